//! `cargo xtask demo`: the README's first command. It builds `loops`, then,
//! in a fresh data directory, creates a sample loop that runs every five
//! seconds (and a sample workflow loop, when this build has `loops
//! workflows`), and runs the daemon in the foreground so the runs can be
//! watched landing on schedule. Ctrl-C stops the daemon gracefully.
//!
//! `cargo xtask demo --for <seconds>` stops it by itself after that long and
//! then lists the recorded runs, for scripted use.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::bench::scratch_dir;
use crate::{cargo, root, run};

/// The sample workflow: two steps, the second after the first.
const WORKFLOW: &str = r#"{
  "name": "demo-flow",
  "description": "two steps, the second after the first",
  "steps": [
    {"id": "fetch", "target": {"type": "command", "command": "echo", "args": ["fetched"]}},
    {"id": "report", "dependsOn": ["fetch"],
     "target": {"type": "command", "command": "echo", "args": ["reported"]}}
  ]
}
"#;

pub(crate) fn demo(args: &[String]) -> Result<(), String> {
    let stop_after = match args {
        [] => None,
        [flag, secs] if flag == "--for" => {
            Some(Duration::from_secs(secs.parse().map_err(|_| {
                format!("--for takes whole seconds, not {secs:?}")
            })?))
        }
        other => return Err(format!("unknown demo arguments {other:?}; try --for 20")),
    };
    let mut build = cargo();
    // A debug build: it compiles in a fraction of the release build's time,
    // and the demo's speed does not depend on optimization.
    build.args(["build", "-p", "loops-cli"]);
    run("cargo build -p loops-cli", build)?;
    let bin = root().join("target/debug/loops");
    let data = scratch_dir("loops-demo")?;
    println!("\nLOOPS_DATA_DIR={}", data.display());

    step(
        &bin,
        &data,
        &[
            "create",
            "command",
            "hello",
            "--every",
            "5s",
            "--cmd",
            "echo hello from loops",
        ],
    )?;
    if has_workflows(&bin, &data) {
        let file = data.join("demo-flow.json");
        std::fs::write(&file, WORKFLOW).map_err(|e| format!("writing {}: {e}", file.display()))?;
        let file = file.display().to_string();
        step(&bin, &data, &["workflows", "create", &file])?;
        step(
            &bin,
            &data,
            &[
                "create",
                "workflow",
                "flow",
                "--every",
                "10s",
                "--workflow",
                "demo-flow",
            ],
        )?;
    }
    step(&bin, &data, &["list"])?;

    println!("\n$ loops daemon run");
    let mut daemon = Command::new(&bin);
    daemon
        .args(["daemon", "run"])
        .env("LOOPS_DATA_DIR", &data)
        .stdin(Stdio::null());
    let Some(stop_after) = stop_after else {
        println!(
            "(the daemon runs in the foreground and logs each run as it lands; Ctrl-C stops it.\n \
             Afterwards, `LOOPS_DATA_DIR={} loops runs --show-output` lists what it recorded.)\n",
            data.display()
        );
        // What was printed must be out before exec replaces this process.
        let _ = std::io::Write::flush(&mut std::io::stdout());
        // The daemon takes over this process, so Ctrl-C reaches it alone and
        // it shuts down gracefully.
        let err = daemon.exec();
        return Err(format!("running {}: {err}", bin.display()));
    };
    let mut child = daemon
        .spawn()
        .map_err(|e| format!("running {}: {e}", bin.display()))?;
    std::thread::sleep(stop_after);
    step(&bin, &data, &["daemon", "stop"])?;
    let _ = child.wait();
    step(&bin, &data, &["runs"])?;
    step(
        &bin,
        &data,
        &["runs", "hello", "--limit", "1", "--show-output"],
    )?;
    println!(
        "\nThe database is {}/loops.db; run the same commands with LOOPS_DATA_DIR set to keep exploring.",
        data.display()
    );
    Ok(())
}

/// Whether this build of `loops` has the `workflows create` command.
fn has_workflows(bin: &Path, data: &Path) -> bool {
    Command::new(bin)
        .args(["workflows", "create", "--help"])
        .env("LOOPS_DATA_DIR", data)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
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
