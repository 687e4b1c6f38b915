//! Project automation, std only: `cargo xtask <task>`.
//!
//! - `ci`: everything CI checks, in CI's order; `.ci/run` calls it.
//! - `demo`: build `loops` and run the daemon on sample loops in a fresh data
//!   directory, in the foreground.
//! - `dist`: the release archive, with man pages and completions.
//! - `hot-functions`: the functions an idle daemon runs, for the release
//!   link to lay out together (`crates/loops-cli/build.rs`).
//! - `bench`: end-to-end figures of the built binary (or of `--bin <path>`);
//!   `--criterion` adds the Criterion micro-benchmarks; `--scale` compares
//!   a small and a large database instead; `--postgres` measures the
//!   PostgreSQL backend on a throwaway server; `--serve` measures
//!   `loops serve`; `--startup` measures start-up beside the `sqlite3` shell.
//! - `reliability`: the reliability suite's long variants (`--short` for
//!   the ones CI runs), then, in long mode, `chaos`.
//! - `chaos`: three daemons sharing one throwaway PostgreSQL while faults
//!   hit them and the server.
//! - `soak`: 200 loops at 50 runs a second for an hour (`--minutes N`, `--bin PATH`),
//!   with gc, backups and `loops serve`; fails on growth or a lost run.
//! - `mcp-python`: the venv with the official MCP Python SDK that the
//!   black-box test `mcp_python` uses (issue 18); prints its python.
//! - `tidy`: the source hygiene checks (also a `#[test]`): module docs, the
//!   line cap, module style, trailing whitespace, leftover macros and SPEC
//!   §10 citations.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

mod bench;
mod bench_daemon;
mod bench_gc;
mod bench_pg;
mod bench_scale;
mod bench_serve;
mod bench_startup;
mod chaos;
mod demo;
mod dist;
mod hot_functions;
mod mcp_python;
mod postgres;
mod reliability;
mod shells;
mod soak;
mod tidy;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let task = args.first().map(String::as_str).unwrap_or("help");
    let result = match task {
        "ci" => ci(),
        "bench" => bench::bench(&args[1..]),
        "chaos" => chaos::chaos(&args[1..]),
        "demo" => demo::demo(&args[1..]),
        "dup" => {
            tidy::backend_dup::report(&root());
            Ok(())
        }
        "dist" => dist::dist(&args[1..]),
        "hot-functions" => hot_functions::hot_functions(&args[1..]),
        "mcp-python" => mcp_python::mcp_python(&args[1..]),
        "postgres" => postgres::with_cluster(&args[1..]),
        "reliability" => reliability::reliability(&args[1..]),
        "soak" => soak::soak(&args[1..]),
        "tidy" => tidy::check(&root()).map_err(|problems| {
            for p in &problems {
                eprintln!("tidy: {p}");
            }
            format!("{} tidy problem(s)", problems.len())
        }),
        "help" | "-h" | "--help" => {
            println!(
                "usage: cargo xtask <task>\n\n\
                 tasks:\n  \
                 ci      fmt --check, clippy -D warnings, tidy, tests (doctests too; a throwaway PostgreSQL on a Unix socket),\n          \
                 the store and black-box tests again on that PostgreSQL, rustdoc -D warnings, build\n  \
                 demo    build loops, create sample loops in a fresh data dir, run the daemon (Ctrl-C stops it; --for N stops after N s)\n  \
                 dup     the backend duplication figure tidy enforces, with each shared run of lines\n  \
                 dist    the release: target/dist/loops-<version>-<target>/ (binaries, man pages, completions, README,\n          \
                 CHANGELOG, LICENSE) and its .tar.gz with a .sha256\n  \
                 hot-functions  run the release loops under callgrind (a daemon, then --version, list, create,\n               \
                 then a daemon on PostgreSQL) and write crates/loops-cli/hot-functions.txt, the functions the link lays out\n               \
                 together (--bin PATH, --seconds N)\n  \
                 bench   end-to-end CLI figures; --cli only create/list/tick, --workflows only the workflow runs,\n          \
                 --daemon only the daemon, --bin PATH measures PATH instead of building, --criterion adds Criterion;\n          \
                 --scale compares 1,000 loops / 10,000 runs with 100,000 / 1,000,000 (`bench --scale --help`);\n          \
                 --postgres drains 1,000 due loops with 1 and 3 daemons, lateness at 20/s, CLI latency side by side;\n          \
                 --serve: loops serve's API list against the CLI's, the loops page, paging 100,000 loops, 50 followers' CPU;\n          \
                 --startup: `--version` under perf stat, each --bin alternating with the sqlite3 shell\n  \
                 mcp-python  make (once) target/mcp-python/venv-<key> with the MCP Python SDK pinned in\n               \
                 tests/mcp/requirements.txt, for the black-box test mcp_python; prints its python\n               \
                 (LOOPS_MCP_PYTHON names the base interpreter, python3 by default)\n  \
                 postgres CMD...  run CMD with a throwaway PostgreSQL, its URL in LOOPS_TEST_DATABASE_URL\n  \
                 reliability  the reliability suite's long variants (crash loop, races, floods, fuzzing, ...);\n               \
                 --short runs the CI variants; other arguments filter tests; long mode ends with chaos\n  \
                 chaos   3 daemons on one throwaway PostgreSQL under kill -9, SIGSTOP, pg_terminate_backend and\n          \
                 server restarts for 60 s (--seconds N); checks every slot ran at most once at a time\n  \
                 soak    200 loops every 4 s (50 runs/s) with gc, backups and loops serve polled, for 60 min\n          \
                 (--minutes N); a row a minute (RSS, threads, fds, db and WAL size, lateness p99, runs lost or\n          \
                 doubled); fails on RSS or fd growth over 10%, a WAL over 64 MiB, or a lost or doubled run\n  \
                 tidy    check module docs, the 650-line cap, no mod.rs, no trailing whitespace, no\n          \
                 dbg!/todo!, and that a test cites every SPEC §10 item"
            );
            Ok(())
        }
        other => Err(format!("unknown task {other:?}; run `cargo xtask help`")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root: the parent of this crate's directory.
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

pub(crate) fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(root());
    cmd
}

/// The store's operation tests and the black-box tests again, on
/// PostgreSQL (issue 15): `LOOPS_TEST_BACKEND=postgres` gives each test a
/// fresh database on `cluster`, and the tests about SQLite files skip.
/// `--workspace` with target filters reuses what the first pass built (one
/// package alone would unify features differently and rebuild), and
/// `--no-fail-fast` runs every suite even after one fails.
fn postgres_pass(cluster: &postgres::Cluster) -> Result<(), String> {
    let mut test = cargo();
    test.args([
        "test",
        "--workspace",
        "--locked",
        "--no-fail-fast",
        "--test",
        "store",
        "--test",
        "workflows",
        "--test",
        "blackbox",
    ])
    .envs(cluster.env())
    .env("LOOPS_TEST_BACKEND", "postgres");
    run(
        "the store (store, workflows) and black-box tests on PostgreSQL",
        test,
    )
}

pub(crate) fn run(step: &str, mut cmd: Command) -> Result<(), String> {
    eprintln!("\n==> {step}");
    let started = std::time::Instant::now();
    let status = cmd
        .status()
        .map_err(|e| format!("{step}: could not start: {e}"))?;
    eprintln!("<== {step}: {status} in {:.1?}", started.elapsed());
    if status.success() {
        Ok(())
    } else {
        Err(format!("{step} failed ({status})"))
    }
}

/// Set by `.ci/run`: without a PostgreSQL server the tests fail rather
/// than skip.
const REQUIRE_POSTGRES: &str = "LOOPS_REQUIRE_POSTGRES";

/// Whether variable `name` is `1` or `true`.
fn required(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| matches!(v.trim(), "1" | "true"))
}

fn ci() -> Result<(), String> {
    let mut fmt = cargo();
    fmt.args(["fmt", "--all", "--", "--check"]);
    run("cargo fmt --check", fmt)?;

    let mut clippy = cargo();
    clippy.args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--locked",
        "--",
        "-D",
        "warnings",
    ]);
    run("cargo clippy -D warnings", clippy)?;

    tidy::check(&root()).map_err(|problems| problems.join("\n"))?;

    // The shells, terminal and browser the black-box tests drive (issues
    // 28 and 29).
    shells::install_missing();

    // A throwaway PostgreSQL for the tests that need one (issue 15); it
    // stops when `cluster` drops. Without one they skip, saying so.
    let cluster =
        postgres::Cluster::start().inspect_err(|e| eprintln!("postgres: none for the tests: {e}"));
    let mut test = cargo();
    // SQLite first, whatever the caller's environment says.
    test.args(["test", "--workspace", "--locked"])
        .env_remove("LOOPS_TEST_BACKEND");
    if let Ok(cluster) = &cluster {
        test.envs(cluster.env());
    }
    run("cargo test --workspace (doctests included)", test)?;
    match &cluster {
        Ok(cluster) => postgres_pass(cluster)?,
        Err(why) if required(REQUIRE_POSTGRES) => {
            return Err(format!(
                "{REQUIRE_POSTGRES} is set, and no PostgreSQL server for the tests ({why})"
            ));
        }
        Err(why) => eprintln!("\n==> the tests on PostgreSQL: skipped, no server ({why})"),
    }
    let had_cluster = cluster.is_ok();
    drop(cluster);
    // A 3-minute soak (issue 32): 50 runs/s with gc and backups on.
    eprintln!("\n==> soak, short: 3 minutes");
    soak::soak(&["--minutes".to_owned(), "3".to_owned()])?;
    // A short multi-host chaos run on every submission (issue 32): three
    // daemons on one PostgreSQL, 20 s of kill -9, SIGSTOP and
    // pg_terminate_backend; the long run stays in `cargo xtask reliability`.
    // The crash loop's short variant (kill -9 on SQLite) runs in the tests.
    if had_cluster {
        eprintln!("\n==> chaos, short: 20 s of faults");
        chaos::chaos(&["--seconds".to_owned(), "20".to_owned()])?;
    }

    let mut doc = cargo();
    doc.args(["doc", "--workspace", "--no-deps", "--locked"])
        .env("RUSTDOCFLAGS", "-D warnings");
    run("cargo doc -D warnings", doc)?;

    let mut build = cargo();
    build.args(["build", "--locked", "-p", "loops-cli"]);
    run("cargo build -p loops-cli", build)?;
    eprintln!("\nci: all checks passed");
    Ok(())
}
