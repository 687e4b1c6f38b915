//! `cargo xtask reliability`: the reliability suite's long variants.
//!
//! It builds `loops`, then runs `tests/reliability` with
//! `LOOPS_RELIABILITY_LONG=1`, one test at a time (so the figures are not
//! skewed by each other), with `--nocapture` so the `reliability: ...`
//! figure lines show, and the core crate's property tests
//! (`crates/loops-core/tests/fuzz.rs`) with `PROPTEST_CASES=4096`. `--short`
//! runs the short variants CI runs; any other argument is passed on to the
//! test harness as a filter. The long mode, unfiltered, ends with
//! `cargo xtask chaos` (skipped, saying why, without PostgreSQL).

use crate::{cargo, run};

pub(crate) fn reliability(args: &[String]) -> Result<(), String> {
    let short = args.iter().any(|a| a == "--short");
    let filters: Vec<&String> = args.iter().filter(|a| *a != "--short").collect();

    let mut build = cargo();
    build.args(["build", "-p", "loops-cli"]);
    run("cargo build -p loops-cli", build)?;

    let mut test = cargo();
    test.args(["test", "-p", "loops-tests", "--test", "reliability", "--"]);
    test.args(&filters);
    test.args(["--nocapture", "--test-threads=1"]);
    if !short {
        test.env("LOOPS_RELIABILITY_LONG", "1");
    }
    let what = if short { "short" } else { "long" };
    run(&format!("reliability suite ({what} variants)"), test)?;

    let mut props = cargo();
    props.args([
        "test",
        "-p",
        "loops-core",
        "--test",
        "fuzz",
        "--",
        "--nocapture",
    ]);
    if !short {
        props.env("PROPTEST_CASES", "4096");
    }
    run(&format!("core property fuzzing ({what})"), props)?;
    if short || !filters.is_empty() {
        return Ok(());
    }
    // Many hosts on one PostgreSQL, under faults (issue 15).
    match crate::chaos::chaos(&[]) {
        Err(e) if e.starts_with(crate::postgres::NO_CLUSTER) => {
            eprintln!("chaos: skipped: {e}");
            Ok(())
        }
        other => other,
    }
}
