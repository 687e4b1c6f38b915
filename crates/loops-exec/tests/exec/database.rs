//! Loops' own database credentials (issue 25 §2): a daemon on PostgreSQL
//! holds its connection string, password included, in `LOOPS_DATABASE_URL`,
//! and every run, hook and `accounts env` call inherited it. None of the
//! libpq credential variables reaches any of them now, with or without an
//! account, and the database's password is masked in what a run stores and
//! logs and in what a hook reports.

use std::collections::BTreeMap;
use std::time::Duration;

use loops_core::{Account, AgentProvider, AgentTarget, ExecutorStatus, ProcessTarget};
use loops_exec::{Hook, RunContext, RunLog, RunMetadata, prepare_logs_dir, run_hook};

use crate::support::*;

/// The variables stripped whatever the account. Written out here rather
/// than taken from the crate, so a name dropped from its list fails.
const DATABASE: [&str; 5] = [
    "LOOPS_DATABASE_URL",
    "PGPASSWORD",
    "PGPASSFILE",
    "PGSERVICEFILE",
    "PGSSLKEY",
];

/// A password in the URL, another in `PGPASSWORD`.
const URL_PASSWORD: &str = "url-pass-SECRET-TAIL";
const PG_PASSWORD: &str = "pgpassword-SECRET";

fn value_of(name: &str) -> String {
    match name {
        "LOOPS_DATABASE_URL" => format!("postgresql://loops:{URL_PASSWORD}@db.example/loops"),
        "PGPASSWORD" => PG_PASSWORD.to_owned(),
        _ => format!("/inherited/{name}"),
    }
}

/// The fixture's environment with every database variable set.
fn env_with_database(fx: &Fixture) -> BTreeMap<String, String> {
    let mut env = fx.env();
    for name in DATABASE {
        env.insert(name.to_owned(), value_of(name));
    }
    env.insert("KEPT".to_owned(), "kept-value".to_owned());
    env
}

fn with_account(mut target: ProcessTarget) -> ProcessTarget {
    let account = Some(Account {
        profile: "work".into(),
        tool: Some("claude".into()),
    });
    match &mut target {
        ProcessTarget::Command(c) => c.account = account,
        ProcessTarget::Agent(a) => a.account = account,
    }
    target
}

/// A fake `accounts` that dumps its environment to `accounts.env` and
/// resolves to a Claude profile directory.
fn fake_accounts(fx: &Fixture) {
    let dir = fx.path_str("claude-home");
    std::fs::create_dir_all(&dir).unwrap();
    fx.fake(
        "accounts",
        &format!("env > \"$MARKERS/accounts.env\"\necho 'export CLAUDE_CONFIG_DIR={dir}'"),
    );
}

/// The names of `DATABASE` that `dump` (the output of `env`) holds, by
/// name or by value.
fn leaked(dump: &str) -> Vec<&'static str> {
    DATABASE
        .into_iter()
        .filter(|name| dump.contains(&format!("{name}=")) || dump.contains(&value_of(name)))
        .collect()
}

fn read(fx: &Fixture, rel: &str) -> String {
    let text = std::fs::read_to_string(fx.path(rel)).unwrap();
    std::fs::remove_file(fx.path(rel)).unwrap();
    text
}

#[test]
fn database_credentials_reach_no_run_account_or_not() {
    let fx = Fixture::new();
    fake_accounts(&fx);
    // Issue 27: an agent that exits 0 must print something.
    fx.fake("claude", r#"env > "$MARKERS/run.env"; echo done"#);
    let opts = fx.opts_with(env_with_database(&fx));
    let dump = shell(r#"env > "$MARKERS/run.env""#);
    let agent = ProcessTarget::Agent(AgentTarget::new(AgentProvider::Claude, "hi"));
    for (what, target) in [
        ("a command", dump.clone()),
        ("a command under an account", with_account(dump)),
        ("an agent", agent.clone()),
        ("an agent under an account", with_account(agent)),
    ] {
        let r = run(&target, &opts);
        assert_eq!(r.status, ExecutorStatus::Succeeded, "{what}: {r:?}");
        let seen = read(&fx, "run.env");
        assert_eq!(leaked(&seen), Vec::<&str>::new(), "{what} inherited them");
        // The control: other variables still pass without an account.
        assert!(seen.contains("KEPT=kept-value"), "{what}: {seen}");
        if what.ends_with("account") {
            let accounts = read(&fx, "accounts.env");
            assert_eq!(
                leaked(&accounts),
                Vec::<&str>::new(),
                "accounts env of {what}"
            );
        }
    }
    // A target may still set one in its own `env`, on purpose.
    let mut own = shell(r#"env > "$MARKERS/run.env""#);
    if let ProcessTarget::Command(c) = &mut own {
        c.env = Some(BTreeMap::from([(
            "PGPASSFILE".into(),
            "/own/pgpass".into(),
        )]));
    }
    assert_eq!(run(&own, &opts).status, ExecutorStatus::Succeeded);
    assert!(read(&fx, "run.env").contains("PGPASSFILE=/own/pgpass"));
}

#[test]
fn preflight_calls_accounts_without_database_credentials() {
    let fx = Fixture::new();
    fake_accounts(&fx);
    let opts = fx.opts_with(env_with_database(&fx));
    loops_exec::preflight_target(&with_account(shell("true")), &RunMetadata::default(), &opts)
        .unwrap();
    assert_eq!(leaked(&read(&fx, "accounts.env")), Vec::<&str>::new());
}

fn hook(command: &str) -> Hook {
    Hook {
        command: command.to_owned(),
        cwd: None,
        stdin: b"{}".to_vec(),
        vars: Vec::new(),
        timeout: Duration::from_secs(10),
    }
}

#[test]
fn hooks_get_no_database_credentials_and_report_no_password() {
    let fx = Fixture::new();
    let mut opts = fx.opts_with(env_with_database(&fx));
    assert_eq!(
        run_hook(&hook(r#"env > "$MARKERS/hook.env""#), &opts),
        Ok(())
    );
    let seen = read(&fx, "hook.env");
    assert_eq!(leaked(&seen), Vec::<&str>::new());
    assert!(seen.contains("KEPT=kept-value"), "{seen}");

    // A hook that found the password elsewhere and failed: its report is
    // masked of the runner's secret values and the inherited ones.
    opts.secret_values = vec!["runner-db-password".to_owned()];
    std::fs::write(
        fx.path("secrets.txt"),
        format!(
            "runner-db-password {PG_PASSWORD} {}",
            value_of("LOOPS_DATABASE_URL")
        ),
    )
    .unwrap();
    let failing = hook(r#"echo "connect failed: $(cat "$MARKERS/secrets.txt")" >&2; exit 2"#);
    assert_eq!(
        run_hook(&failing, &opts),
        Err("exited with code 2: connect failed: [redacted] [redacted] [redacted]".to_owned())
    );
}

#[test]
fn the_database_password_is_masked_in_output_errors_and_the_log() {
    let fx = Fixture::new();
    let mut opts = fx.opts_with(env_with_database(&fx));
    // As `ProcessExecutor::for_store` gives them: each spelling.
    opts.secret_values = vec![
        "db pass SECRET-TAIL".to_owned(),
        "db\\ pass\\ SECRET-TAIL".to_owned(),
    ];
    // The run was pointed at a file holding them, as a job that reads the
    // password from a config file would be.
    std::fs::write(
        fx.path("conninfo"),
        format!(
            "host=h password=db\\ pass\\ SECRET-TAIL\ndb pass SECRET-TAIL\n{}\n{PG_PASSWORD}\n",
            value_of("LOOPS_DATABASE_URL")
        ),
    )
    .unwrap();
    let target = shell(r#"cat "$MARKERS/conninfo"; cat "$MARKERS/conninfo" >&2; exit 1"#);
    let logs = prepare_logs_dir(fx.dir.path()).unwrap();
    let log = RunLog::create(&logs, "0123456789ab").unwrap();
    let ctx = RunContext {
        log: Some(&log),
        ..RunContext::default()
    };
    let r = run_in(&target, &RunMetadata::default(), &opts, &ctx)
        .0
        .unwrap();
    let masked = "host=h password=[redacted]\n[redacted]\n[redacted]\n[redacted]\n";
    assert_eq!(r.stdout, masked);
    assert_eq!(r.stderr, masked);
    let logged = std::fs::read_to_string(log.path()).unwrap();
    for secret in ["SECRET", "pgpassword", "url-pass"] {
        assert!(!logged.contains(secret), "{logged}");
    }
    assert!(logged.contains("password=[redacted]"), "{logged}");

    // An error loops writes itself.
    let missing = fx.path_str("db pass SECRET-TAIL");
    let r = run(&with_cwd(shell("true"), &missing), &opts);
    let error = r.error.unwrap();
    assert!(error.ends_with("/[redacted]"), "{error}");
}
