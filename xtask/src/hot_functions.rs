//! `cargo xtask hot-functions [--bin PATH] [--seconds N]`: writes
//! `crates/loops-cli/hot-functions.txt`, the functions an idle daemon runs,
//! which the release link lays out together (`crates/loops-cli/build.rs`).
//!
//! It runs the release `loops` (or `--bin`, which must keep its symbol
//! table: the release profile strips only debug info) under valgrind's
//! callgrind: `daemon run` over 100 loops `--every 1h` and one `--every
//! 2s` for N seconds (20 by default), then `--version`, `list` and
//! `create`. It writes the mangled name of every function of the binary
//! that ran, each once: the daemon's first, then what each command added,
//! each group sorted.
//!
//! Run it again after a dependency update: the names carry a hash of each
//! crate's build settings, so an older list matches fewer functions
//! (`bench --daemon` says how many, and shows the idle daemon's memory
//! grow).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::bench::{create_true, scratch_dir};
use crate::{cargo, root, run};

/// Idle loops in the store the daemon runs on, as `bench --daemon`'s
/// idle reading has.
const LOOPS: usize = 100;

pub(crate) fn hot_functions(args: &[String]) -> Result<(), String> {
    let mut bin = None;
    let mut seconds = 20u64;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .cloned()
                .ok_or_else(|| format!("{arg} needs a value"))
        };
        match arg.as_str() {
            "--bin" => bin = Some(PathBuf::from(value()?)),
            "--seconds" => {
                seconds = value()?
                    .parse()
                    .map_err(|e| format!("--seconds takes a whole number: {e}"))?;
            }
            other => {
                return Err(format!(
                    "hot-functions takes --bin PATH and --seconds N, not {other:?}"
                ));
            }
        }
    }
    if Command::new("valgrind")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_err()
    {
        return Err("valgrind is not installed: apt-get install valgrind".into());
    }
    let bin = match bin {
        Some(bin) => bin,
        None => {
            let mut build = cargo();
            build.args(["build", "--release", "--locked", "-p", "loops-cli"]);
            run("cargo build --release -p loops-cli", build)?;
            root().join("target/release/loops")
        }
    };
    let bin = bin
        .canonicalize()
        .map_err(|e| format!("{}: {e}", bin.display()))?;
    let scratch = scratch_dir("loops-hot")?;
    let result = collect(&bin, &scratch, Duration::from_secs(seconds));
    let _ = std::fs::remove_dir_all(&scratch);
    let names = result?;
    let out = root().join("crates/loops-cli/hot-functions.txt");
    let mut text = names.join("\n");
    text.push('\n');
    std::fs::write(&out, text).map_err(|e| format!("writing {}: {e}", out.display()))?;
    println!("{} functions written to {}", names.len(), out.display());
    Ok(())
}

/// How many names of the committed list `bin`'s symbol table has, of
/// how many: fewer than all means the list is stale (a dependency or the
/// release profile changed) or `bin` was not built with it in mind.
pub(crate) fn listed_in(bin: &Path) -> Result<(usize, usize), String> {
    let list = root().join("crates/loops-cli/hot-functions.txt");
    let list =
        std::fs::read_to_string(&list).map_err(|e| format!("reading {}: {e}", list.display()))?;
    let out = Command::new("nm")
        .arg("--defined-only")
        .arg(bin)
        .stderr(Stdio::null())
        .output()
        .map_err(|e| format!("running nm: {e}"))?;
    let symbols: HashSet<&str> = std::str::from_utf8(&out.stdout)
        .map_err(|e| format!("nm's output: {e}"))?
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    let names: Vec<&str> = list.lines().filter(|l| !l.is_empty()).collect();
    let found = names.iter().filter(|n| symbols.contains(*n)).count();
    Ok((found, names.len()))
}

/// The daemon's functions, then those of a few short commands.
fn collect(bin: &Path, scratch: &Path, idle: Duration) -> Result<Vec<String>, String> {
    let data = scratch.join("data");
    std::fs::create_dir(&data).map_err(|e| format!("creating {}: {e}", data.display()))?;
    for i in 0..LOOPS {
        create_true(bin, &data, &format!("idle-{i}"), "1h")?;
    }
    // One loop that runs, so that starting, watching and finishing a run
    // are laid out with the rest: a daemon is idle between runs, not
    // without them.
    create_true(bin, &data, "busy", "2s")?;
    let mut names = Vec::new();
    let mut seen = HashSet::new();
    let runs: [(&str, &[&str]); 4] = [
        ("daemon", &["daemon", "run"]),
        ("version", &["--version"]),
        ("list", &["list"]),
        (
            "create",
            &[
                "-q", "create", "command", "hot", "--every", "1h", "--cmd", "true",
            ],
        ),
    ];
    for (label, args) in runs {
        let out = scratch.join(format!("{label}.callgrind"));
        let mut child = callgrind(bin, &data, &out, args)?;
        if label == "daemon" {
            stop_after(&mut child, idle)?;
        }
        let status = child
            .wait()
            .map_err(|e| format!("waiting for {label}: {e}"))?;
        if !status.success() {
            return Err(format!(
                "`loops {}` under callgrind: {status}",
                args.join(" ")
            ));
        }
        let text =
            std::fs::read_to_string(&out).map_err(|e| format!("reading {}: {e}", out.display()))?;
        // Each run's new names sorted, so that the list changes only
        // where the functions that ran did.
        let mut new: Vec<String> = functions_of(&text, bin)
            .into_iter()
            .filter(|name| seen.insert(name.clone()))
            .collect();
        new.sort();
        names.extend(new);
    }
    if names.len() < 100 {
        return Err(format!(
            "only {} functions of {} ran: is its symbol table stripped?",
            names.len(),
            bin.display()
        ));
    }
    Ok(names)
}

fn callgrind(bin: &Path, data: &Path, out: &Path, args: &[&str]) -> Result<Child, String> {
    Command::new("valgrind")
        .args([
            "--tool=callgrind",
            "--demangle=no",
            "--compress-strings=no",
            "--compress-pos=no",
        ])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(bin)
        .args(args)
        .env("LOOPS_DATA_DIR", data)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("starting valgrind: {e}"))
}

/// Lets the daemon idle for `idle`, then stops it with SIGTERM (callgrind
/// writes its output on a clean exit, not on SIGKILL).
fn stop_after(child: &mut Child, idle: Duration) -> Result<(), String> {
    let deadline = Instant::now() + idle;
    while Instant::now() < deadline {
        if child
            .try_wait()
            .map_err(|e| format!("waiting for the daemon: {e}"))?
            .is_some()
        {
            return Err("the daemon under callgrind ended by itself".into());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .map_err(|e| format!("running kill: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("kill -TERM {}: {status}", child.id()))
    }
}

/// The functions of `bin` in a callgrind profile written with
/// `--compress-strings=no`: each `fn=` line after an `ob=` line naming
/// `bin`, without the `'N` callgrind adds to a recursion's levels, and
/// without the addresses it names functions it has no symbol for.
fn functions_of(profile: &str, bin: &Path) -> Vec<String> {
    let bin = bin.to_string_lossy();
    let mut in_bin = false;
    let mut names = Vec::new();
    for line in profile.lines() {
        if let Some(object) = line.strip_prefix("ob=") {
            in_bin = object == bin;
        } else if let Some(name) = line.strip_prefix("fn=")
            && in_bin
        {
            let name = name.split('\'').next().unwrap_or(name);
            if !name.starts_with("0x") && !name.is_empty() {
                names.push(name.to_owned());
            }
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn functions_of_keeps_the_binarys_named_functions_once_per_line() {
        let profile = "ob=/usr/lib/libc.so.6\nfn=malloc\n\
                       ob=/x/loops\nfn=_ZN5loops4main17h0123456789abcdefE\n\
                       cfn=skipped\nfn=sqlite3_step'2\nfn=0x0000000000358f30\n\
                       ob=/usr/lib/ld.so\nfn=_dl_start\n";
        assert_eq!(
            functions_of(profile, Path::new("/x/loops")),
            ["_ZN5loops4main17h0123456789abcdefE", "sqlite3_step"]
        );
    }
}
