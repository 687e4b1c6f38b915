//! A `loops_run_now` in flight stops when the client cancels the call, when
//! the client goes away (closes the server's stdin) and on SIGTERM: the run
//! is recorded as failed and cancelled, never left `running`, and its
//! process is gone. On SIGTERM the call is answered with an error first.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use loops_tests::{TestEnv, is_running, kill};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest, ErrorCode};
use rmcp::service::{PeerRequestOptions, RequestHandle, RoleClient, ServiceError};
use serde_json::{Value, json};

use super::{block_on, cli_json, mutable, poll, server_command, within};

/// A loop `gated` whose command writes its pid to `<dir>/pid`, then waits
/// (at most about 30 seconds) for `<dir>/open` to exist; returns `dir`.
fn gated_loop(env: &TestEnv) -> PathBuf {
    let dir = env.home().join("gate");
    std::fs::create_dir_all(&dir).expect("a gate directory");
    env.write_script(
        "gate",
        r#"echo $$ > "$1/pid.tmp" && mv "$1/pid.tmp" "$1/pid"
i=0
while [ ! -f "$1/open" ] && [ "$i" -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
echo opened"#,
    );
    env.create_command(
        "gated",
        &format!("gate '{}'", dir.display()),
        &["--every", "1h"],
    );
    dir
}

/// Starts `loops_run_now` on `gated` without waiting for its result, and
/// waits until the gate script runs; its pid.
async fn start_gated_run(
    peer: &rmcp::service::Peer<RoleClient>,
    dir: &Path,
) -> (RequestHandle<RoleClient>, u32) {
    let params = CallToolRequestParams::new("loops_run_now").with_arguments(
        json!({"loop": "gated"})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    );
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let handle = within(
        "tools/call loops_run_now",
        peer.send_cancellable_request(request, PeerRequestOptions::no_options()),
    )
    .await
    .expect("the call is sent");
    let pid = poll("the gate script to start", || {
        std::fs::read_to_string(dir.join("pid"))
            .ok()
            .and_then(|p| p.trim().parse().ok())
    })
    .await;
    (handle, pid)
}

/// The newest run of `gated`.
fn last_run(env: &TestEnv) -> Value {
    cli_json(env, &["runs", "gated", "--limit", "1"])[0].clone()
}

/// Checks that the run of `gated` ended as a failure with `reason` as its
/// error and that the gate script is gone without its gate having opened.
async fn assert_cancelled(env: &TestEnv, dir: &Path, pid: u32, reason: &str) {
    let run = last_run(env);
    assert_eq!(run["status"], "failed", "{run}");
    assert_eq!(run["error"], reason, "{run}");
    assert_eq!(
        cli_json(env, &["runs", "gated", "--status", "running"]),
        json!([])
    );
    poll("the gate script to end", || {
        (!is_running(pid)).then_some(())
    })
    .await;
    assert!(!dir.join("open").exists());
}

#[test]
fn a_cancelled_call_stops_its_run_and_the_session_goes_on() {
    let env = TestEnv::new();
    block_on(async {
        let dir = gated_loop(&env);
        let mcp = mutable(&env).await;
        let (handle, pid) = start_gated_run(mcp.client().peer(), &dir).await;
        assert_eq!(last_run(&env)["status"], "running");
        within(
            "notifications/cancelled",
            handle.cancel(Some("the test changed its mind".to_owned())),
        )
        .await
        .expect("the cancel is sent");
        poll("the run to end", || {
            (last_run(&env)["status"] != "running").then_some(())
        })
        .await;
        assert_cancelled(&env, &dir, pid, "cancelled by the MCP client").await;
        // The session still serves, and the loop runs again once its gate is
        // open.
        std::fs::write(dir.join("open"), "").expect("the gate opens");
        let run = mcp.ok("loops_run_now", json!({"loop": "gated"})).await;
        assert_eq!(run["status"], "succeeded", "{run}");
        assert_eq!(
            cli_json(&env, &["runs", "gated"]).as_array().map(Vec::len),
            Some(2)
        );
        mcp.close().await;
    });
}

/// How the server is told to go while a run is in flight.
enum End {
    /// The client closes the server's stdin (the session ends).
    CloseStdin,
    /// SIGTERM.
    Terminate,
}

/// A `loops mcp` server of the test's own (a child it waits for), with
/// mutations allowed, and a client session on it; the child and its pid.
async fn own_server(
    env: &TestEnv,
) -> (
    tokio::process::Child,
    u32,
    rmcp::service::RunningService<RoleClient, ()>,
) {
    let mut server = server_command(env, Some("true"));
    server
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = server.spawn().expect("loops mcp starts");
    let server_pid = child.id().expect("a running server has a pid");
    let stdout = child.stdout.take().expect("stdout is piped");
    let stdin = child.stdin.take().expect("stdin is piped");
    let client = within("initialize", ().serve((stdout, stdin)))
        .await
        .expect("the MCP session initializes");
    (child, server_pid, client)
}

/// Starts a server of its own (a child the test waits for), starts a
/// gated run, ends the server as `end` says, and checks that the server
/// exits 0 having recorded the run as cancelled.
async fn server_ends_mid_run(env: &TestEnv, end: End) {
    let dir = gated_loop(env);
    let (mut child, server_pid, client) = own_server(env).await;
    let (handle, pid) = start_gated_run(client.peer(), &dir).await;
    match end {
        End::CloseStdin => {
            drop(handle);
            // Ending the client's service drops its end of the pipe.
            within("the client's end", client.cancel())
                .await
                .expect("the client's service ends");
        }
        End::Terminate => {
            assert!(kill("-TERM", server_pid), "SIGTERM reaches the server");
        }
    }
    // The run ends recorded as cancelled, then the server exits: it has
    // nothing left to do.
    poll("the run to end", || {
        (last_run(env)["status"] != "running").then_some(())
    })
    .await;
    let reason = match end {
        End::CloseStdin => "cancelled by the MCP client",
        End::Terminate => "cancelled by SIGTERM",
    };
    assert_cancelled(env, &dir, pid, reason).await;
    let status = within("the server to exit", child.wait())
        .await
        .expect("the server is waited for");
    assert!(status.success(), "loops mcp exits 0: {status:?}");
}

#[test]
fn the_end_of_the_session_stops_a_run_in_flight() {
    let env = TestEnv::new();
    block_on(server_ends_mid_run(&env, End::CloseStdin));
}

#[test]
fn sigterm_stops_a_run_in_flight_and_the_server() {
    let env = TestEnv::new();
    block_on(server_ends_mid_run(&env, End::Terminate));
}

#[test]
fn sigterm_answers_a_call_in_flight_with_an_error_before_the_server_exits() {
    let env = TestEnv::new();
    block_on(async {
        let dir = gated_loop(&env);
        let (mut child, server_pid, client) = own_server(&env).await;
        let (handle, pid) = start_gated_run(client.peer(), &dir).await;
        assert!(kill("-TERM", server_pid), "SIGTERM reaches the server");
        // The reply comes before the server closes its stdout: a server
        // that exits without one fails the call as a closed transport.
        let reply = within("the call's reply", handle.await_response()).await;
        let Err(ServiceError::McpError(error)) = reply else {
            panic!("the call in flight gets an error reply, not {reply:?}");
        };
        assert_eq!(error.code, ErrorCode(-32000), "{error:?}");
        assert!(error.message.contains("SIGTERM"), "{}", error.message);
        assert!(error.message.contains("loops_run_now"), "{}", error.message);
        // It carries what the call recorded: the run, cancelled.
        let run = error
            .data
            .as_ref()
            .map(|data| data["result"].clone())
            .unwrap_or_default();
        assert_eq!(run["id"], last_run(&env)["id"], "{error:?}");
        assert_cancelled(&env, &dir, pid, "cancelled by SIGTERM").await;
        let status = within("the server to exit", child.wait())
            .await
            .expect("the server is waited for");
        assert!(status.success(), "loops mcp exits 0: {status:?}");
    });
}
