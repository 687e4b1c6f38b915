//! `cargo xtask demo`: the README's first command. It builds `loops`, then,
//! in a fresh data directory, creates a sample loop, runs it once and shows
//! the recorded run, echoing each command it runs.

use std::path::Path;
use std::process::Command;

use crate::bench::scratch_dir;
use crate::{cargo, root, run};

pub(crate) fn demo() -> Result<(), String> {
    let mut build = cargo();
    // A debug build: it compiles in a fraction of the release build's time,
    // and the demo's speed does not depend on optimization.
    build.args(["build", "-p", "loops-cli"]);
    run("cargo build -p loops-cli", build)?;
    let bin = root().join("target/debug/loops");
    let data = scratch_dir("loops-demo")?;
    println!("\nLOOPS_DATA_DIR={}", data.display());

    let steps: &[&[&str]] = &[
        &[
            "create",
            "command",
            "hello",
            "--every",
            "1m",
            "--cmd",
            "echo hello from loops",
        ],
        &["list"],
        &["run-now", "hello", "--show-output"],
        &["runs", "hello", "--show-output"],
    ];
    for args in steps {
        step(&bin, &data, args)?;
    }
    println!(
        "\nThe database is {}/loops.db; run the same commands with LOOPS_DATA_DIR set to keep exploring.",
        data.display()
    );
    Ok(())
}

fn step(bin: &Path, data: &Path, args: &[&str]) -> Result<(), String> {
    let shown: Vec<String> = args
        .iter()
        .map(|a| {
            if a.contains(' ') {
                format!("'{a}'")
            } else {
                (*a).to_owned()
            }
        })
        .collect();
    println!("\n$ loops {}", shown.join(" "));
    let status = Command::new(bin)
        .args(args)
        .env("LOOPS_DATA_DIR", data)
        .status()
        .map_err(|e| format!("running {}: {e}", bin.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`loops {}` failed ({status})", shown.join(" ")))
    }
}
