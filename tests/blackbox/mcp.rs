//! `loops mcp` (issue 18) through the official MCP SDK's client (rmcp): the
//! test starts the built binary as a child process, speaks the protocol on
//! its stdio, and checks each tool's result against what the matching CLI
//! command prints with `--json`, on both backends.
//!
//! Each test runs on a current-thread tokio runtime of its own
//! ([`block_on`]), and every await on the server has a deadline
//! ([`within`]), so a server that stops answering fails the test instead of
//! hanging it.

mod cancel;
mod mutations;
mod protocol;
mod reads;
mod secrets;

use std::future::Future;
use std::process::Stdio;
use std::time::Duration;

use loops_tests::TestEnv;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::transport::TokioChildProcess;
use serde_json::Value;

/// The variable that allows mutations in the server's environment.
pub(crate) const ALLOW: &str = "LOOPS_MCP_ALLOW_MUTATIONS";

/// The tools, in the order `tools/list` gives them.
pub(crate) const TOOLS: [&str; 19] = [
    "loops_list",
    "loops_show",
    "loops_runs",
    "loops_health",
    "loops_doctor",
    "loops_daemon_status",
    "loops_workflows_list",
    "loops_workflow_read",
    "loops_workflow_run_inspect",
    "loops_workflow_validate",
    "loops_create_command",
    "loops_create_workflow",
    "loops_pause",
    "loops_resume",
    "loops_stop",
    "loops_cancel",
    "loops_run_now",
    "loops_apply",
    "loops_labels_update",
];

/// The longest any one exchange with the server may take.
pub(crate) const DEADLINE: Duration = Duration::from_secs(60);

/// Runs a test's `future` on a current-thread runtime of its own. The
/// test's [`TestEnv`] lives outside it: on PostgreSQL its database is made
/// and dropped with the synchronous client, which may not run inside a
/// runtime.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(future)
}

/// Awaits `future`, failing the test when it takes longer than
/// [`DEADLINE`].
pub(crate) async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(DEADLINE, future)
        .await
        .unwrap_or_else(|_| panic!("timed out after {DEADLINE:?} waiting for {what}"))
}

/// Polls `check` until it returns `Some`, failing after [`DEADLINE`]; the
/// runtime keeps serving the client between polls.
pub(crate) async fn poll<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    within(what, async {
        loop {
            if let Some(v) = check() {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}

/// The environment of `loops mcp` in `env`: `env`'s variables, and
/// [`ALLOW`] set to `allow` or removed (never inherited from the caller).
pub(crate) fn server_command(env: &TestEnv, allow: Option<&str>) -> tokio::process::Command {
    let mut cmd = env.cmd();
    cmd.arg("mcp");
    match allow {
        Some(value) => cmd.env(ALLOW, value),
        None => cmd.env_remove(ALLOW),
    };
    let mut cmd = tokio::process::Command::from(cmd);
    // A test that fails half-way must not leave a server behind.
    cmd.kill_on_drop(true);
    cmd
}

/// An MCP session with `loops mcp`, through rmcp's client.
pub(crate) struct Mcp {
    client: RunningService<RoleClient, ()>,
}

/// A server in `env` that refuses mutations.
pub(crate) async fn read_only(env: &TestEnv) -> Mcp {
    Mcp::start(env, None).await
}

/// A server in `env` with `LOOPS_MCP_ALLOW_MUTATIONS=true`.
pub(crate) async fn mutable(env: &TestEnv) -> Mcp {
    Mcp::start(env, Some("true")).await
}

impl Mcp {
    /// Starts `loops mcp` in `env` (with [`ALLOW`] = `allow`) and
    /// initializes the session.
    pub(crate) async fn start(env: &TestEnv, allow: Option<&str>) -> Mcp {
        let (transport, _) = TokioChildProcess::builder(server_command(env, allow))
            .stderr(Stdio::null())
            .spawn()
            .expect("loops mcp starts");
        let client = within("initialize", ().serve(transport))
            .await
            .expect("the MCP session initializes");
        Mcp { client }
    }

    /// The session's client.
    pub(crate) fn client(&self) -> &RunningService<RoleClient, ()> {
        &self.client
    }

    /// Calls `tool` with `args` (a JSON object); a protocol error is an
    /// `Err`.
    pub(crate) async fn try_call(&self, tool: &str, args: Value) -> Result<Reply, ServiceError> {
        let Value::Object(args) = args else {
            panic!("tool arguments are a JSON object, not {args}");
        };
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(args);
        let result = within(tool, self.client.call_tool(params)).await?;
        Ok(Reply::from_result(
            &serde_json::to_value(result).expect("a result serializes"),
        ))
    }

    /// Calls `tool` with `args`; a protocol error fails the test.
    pub(crate) async fn call(&self, tool: &str, args: Value) -> Reply {
        self.try_call(tool, args)
            .await
            .unwrap_or_else(|e| panic!("{tool}: protocol error {e}"))
    }

    /// Calls `tool`, which must succeed, and returns its JSON.
    pub(crate) async fn ok(&self, tool: &str, args: Value) -> Value {
        self.call(tool, args).await.json()
    }

    /// Calls `tool`, which must fail as a tool error, and returns its
    /// message.
    pub(crate) async fn err(&self, tool: &str, args: Value) -> String {
        self.call(tool, args).await.error()
    }

    /// Ends the session: closes the server's stdin and waits for it to
    /// exit (rmcp sends SIGTERM, then SIGKILL, to one that does not).
    pub(crate) async fn close(self) {
        within("the session's end", self.client.cancel())
            .await
            .expect("the client's service ends");
    }
}

/// A tool's result: its text blocks and whether it is an error.
#[derive(Debug)]
pub(crate) struct Reply {
    /// `isError`.
    pub(crate) is_error: bool,
    /// The text of each content block, in order.
    pub(crate) texts: Vec<String>,
}

impl Reply {
    /// Reads a `CallToolResult` as it goes on the wire.
    fn from_result(result: &Value) -> Reply {
        let texts = result["content"]
            .as_array()
            .expect("a result has content")
            .iter()
            .map(|block| {
                assert_eq!(block["type"], "text", "{result}");
                block["text"].as_str().expect("text content").to_owned()
            })
            .collect();
        Reply {
            is_error: result["isError"].as_bool().unwrap_or(false),
            texts,
        }
    }

    /// The result of a successful call: one text block holding JSON (a
    /// second one holds warnings, if any), parsed.
    pub(crate) fn json(&self) -> Value {
        assert!(!self.is_error, "the call failed: {:?}", self.texts);
        assert!(
            (1..=2).contains(&self.texts.len()),
            "one JSON block, then warnings: {:?}",
            self.texts
        );
        serde_json::from_str(&self.texts[0])
            .unwrap_or_else(|e| panic!("the result is not JSON ({e}): {}", self.texts[0]))
    }

    /// The message of a failed call: `isError`, one text block.
    pub(crate) fn error(&self) -> String {
        assert!(self.is_error, "the call succeeded: {:?}", self.texts);
        assert_eq!(self.texts.len(), 1, "{:?}", self.texts);
        self.texts[0].clone()
    }
}

/// `loops --json <args>` in `env`, which must succeed; its JSON.
pub(crate) fn cli_json(env: &TestEnv, args: &[&str]) -> Value {
    env.loops(["--json"]).args(args).run().json()
}

/// What `loops <args>` prints after `error: ` when it fails (exit 1): the
/// text a tool error must carry.
pub(crate) fn cli_error(env: &TestEnv, args: &[&str]) -> String {
    let ran = env.loops(["--json"]).args(args).code(1).run();
    ran.stderr
        .strip_prefix("error: ")
        .unwrap_or_else(|| panic!("an error on stderr: {}", ran.stderr))
        .trim_end()
        .to_owned()
}
