//! Issue 25 §2: loops' own database credentials reach no run and no hook.
//! A daemon on PostgreSQL holds its connection string, password included,
//! in `LOOPS_DATABASE_URL`, and a loop that printed its environment stored
//! the password in the clear in its run, its log file, `export`,
//! `runs --show-output` and its hook's stdin.
//!
//! Here loops runs with the libpq credential variables set (and, against a
//! PostgreSQL server, with a password in `LOOPS_DATABASE_URL`); a loop
//! prints its environment and a file it was pointed at, its success hook
//! (shown the output) saves its stdin and its environment, and every
//! surface is grepped for the values.

use std::path::{Path, PathBuf};

use loops_tests::{DATABASE_URL_ENV, Test, TestEnv};

/// The libpq variables loops must never pass on, with values to grep for.
const PG_VARS: [(&str, &str); 4] = [
    ("PGPASSWORD", "pgpassword-SECRET-1"),
    ("PGPASSFILE", "/secret/pgpass-SECRET-2"),
    ("PGSERVICEFILE", "/secret/pgservice-SECRET-3"),
    ("PGSSLKEY", "/secret/pgsslkey-SECRET-4"),
];

/// `loops` in `env`, with the libpq variables set and, when given, the
/// database `url` (its own database otherwise).
struct Runner<'a> {
    env: &'a TestEnv,
    url: Option<String>,
}

impl Runner<'_> {
    fn loops(&self, args: &[&str]) -> Test {
        let mut test = self.env.loops(args);
        if let Some(url) = &self.url {
            test = test.env(DATABASE_URL_ENV, Some(url));
        }
        for (name, value) in PG_VARS {
            test = test.env(name, Some(value));
        }
        test
    }

    /// The work directory the loops run in and their hooks write to.
    fn workdir(&self) -> PathBuf {
        let dir = self.env.home().join("work");
        std::fs::create_dir_all(&dir).expect("a work directory");
        dir
    }

    /// Two loops that print their environment and `file`, one to run now,
    /// one due for `tick`, whose success hooks save their stdin and
    /// environment in the work directory; then `run-now` and `tick`.
    fn run_dumping_loops(&self, file: &Path) {
        let dir = self.workdir();
        for (name, schedule) in [("now", ["--every", "1h"]), ("due", ["--at", "2020-01-01"])] {
            self.loops(&["create", "command", name])
                .args(["--cmd", &format!("env; cat '{}'", file.display())])
                .args(["--cwd", dir.to_str().expect("a UTF-8 path")])
                .args([
                    "--on-success",
                    &format!("cat > {name}-hook.json; env > {name}-hook.env"),
                ])
                .args(["--hook-show-output"])
                .args(schedule)
                .run();
        }
        self.loops(&["run-now", "now"]).run();
        self.loops(&["tick"]).run();
    }

    /// Every place a run's output or environment could be kept, with its
    /// text: `runs --show-output --json` first, then the run logs,
    /// `export` and the hooks' files.
    fn every_surface(&self) -> Vec<(String, String)> {
        let mut surfaces = vec![(
            "runs --show-output --json".to_owned(),
            self.loops(&["--json", "runs", "--show-output"])
                .run()
                .stdout,
        )];
        let export = self.env.home().join("export.json");
        self.loops(&["export", "--file", export.to_str().expect("a UTF-8 path")])
            .run();
        let logs = self.env.data_dir().join("logs");
        let files = [logs, self.workdir()]
            .into_iter()
            .flat_map(|dir| std::fs::read_dir(dir).expect("a directory").flatten())
            .map(|entry| entry.path())
            .chain([export]);
        for path in files {
            let text = std::fs::read_to_string(&path).expect("a file");
            surfaces.push((path.display().to_string(), text));
        }
        surfaces
    }

    /// Asserts that no surface holds any of `secrets` or names a database
    /// variable, and that the runs and hooks did print their environments
    /// (so a leak would have been seen).
    fn assert_nowhere(&self, secrets: &[&str]) {
        let surfaces = self.every_surface();
        let named = |suffix: &str| {
            surfaces
                .iter()
                .filter(|(what, _)| what.ends_with(suffix))
                .count()
        };
        assert_eq!(named("-hook.env"), 2, "both hooks ran");
        assert_eq!(named(".log"), 2, "both runs were logged");
        for (what, text) in &surfaces {
            for secret in secrets {
                assert!(!text.contains(secret), "{what} holds {secret}:\n{text}");
            }
            for name in PG_VARS.iter().map(|(n, _)| *n).chain([DATABASE_URL_ENV]) {
                assert!(
                    !text.contains(&format!("{name}=")),
                    "{what} has {name}:\n{text}"
                );
            }
        }
        let runs = &surfaces[0].1;
        assert!(
            runs.contains("HOME="),
            "the runs printed no environment: {runs}"
        );
    }
}

#[test]
fn libpq_credentials_reach_no_run_and_no_hook() {
    let env = TestEnv::new();
    let runner = Runner {
        env: &env,
        url: None,
    };
    let file = env.home().join("empty");
    std::fs::write(&file, "").unwrap();
    runner.run_dumping_loops(&file);
    let values: Vec<&str> = PG_VARS.iter().map(|(_, v)| *v).collect();
    runner.assert_nowhere(&values);
}

/// `url` with `password` added: a URL's query parameter or a `key=value`
/// pair.
fn with_password(url: &str, password: &str) -> String {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let sep = if url.contains('?') { '&' } else { '?' };
        format!("{url}{sep}password={password}")
    } else {
        format!("{url} password='{password}'")
    }
}

#[test]
fn the_database_url_and_its_password_reach_no_run_and_no_hook() {
    // A database of its own, whatever the backend of the other tests; the
    // test server trusts local connections, so the password is never asked
    // for: it is only carried, as a daemon's would be.
    let db = loops_tests::postgres_only!();
    let password = "db-url-SECRET-TAIL";
    let env = TestEnv::new();
    let runner = Runner {
        env: &env,
        url: Some(with_password(db.url(), password)),
    };
    // A run that reads the password from a file it was pointed at.
    let file = env.home().join("pgpass");
    std::fs::write(&file, format!("*:*:*:*:{password}\n")).unwrap();
    runner.run_dumping_loops(&file);
    let runs = runner
        .loops(&["--json", "runs", "--show-output"])
        .run()
        .stdout;
    assert!(runs.contains("*:*:*:*:[redacted]"), "{runs}");
    let mut secrets: Vec<&str> = PG_VARS.iter().map(|(_, v)| *v).collect();
    secrets.push(password);
    runner.assert_nowhere(&secrets);
}
