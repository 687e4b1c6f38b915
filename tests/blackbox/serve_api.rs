//! `loops serve` (issue 29), continued: the server inside the daemon
//! (`loops daemon run --serve`), paging of the lists, and `PATCH` as
//! `loops edit`. Black-box, with the HTTP client of `serve.rs`.

use std::net::TcpStream;

use loops_tests::TestEnv;

use crate::mcp::cli_json;
use crate::serve::{DEADLINE, Server};

#[test]
fn the_daemon_serves_the_api_until_it_stops() {
    let env = TestEnv::new();
    env.create_command("backup", "true", &["--every", "1h"]);
    let mut server = Server::start_with(&env, &["daemon", "run", "--serve", "127.0.0.1:0"]);
    let daemons = server.authed("GET", "/api/v1/daemons");
    assert_eq!(daemons.status, 200, "{}", daemons.body);
    let pid = server.child.id();
    loops_tests::wait_for("the daemon to hold its lease", DEADLINE, || {
        let doc = server.authed("GET", "/api/v1/daemons").json();
        (doc["running"] == true && doc["pid"] == pid).then_some(())
    });
    let list = server.authed("GET", "/api/v1/loops");
    assert_eq!(list.json(), cli_json(&env, &["list"]));
    // The token is the one in the data directory, as for `loops serve`.
    let kept = std::fs::read_to_string(env.data_dir().join("serve.token")).unwrap();
    assert_eq!(kept.trim(), server.token);
    env.loops(["daemon", "stop", "--grace", "0"]).run();
    let status = loops_tests::wait_for("the daemon to exit", DEADLINE, || {
        server.child.try_wait().expect("its status")
    });
    assert!(status.success(), "{status:?}");
    assert!(
        TcpStream::connect(&server.addr).is_err(),
        "the port is closed once the daemon has stopped"
    );
}

#[test]
fn the_daemon_refuses_a_serve_address_it_cannot_make_safe() {
    let env = TestEnv::new();
    let ran = env
        .loops(["daemon", "run", "--serve", "0.0.0.0:0"])
        .code(1)
        .run();
    assert!(
        ran.stderr
            .contains("--serve 0.0.0.0:0 is not a loopback address"),
        "{}",
        ran.stderr
    );
    let ran = env
        .loops(["daemon", "start", "--serve", "here"])
        .code(1)
        .run();
    assert!(
        ran.stderr.contains("--serve must be an address"),
        "{}",
        ran.stderr
    );
    assert_eq!(env.daemon_pid(), None);
}
