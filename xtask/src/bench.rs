//! `cargo xtask bench`: end-to-end figures of the built `loops` binary, plus
//! (with `--criterion`) the Criterion micro-benchmarks.
//!
//! Each figure runs in a fresh temporary data directory against a release
//! build, so results do not depend on earlier state:
//! - `loops create command`, sequential creates per second;
//! - the median wall time of `loops --json list` with 1,000 loops stored;
//! - one `loops tick` over 1,000 due `true` loops (`--no-shell`), every run
//!   verified in `loops runs --json`, in runs per second, next to the cost of
//!   spawning `true` directly from this process (the spawn floor);
//! - the median wall time of `loops workflows run` over 50 `true` steps:
//!   independent with `maxParallel` 1, independent with `maxParallel` 8, and
//!   a chain where each step depends on the previous one, and a run of one
//!   step, the fixed cost that the chain's cost per step is given without.
//!   Each sample runs in a fresh data directory with the workflow created
//!   beforehand.
//!
//! - the daemon's figures (`bench_daemon.rs`): lateness, idle memory and
//!   CPU, and the time from SIGTERM to exit.
//!
//! `--scale` measures instead what the frequent commands and the daemon
//! cost on a small and a large database (`bench_scale.rs`), and `--serve`
//! what `loops serve` costs (`bench_serve.rs`), and `--startup` what
//! starting costs, one `--bin` or more beside the `sqlite3` shell
//! (`bench_startup.rs`).
//!
//! `--workflows` measures only the workflow runs, `--daemon` only the daemon,
//! `--cli` only the create, list and tick figures. `--bin <path>` measures
//! that binary instead of building `target/release/loops`, so two builds can
//! be compared side by side (copy each aside, then alternate runs).
//! `docs/perf.md` lists what each figure means and the figures measured.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{cargo, root, run};

const LOOPS: usize = 1000;
const LIST_SAMPLES: usize = 50;

/// What `cargo xtask bench --help` prints.
const USAGE: &str = "\
usage: cargo xtask bench [MODE] [--bin PATH]... [--criterion]

With no MODE: the create, list and tick figures, the workflow runs and the
daemon's figures, against a fresh release build (or `--bin PATH`).

modes:
  --cli          only the create, list and tick figures
  --workflows    only the workflow runs, beside the floor of 50 spawns
  --daemon       only the daemon: lateness, idle memory and CPU, SIGTERM
  --serve        what `loops serve` costs
  --postgres     the PostgreSQL backend on a throwaway server
  --startup      `loops --version` beside the `sqlite3` shell (several --bin)
  --scale        a small and a large database (--scale --help)
  --gc           what a gc pass writes against what it frees (several --bin)

examples:
  cargo xtask bench --workflows --bin /tmp/loops-before
  cargo xtask bench --startup --bin /tmp/loops-a --bin /tmp/loops-b
  cargo xtask bench --gc --gc-beside-daemon 30 --bin /tmp/loops-a --bin /tmp/loops-b

docs/perf.md says what each figure means and lists the figures measured.";

pub(crate) fn bench(args: &[String]) -> Result<(), String> {
    if args.iter().any(|a| a == "-h" || a == "--help") && !args.iter().any(|a| a == "--scale") {
        println!("{USAGE}");
        return Ok(());
    }
    if args.iter().any(|a| a == "--scale") {
        return match crate::bench_scale::options(args)? {
            Some(opts) => crate::bench_scale::scale(&binary(args)?, &opts),
            None => Ok(()),
        };
    }
    if args.iter().any(|a| a == "--gc") {
        return crate::bench_gc::bench(args, || binary(&[]));
    }
    check_options(args)?;
    if args.iter().any(|a| a == "--startup") {
        return crate::bench_startup::bench(args, || binary(&[]));
    }
    let bin = binary(args)?;

    let scratch = scratch_dir("loops-bench")?;
    let result = if args.iter().any(|a| a == "--serve") {
        crate::bench_serve::bench(&bin, &scratch)
    } else if args.iter().any(|a| a == "--postgres") {
        crate::bench_pg::figures(&bin, &scratch)
    } else if args.iter().any(|a| a == "--workflows") {
        workflow_figures(&bin, &scratch)
    } else if args.iter().any(|a| a == "--daemon") {
        crate::bench_daemon::figures(&bin, &scratch)
    } else if args.iter().any(|a| a == "--cli") {
        figures(&bin, &scratch)
    } else {
        // Each section starts with the disk quiet: the tick leaves its
        // database pages for the kernel to write back, and a later section
        // would otherwise measure that writeback against its own syncs.
        figures(&bin, &scratch)
            .and_then(|()| settle_disk())
            .and_then(|()| workflow_figures(&bin, &scratch))
            .and_then(|()| settle_disk())
            .and_then(|()| crate::bench_daemon::figures(&bin, &scratch))
    };
    let _ = std::fs::remove_dir_all(&scratch);
    result?;

    if args.iter().any(|a| a == "--criterion") {
        let mut cmd = cargo();
        cmd.args(["bench", "--workspace", "--locked"]);
        run("cargo bench (Criterion)", cmd)?;
    }
    Ok(())
}

/// Refuses an option the modes without their own parser do not know, so
/// that a typo does not run every figure for minutes.
fn check_options(args: &[String]) -> Result<(), String> {
    const FLAGS: [&str; 8] = [
        "--cli",
        "--workflows",
        "--daemon",
        "--serve",
        "--postgres",
        "--startup",
        "--criterion",
        "--bin",
    ];
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if !FLAGS.contains(&arg.as_str()) {
            return Err(format!(
                "unknown option {arg:?} for bench; see `cargo xtask bench --help`"
            ));
        }
        if arg == "--bin" {
            rest.next();
        }
    }
    Ok(())
}

/// The binary to measure: `--bin <path>`, else a fresh release build.
fn binary(args: &[String]) -> Result<PathBuf, String> {
    if let Some(bin) = bin_arg(args)? {
        return Ok(bin);
    }
    let mut build = cargo();
    build.args(["build", "--release", "--locked", "-p", "loops-cli"]);
    run("cargo build --release -p loops-cli", build)?;
    Ok(root().join("target/release/loops"))
}

/// The binary given with `--bin <path>`, made absolute, if any.
fn bin_arg(args: &[String]) -> Result<Option<PathBuf>, String> {
    let Some(at) = args.iter().position(|a| a == "--bin") else {
        return Ok(None);
    };
    let path = args
        .get(at + 1)
        .ok_or("--bin needs the path of a `loops` binary")?;
    bin_path(path).map(Some)
}

/// The value of a `--bin` option: a file that exists, made absolute.
pub(crate) fn bin_path(path: &str) -> Result<PathBuf, String> {
    let path = std::path::absolute(path).map_err(|e| format!("--bin {path}: {e}"))?;
    if !path.is_file() {
        return Err(format!("--bin {}: no such file", path.display()));
    }
    Ok(path)
}

fn figures(bin: &Path, scratch: &Path) -> Result<(), String> {
    // 1. Sequential creates.
    let data = scratch.join("create");
    let started = Instant::now();
    for i in 0..LOOPS {
        create_true(bin, &data, &format!("bench-{i}"), "1h")?;
    }
    let create_elapsed = started.elapsed();
    let creates_per_s = LOOPS as f64 / create_elapsed.as_secs_f64();
    println!(
        "create: {LOOPS} sequential `loops create command` in {:.2?} = {creates_per_s:.0} creates/s",
        create_elapsed
    );

    // 2. `loops --json list` with 1,000 loops stored.
    let mut samples = Vec::with_capacity(LIST_SAMPLES);
    for _ in 0..LIST_SAMPLES {
        let t = Instant::now();
        let out = loops(bin, &data, &["--json", "list"])?;
        samples.push(t.elapsed());
        if out.matches("\"id\"").count() != LOOPS {
            return Err(format!(
                "list returned {} loops, expected {LOOPS}",
                out.matches("\"id\"").count()
            ));
        }
    }
    samples.sort();
    println!(
        "list: median `loops --json list` with {LOOPS} loops = {:.2} ms (min {:.2} ms, max {:.2} ms, {LIST_SAMPLES} runs)",
        ms(samples[LIST_SAMPLES / 2]),
        ms(samples[0]),
        ms(samples[LIST_SAMPLES - 1])
    );
    // What any command costs here before it does any work: starting the
    // process, and opening the database.
    let empty = scratch.join("empty");
    loops(bin, &empty, &["list"])?;
    for (label, args) in [
        ("`loops --version`", &["--version"][..]),
        ("`loops --json list` with no loops", &["--json", "list"][..]),
    ] {
        let mut floor = Vec::with_capacity(LIST_SAMPLES);
        for _ in 0..LIST_SAMPLES {
            let t = Instant::now();
            loops(bin, &empty, args)?;
            floor.push(t.elapsed());
        }
        floor.sort();
        println!(
            "floor: median {label} = {:.2} ms (min {:.2} ms, {LIST_SAMPLES} runs)",
            ms(floor[LIST_SAMPLES / 2]),
            ms(floor[0])
        );
    }

    // 3. One tick over 1,000 due loops.
    let data = scratch.join("tick");
    for i in 0..LOOPS {
        let name = format!("due-{i}");
        loops(
            bin,
            &data,
            &[
                "create",
                "command",
                &name,
                "--at",
                "2020-01-01T00:00:00Z",
                "--cmd",
                "true",
                "--no-shell",
            ],
        )?;
    }
    let t = Instant::now();
    let summary = loops(bin, &data, &["tick"])?;
    let tick_elapsed = t.elapsed();
    let runs = loops(bin, &data, &["--json", "runs", "--limit", "100000"])?;
    let succeeded = runs.matches("\"status\": \"succeeded\"").count();
    if succeeded != LOOPS {
        return Err(format!(
            "tick recorded {succeeded} succeeded runs, expected {LOOPS} ({})",
            summary.trim()
        ));
    }
    let runs_per_s = LOOPS as f64 / tick_elapsed.as_secs_f64();

    // The spawn floor: spawning and reaping `true` from here, one at a time.
    let true_bin = which_true();
    let t = Instant::now();
    for _ in 0..LOOPS {
        Command::new(&true_bin)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| format!("spawning {}: {e}", true_bin.display()))?;
    }
    let floor = t.elapsed();
    let per_run = tick_elapsed.as_secs_f64() * 1000.0 / LOOPS as f64;
    let per_spawn = floor.as_secs_f64() * 1000.0 / LOOPS as f64;
    println!(
        "tick: {LOOPS} due `true` loops in {:.2?} = {runs_per_s:.0} runs/s ({per_run:.3} ms/run), all {succeeded} verified succeeded",
        tick_elapsed
    );
    println!(
        "spawn floor: {LOOPS} sequential spawns of `true` in {:.2?} = {per_spawn:.3} ms/spawn; tick per-run cost / floor = {:.2}",
        floor,
        per_run / per_spawn
    );
    Ok(())
}

/// Steps per benchmarked workflow.
const WORKFLOW_STEPS: usize = 50;
/// Samples per workflow figure; the median is reported.
const WORKFLOW_SAMPLES: usize = 5;

/// The shape of a benchmarked workflow.
struct WorkflowShape {
    label: &'static str,
    steps: usize,
    max_parallel: u32,
    chain: bool,
    /// The issue's goal for the median; none for the one-step run, which
    /// only measures the fixed cost.
    goal_ms: Option<u32>,
}

fn workflow_figures(bin: &Path, scratch: &Path) -> Result<(), String> {
    let shapes = [
        WorkflowShape {
            label: "independent, maxParallel 1",
            steps: WORKFLOW_STEPS,
            max_parallel: 1,
            chain: false,
            goal_ms: Some(150),
        },
        WorkflowShape {
            label: "independent, maxParallel 8",
            steps: WORKFLOW_STEPS,
            max_parallel: 8,
            chain: false,
            goal_ms: Some(50),
        },
        WorkflowShape {
            label: "chain (each step depends on the previous)",
            steps: WORKFLOW_STEPS,
            max_parallel: 1,
            chain: true,
            goal_ms: Some(60),
        },
        // What a run costs whatever its steps (start, open, create the
        // run, the close checkpoint), so that the chain's cost per step
        // can be told apart from it.
        WorkflowShape {
            label: "one step (the fixed cost)",
            steps: 1,
            max_parallel: 1,
            chain: true,
            goal_ms: None,
        },
    ];
    // The floor (issue 32): the same number of `true` spawned one after
    // another, measured in the same run.
    let mut floor = Vec::with_capacity(WORKFLOW_SAMPLES);
    for _ in 0..WORKFLOW_SAMPLES {
        let t = Instant::now();
        for _ in 0..WORKFLOW_STEPS {
            Command::new("true")
                .stdin(Stdio::null())
                .status()
                .map_err(|e| format!("spawning true: {e}"))?;
        }
        floor.push(t.elapsed());
    }
    floor.sort();
    let floor_ms = ms(floor[WORKFLOW_SAMPLES / 2]);
    println!(
        "floor: {WORKFLOW_STEPS} sequential spawns of `true`: median {floor_ms:.2} ms (min {:.2} ms)",
        ms(floor[0])
    );
    let mut medians = Vec::with_capacity(shapes.len());
    for (i, shape) in shapes.iter().enumerate() {
        let file = scratch.join(format!("workflow-{i}.json"));
        std::fs::write(&file, workflow_file(shape))
            .map_err(|e| format!("writing {}: {e}", file.display()))?;
        let file = file.display().to_string();
        let mut samples = Vec::with_capacity(WORKFLOW_SAMPLES);
        for sample in 0..WORKFLOW_SAMPLES {
            let data = scratch.join(format!("workflow-{i}-{sample}"));
            loops(bin, &data, &["workflows", "create", &file])?;
            let t = Instant::now();
            let out = loops(bin, &data, &["workflows", "run", "bench"])?;
            samples.push(t.elapsed());
            let succeeded = out.lines().filter(|l| l.contains(" succeeded ")).count();
            if !out
                .lines()
                .next()
                .is_some_and(|l| l.ends_with(" succeeded"))
                || succeeded != shape.steps
            {
                return Err(format!("workflow run did not succeed:\n{out}"));
            }
        }
        samples.sort();
        let median = ms(samples[WORKFLOW_SAMPLES / 2]);
        let goal = shape
            .goal_ms
            .map_or_else(String::new, |g| format!("; goal <= {g} ms"));
        println!(
            "workflow run: {} `true` step{}, {}: median {median:.2} ms (min {:.2} ms, max {:.2} ms, {WORKFLOW_SAMPLES} runs{goal})",
            shape.steps,
            if shape.steps == 1 { "" } else { "s" },
            shape.label,
            ms(samples[0]),
            ms(samples[WORKFLOW_SAMPLES - 1]),
        );
        medians.push(median);
    }
    let (chain, one) = (medians[2], medians[3]);
    let per_step = (chain - floor_ms) / WORKFLOW_STEPS as f64;
    println!(
        "workflow run: chain overhead above the floor: {per_step:.3} ms per step (goal <= 0.2 ms)"
    );
    // The same, less the fixed cost: what each step after the first adds
    // beyond its own spawn.
    let steps = (WORKFLOW_STEPS - 1) as f64;
    let marginal = (chain - one) / steps - floor_ms / WORKFLOW_STEPS as f64;
    println!(
        "workflow run: of which fixed {one:.2} ms a run (one step), and {marginal:.3} ms per further step above its spawn"
    );
    Ok(())
}

/// A workflow file of `shape.steps` `true` steps run without a shell,
/// written by hand because xtask uses only std.
fn workflow_file(shape: &WorkflowShape) -> String {
    let steps: Vec<String> = (1..=shape.steps)
        .map(|i| {
            let depends = if shape.chain && i > 1 {
                format!(r#","dependsOn":["s{}"]"#, i - 1)
            } else {
                String::new()
            };
            format!(r#"{{"id":"s{i}","target":{{"type":"command","command":"true"}}{depends}}}"#)
        })
        .collect();
    format!(
        r#"{{"name":"bench","maxParallel":{},"steps":[{}]}}"#,
        shape.max_parallel,
        steps.join(",")
    )
}

/// Writes back every dirty page (`sync`), so a section does not pay for
/// the previous one's writes.
fn settle_disk() -> Result<(), String> {
    let status = Command::new("sync")
        .status()
        .map_err(|e| format!("running sync: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("sync failed ({status})"))
    }
}

/// `loops create command <name> --every <every> --cmd true --no-shell` in
/// data dir `data`.
pub(crate) fn create_true(bin: &Path, data: &Path, name: &str, every: &str) -> Result<(), String> {
    loops(
        bin,
        data,
        &[
            "create",
            "command",
            name,
            "--every",
            every,
            "--cmd",
            "true",
            "--no-shell",
        ],
    )
    .map(drop)
}

/// Runs `loops <args>` in data dir `data`, returning its stdout.
pub(crate) fn loops(bin: &Path, data: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new(bin)
        .args(args)
        .env("LOOPS_DATA_DIR", data)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running {}: {e}", bin.display()))?;
    if !out.status.success() {
        return Err(format!(
            "`loops {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn which_true() -> PathBuf {
    ["/usr/bin/true", "/bin/true"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("true"))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// A fresh directory under the system temp dir, removed by the caller.
#[expect(
    clippy::disallowed_methods,
    reason = "entropy for a unique name, not a reading of time"
)]
pub(crate) fn scratch_dir(prefix: &str) -> Result<PathBuf, String> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir = std::env::temp_dir().join(format!("{prefix}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::check_options;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|a| (*a).to_owned()).collect()
    }

    #[test]
    fn known_modes_pass_and_a_bin_takes_its_value() {
        assert_eq!(check_options(&args(&[])), Ok(()));
        assert_eq!(
            check_options(&args(&["--workflows", "--bin", "--cli", "--criterion"])),
            Ok(())
        );
        // `--bin`'s value is not read as an option, whatever it looks like.
        assert_eq!(check_options(&args(&["--bin", "--bogus"])), Ok(()));
    }

    #[test]
    fn an_unknown_option_is_refused_by_name() {
        let err = check_options(&args(&["--workflow"])).unwrap_err();
        assert!(err.contains("\"--workflow\""), "{err}");
        assert!(err.contains("cargo xtask bench --help"), "{err}");
        let err = check_options(&args(&["--bin", "/tmp/x", "--help"])).unwrap_err();
        assert!(err.contains("\"--help\""), "{err}");
    }
}
