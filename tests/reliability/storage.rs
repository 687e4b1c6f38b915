//! Storage faults: a read-only data directory, a full disk, a file size
//! limit, a truncated or corrupt database file, and a database from a newer
//! schema.
//!
//! Each fault is set up under a database holding loops, runs and a
//! workflow. Every command run against it must end with exit 0, or exit 1
//! and a first stderr line `error: <what is wrong>`: never a panic or a
//! death by signal, never a message that repeats itself, and never the
//! advice to move aside a database that is fine. A command that fails must
//! not change the database file, and a rejected `create` adds no row. Then
//! the fault is fixed (permissions restored, space freed, the file restored
//! from a backup copy) and `loops create` plus `loops tick` work, with
//! nothing written before the fault lost.
//!
//! Read-only directories use `chmod 0500`, or, as root (where permissions do
//! not apply), a read-only bind mount; a full disk is a tiny tmpfs. Both
//! need root's `mount`; without it that part is skipped with a printed
//! note. Every mount is undone by a guard, also when the test fails.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use loops_tests::{TestEnv, sqlite_only};
use rusqlite::{Connection, OpenFlags};

use crate::support::{figure, pick, wait_for};

/// Whether this process runs as root.
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|uid| uid == "0"))
        })
        .unwrap_or(false)
}

/// A mount at `path`, unmounted on drop.
struct Mount {
    path: PathBuf,
}

impl Mount {
    /// Runs `mount <args> <path>`; `None` if it fails (not root, no
    /// capability, no `mount`).
    fn new(args: &[&str], path: &Path) -> Option<Mount> {
        let status = Command::new("mount")
            .args(args)
            .arg(path)
            .stderr(std::process::Stdio::null())
            .status()
            .ok()?;
        status.success().then(|| Mount {
            path: path.to_owned(),
        })
    }

    /// A read-only bind mount of `dir` over itself.
    fn read_only(dir: &Path) -> Option<Mount> {
        let bind = Mount::new(&["--bind", &dir.display().to_string()], dir)?;
        // If the remount fails, the bind's guard undoes it.
        // Once remounted, the one guard of the remount undoes the bind.
        Mount::new(&["-o", "remount,ro,bind"], dir).inspect(move |_| std::mem::forget(bind))
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        for _ in 0..50 {
            let ok = Command::new("umount")
                .arg(&self.path)
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

/// Sets the mode of `dir` and of the files in it.
fn set_modes(dir: &Path, dir_mode: u32, file_mode: u32) {
    for entry in std::fs::read_dir(dir).expect("the data dir").flatten() {
        let _ = std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(file_mode));
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(dir_mode)).expect("chmod");
}

/// What a storage test found.
#[derive(Default)]
struct Findings {
    commands: usize,
    errors: usize,
    failures: Vec<String>,
}

impl Findings {
    fn finish(self, test: &str, started: Instant, extra: &str) {
        figure(
            test,
            &format!(
                "{} commands in {:.1}s, {} clean errors{extra}; panics 0; failures {}",
                self.commands,
                started.elapsed().as_secs_f64(),
                self.errors,
                self.failures.len()
            ),
        );
        assert!(
            self.failures.is_empty(),
            "{} problems:\n- {}",
            self.failures.len(),
            self.failures.join("\n- ")
        );
    }
}

/// How a command under a fault ended.
struct Ended {
    code: i32,
    stdout: String,
    first: String,
}

/// Runs `loops <args>` under a fault and checks the shape of the outcome:
/// exit 0, or exit 1 with a clean `error:` line (a report on stdout for
/// `doctor`, which exits 1 when a check fails). Returns `None` after a
/// panic or a signal, which are recorded as failures.
fn run(env: &TestEnv, f: &mut Findings, args: &[&str], cmd: Option<Command>) -> Option<Ended> {
    let mut cmd = cmd.unwrap_or_else(|| env.cmd());
    let out = match cmd.args(args).output() {
        Ok(out) => out,
        Err(e) => {
            f.failures
                .push(format!("loops {args:?}: could not run: {e}"));
            return None;
        }
    };
    f.commands += 1;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    // The error line, else the first: a run that started before the disk
    // filled may warn about its log first.
    let first = stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .or_else(|| stderr.lines().next())
        .unwrap_or_default()
        .to_owned();
    if let Some(signal) = out.status.signal() {
        f.failures.push(format!(
            "loops {args:?} was killed by signal {signal} without a message; stderr: {stderr:?}"
        ));
        return None;
    }
    let code = out.status.code().unwrap_or(-1);
    if code == 101 || stderr.contains("panicked") {
        f.failures
            .push(format!("loops {args:?} panicked (exit {code}): {stderr}"));
        return None;
    }
    let report = args.contains(&"doctor") && code == 1 && !stdout.is_empty();
    if code == 1 && !report {
        f.errors += 1;
        if !first.starts_with("error: ") || first.len() < 15 {
            f.failures.push(format!(
                "loops {args:?} exited 1 without an `error:` line: {stderr:?}"
            ));
        }
        if let Some(phrase) = repeated_clause(&first) {
            f.failures.push(format!(
                "loops {args:?}: the error repeats itself ({phrase:?} more than once): {first}"
            ));
        }
    } else if code != 0 && !report {
        f.failures
            .push(format!("loops {args:?} exited {code}: {stderr}"));
    }
    Some(Ended {
        code,
        stdout,
        first,
    })
}

/// A `: `-separated clause of at least 12 characters that appears twice in
/// `line`.
fn repeated_clause(line: &str) -> Option<String> {
    let clauses: Vec<&str> = line.split(": ").map(str::trim).collect();
    clauses
        .iter()
        .enumerate()
        .find(|(i, c)| c.len() >= 12 && clauses[i + 1..].iter().any(|d| d.contains(**c)))
        .map(|(_, c)| (*c).to_owned())
}

/// What was written before a fault.
struct Seeded {
    loops: Vec<String>,
    runs: Vec<String>,
    workflow: String,
}

/// Three loops with a finished run each, and a workflow with one run.
fn seed(env: &TestEnv) -> Seeded {
    let loops: Vec<String> = (0..3)
        .map(|i| env.create_command(&format!("seeded-{i}"), "echo seeded", &["--every", "1h"]))
        .collect();
    let mut runs = Vec::new();
    for id in &loops {
        let run = env.loops(["--json", "run-now", id]).run().json();
        runs.push(run["id"].as_str().expect("a run id").to_owned());
    }
    let file = env.home().join("seeded.json");
    std::fs::write(
        &file,
        r#"{"name": "seeded", "steps": [{"id": "a", "target": {"type": "command", "command": "true"}}]}"#,
    )
    .expect("a workflow file");
    let created = env
        .loops(["--json", "workflows", "create"])
        .arg_path(&file)
        .run()
        .json();
    env.loops(["workflows", "run", "seeded"]).run();
    Seeded {
        loops,
        runs,
        workflow: created["id"].as_str().expect("a workflow id").to_owned(),
    }
}

/// `TestEnv::loops` with a path argument.
trait ArgPath {
    fn arg_path(self, path: &Path) -> Self;
}

impl ArgPath for loops_tests::Test {
    fn arg_path(self, path: &Path) -> Self {
        self.args([path.as_os_str()])
    }
}

/// Checks that everything [`seed`] wrote is still there.
fn check_seeded(env: &TestEnv, seeded: &Seeded) {
    let loops = env.loops(["--json", "list"]).run().json();
    for id in &seeded.loops {
        assert!(
            loops
                .as_array()
                .is_some_and(|l| l.iter().any(|lp| lp["id"] == id.as_str())),
            "loop {id} was lost: {loops}"
        );
    }
    let runs = env
        .loops(["--json", "runs", "--limit", "1000"])
        .run()
        .json();
    for id in &seeded.runs {
        assert!(
            runs.as_array()
                .is_some_and(|r| r.iter().any(|run| run["id"] == id.as_str())),
            "run {id} was lost"
        );
    }
    let workflows = env.loops(["--json", "workflows", "list"]).run().json();
    assert!(
        workflows.to_string().contains(&seeded.workflow),
        "workflow {} was lost: {workflows}",
        seeded.workflow
    );
}

/// After the fault is fixed: a new loop is created and a tick runs it.
fn check_recovered(env: &TestEnv, seeded: &Seeded, tag: &str) {
    let id = env.create_command(
        &format!("after-{tag}"),
        "echo after",
        &["--at", "2000-01-01T00:00:00Z"],
    );
    let tick = env.loops(["--json", "tick"]).run().json();
    assert!(
        tick["completed"]
            .as_array()
            .is_some_and(|c| c.iter().any(|run| run["loopId"] == id.as_str())),
        "the tick after {tag} did not run the new loop: {tick}"
    );
    check_seeded(env, seeded);
}

/// Moves everything in the WAL into the database file and removes the WAL,
/// so the file alone holds the data (for byte comparisons and backups).
fn checkpoint(db: &Path) {
    let conn = Connection::open(db).expect("the database opens");
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .expect("a checkpoint");
    drop(conn);
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(sidecar(db, suffix));
    }
}

fn sidecar(db: &Path, suffix: &str) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Rows in the `loops` table, read without writing anything.
fn loop_rows(db: &Path) -> Option<i64> {
    let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY).ok()?;
    conn.query_row("SELECT COUNT(*) FROM loops", [], |r| r.get(0))
        .ok()
}

/// `PRAGMA integrity_check` without writing anything.
fn integrity(db: &Path) -> String {
    Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .and_then(|c| c.query_row("PRAGMA integrity_check", [], |r| r.get::<_, String>(0)))
        .unwrap_or_else(|e| e.to_string())
}

/// `loops create` of a loop named `wide` with a large description: one
/// write of many pages.
fn wide_create(description: &str) -> [&str; 9] {
    [
        "create",
        "command",
        "wide",
        "--cmd",
        "true",
        "--every",
        "1m",
        "-d",
        description,
    ]
}

/// The commands run against a faulty store: reads first, then writes.
const READS: &[&[&str]] = &[
    &["list"],
    &["--json", "list"],
    &["runs"],
    &["--json", "runs"],
    &["show", "seeded-0"],
    &["workflows", "list"],
    &["--json", "workflows", "show", "seeded"],
    &["daemon", "status"],
    &["doctor"],
];
const WRITES: &[&[&str]] = &[
    &[
        "create", "command", "during", "--cmd", "true", "--every", "1m",
    ],
    &["tick"],
    &["run-now", "seeded-1"],
    &["pause", "seeded-2"],
    &["workflows", "run", "seeded"],
];

#[test]
fn a_read_only_data_dir_fails_clearly_and_recovers() {
    sqlite_only!("storage faults on the SQLite file and its data directory");
    let test = "storage_read_only";
    let started = Instant::now();
    let env = TestEnv::new();
    let mut f = Findings::default();
    let seeded = seed(&env);
    let db = env.db_path();
    let dir = env.data_dir();
    // Twice: with the WAL files a previous command left, and with only the
    // database file (after a checkpoint, or a copy made elsewhere).
    let mut modes = Vec::new();
    for sidecars in [true, false] {
        // Counting opens the database, which creates the WAL files.
        let rows = loop_rows(&db);
        if !sidecars {
            checkpoint(&db);
        }
        let before = std::fs::read(&db).expect("the database");
        // Root ignores permissions, so it needs a read-only mount.
        let (mount, mode) = if is_root() {
            match Mount::read_only(&dir) {
                Some(m) => (Some(m), "read-only bind mount"),
                None => {
                    figure(
                        test,
                        "skipped: running as root and `mount` fails, so there is no read-only directory to test",
                    );
                    return;
                }
            }
        } else {
            set_modes(&dir, 0o500, 0o400);
            (None, "chmod 0500")
        };
        modes.push(format!(
            "{mode} ({})",
            if sidecars {
                "with WAL files"
            } else {
                "database file only"
            }
        ));
        for args in READS {
            let Some(ended) = run(&env, &mut f, args, None) else {
                continue;
            };
            // A read may fail, but not by calling a healthy database unusable.
            if ended.code != 0 && ended.first.contains("not a usable loops database") {
                f.failures.push(format!(
                    "loops {args:?} in a read-only data dir ({mode}) calls the healthy database unusable \
                     and advises moving it aside: {}",
                    ended.first
                ));
            }
        }
        for args in WRITES {
            let Some(ended) = run(&env, &mut f, args, None) else {
                continue;
            };
            if ended.code == 0 && !(args[0] == "tick" && ended.stdout.starts_with("completed=0")) {
                f.failures.push(format!(
                    "loops {args:?} succeeded in a read-only data dir: {}",
                    ended.stdout
                ));
            }
            let lower = ended.first.to_lowercase();
            let says_why = ["read-only", "readonly", "permission", "not writable"]
                .iter()
                .any(|w| lower.contains(w));
            if ended.code == 1 && !says_why {
                f.failures.push(format!(
                    "loops {args:?} in a read-only data dir ({mode}) does not say the directory or database is \
                     read-only: {}",
                    ended.first
                ));
            }
        }
        drop(mount);
        set_modes(&dir, 0o700, 0o600);
        assert_eq!(
            std::fs::read(&db).expect("the database"),
            before,
            "the database changed"
        );
        assert_eq!(loop_rows(&db), rows, "a rejected create wrote a row");
        check_recovered(&env, &seeded, if sidecars { "ro-wal" } else { "ro-file" });
    }
    f.finish(test, started, &format!("; modes: {}", modes.join(", ")));
}

#[test]
fn a_full_disk_fails_clearly_and_recovers() {
    sqlite_only!("storage faults on the SQLite file and its data directory");
    let test = "storage_full_disk";
    let started = Instant::now();
    let env = TestEnv::new();
    let dir = env.data_dir();
    std::fs::create_dir_all(&dir).expect("a data dir");
    let Some(_tmpfs) = Mount::new(&["-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs"], &dir)
    else {
        figure(
            test,
            "skipped: `mount -t tmpfs` is not permitted here; the file size limit test covers writes that fail",
        );
        return;
    };
    let mut f = Findings::default();
    let seeded = seed(&env);
    let db = env.db_path();
    // A loop that is due and prints 300 kB, and one with a short lease.
    let big = env.create_command(
        "big-output",
        "head -c 300000 /dev/zero | tr '\\0' x",
        &["--at", "2000-01-01T00:00:00Z", "--lease", "1s"],
    );
    let filler = dir.join("filler");
    let fill = |leave: u64| {
        let _ = std::fs::remove_file(&filler);
        let mut file = std::fs::File::create(&filler).expect("a filler file");
        let chunk = vec![0u8; 64 * 1024];
        use std::io::Write;
        while file.write_all(&chunk).is_ok() {}
        let _ = file.flush();
        drop(file);
        // Then give `leave` bytes back.
        let len = std::fs::metadata(&filler).map(|m| m.len()).unwrap_or(0);
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .open(&filler)
            .and_then(|f| f.set_len(len.saturating_sub(leave)));
    };

    // Completely full: every write fails before anything runs.
    fill(0);
    // A write that fits in blocks the files already hold (a WAL that a
    // checkpoint restarted keeps its size) rightly succeeds on a full disk:
    // each create that says it succeeded adds its row, one that failed
    // adds nothing.
    let mut rows = loop_rows(&db).expect("loops counted");
    let mut created = |ended: &Option<Ended>, args: &[&str]| {
        if args[0] == "create" && ended.as_ref().is_some_and(|e| e.code == 0) {
            rows += 1;
        }
    };
    let mut full_errors = Vec::new();
    for args in READS.iter().chain(WRITES) {
        let ended = run(&env, &mut f, args, None);
        created(&ended, args);
        if let Some(ended) = ended
            && ended.code == 1
            && !args.contains(&"doctor")
        {
            full_errors.push(ended.first.clone());
            let lower = ended.first.to_lowercase();
            if !["full", "space"].iter().any(|w| lower.contains(w)) {
                f.failures.push(format!(
                    "loops {args:?} on a full disk does not say the disk is full: {}",
                    ended.first
                ));
            }
        }
    }
    // Below the kernel's 128 KiB limit on one argument (MAX_ARG_STRLEN).
    let description = "d".repeat(120_000);
    let wide = wide_create(&description);
    let ended = run(&env, &mut f, &wide, None);
    created(&ended, &wide);
    assert_eq!(
        loop_rows(&db),
        Some(rows),
        "a create that failed on a full disk wrote a row, or one that succeeded did not"
    );
    assert!(
        !full_errors.is_empty(),
        "no write failed on a full disk, so nothing here was tested"
    );
    assert_eq!(integrity(&db), "ok", "the database is damaged");

    // Nearly full: the claim fits, the run's 300 kB of output does not, so
    // the finalize fails after the command ran. The run stays `running`
    // until its lease (1 s) expires, and the next tick recovers it.
    fill(96 * 1024);
    let nearly = run(&env, &mut f, &["tick"], None);
    assert_eq!(integrity(&db), "ok", "the database is damaged");
    std::fs::remove_file(&filler).expect("space freed");
    let big_runs = |env: &TestEnv| -> Vec<String> {
        env.loops(["--json", "runs", &big])
            .run()
            .json()
            .as_array()
            .map(|runs| {
                runs.iter()
                    .map(|r| r["status"].as_str().unwrap_or_default().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let stuck = big_runs(&env);
    let settled = wait_for(std::time::Duration::from_secs(10), || {
        env.loops(["tick"]).run();
        let statuses = big_runs(&env);
        (!statuses.is_empty() && statuses.iter().all(|s| s != "running")).then_some(statuses)
    });
    assert!(
        settled.is_some(),
        "the run whose finalize failed was never recovered: {:?}",
        big_runs(&env)
    );
    check_recovered(&env, &seeded, "full");
    f.finish(
        test,
        started,
        &format!(
            "; full disk: {:?}; nearly full tick: exit {:?}, {:?}, then the run was {:?} then {:?}",
            full_errors.first().map(|e| cut(e, 120)),
            nearly.as_ref().map(|e| e.code),
            nearly.as_ref().map(|e| cut(&e.first, 120)),
            stuck,
            settled.unwrap_or_default()
        ),
    );
}

fn cut(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

#[test]
fn a_file_size_limit_is_an_error_not_a_signal() {
    sqlite_only!("storage faults on the SQLite file and its data directory");
    let test = "storage_file_size_limit";
    let started = Instant::now();
    if Command::new("prlimit").arg("--version").output().is_err() {
        figure(test, "skipped: no `prlimit` to set RLIMIT_FSIZE with");
        return;
    }
    let env = TestEnv::new();
    let mut f = Findings::default();
    let seeded = seed(&env);
    let db = env.db_path();
    let rows = loop_rows(&db);
    // A limit just above what the database and its WAL hold now, so the
    // next large write crosses it. SIGXFSZ terminates a process that does
    // not handle it; handled, the write fails with EFBIG instead.
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let limit = size(&db).max(size(&sidecar(&db, "-wal"))) + 16 * 1024;
    let description = "d".repeat(120_000);
    let mut cmd = Command::new("prlimit");
    cmd.arg(format!("--fsize={limit}"))
        .arg("--")
        .arg(loops_tests::loops_bin())
        .envs(
            env.cmd()
                .get_envs()
                .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned()))),
        );
    let ended = run(&env, &mut f, &wide_create(&description), Some(cmd));
    assert_eq!(loop_rows(&db), rows, "a failed create wrote a row");
    assert_eq!(integrity(&db), "ok", "the database is damaged");
    check_recovered(&env, &seeded, "fsize");
    let outcome = match &ended {
        Some(e) => format!("exit {}: {}", e.code, cut(&e.first, 160)),
        None => "killed by SIGXFSZ".to_owned(),
    };
    f.finish(
        test,
        started,
        &format!("; a create past RLIMIT_FSIZE={limit}: {outcome}"),
    );
}

/// A corruption of the database file.
fn corrupt(kind: &str, good: &[u8], seed: u64) -> Vec<u8> {
    let mut bytes = good.to_vec();
    match kind {
        "truncated to half" => bytes.truncate(bytes.len() / 2),
        "truncated to the header" => bytes.truncate(100),
        "truncated mid-page" => bytes.truncate(4096 + 1234),
        "header overwritten" => bytes[..16].copy_from_slice(b"NOT A DATABASE!\0"),
        "page size zeroed" => {
            bytes[16] = 0;
            bytes[17] = 0;
        }
        "zeroed first page" => {
            let end = bytes.len().min(4096);
            bytes[..end].fill(0);
        }
        _ => {
            // Random bit flips after the 100-byte header.
            let mut x = seed.max(1);
            for _ in 0..1 + seed % 40 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let at = 100 + (x as usize) % (bytes.len() - 100);
                bytes[at] ^= 1 << ((x >> 40) % 8);
            }
        }
    }
    bytes
}

#[test]
fn a_corrupt_database_is_left_untouched_and_can_be_restored() {
    sqlite_only!("storage faults on the SQLite file and its data directory");
    let test = "storage_corrupt";
    let started = Instant::now();
    let env = TestEnv::new();
    let mut f = Findings::default();
    let seeded = seed(&env);
    let db = env.db_path();
    let path = db.display().to_string();
    checkpoint(&db);
    let backup = std::fs::read(&db).expect("a backup copy");
    let mut kinds: Vec<String> = [
        "truncated to half",
        "truncated to the header",
        "truncated mid-page",
        "header overwritten",
        "page size zeroed",
        "zeroed first page",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    // `LOOPS_RELIABILITY_SEED=<n>` replays the flips named `bit flips #<n>`
    // first.
    #[expect(
        clippy::disallowed_methods,
        reason = "entropy for a seed or a unique name, not a reading of time"
    )]
    let base_seed = std::env::var("LOOPS_RELIABILITY_SEED")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    for i in 0..pick(6, 60) {
        kinds.push(format!("bit flips #{}", base_seed.wrapping_add(i)));
    }
    let (mut refused, mut opened) = (0, 0);
    for kind in &kinds {
        let seed = kind
            .strip_prefix("bit flips #")
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let bad = corrupt(kind, &backup, seed);
        std::fs::write(&db, &bad).expect("a corrupt database");
        let mut refused_here = false;
        for args in READS.iter().chain(WRITES) {
            let before = std::fs::read(&db).expect("the database");
            let Some(ended) = run(&env, &mut f, args, None) else {
                continue;
            };
            if ended.code != 1 || args.contains(&"doctor") {
                continue;
            }
            let lower = ended.first.to_lowercase();
            let about_the_file = ["malformed", "not a database", "not a usable", "corrupt"]
                .iter()
                .any(|w| lower.contains(w));
            if about_the_file && !ended.first.contains(&path) {
                f.failures.push(format!(
                    "{kind}: loops {args:?} reports a corrupt database without naming the file: {}",
                    ended.first
                ));
            }
            refused_here |= ended.first.contains("not a usable loops database");
            if std::fs::read(&db).ok().as_deref() != Some(&before[..]) {
                f.failures.push(format!(
                    "{kind}: loops {args:?} failed ({}) and changed the database file",
                    ended.first
                ));
            }
            if ended.first.contains("it was left untouched")
                && std::fs::metadata(sidecar(&db, "-wal")).is_ok_and(|m| m.len() > 0)
            {
                f.failures.push(format!(
                    "{kind}: loops {args:?} says the file was left untouched but wrote a WAL"
                ));
            }
        }
        if refused_here {
            refused += 1;
        } else {
            opened += 1;
        }
        // Restore the backup copy: everything is back and works.
        for suffix in ["-wal", "-shm"] {
            let _ = std::fs::remove_file(sidecar(&db, suffix));
        }
        std::fs::write(&db, &backup).expect("the backup restored");
        check_recovered(&env, &seeded, "restore");
        checkpoint(&db);
        std::fs::write(&db, &backup).expect("the backup restored");
    }
    f.finish(
        test,
        started,
        &format!(
            "; {} corruptions: {refused} refused at open, {opened} opened (damage SQLite cannot see until a query \
             meets it)",
            kinds.len()
        ),
    );
}

#[test]
fn a_garbage_wal_loses_nothing_committed() {
    sqlite_only!("storage faults on the SQLite file and its data directory");
    let test = "storage_garbage_wal";
    let started = Instant::now();
    let env = TestEnv::new();
    let mut f = Findings::default();
    let seeded = seed(&env);
    let db = env.db_path();
    checkpoint(&db);
    // A WAL whose header and checksums do not match is ignored by SQLite.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let garbage: Vec<u8> = (0..64 * 1024)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let wal = sidecar(&db, "-wal");
    std::fs::write(&wal, &garbage).expect("a garbage WAL");
    // With its database's mode, as SQLite makes a WAL, whatever the umask:
    // loops refuses a WAL that group or others can write.
    std::fs::set_permissions(&wal, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    for args in READS {
        run(&env, &mut f, args, None);
    }
    check_recovered(&env, &seeded, "garbage-wal");
    f.finish(test, started, "");
}

#[test]
fn a_newer_schema_is_refused_without_a_write() {
    sqlite_only!("storage faults on the SQLite file and its data directory");
    let test = "storage_newer_schema";
    let started = Instant::now();
    let env = TestEnv::new();
    let mut f = Findings::default();
    let seeded = seed(&env);
    let db = env.db_path();
    let path = db.display().to_string();
    checkpoint(&db);
    let backup = std::fs::read(&db).expect("a backup copy");
    // What a newer loops leaves behind: a migration this one does not know.
    let newest: i64 = {
        let conn = Connection::open(&db).expect("the database opens");
        let newest: i64 = conn
            .query_row(
                "SELECT MAX(version) FROM refinery_schema_history",
                [],
                |r| r.get(0),
            )
            .expect("a schema history");
        conn.execute(
            "INSERT INTO refinery_schema_history (version, name, applied_on, checksum) VALUES (?1, 'from_the_future', '2099-01-01T00:00:00Z', '0')",
            [newest + 1],
        )
        .expect("a newer migration");
        newest
    };
    checkpoint(&db);
    let newer = std::fs::read(&db).expect("the newer database");
    for args in READS.iter().chain(WRITES) {
        let Some(ended) = run(&env, &mut f, args, None) else {
            continue;
        };
        if args.contains(&"doctor") {
            continue;
        }
        let expected = format!("has schema version {}, newer than the {newest}", newest + 1);
        if ended.code != 1 || !ended.first.contains(&path) || !ended.first.contains(&expected) {
            f.failures.push(format!(
                "loops {args:?} on a newer schema: exit {}, {:?} (expected the path and {expected:?})",
                ended.code, ended.first
            ));
        }
        if std::fs::read(&db).ok().as_deref() != Some(&newer[..]) {
            f.failures.push(format!(
                "loops {args:?} changed a database of a newer schema"
            ));
        }
        if std::fs::metadata(sidecar(&db, "-wal")).is_ok_and(|m| m.len() > 0) {
            f.failures.push(format!(
                "loops {args:?} wrote a WAL for a database of a newer schema"
            ));
        }
    }
    // `PRAGMA user_version` is not how loops versions its schema: a value
    // there changes nothing and is kept.
    std::fs::write(&db, &backup).expect("the backup restored");
    {
        let conn = Connection::open(&db).expect("the database opens");
        conn.execute_batch("PRAGMA user_version = 99")
            .expect("a user_version");
    }
    check_recovered(&env, &seeded, "user-version");
    let kept: i64 = Connection::open_with_flags(&db, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .and_then(|c| c.query_row("PRAGMA user_version", [], |r| r.get(0)))
        .expect("a user_version");
    assert_eq!(kept, 99, "loops reset PRAGMA user_version");
    // Restoring the backup copy fixes the newer schema.
    checkpoint(&db);
    std::fs::write(&db, &backup).expect("the backup restored");
    check_recovered(&env, &seeded, "newer-schema");
    f.finish(test, started, "");
}

#[test]
fn paths_that_are_not_a_data_dir_fail_clearly() {
    sqlite_only!("storage faults on the SQLite file and its data directory");
    let test = "storage_odd_paths";
    let started = Instant::now();
    let env = TestEnv::new();
    let mut f = Findings::default();
    let file = env.home().join("a-file");
    std::fs::write(&file, "not a directory").expect("a file");
    let dir_as_db = env.home().join("dir-db");
    std::fs::create_dir_all(dir_as_db.join("loops.db")).expect("a directory named loops.db");
    let text_db = env.home().join("text-db");
    std::fs::create_dir_all(&text_db).expect("a data dir");
    std::fs::write(
        text_db.join("loops.db"),
        "hello, I am not SQLite\n".repeat(300),
    )
    .expect("a text file");
    // Private whatever the umask, so loops gets as far as the odd
    // `loops.db` rather than refusing a directory others can write.
    set_modes(&dir_as_db, 0o700, 0o700);
    set_modes(&text_db, 0o700, 0o600);
    for (what, data_dir) in [
        ("LOOPS_DATA_DIR is a file", file.clone()),
        ("LOOPS_DATA_DIR is below a file", file.join("sub")),
        ("loops.db is a directory", dir_as_db),
        ("loops.db is a text file", text_db.clone()),
    ] {
        for args in [
            &["list"][..],
            &["create", "command", "x", "--cmd", "true", "--every", "1m"],
        ] {
            let mut cmd = env.cmd();
            cmd.env("LOOPS_DATA_DIR", &data_dir);
            let Some(ended) = run(&env, &mut f, args, Some(cmd)) else {
                continue;
            };
            let shown = data_dir.display().to_string();
            if ended.code != 1 || !ended.first.contains(&shown) {
                f.failures.push(format!(
                    "{what}: loops {args:?}: exit {}, {:?} (expected an error naming {shown})",
                    ended.code, ended.first
                ));
            }
        }
    }
    assert_eq!(
        std::fs::read(text_db.join("loops.db")).expect("the text file"),
        "hello, I am not SQLite\n".repeat(300).into_bytes(),
        "the text file was changed"
    );
    f.finish(test, started, "");
}
