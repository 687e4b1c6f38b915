//! Issue 32: a PostgreSQL password given in the URL appears in no `ps`
//! line, no service file, no daemon log and no `doctor` output; a password
//! file (`passfile=` in the URL, `$PGPASSFILE`, `~/.pgpass`) keeps it out
//! of the URL altogether.
//!
//! The test server trusts local connections, so no test here can prove
//! that the password from a file is the one the server gets: the store's
//! unit tests check that it is read and given. Here a URL naming a
//! password file connects, and a file open to others is refused.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use loops_tests::{DATABASE_URL_ENV, TestEnv};

const SECRET: &str = "pg-SECRET-TAIL";

/// `url` with `param` (`key=value`) added: a URL's query parameter or a
/// `key=value` pair.
fn with_param(url: &str, key: &str, value: &str) -> String {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let sep = if url.contains('?') { '&' } else { '?' };
        format!("{url}{sep}{key}={value}")
    } else {
        format!("{url} {key}='{value}'")
    }
}

fn write_passfile(path: &Path, text: &str, mode: u32) {
    std::fs::write(path, text).expect("a password file");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("its mode");
}

#[test]
fn install_moves_the_urls_password_into_a_private_passfile() {
    // `daemon install` opens no database: any URL with a password will do.
    let env = TestEnv::new();
    let url = format!("postgresql://app:{SECRET}@db.example:5433/loops?sslmode=disable");
    let passfile = env.data_dir().join("pgpass");
    for platform in ["linux", "macos"] {
        let ran = env
            .loops(["daemon", "install", "--platform", platform])
            .env(DATABASE_URL_ENV, Some(&url))
            .stdout_has("the database password is in ")
            .run();
        assert!(!ran.stdout.contains(SECRET), "{}", ran.stdout);
        let service = match platform {
            "linux" => env.systemd_unit_path(),
            _ => env.launchd_plist_path(),
        };
        let text = std::fs::read_to_string(&service).unwrap();
        assert!(!text.contains(SECRET), "{text}");
        assert!(
            text.contains(&format!(
                "LOOPS_DATABASE_URL=postgresql://app@db.example:5433/loops?sslmode=disable\
                 &passfile={}",
                passfile.display()
            )) || text.contains(&format!(
                "<string>postgresql://app@db.example:5433/loops?sslmode=disable\
                 &amp;passfile={}</string>",
                passfile.display()
            )),
            "{text}"
        );
        let mode = std::fs::metadata(&passfile).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            std::fs::read_to_string(&passfile).unwrap(),
            format!("db.example:5433:loops:app:{SECRET}\n")
        );
    }
    let json = env
        .loops(["--json", "daemon", "install", "--platform", "linux"])
        .env(DATABASE_URL_ENV, Some(&url))
        .run()
        .json();
    assert_eq!(json["passfile"], passfile.display().to_string());
    // The URL the service file holds reads the password from there.
    let bare = format!(
        "postgresql://app@127.0.0.1:1/loops?connect_timeout=1&passfile={}",
        passfile.display()
    );
    std::fs::set_permissions(&passfile, std::fs::Permissions::from_mode(0o640)).unwrap();
    env.loops(["list"])
        .env(DATABASE_URL_ENV, Some(&bare))
        .code(1)
        .stderr_has("refusing password file")
        .stderr_has("chmod 600")
        .run();
}

#[test]
fn a_passfile_open_to_others_is_refused() {
    let env = TestEnv::new();
    let file = env.home().join("pgpass");
    write_passfile(&file, &format!("*:*:*:*:{SECRET}\n"), 0o644);
    // Without a password in the URL the file is read, before connecting.
    let url = "postgresql://app@127.0.0.1:1/loops?connect_timeout=1";
    let ran = env
        .loops(["list"])
        .env(DATABASE_URL_ENV, Some(url))
        .env("PGPASSFILE", Some(file.to_str().unwrap()))
        .code(1)
        .stderr_has("chmod 600")
        .run();
    assert!(!ran.stderr.contains(SECRET), "{}", ran.stderr);
}

#[test]
fn an_unsafe_pgpass_that_nobody_named_is_passed_over() {
    let env = TestEnv::new();
    write_passfile(
        &env.home().join(".pgpass"),
        &format!("*:*:*:*:{SECRET}\n"),
        0o644,
    );
    // libpq's rule: `~/.pgpass` open to others is ignored, not an error,
    // so the failure is the connection's (nothing listens on port 1).
    let url = "postgresql://app@127.0.0.1:1/loops?connect_timeout=1";
    let ran = env
        .loops(["list"])
        .env(DATABASE_URL_ENV, Some(url))
        .code(1)
        .run();
    assert!(!ran.stderr.contains("chmod 600"), "{}", ran.stderr);
    assert!(!ran.stderr.contains(SECRET), "{}", ran.stderr);
}

#[test]
fn a_url_naming_a_passfile_connects() {
    let env = TestEnv::new();
    let Some(url) = env.database_url() else {
        eprintln!("skipped: needs LOOPS_TEST_BACKEND=postgres");
        return;
    };
    let file = env.home().join("pgpass");
    write_passfile(&file, &format!("*:*:*:*:{SECRET}\n"), 0o600);
    let named = with_param(url, "passfile", file.to_str().unwrap());
    env.loops(["list"])
        .env(DATABASE_URL_ENV, Some(&named))
        .run();
    env.loops(["list"])
        .env("PGPASSFILE", Some(file.to_str().unwrap()))
        .run();
}

/// The daemon's command line, from `/proc` (Linux only).
fn cmdline(pid: u32) -> Option<String> {
    let bytes = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(String::from_utf8_lossy(&bytes).replace('\0', " "))
}

#[test]
fn the_password_shows_in_no_ps_line_log_or_doctor() {
    let env = TestEnv::new();
    let Some(url) = env.database_url() else {
        eprintln!("skipped: needs LOOPS_TEST_BACKEND=postgres");
        return;
    };
    // The test server trusts local connections: the password is carried,
    // never checked.
    let url = with_param(url, "password", SECRET);
    let ran = env.loops(["--database-url", &url, "daemon", "start"]).run();
    let pid: u32 = ran
        .stdout
        .trim()
        .strip_prefix("started pid=")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{}{}", ran.stdout, ran.stderr));
    if let Some(line) = cmdline(pid) {
        assert!(line.contains("daemon"), "{line}");
        assert!(!line.contains(SECRET), "{line}");
    }
    for args in [&["doctor"][..], &["--json", "doctor"]] {
        let out = env
            .cmd()
            .env(DATABASE_URL_ENV, &url)
            .args(args)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("***"), "{text}");
        assert!(!text.contains(SECRET), "{text}");
    }
    env.stop_daemon(pid);
    let log = env.data_dir().join("daemon.log");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!text.contains(SECRET), "{text}");
}
