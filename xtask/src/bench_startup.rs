//! `cargo xtask bench --startup [--bin A --bin B …]` (issue 32): what
//! starting `loops --version` costs, side by side with other builds and with
//! the `sqlite3` shell as the floor.
//!
//! Each binary gets `ROUNDS` turns of `perf stat -r RUNS -e
//! task-clock,page-faults <bin> --version`, the binaries alternating turn by
//! turn, so a load that comes and goes falls on all of them alike. Printed
//! per binary: the median over the turns of the mean task-clock and of the
//! page faults, then what the binary asks of the loader: whether it links
//! `libssl`, its relative relocations, and the size of `.data.rel.ro`,
//! the pages those relocations write. With no `--bin`, the release build is
//! measured.

use std::path::{Path, PathBuf};
use std::process::Command;

const ROUNDS: usize = 5;
const RUNS: &str = "10";

pub(crate) fn bench(
    args: &[String],
    release: impl FnOnce() -> Result<PathBuf, String>,
) -> Result<(), String> {
    let mut bins = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if arg == "--bin" {
            let path = rest
                .next()
                .ok_or("--bin needs the path of a `loops` binary")?;
            bins.push(crate::bench::bin_path(path)?);
        }
    }
    if bins.is_empty() {
        bins.push(release()?);
    }
    if Command::new("perf").arg("--version").output().is_err() {
        return Err("bench --startup needs `perf` (apt-get install linux-perf)".into());
    }
    let floor = which("sqlite3");
    let mut subjects: Vec<(String, PathBuf)> = bins
        .iter()
        .map(|bin| (bin.display().to_string(), bin.clone()))
        .collect();
    if let Some(sqlite3) = &floor {
        subjects.push(("sqlite3 (floor)".into(), sqlite3.clone()));
    }
    let mut samples: Vec<Vec<(f64, f64)>> = vec![Vec::new(); subjects.len()];
    for _ in 0..ROUNDS {
        for (i, (_, bin)) in subjects.iter().enumerate() {
            samples[i].push(perf_stat(bin)?);
        }
    }
    println!(
        "startup: `<bin> --version`, {ROUNDS} alternating turns of `perf stat -r {RUNS}` each; medians of the turns"
    );
    for ((label, bin), mut turns) in subjects.iter().zip(samples) {
        turns.sort_by(|a, b| a.0.total_cmp(&b.0));
        let clock = turns[turns.len() / 2].0;
        turns.sort_by(|a, b| a.1.total_cmp(&b.1));
        let faults = turns[turns.len() / 2].1;
        println!(
            "  {label}: {clock:.2} ms task-clock, {faults:.0} page faults; {}",
            loader_facts(bin)
        );
    }
    if floor.is_none() {
        println!("  (no `sqlite3` shell on PATH: no floor)");
    }
    Ok(())
}

/// One turn: the mean task-clock in ms and the mean page faults.
fn perf_stat(bin: &Path) -> Result<(f64, f64), String> {
    let out = Command::new("perf")
        .args([
            "stat",
            "-x",
            ",",
            "-r",
            RUNS,
            "-e",
            "task-clock,page-faults",
            "--",
        ])
        .arg(bin)
        .arg("--version")
        .output()
        .map_err(|e| format!("perf stat: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "perf stat {} --version: {}",
            bin.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    // CSV on stderr: `value,unit,event,…`.
    let text = String::from_utf8_lossy(&out.stderr);
    let value = |event: &str| {
        text.lines()
            .find(|line| line.split(',').nth(2).is_some_and(|e| e.starts_with(event)))
            .and_then(|line| line.split(',').next()?.parse::<f64>().ok())
            .ok_or_else(|| format!("perf stat printed no {event}: {}", text.trim()))
    };
    Ok((value("task-clock")?, value("page-faults")?))
}

/// What the binary asks of the dynamic loader, from `ldd` and `readelf`.
fn loader_facts(bin: &Path) -> String {
    let ldd = Command::new("ldd").arg(bin).output();
    let ssl = match ldd {
        Ok(out) => match String::from_utf8_lossy(&out.stdout).contains("libssl") {
            true => "links libssl",
            false => "no libssl",
        },
        Err(_) => "ldd missing",
    };
    let dynamic = readelf(bin, "-d");
    let relative = dynamic
        .lines()
        .find(|line| line.contains("(RELACOUNT)"))
        .and_then(|line| line.split_whitespace().last())
        .unwrap_or("?")
        .to_owned();
    let sections = readelf(bin, "-SW");
    let rel_ro = sections
        .lines()
        .find(|line| line.contains(" .data.rel.ro "))
        .and_then(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let at = fields.iter().position(|f| *f == ".data.rel.ro")?;
            u64::from_str_radix(fields.get(at + 4)?, 16).ok()
        })
        .map_or("?".to_owned(), |bytes| format!("{} KiB", bytes / 1024));
    format!("{ssl}, {relative} relative relocations, .data.rel.ro {rel_ro}")
}

fn readelf(bin: &Path, flag: &str) -> String {
    Command::new("readelf")
        .arg(flag)
        .arg(bin)
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
        .unwrap_or_default()
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|dir| Path::new(dir).join(name))
        .find(|path| path.is_file())
}
