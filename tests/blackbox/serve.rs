//! `loops serve` (issue 29): the HTTP API, black-box. Each test starts the
//! built binary on a free loopback port, reads the login URL it prints on
//! stderr, and speaks HTTP/1.1 to it over a plain `TcpStream`: the reads
//! equal what the CLI prints with `--json`, a write changes the store, and
//! each security rule refuses what it must.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Child;
use std::sync::{Arc, mpsc};
use std::time::Duration;

use loops_tests::TestEnv;
use loops_tests::tls::TestCa;
use serde_json::Value;

use crate::mcp::{cli_error, cli_json};

/// The longest the server may take to start.
pub(crate) const DEADLINE: Duration = Duration::from_secs(60);

/// A running `loops serve`, killed when dropped; the browser tests
/// (`browser.rs`) start theirs with it too.
pub(crate) struct Server {
    pub(crate) child: Child,
    /// `127.0.0.1:<port>`.
    pub(crate) addr: String,
    /// The access token from the login URL.
    pub(crate) token: String,
    /// Whether it serves HTTPS.
    tls: bool,
    /// The TLS client of an HTTPS server's requests (see
    /// [`Server::trusting`]).
    client: Option<Arc<rustls::ClientConfig>>,
}

impl Server {
    /// `loops serve` on a free loopback port of `env`.
    pub(crate) fn start(env: &TestEnv) -> Server {
        Server::start_with(env, &["serve", "--listen", "127.0.0.1:0"])
    }

    /// The login URL it printed.
    pub(crate) fn login_url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}/login?token={}", self.addr, self.token)
    }

    /// `loops <args>`, which must print a login URL (on a line of its own,
    /// or of the daemon's log).
    pub(crate) fn start_with(env: &TestEnv, args: &[&str]) -> Server {
        let mut child = env.spawn(args);
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut server = Server {
            child,
            addr: String::new(),
            token: String::new(),
            tls: false,
            client: None,
        };
        while server.token.is_empty() {
            let line = rx
                .recv_timeout(DEADLINE)
                .expect("loops serve prints its login URL");
            let url = line
                .split_once("loops serve: log in at ")
                .map(|(_, url)| url);
            if let Some((scheme, url)) = url.and_then(|u| u.split_once("://")) {
                server.tls = scheme == "https";
                let (addr, token) = url.split_once("/login?token=").expect("a login URL");
                server.addr = addr.to_owned();
                server.token = token.to_owned();
            }
        }
        server
    }

    /// This server, its HTTPS requests trusting `ca` alone.
    pub(crate) fn trusting(mut self, ca: &TestCa) -> Server {
        self.client = Some(ca.client_config());
        self
    }

    /// One request with `headers` (a `Host` naming the server unless they
    /// give one): the status, the headers (names lowercased) and the body.
    pub(crate) fn send(&self, method: &str, path: &str, headers: &[(&str, &str)]) -> Reply {
        self.send_body(method, path, headers, "")
    }

    /// [`Server::send`] with a body.
    pub(crate) fn send_body(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Reply {
        let stream = TcpStream::connect(&self.addr).expect("the server accepts");
        stream
            .set_read_timeout(Some(DEADLINE))
            .expect("a read timeout");
        if self.tls {
            // The server's certificate is checked, against the test's CA.
            let config = self
                .client
                .clone()
                .expect("an HTTPS server's test trusts its CA (Server::trusting)");
            let name = "localhost".try_into().expect("a server name");
            let tls = rustls::ClientConnection::new(config, name).expect("a TLS client");
            let stream = rustls::StreamOwned::new(tls, stream);
            return exchange(stream, &self.addr, (method, path, headers, body));
        }
        exchange(stream, &self.addr, (method, path, headers, body))
    }

    /// A request carrying the token as a bearer.
    pub(crate) fn authed(&self, method: &str, path: &str) -> Reply {
        let bearer = format!("Bearer {}", self.token);
        self.send(method, path, &[("Authorization", &bearer)])
    }
}

/// Sends one request on `stream` and reads the whole response.
fn exchange(
    mut stream: impl Read + Write,
    addr: &str,
    (method, path, headers, body): (&str, &str, &[(&str, &str)], &str),
) -> Reply {
    let mut request = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        request.push_str(&format!("Host: {addr}\r\n"));
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    if ["POST", "PATCH", "DELETE"].contains(&method) {
        request.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream
        .write_all(request.as_bytes())
        .expect("the request is sent");
    let mut raw = Vec::new();
    // A TLS peer may close without close_notify once it has answered.
    let _ = stream.read_to_end(&mut raw);
    let raw = String::from_utf8(raw).expect("a UTF-8 response");
    let (head, body) = raw.split_once("\r\n\r\n").expect("a response head");
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .expect("a status line");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Reply {
        status,
        headers,
        body: body.to_owned(),
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) struct Reply {
    pub(crate) status: u16,
    headers: Vec<(String, String)>,
    pub(crate) body: String,
}

impl Reply {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }

    /// The error document's code and message.
    pub(crate) fn error(&self) -> (String, String) {
        let doc = self.json();
        (
            doc["error"]["code"].as_str().expect("a code").to_owned(),
            doc["error"]["message"]
                .as_str()
                .expect("a message")
                .to_owned(),
        )
    }
}

#[test]
fn reads_are_the_clis_json_documents() {
    let env = TestEnv::new();
    let id = env.create_command("nightly", "true", &["--every", "1h"]);
    env.loops(["run-now", "nightly"]).run();
    let server = Server::start(&env);
    let list = server.authed("GET", "/api/v1/loops");
    assert_eq!(list.status, 200, "{}", list.body);
    assert_eq!(list.header("content-type"), Some("application/json"));
    assert_eq!(list.json(), cli_json(&env, &["list"]));
    let shown = server.authed("GET", "/api/v1/loops/nightly");
    assert_eq!(shown.json(), cli_json(&env, &["show", &id]));
    let runs = server.authed("GET", "/api/v1/runs?loop=nightly&limit=5");
    assert_eq!(
        runs.json(),
        cli_json(&env, &["runs", "nightly", "--limit", "5"])
    );
    let run_id = runs.json()[0]["id"].as_str().unwrap().to_owned();
    let run = server.authed("GET", &format!("/api/v1/runs/{run_id}"));
    assert_eq!(run.json(), cli_json(&env, &["runs", &run_id]));
    let output = server.authed("GET", &format!("/api/v1/runs/{run_id}/output?showOutput=1"));
    assert_eq!(
        output.json(),
        cli_json(&env, &["runs", &run_id, "--show-output"])
    );
    // Output only on request, as --show-output.
    let refused = server.authed("GET", &format!("/api/v1/runs/{run_id}/output"));
    assert_eq!(refused.status, 400);
    let workflows = server.authed("GET", "/api/v1/workflows");
    assert_eq!(workflows.json(), cli_json(&env, &["workflows", "list"]));
    let none = server.authed("GET", "/api/v1/workflow-runs?limit=5");
    assert_eq!(
        none.json(),
        cli_json(&env, &["workflows", "runs", "--limit", "5"])
    );
    let wf = crate::workflows::create_workflow(
        &env,
        &serde_json::json!({"name": "ship", "steps": [crate::workflows::exec_step("a", "true", &[])]}),
    );
    env.loops(["workflows", "run", "ship"]).run();
    let shown = server.authed("GET", &format!("/api/v1/workflows/{wf}"));
    assert_eq!(shown.json(), cli_json(&env, &["workflows", "show", "ship"]));
    let of_ship = server.authed("GET", "/api/v1/workflow-runs?workflow=ship");
    assert_eq!(
        of_ship.json(),
        cli_json(&env, &["workflows", "runs", "ship"])
    );
    assert_eq!(of_ship.json().as_array().map(Vec::len), Some(1));
    let next = server.authed("GET", "/api/v1/loops/nightly/next?n=3");
    assert_eq!(next.status, 200, "{}", next.body);
    assert_eq!(next.json()["times"].as_array().map(Vec::len), Some(3));
    for path in ["/api/v1/daemons", "/api/v1/doctor"] {
        let reply = server.authed("GET", path);
        assert!(reply.json().is_object(), "{path}: {}", reply.body);
    }
    // The CLI's error, with a status that says whose fault it was.
    let missing = server.authed("GET", "/api/v1/loops/nope");
    assert_eq!(missing.status, 404);
    assert_eq!(
        missing.error(),
        ("not_found".to_owned(), cli_error(&env, &["show", "nope"]))
    );
    let bad = server.authed("GET", "/api/v1/loops?limit=many");
    assert_eq!((bad.status, bad.error().0.as_str()), (400, "bad_request"));
}

#[test]
fn a_pause_through_the_api_changes_the_store() {
    let env = TestEnv::new();
    let id = env.create_command("backup", "true", &["--every", "1h"]);
    let server = Server::start(&env);
    let own = format!("http://{}", server.addr);
    let bearer = format!("Bearer {}", server.token);
    let paused = server.send(
        "POST",
        &format!("/api/v1/loops/{id}/pause"),
        &[("Authorization", &bearer), ("Origin", &own)],
    );
    assert_eq!(paused.status, 200, "{}", paused.body);
    assert_eq!(cli_json(&env, &["show", &id])["status"], "paused");
    let resumed = server.authed("POST", "/api/v1/loops/backup/resume");
    assert_eq!(resumed.status, 200, "{}", resumed.body);
    assert_eq!(cli_json(&env, &["show", &id])["status"], "active");
}

#[test]
fn labels_and_remove_through_the_api_change_the_store() {
    let env = TestEnv::new();
    let id = env.create_command("backup", "true", &["--every", "1h"]);
    let server = Server::start(&env);
    let added = server.authed(
        "POST",
        "/api/v1/loops/backup/labels/add?labels=team:ops,nightly",
    );
    assert_eq!(added.status, 200, "{}", added.body);
    let labels = &cli_json(&env, &["show", &id])["labels"];
    assert_eq!(labels, &serde_json::json!(["team:ops", "nightly"]));
    let bad = server.authed("POST", "/api/v1/loops/backup/labels/drop?labels=x");
    assert_eq!(bad.status, 400, "{}", bad.body);
    let removed = server.authed("DELETE", &format!("/api/v1/loops/{id}"));
    assert_eq!(removed.status, 200, "{}", removed.body);
    let gone = server.authed("GET", &format!("/api/v1/loops/{id}"));
    assert_eq!(gone.status, 404, "{}", gone.body);
    assert_eq!(gone.error().1, cli_error(&env, &["show", &id]));
}

#[test]
fn a_loop_created_through_the_api_is_the_clis() {
    let env = TestEnv::new();
    let server = Server::start(&env);
    let bearer = format!("Bearer {}", server.token);
    let json = [
        ("Authorization", bearer.as_str()),
        ("Content-Type", "application/json"),
    ];
    let body = r#"{"name": "made", "cmd": "echo hi", "every": "5m", "label": ["web"]}"#;
    let made = server.send_body("POST", "/api/v1/loops", &json, body);
    assert_eq!(made.status, 200, "{}", made.body);
    let id = made.json()["id"].as_str().expect("an id").to_owned();
    let shown = cli_json(&env, &["show", &id]);
    assert_eq!(shown["name"], "made");
    assert_eq!(shown["labels"], serde_json::json!(["web"]));
    // What the CLI refuses, the API refuses with the same message.
    let bad = r#"{"name": "bad", "cmd": "true", "every": "soon"}"#;
    let refused = server.send_body("POST", "/api/v1/loops", &json, bad);
    assert_eq!(refused.status, 400, "{}", refused.body);
    let cli = cli_error(
        &env,
        &[
            "create", "command", "bad", "--cmd", "true", "--every", "soon",
        ],
    );
    assert_eq!(refused.error().1, cli);
    // Not JSON: a form another site could post is refused.
    let form = [
        ("Authorization", bearer.as_str()),
        ("Content-Type", "text/plain"),
    ];
    let refused = server.send_body("POST", "/api/v1/loops", &form, body);
    assert_eq!(refused.status, 415, "{}", refused.body);
    assert_eq!(cli_json(&env, &["list"]).as_array().map(Vec::len), Some(1));
}

#[test]
fn the_login_url_sets_a_strict_cookie_that_opens_the_api() {
    let env = TestEnv::new();
    let server = Server::start(&env);
    let login = server.send("GET", &format!("/login?token={}", server.token), &[]);
    assert_eq!(login.status, 303);
    assert_eq!(login.header("location"), Some("/"));
    let cookie = login.header("set-cookie").expect("a cookie");
    for part in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(part), "{cookie}");
    }
    let pair = cookie.split(';').next().unwrap();
    let list = server.send("GET", "/api/v1/loops", &[("Cookie", pair)]);
    assert_eq!(list.status, 200, "{}", list.body);
    let wrong = server.send("GET", "/login?token=00", &[]);
    assert_eq!(wrong.status, 401);
    assert!(wrong.header("set-cookie").is_none());
}

#[test]
fn an_api_call_without_the_token_is_refused() {
    let env = TestEnv::new();
    let server = Server::start(&env);
    for headers in [
        vec![],
        vec![("Authorization", "Bearer 0123")],
        vec![("Cookie", "loops_token=0123")],
    ] {
        let reply = server.send("GET", "/api/v1/loops", &headers);
        assert_eq!(reply.status, 401, "{headers:?}");
        assert_eq!(reply.error().0, "unauthorized");
        // Security headers on every response, refusals too.
        assert_eq!(
            reply.header("content-security-policy"),
            Some("default-src 'self'; script-src 'self'")
        );
        assert_eq!(reply.header("x-content-type-options"), Some("nosniff"));
        assert_eq!(reply.header("referrer-policy"), Some("same-origin"));
    }
    // A page without the cookie: a refusal, as HTML.
    let index = server.send("GET", "/", &[]);
    assert_eq!(index.status, 401);
    let kind = index.header("content-type").unwrap_or_default();
    assert!(kind.starts_with("text/html"), "{kind}");
    assert_eq!(index.header("x-content-type-options"), Some("nosniff"));
}

#[test]
fn a_write_from_another_origin_is_refused() {
    let env = TestEnv::new();
    let id = env.create_command("backup", "true", &["--every", "1h"]);
    let server = Server::start(&env);
    let bearer = format!("Bearer {}", server.token);
    let reply = server.send(
        "POST",
        &format!("/api/v1/loops/{id}/pause"),
        &[
            ("Authorization", &bearer),
            ("Origin", "http://evil.example"),
        ],
    );
    assert_eq!(reply.status, 403, "{}", reply.body);
    assert_eq!(cli_json(&env, &["show", &id])["status"], "active");
}

#[test]
fn a_foreign_host_is_refused() {
    let env = TestEnv::new();
    let server = Server::start(&env);
    let bearer = format!("Bearer {}", server.token);
    let reply = server.send(
        "GET",
        "/api/v1/loops",
        &[("Authorization", &bearer), ("Host", "evil.example:80")],
    );
    assert_eq!(reply.status, 421, "{}", reply.body);
    let port = server.addr.rsplit(':').next().unwrap();
    let local = format!("localhost:{port}");
    let reply = server.send(
        "GET",
        "/api/v1/loops",
        &[("Authorization", &bearer), ("Host", &local)],
    );
    assert_eq!(reply.status, 200, "{}", reply.body);
}

#[test]
fn a_non_loopback_listen_without_tls_refuses_to_start() {
    let env = TestEnv::new();
    let ran = env.loops(["serve", "--listen", "0.0.0.0:0"]).code(1).run();
    assert_eq!(ran.stderr.lines().count(), 1, "{}", ran.stderr);
    assert!(
        ran.stderr.starts_with("error: ") && ran.stderr.contains("TLS"),
        "{}",
        ran.stderr
    );
}

#[test]
fn the_token_file_is_the_owners_alone() {
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new();
    let server = Server::start(&env);
    let path = env.data_dir().join("serve.token");
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(std::fs::read_to_string(&path).unwrap().trim(), server.token);
    drop(server);
    // A restarted server keeps it.
    let again = Server::start(&env);
    assert_eq!(std::fs::read_to_string(&path).unwrap().trim(), again.token);
}

/// A CA, and a certificate it signed for `localhost` with its key (PEM)
/// written into `dir`; their paths.
fn certificate(dir: &Path) -> (TestCa, String, String) {
    let ca = TestCa::new("loops serve test CA");
    let (cert, key) = ca.write_server_cert(dir, &["localhost"]);
    (ca, cert, key)
}

#[test]
fn with_a_certificate_the_api_is_served_over_tls() {
    let env = TestEnv::new();
    env.create_command("backup", "true", &["--every", "1h"]);
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = certificate(dir.path());
    let server = Server::start_with(
        &env,
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
        ],
    )
    .trusting(&ca);
    assert!(server.tls, "the login URL is https");
    let list = server.authed("GET", "/api/v1/loops");
    assert_eq!(list.status, 200, "{}", list.body);
    assert_eq!(list.json(), cli_json(&env, &["list"]));
    let login = server.send("GET", &format!("/login?token={}", server.token), &[]);
    let cookie = login.header("set-cookie").expect("a cookie");
    assert!(cookie.ends_with("; Secure"), "{cookie}");
    // A write from this server's own https origin passes the Origin check.
    let own = format!("https://{}", server.addr);
    let bearer = format!("Bearer {}", server.token);
    let paused = server.send(
        "POST",
        "/api/v1/loops/backup/pause",
        &[("Authorization", &bearer), ("Origin", &own)],
    );
    assert_eq!(paused.status, 200, "{}", paused.body);
}

#[test]
fn a_bad_certificate_or_a_wildcard_tls_bind_refuses_to_start() {
    let env = TestEnv::new();
    let dir = tempfile::tempdir().unwrap();
    let (_, cert, key) = certificate(dir.path());
    let ran = env
        .loops([
            "serve",
            "--listen",
            "0.0.0.0:0",
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
        ])
        .code(1)
        .run();
    assert!(ran.stderr.contains("every address"), "{}", ran.stderr);
    let ran = env
        .loops(["serve", "--tls-cert", &key, "--tls-key", &key])
        .code(1)
        .run();
    assert!(
        ran.stderr.contains("reading the TLS certificate"),
        "{}",
        ran.stderr
    );
    // The key of another certificate.
    let other = tempfile::tempdir().unwrap();
    let (_, _, other_key) = certificate(other.path());
    let ran = env
        .loops(["serve", "--tls-cert", &cert, "--tls-key", &other_key])
        .code(1)
        .run();
    assert!(
        ran.stderr.contains("does not belong to the certificate"),
        "{}",
        ran.stderr
    );
}

#[test]
fn the_openapi_document_lists_only_routes_the_server_has() {
    let env = TestEnv::new();
    let server = Server::start(&env);
    let doc = server.authed("GET", "/api/v1/openapi.json").json();
    assert_eq!(doc["openapi"], "3.1.0");
    let paths = doc["paths"].as_object().expect("paths");
    assert!(paths.len() >= 12, "{paths:?}");
    for (path, operations) in paths {
        for method in operations.as_object().expect("operations").keys() {
            // A loop or run that does not exist: the command's own 404,
            // never the router's.
            let path = path
                .replace("{loop}", "nope")
                .replace("{run}", "nope")
                .replace("{workflow}", "nope")
                .replace("{action}", "add");
            // A stream that does not end: `serve_pages.rs` reads it.
            if path == "/events" {
                continue;
            }
            let query = match path.as_str() {
                "/runs/nope/output" => "?showOutput=1",
                "/loops/nope/labels/add" => "?labels=x",
                _ => "",
            };
            let reply = server.authed(
                &method.to_ascii_uppercase(),
                &format!("/api/v1{path}{query}"),
            );
            assert_ne!(reply.status, 405, "{method} {path}");
            if reply.status == 404 {
                let (_, message) = reply.error();
                assert!(
                    !message.starts_with("no such route"),
                    "{method} {path}: {message}"
                );
            }
        }
    }
    let unknown = server.authed("GET", "/api/v1/nothing");
    assert_eq!(unknown.status, 404);
    assert!(unknown.error().1.starts_with("no such route"));
}

#[test]
fn sigterm_ends_the_server_cleanly() {
    let env = TestEnv::new();
    let mut server = Server::start(&env);
    assert_eq!(server.authed("GET", "/api/v1/loops").status, 200);
    assert!(loops_tests::kill("-TERM", server.child.id()));
    let status = loops_tests::wait_for("loops serve to exit", DEADLINE, || {
        server.child.try_wait().expect("its status")
    });
    assert!(status.success(), "{status:?}");
}
