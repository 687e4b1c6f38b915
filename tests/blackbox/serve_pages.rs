//! `loops serve`'s pages and event streams (issue 29), over plain HTTP:
//! the pages need the token, show the store escaped, change it only from
//! their own origin; a run's output streams as it is written; the change
//! feed wakes on a change. The real browser drives them in `browser.rs`.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use loops_tests::TestEnv;

use crate::mcp::cli_json;
use crate::serve::Server;

/// The longest a stream may take to say what the test waits for.
const DEADLINE: Duration = Duration::from_secs(60);

/// An open event stream: the lines the server sent so far.
struct Stream {
    reader: BufReader<TcpStream>,
    seen: Vec<String>,
}

impl Stream {
    /// `GET path` with the token, kept open.
    fn open(server: &Server, path: &str) -> Stream {
        let mut stream = TcpStream::connect(&server.addr).expect("the server accepts");
        stream
            .set_read_timeout(Some(DEADLINE))
            .expect("a read timeout");
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\r\n",
            server.addr, server.token
        )
        .expect("the request is sent");
        Stream {
            reader: BufReader::new(stream),
            seen: Vec::new(),
        }
    }

    /// Reads lines until one equals `line`; the lines read before it.
    fn until(&mut self, line: &str) -> Vec<String> {
        let deadline = Instant::now() + DEADLINE;
        let mut before = Vec::new();
        loop {
            assert!(
                Instant::now() < deadline,
                "no {line:?} in the stream: {:?}",
                self.seen
            );
            let mut got = String::new();
            let n = self.reader.read_line(&mut got).expect("the stream reads");
            assert!(n > 0, "the stream ended before {line:?}: {:?}", self.seen);
            let got = got.trim_end_matches(['\r', '\n']).to_owned();
            self.seen.push(got.clone());
            if got == line {
                return before;
            }
            before.push(got);
        }
    }
}

/// A child killed when the test ends, passed or not.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_page_without_the_token_asks_to_log_in() {
    let env = TestEnv::new();
    env.create_command("nightly", "true", &["--every", "1h"]);
    let server = Server::start(&env);
    let refused = server.send("GET", "/", &[]);
    assert_eq!(refused.status, 401, "{}", refused.body);
    assert_eq!(
        refused.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert!(refused.body.contains("login URL"), "{}", refused.body);
    assert!(!refused.body.contains("nightly"), "{}", refused.body);
    // The assets are no secret: the login page uses the stylesheet.
    let css = server.send("GET", "/assets/app.css", &[]);
    assert_eq!(
        (css.status, css.header("content-type")),
        (200, Some("text/css; charset=utf-8"))
    );
}

#[test]
fn the_loops_page_lists_the_store_escaped() {
    let env = TestEnv::new();
    let id = env.create_command(
        "nightly",
        "echo '<b>hi</b>'",
        &["--every", "1h", "--label", "prod"],
    );
    env.create_command("weekly", "true", &["--every", "7d"]);
    env.loops(["pause", "weekly"]).run();
    let server = Server::start(&env);
    let page = server.authed("GET", "/");
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains(&format!(
            "<tr class=\"loop\" data-id=\"{id}\" data-status=\"active\">"
        )),
        "{}",
        page.body
    );
    // What the user wrote is text, never markup.
    let one = server.authed("GET", &format!("/loops/{id}"));
    assert!(one.body.contains("&lt;b&gt;hi&lt;/b&gt;"), "{}", one.body);
    assert!(!one.body.contains("<b>hi"), "{}", one.body);
    // The header counts every loop, whatever the page shows.
    assert!(
        page.body.contains("2 loops, 1 active, 1 paused"),
        "{}",
        page.body
    );
    let paused_only = server.authed("GET", "/?status=paused");
    assert!(paused_only.body.contains("2 loops, 1 active, 1 paused"));
    // The status filter keeps the paused loop only; the search by label
    // the other.
    let paused = server.authed("GET", "/?status=paused");
    assert!(paused.body.contains("weekly") && !paused.body.contains(">nightly<"));
    let searched = server.authed("GET", "/?q=PROD");
    assert!(searched.body.contains(">nightly<") && !searched.body.contains(">weekly<"));
    let labelled = server.authed("GET", "/?label=prod");
    assert!(labelled.body.contains(">nightly<") && !labelled.body.contains(">weekly<"));
    assert!(
        server
            .authed("GET", "/?label=PROD")
            .body
            .contains("No loops here")
    );
    // Every page sends the security headers.
    assert_eq!(
        page.header("content-security-policy"),
        Some("default-src 'self'; script-src 'self'")
    );
}

#[test]
fn a_pages_button_changes_the_store_only_from_its_own_origin() {
    let env = TestEnv::new();
    let id = env.create_command("backup", "true", &["--every", "1h"]);
    let server = Server::start(&env);
    let bearer = format!("Bearer {}", server.token);
    let own = format!("http://{}", server.addr);
    let path = format!("/loops/{id}/pause");
    for origin in [None, Some("http://evil.example")] {
        let mut headers = vec![("Authorization", bearer.as_str())];
        headers.extend(origin.map(|o| ("Origin", o)));
        let refused = server.send("POST", &path, &headers);
        assert_eq!(refused.status, 403, "{origin:?}: {}", refused.body);
        assert_eq!(cli_json(&env, &["show", &id])["status"], "active");
    }
    let paused = server.send(
        "POST",
        &path,
        &[("Authorization", &bearer), ("Origin", &own)],
    );
    assert_eq!(paused.status, 303, "{}", paused.body);
    assert_eq!(paused.header("location"), Some(&*format!("/loops/{id}")));
    assert_eq!(cli_json(&env, &["show", &id])["status"], "paused");
    let page = server.authed("GET", &format!("/loops/{id}"));
    assert!(page.body.contains("id=\"resume\""), "{}", page.body);
    assert!(!page.body.contains("id=\"pause\""), "{}", page.body);
}

#[test]
fn login_goes_on_to_a_page_of_this_server_only() {
    let env = TestEnv::new();
    let server = Server::start(&env);
    let token = server.token.clone();
    let to = |next: &str| {
        let reply = server.send("GET", &format!("/login?token={token}&next={next}"), &[]);
        assert_eq!(reply.status, 303, "{}", reply.body);
        reply.header("location").map(str::to_owned)
    };
    assert_eq!(to("/daemons").as_deref(), Some("/daemons"));
    assert_eq!(to("//evil.example/").as_deref(), Some("/"));
    assert_eq!(to("https://evil.example/").as_deref(), Some("/"));
}

#[test]
fn a_runs_output_streams_as_it_is_written_then_its_end() {
    let env = TestEnv::new();
    // Each line waits for a file the test writes once it has seen the
    // line before: the stream shows output while the run runs.
    let gate = env.data_dir().join("gate");
    // At most 30 s, should the test fail first.
    let script = format!(
        "echo first; for i in $(seq 600); do [ -e {gate} ] && break; sleep 0.05; done; echo second",
        gate = gate.display()
    );
    env.create_command("slow", &script, &["--every", "1h"]);
    let server = Server::start(&env);
    let mut run = Killed(env.spawn(&["run-now", "slow"]));
    let run_id = loops_tests::wait_for("the run to start", DEADLINE, || {
        let runs = cli_json(&env, &["runs", "slow"]);
        runs[0]["id"].as_str().map(str::to_owned)
    });
    let mut stream = Stream::open(
        &server,
        &format!("/api/v1/runs/{run_id}/output?follow=1&showOutput=1"),
    );
    stream.until("event: ready");
    stream.until("data: first");
    // Not ended yet: the run waits for the gate.
    assert!(!stream.seen.iter().any(|l| l.contains("event: end")));
    // A second follower shares the run's tail, and gets its output from
    // the start.
    let follow = format!("/api/v1/runs/{run_id}/output?follow=1&showOutput=1");
    let mut late = Stream::open(&server, &follow);
    late.until("data: first");
    std::fs::write(&gate, "").expect("the gate opens");
    stream.until("data: second");
    stream.until("event: end");
    late.until("data: second");
    late.until("event: end");
    let once = |s: &Stream, line: &str| s.seen.iter().filter(|l| *l == line).count();
    assert_eq!(
        (once(&stream, "data: first"), once(&late, "data: first")),
        (1, 1)
    );
    let end = stream.until("");
    let doc = end
        .iter()
        .find_map(|l| l.strip_prefix("data: "))
        .expect("the end event's data");
    let doc: serde_json::Value = serde_json::from_str(doc).expect("the run as JSON");
    assert_eq!(
        (doc["id"].as_str(), doc["status"].as_str()),
        (Some(&*run_id), Some("succeeded"))
    );
    assert!(run.0.wait().expect("run-now ends").success());
    // Without ?showOutput=1 there is no stream.
    let refused = server.authed("GET", &format!("/api/v1/runs/{run_id}/output?follow=1"));
    assert_eq!(refused.status, 400, "{}", refused.body);
}

#[test]
fn the_change_feed_wakes_when_the_store_changes() {
    let env = TestEnv::new();
    env.create_command("backup", "true", &["--every", "1h"]);
    let server = Server::start(&env);
    let mut stream = Stream::open(&server, "/api/v1/events");
    stream.until("event: ready");
    env.loops(["pause", "backup"]).run();
    // `change`, not the `tick` that comes when nothing changed.
    stream.until("event: change");
}
