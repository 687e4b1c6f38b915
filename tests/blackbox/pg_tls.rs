//! Issue 32: PostgreSQL over TLS through rustls, with libpq's `sslmode`
//! and `sslrootcert`. `cargo xtask postgres` serves TLS on 127.0.0.1 with
//! a certificate for `localhost` only, signed by a CA of its own
//! (`LOOPS_TEST_DATABASE_TLS_PORT`, `LOOPS_TEST_DATABASE_TLS_CA`); without
//! them every test here skips, saying so.
//!
//! Each URL carries a password (the server trusts every local
//! connection, so it is never asked for): a refused server's message must
//! name the cause and never print it.

use loops_store::testing::TestDatabase;
use loops_tests::tls::TestCa;
use loops_tests::{DATABASE_URL_ENV, Ran, TestEnv};

/// The password every URL here carries.
const PASSWORD: &str = "tls-pw-SECRET-32";

/// The cluster's TLS endpoint, and a fresh database on it.
struct TlsServer {
    db: TestDatabase,
    port: String,
    ca: String,
}

impl TlsServer {
    /// The server of `cargo xtask postgres`, or `None` (after saying so)
    /// when it does not serve TLS.
    fn find(test: &str, db: TestDatabase) -> Option<TlsServer> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        match (
            var("LOOPS_TEST_DATABASE_TLS_PORT"),
            var("LOOPS_TEST_DATABASE_TLS_CA"),
        ) {
            (Some(port), Some(ca)) => Some(TlsServer { db, port, ca }),
            _ => {
                eprintln!(
                    "skipped {test}: no PostgreSQL TLS server (LOOPS_TEST_DATABASE_TLS_PORT and \
                     LOOPS_TEST_DATABASE_TLS_CA are set by `cargo xtask postgres`)"
                );
                None
            }
        }
    }

    /// The URL of the test's database on `host`, with `query`.
    fn url(&self, host: &str, query: &str) -> String {
        format!(
            "postgresql://postgres:{PASSWORD}@{host}:{}/{}?{query}",
            self.port,
            self.db.name()
        )
    }

    /// `loops list --json` on `url`.
    fn list(&self, env: &TestEnv, url: &str, code: i32) -> Ran {
        let ran = env
            .loops(["list", "--json"])
            .env(DATABASE_URL_ENV, Some(url))
            .code(code)
            .run();
        for out in [&ran.stdout, &ran.stderr] {
            assert!(!out.contains(PASSWORD), "the password is printed:\n{out}");
        }
        ran
    }
}

/// Starts a test that needs the TLS server: evaluates to it, or returns
/// after saying why there is none.
macro_rules! tls_server {
    () => {{
        fn here() {}
        let test = std::any::type_name_of_val(&here);
        let test = test.strip_suffix("::here").unwrap_or(test);
        let test = test.split_once("::").map_or(test, |(_, rest)| rest);
        let db = loops_tests::postgres_only!();
        match TlsServer::find(test, db) {
            Some(server) => server,
            None => return,
        }
    }};
}

#[test]
fn every_sslmode_connects_to_a_server_whose_certificate_checks_out() {
    let server = tls_server!();
    let env = TestEnv::new();
    let ca = &server.ca;
    for query in [
        "sslmode=require".to_owned(),
        format!("sslmode=require&sslrootcert={ca}"),
        format!("sslmode=verify-ca&sslrootcert={ca}"),
        format!("sslmode=verify-full&sslrootcert={ca}"),
    ] {
        let ran = server.list(&env, &server.url("localhost", &query), 0);
        assert_eq!(ran.json(), serde_json::json!([]), "{query}");
    }
    // verify-ca checks the chain, not the name: 127.0.0.1 is not in the
    // certificate, and passes.
    let url = server.url("127.0.0.1", &format!("sslmode=verify-ca&sslrootcert={ca}"));
    server.list(&env, &url, 0);
    // The key=value form takes the same keys.
    let conninfo = format!(
        "host=localhost port={} dbname={} user=postgres password={PASSWORD} \
         sslmode=verify-full sslrootcert='{ca}'",
        server.port,
        server.db.name()
    );
    server.list(&env, &conninfo, 0);
}

#[test]
fn verify_full_refuses_a_host_name_the_certificate_does_not_name() {
    let server = tls_server!();
    let env = TestEnv::new();
    let url = server.url(
        "127.0.0.1",
        &format!("sslmode=verify-full&sslrootcert={}", server.ca),
    );
    let ran = server.list(&env, &url, 1);
    assert!(
        ran.stderr
            .contains("its certificate does not name the host 127.0.0.1 (it names")
            && ran.stderr.contains("sslmode=verify-ca"),
        "{}",
        ran.stderr
    );
}

#[test]
fn a_certificate_from_an_unknown_ca_is_refused() {
    let server = tls_server!();
    let env = TestEnv::new();
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other-ca.crt");
    TestCa::new("another CA").write(&other);
    let other = other.display().to_string();
    // libpq's `require` with a root file checks the chain too.
    for mode in ["verify-full", "verify-ca", "require"] {
        let url = server.url("localhost", &format!("sslmode={mode}&sslrootcert={other}"));
        let ran = server.list(&env, &url, 1);
        assert!(
            ran.stderr.contains(&format!(
                "its certificate is not signed by a CA of sslrootcert={other}"
            )),
            "{mode}: {}",
            ran.stderr
        );
    }
    // Without sslrootcert=, verify-full checks against the system's roots,
    // which do not hold the test's CA.
    let ran = server.list(&env, &server.url("localhost", "sslmode=verify-full"), 1);
    assert!(
        ran.stderr.contains("system's trusted roots"),
        "{}",
        ran.stderr
    );
}

#[test]
fn an_unreadable_root_file_or_a_bad_sslmode_says_what_is_wrong() {
    let server = tls_server!();
    let env = TestEnv::new();
    let url = server.url(
        "localhost",
        "sslmode=verify-full&sslrootcert=/nonexistent/ca.crt",
    );
    let ran = server.list(&env, &url, 1);
    assert!(
        ran.stderr.contains("sslrootcert=/nonexistent/ca.crt"),
        "{}",
        ran.stderr
    );
    let ran = server.list(&env, &server.url("localhost", "sslmode=verify"), 1);
    assert!(
        ran.stderr.contains("sslmode=\"verify\" is not one of"),
        "{}",
        ran.stderr
    );
}
