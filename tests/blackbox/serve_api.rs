//! `loops serve` (issue 29), continued: the server inside the daemon
//! (`loops daemon run --serve`), paging of the lists, and `PATCH` as
//! `loops edit`. Black-box, with the HTTP client of `serve.rs`.

use std::net::TcpStream;

use loops_tests::TestEnv;

use serde_json::Value;

use crate::mcp::{cli_error, cli_json};
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

#[test]
fn lists_come_a_page_at_a_time_with_a_link_to_the_next() {
    let env = TestEnv::new();
    for name in ["a", "b", "c", "d", "e"] {
        env.create_command(name, "true", &["--every", "1h", "--label", "team"]);
    }
    let server = Server::start(&env);
    let mut pages = Vec::new();
    let mut next = Some("/api/v1/loops?label=team&limit=2".to_owned());
    while let Some(path) = next.take() {
        let page = server.authed("GET", &path);
        assert_eq!(page.status, 200, "{path}: {}", page.body);
        next = page.header("link").map(|link| {
            let url = link.strip_prefix('<').and_then(|l| l.split_once('>'));
            let (url, rel) = url.unwrap_or_else(|| panic!("a Link: {link}"));
            assert_eq!(rel, "; rel=\"next\"");
            url.to_owned()
        });
        pages.push((path, page.json()));
        assert!(pages.len() < 5, "the pages end: {pages:?}");
    }
    // Three pages, the last short; each is `loops list --limit --offset`.
    let paths: Vec<&str> = pages.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/api/v1/loops?label=team&limit=2",
            "/api/v1/loops?label=team&limit=2&offset=2",
            "/api/v1/loops?label=team&limit=2&offset=4",
        ]
    );
    for (i, (_, page)) in pages.iter().enumerate() {
        let offset = (2 * i).to_string();
        let cli = cli_json(
            &env,
            &[
                "list", "--label", "team", "--limit", "2", "--offset", &offset,
            ],
        );
        assert_eq!(page, &cli, "page {i}");
    }
    let all: Vec<Value> = pages
        .into_iter()
        .flat_map(|(_, p)| p.as_array().cloned().unwrap_or_default())
        .collect();
    assert_eq!(Value::Array(all), cli_json(&env, &["list"]));
    // Too big a page, or a bad offset: the command line's words.
    let big = server.authed("GET", "/api/v1/loops?limit=1001");
    assert_eq!(big.status, 400, "{}", big.body);
    assert!(big.error().1.contains("at most 1000"), "{}", big.body);
    let bad = server.authed("GET", "/api/v1/loops?offset=-1");
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert_eq!(
        bad.error().1,
        cli_error(&env, &["list", "--offset=-1"]),
        "{}",
        bad.body
    );
}

#[test]
fn runs_page_as_loops_runs_offset_does() {
    let env = TestEnv::new();
    env.create_command("job", "true", &["--every", "1h"]);
    for _ in 0..3 {
        env.loops(["run-now", "job"]).run();
    }
    let server = Server::start(&env);
    let page = server.authed("GET", "/api/v1/runs?loop=job&limit=2&offset=1");
    assert_eq!(page.status, 200, "{}", page.body);
    let cli = cli_json(&env, &["runs", "job", "--limit", "2", "--offset", "1"]);
    assert_eq!(page.json(), cli);
    assert_eq!(
        page.header("link"),
        Some("</api/v1/runs?loop=job&limit=2&offset=3>; rel=\"next\"")
    );
    let last = server.authed("GET", "/api/v1/runs?loop=job&limit=2&offset=2");
    assert_eq!(last.json().as_array().map(Vec::len), Some(1));
    assert_eq!(last.header("link"), None);
}

#[test]
fn a_patch_is_loops_edit_with_the_flags_as_json() {
    let env = TestEnv::new();
    let id = env.create_command("nightly", "true", &["--every", "1h"]);
    let server = Server::start(&env);
    let bearer = format!("Bearer {}", server.token);
    let own = format!("http://{}", server.addr);
    let json = [
        ("Authorization", bearer.as_str()),
        ("Content-Type", "application/json"),
        ("Origin", own.as_str()),
    ];
    let path = format!("/api/v1/loops/{id}");
    let body = r#"{"every": "2h", "catchUp": "all", "label": ["ops", "web"], "attempts": 3}"#;
    let edited = server.send_body("PATCH", &path, &json, body);
    assert_eq!(edited.status, 200, "{}", edited.body);
    let shown = cli_json(&env, &["show", &id]);
    assert_eq!(shown["schedule"]["everyMs"], 7_200_000, "{shown}");
    assert_eq!(shown["catchUp"], "all");
    assert_eq!(shown["labels"], serde_json::json!(["ops", "web"]));
    assert_eq!(shown["maxAttempts"], 3);
    // The document is the one `loops --json edit` prints: the loop after.
    let again = r#"{"every": "3h"}"#;
    let edited = server.send_body("PATCH", "/api/v1/loops/nightly", &json, again);
    assert_eq!(edited.status, 200, "{}", edited.body);
    assert_eq!(edited.json(), cli_json(&env, &["show", &id]));
    // What the command line refuses, the API refuses in its words.
    let bad = server.send_body("PATCH", &path, &json, r#"{"every": "soon"}"#);
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert_eq!(
        bad.error().1,
        cli_error(&env, &["edit", &id, "--every", "soon"])
    );
    let unknown = server.send_body("PATCH", &path, &json, r#"{"evry": "2h"}"#);
    assert_eq!(unknown.status, 400, "{}", unknown.body);
    assert!(unknown.error().1.contains("catchUp"), "{}", unknown.body);
    let missing = server.send_body("PATCH", "/api/v1/loops/nope", &json, again);
    assert_eq!(missing.status, 404, "{}", missing.body);
    // A write: another origin, or a body a form could send, is refused.
    let evil = [
        ("Authorization", bearer.as_str()),
        ("Content-Type", "application/json"),
        ("Origin", "http://evil.example"),
    ];
    let refused = server.send_body("PATCH", &path, &evil, r#"{"every": "5m"}"#);
    assert_eq!(refused.status, 403, "{}", refused.body);
    let form = [
        ("Authorization", bearer.as_str()),
        ("Content-Type", "text/plain"),
    ];
    let refused = server.send_body("PATCH", &path, &form, r#"{"every": "5m"}"#);
    assert_eq!(refused.status, 415, "{}", refused.body);
    assert_eq!(
        cli_json(&env, &["show", &id])["schedule"]["everyMs"],
        10_800_000
    );
}
