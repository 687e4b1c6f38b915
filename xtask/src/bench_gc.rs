//! `cargo xtask bench --gc [--gc-loops N] [--gc-runs N] [--bin PATH]...`:
//! what a gc pass writes against what it frees (issue 32).
//!
//! For each binary (`--bin`, repeatable; the release build by default) it
//! seeds a store as `--scale` does (100,000 loops and 1,000,000 runs by
//! default), ages every fifth run by a hash of its row id (20%, scattered
//! over the file), and runs `loops --json gc --apply --keep-per-loop 0`
//! with nothing else on the database.
//! What the pass writes is read three ways (`LOOPS_SKIP_BACKUP=1`: no
//! backup is taken first):
//! - `wchar` of `/proc/self/io`, which takes in a child's I/O when the
//!   child is reaped: the bytes gc handed to `write`, WAL frames and
//!   checkpoints, whether or not they reach the disk;
//! - the same file's `write_bytes`, which the kernel counts per page-cache
//!   folio dirtied: on a file system with large folios (ext4 since Linux
//!   6.16) one 4 KiB page written counts as the whole folio, up to 5
//!   times what the disk receives;
//! - the sectors the store's block device wrote (`/sys/dev/block`), after
//!   a `sync` of its file system, before and after: exact on a device
//!   only the bench writes (`--gc-dir` on a loop mount), an upper bound on
//!   a shared one.
//!
//! The pages freed are the free-list growth (`PRAGMA freelist_count`).
//! The store lives under `--gc-dir`, or the temporary directory, which
//! must be a disk: on a tmpfs nothing is written to storage.
//!
//! `--gc-beside-daemon SECS` runs the daemon phase of `--scale` beside the
//! pass (`bench_scale/daemon.rs`: 20 loops every second, `daemon start`,
//! a window of SECS from a second later) and prints the lateness of those
//! runs: the pass starts as the window does, so keep SECS under the pass's
//! length. The creates and queries of that phase are this process's
//! children too, and their few writes count in the pass's bytes.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::bench_scale::daemon::{Figures, measure};
use crate::bench_scale::{Size, seed_one};

/// Reads the options of `--gc`.
fn options(args: &[String]) -> Result<Options, String> {
    let mut size = Size {
        loops: 100_000,
        runs: 1_000_000,
    };
    let mut bins = Vec::new();
    let mut beside = None;
    let mut dir = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--gc" => {}
            "--gc-loops" => size.loops = number(arg, value()?)?,
            "--gc-runs" => size.runs = number(arg, value()?)?,
            "--gc-beside-daemon" => beside = Some(number(arg, value()?)?),
            "--bin" => bins.push(crate::bench::bin_path(value()?)?),
            "--gc-dir" => dir = Some(PathBuf::from(value()?)),
            other => return Err(format!("unknown option {other:?} for --gc")),
        }
    }
    Ok(Options {
        size,
        bins,
        beside,
        dir,
    })
}

/// The options of `--gc`.
struct Options {
    size: Size,
    bins: Vec<PathBuf>,
    /// `--gc-beside-daemon SECS`.
    beside: Option<u64>,
    /// `--gc-dir`: where the stores are made, instead of the temporary
    /// directory.
    dir: Option<PathBuf>,
}

fn number(flag: &str, text: &str) -> Result<u64, String> {
    text.replace(['_', ','], "")
        .parse()
        .map_err(|_| format!("{flag} takes a count, not {text:?}"))
}

/// `bench --gc`.
pub(crate) fn bench(
    args: &[String],
    default_bin: impl FnOnce() -> Result<PathBuf, String>,
) -> Result<(), String> {
    let Options {
        size,
        mut bins,
        beside,
        dir,
    } = options(args)?;
    if bins.is_empty() {
        bins.push(default_bin()?);
    }
    let mut rows = Vec::new();
    for bin in &bins {
        let scratch = match &dir {
            Some(dir) => {
                let scratch = dir.join(format!("loops-bench-gc-{}", std::process::id()));
                std::fs::create_dir(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
                scratch
            }
            None => crate::bench::scratch_dir("loops-bench-gc")?,
        };
        let result = one(bin, &scratch, size, beside);
        let _ = std::fs::remove_dir_all(&scratch);
        rows.push((bin.clone(), result?));
    }
    println!();
    println!(
        "{:<40} {:>10} {:>9} {:>9} {:>9} {:>9} {:>7} {:>9} {:>10} {:>8}",
        "binary",
        "runs gone",
        "freed MB",
        "wchar MB",
        "wbytes MB",
        "device MB",
        "ratio",
        "batches",
        "longest ms",
        "secs"
    );
    for (bin, m) in rows {
        println!(
            "{:<40} {:>10} {:>9.1} {:>9.1} {:>9.1} {:>9} {:>7} {:>9} {:>10} {:>8.1}",
            bin.display().to_string(),
            m.runs,
            mb(m.freed),
            mb(m.written.wchar),
            mb(m.written.write_bytes),
            m.device.map_or("-".to_owned(), |d| format!("{:.1}", mb(d))),
            // Against the disk's bytes where they are known.
            format!(
                "{:.1}",
                m.device.unwrap_or(m.written.wchar) as f64 / (m.freed.max(1)) as f64
            ),
            m.batches,
            m.longest_ms,
            m.secs
        );
        if let Some(late) = &m.beside {
            println!(
                "  beside it, the daemon: {} runs of 20 loops every 1s in the window ({} slots): lateness p50 {} ms, p99 {} ms, max {} ms",
                late.runs, late.slots, late.p50, late.p99, late.max
            );
            let latest: Vec<String> = late
                .latest
                .iter()
                .map(|(at, ms)| format!("{ms} ms at {at} s"))
                .collect();
            println!(
                "  runs over {} ms late: {}; the latest: {}",
                crate::bench_scale::daemon::SLOW_RUN_MS,
                late.slow_runs,
                latest.join(", ")
            );
        }
    }
    Ok(())
}

/// One binary's figures.
struct Measured {
    runs: u64,
    freed: u64,
    /// What this process and its reaped children wrote during the pass.
    written: Written,
    /// What the store's block device wrote during the pass, when its
    /// counters can be read.
    device: Option<u64>,
    batches: u64,
    longest_ms: u64,
    secs: f64,
    /// The daemon's lateness beside the pass (`--gc-beside-daemon`).
    beside: Option<Figures>,
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

fn one(bin: &Path, scratch: &Path, size: Size, beside: Option<u64>) -> Result<Measured, String> {
    let data = scratch.join("data");
    std::fs::create_dir_all(&data).map_err(|e| format!("{}: {e}", data.display()))?;
    seed_one(bin, &data, "gc", size)?;
    crate::soak::sqlite(
        &data,
        "PRAGMA journal_mode = DELETE; \
         UPDATE loop_runs SET created_at = '2020-01-01T00:00:00.000Z' \
         WHERE ((rowid * 2654435761) % 4294967296) % 5 = 0; \
         PRAGMA journal_mode = WAL;",
    )?;
    let free_before = freelist_bytes(&data)?;
    let device_before = device_written(&data);
    let written_before = own_written()?;
    let data = data.as_path();
    let (pass, late) = std::thread::scope(|s| {
        let daemon = beside.map(|secs| s.spawn(move || measure(bin, data, secs)));
        if daemon.is_some() {
            // `daemon start`, then the phase's one-second warm-up: the
            // pass begins about when the window does.
            std::thread::sleep(std::time::Duration::from_millis(1500));
        }
        let pass = gc_pass(bin, data);
        let late = daemon.map(|h| {
            h.join()
                .unwrap_or_else(|_| Err("the daemon phase panicked".into()))
        });
        (pass, late)
    });
    let (out, secs) = pass?;
    let beside = late.transpose()?;
    let written = own_written()?.since(written_before);
    let device = device_before
        .zip(device_written(data))
        .map(|(before, after)| after.saturating_sub(before));
    if !out.status.success() {
        return Err(format!(
            "loops gc --apply failed ({}): {} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim(),
            String::from_utf8_lossy(&out.stdout).trim()
        ));
    }
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    let field = |name: &str| json_u64(&report, name);
    let freed = freelist_bytes(data)?.saturating_sub(free_before);
    Ok(Measured {
        runs: field("loopRuns").unwrap_or(0),
        freed,
        written,
        device,
        batches: field("batches").unwrap_or(0),
        longest_ms: field("longestBatchMs").unwrap_or(0),
        secs,
        beside,
    })
}

/// `loops --json gc --apply` deleting what is over a year old, and its
/// wall time.
fn gc_pass(bin: &Path, data: &Path) -> Result<(std::process::Output, f64), String> {
    let started = Instant::now();
    let out = Command::new(bin)
        .args([
            "--json",
            "gc",
            "--apply",
            "--max-age-days",
            "365",
            "--keep-per-loop",
            "0",
        ])
        .env("LOOPS_DATA_DIR", data)
        .env("LOOPS_SKIP_BACKUP", "1")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running {}: {e}", bin.display()))?;
    Ok((out, started.elapsed().as_secs_f64()))
}

/// The bytes on the free list of the data directory's database.
fn freelist_bytes(data: &Path) -> Result<u64, String> {
    let out = crate::soak::sqlite(data, "PRAGMA page_size; PRAGMA freelist_count;")?;
    let n: Vec<u64> = out.lines().filter_map(|l| l.trim().parse().ok()).collect();
    match n[..] {
        [size, free] => Ok(size * free),
        _ => Err(format!("reading the free list: {out}")),
    }
}

/// Two of the write counters of `/proc/self/io`.
#[derive(Clone, Copy)]
struct Written {
    /// Bytes handed to `write`.
    wchar: u64,
    /// Bytes of page cache dirtied, counted by folio.
    write_bytes: u64,
}

impl Written {
    fn since(self, before: Written) -> Written {
        Written {
            wchar: self.wchar.saturating_sub(before.wchar),
            write_bytes: self.write_bytes.saturating_sub(before.write_bytes),
        }
    }
}

/// What this process wrote, its reaped children included.
fn own_written() -> Result<Written, String> {
    let io = std::fs::read_to_string("/proc/self/io").map_err(|e| format!("/proc/self/io: {e}"))?;
    let field = |name: &str| {
        io.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| format!("no {name} in /proc/self/io"))
    };
    Ok(Written {
        wchar: field("wchar")?,
        write_bytes: field("write_bytes")?,
    })
}

/// The bytes the block device under `dir` has written since boot, after
/// its file system's dirty pages are flushed (`sync -f`); `None` where
/// that cannot be read (no `/sys`, a device without counters).
fn device_written(dir: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let synced = Command::new("sync").arg("-f").arg(dir).status();
    if !synced.is_ok_and(|s| s.success()) {
        return None;
    }
    let dev = std::fs::metadata(dir).ok()?.dev();
    let (major, minor) = ((dev >> 8) & 0xfff, (dev & 0xff) | ((dev >> 12) & 0xfff00));
    let stat = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/stat")).ok()?;
    // The seventh field: sectors written, of 512 bytes whatever the disk.
    let sectors: u64 = stat.split_whitespace().nth(6)?.parse().ok()?;
    Some(sectors * 512)
}

/// The number of the first `"key": N` in `json`.
fn json_u64(json: &str, key: &str) -> Option<u64> {
    let at = json.find(&format!("\"{key}\":"))? + key.len() + 3;
    let digits: String = json[at..]
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}
