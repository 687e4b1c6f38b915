//! `cargo xtask hot-functions [--bin PATH] [--seconds N]`: writes
//! `crates/loops-cli/hot-functions.txt`, the functions an idle daemon runs,
//! which the release link lays out together (`crates/loops-cli/build.rs`).
//!
//! It runs the release `loops` (or `--bin`, which must keep its symbol
//! table: the release profile strips only debug info) under valgrind's
//! callgrind: `daemon run` over 100 loops `--every 1h` and one `--every
//! 2s` for N seconds (20 by default), then `--version`, `list` and
//! `create`, then the same daemon on a throwaway PostgreSQL (skipped, and
//! said, where none starts). It writes the mangled name of every function
//! of the binary that ran, each once: the SQLite daemon's first, then
//! what each later run added, each group sorted.
//!
//! Run it again after a dependency update: the names carry a hash of each
//! crate's build settings, so an older list matches fewer functions
//! (`bench --daemon` says how many, and shows the idle daemon's memory
//! grow).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::bench::scratch_dir;
use crate::postgres::Cluster;
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

/// Where a run under callgrind keeps its loops: a data directory, and a
/// PostgreSQL database when `url` is set.
struct Place {
    data: PathBuf,
    url: Option<String>,
}

impl Place {
    /// `cmd` with this place's variables.
    fn env<'c>(&self, cmd: &'c mut Command) -> &'c mut Command {
        cmd.env("LOOPS_DATA_DIR", &self.data).env("NO_COLOR", "1");
        if let Some(url) = &self.url {
            cmd.env("LOOPS_DATABASE_URL", url);
        }
        cmd
    }

    /// A new place in `dir`, with 100 idle loops and one that runs.
    fn seed(bin: &Path, dir: PathBuf, url: Option<String>) -> Result<Place, String> {
        std::fs::create_dir(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let place = Place { data: dir, url };
        // One loop that runs, so that starting, watching and finishing a
        // run are laid out with the rest: a daemon is idle between runs,
        // not without them.
        let loops = (0..LOOPS)
            .map(|i| (format!("idle-{i}"), "1h"))
            .chain([("busy".to_owned(), "2s")]);
        for (name, every) in loops {
            let args = ["-q", "create", "command", &name, "--every", every];
            let status = place
                .env(
                    Command::new(bin)
                        .args(args)
                        .args(["--cmd", "true", "--no-shell"]),
                )
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .status()
                .map_err(|e| format!("running {}: {e}", bin.display()))?;
            if !status.success() {
                return Err(format!("`loops {}` failed ({status})", args.join(" ")));
            }
        }
        Ok(place)
    }
}

/// The daemon's functions on SQLite, then those of a few short commands,
/// then the daemon's on PostgreSQL when a throwaway cluster starts.
fn collect(bin: &Path, scratch: &Path, idle: Duration) -> Result<Vec<String>, String> {
    let sqlite = Place::seed(bin, scratch.join("data"), None)?;
    let mut collected = Collected::default();
    collected.run(
        bin,
        &sqlite,
        scratch,
        "daemon",
        &["daemon", "run"],
        Some(idle),
    )?;
    collected.run(bin, &sqlite, scratch, "version", &["--version"], None)?;
    collected.run(bin, &sqlite, scratch, "list", &["list"], None)?;
    let create = [
        "-q", "create", "command", "hot", "--every", "1h", "--cmd", "true",
    ];
    collected.run(bin, &sqlite, scratch, "create", &create, None)?;
    match Cluster::start() {
        Ok(cluster) => {
            cluster.psql(&cluster.url, "CREATE DATABASE hot")?;
            let pg = Place::seed(bin, scratch.join("data-pg"), Some(cluster.url_of("hot")))?;
            collected.run(
                bin,
                &pg,
                scratch,
                "daemon-pg",
                &["daemon", "run"],
                Some(idle),
            )?;
        }
        Err(e) => {
            eprintln!("hot-functions: PostgreSQL skipped ({e}): the list holds SQLite's paths only")
        }
    }
    let names = collected.names;
    if names.len() < 100 {
        return Err(format!(
            "only {} functions of {} ran: is its symbol table stripped?",
            names.len(),
            bin.display()
        ));
    }
    Ok(names)
}

/// The names gathered so far, each once, in the order of the runs.
#[derive(Default)]
struct Collected {
    names: Vec<String>,
    seen: HashSet<String>,
}

impl Collected {
    /// Runs `loops <args>` on `place` under callgrind (a daemon for
    /// `idle`, then SIGTERM) and adds the names it ran that no earlier
    /// run did, sorted, so that the list changes only where the functions
    /// that ran did.
    fn run(
        &mut self,
        bin: &Path,
        place: &Place,
        scratch: &Path,
        label: &str,
        args: &[&str],
        idle: Option<Duration>,
    ) -> Result<(), String> {
        let out = scratch.join(format!("{label}.callgrind"));
        let mut child = place
            .env(&mut Command::new("valgrind"))
            .args([
                "--tool=callgrind",
                "--demangle=no",
                "--compress-strings=no",
                "--compress-pos=no",
            ])
            .arg(format!("--callgrind-out-file={}", out.display()))
            .arg(bin)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting valgrind: {e}"))?;
        if let Some(idle) = idle {
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
        let mut new: Vec<String> = functions_of(&text, bin)
            .into_iter()
            .filter(|name| self.seen.insert(name.clone()))
            .collect();
        new.sort();
        self.names.extend(new);
        Ok(())
    }
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
/// `bin`, without the `'N` callgrind adds to a recursion's levels, the
/// addresses it names functions it has no symbol for, and its own
/// `(below main)`.
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
            if !name.starts_with("0x") && !name.starts_with('(') && !name.is_empty() {
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
                       fn=(below main)\n\
                       ob=/usr/lib/ld.so\nfn=_dl_start\n";
        assert_eq!(
            functions_of(profile, Path::new("/x/loops")),
            ["_ZN5loops4main17h0123456789abcdefE", "sqlite3_step"]
        );
    }
}
