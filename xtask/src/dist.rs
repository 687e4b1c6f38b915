//! `cargo xtask dist` (issue 16 §7): the release archive.
//!
//! Builds `loops` and `loops-daemon` in release mode, then lays out
//! `target/dist/loops-<version>-<target>/` with the two binaries, the man
//! pages (`man/loops.1` and one per subcommand, written by `loops man`),
//! the completion scripts (`completions/`, written by `loops
//! completions`), README.md, CHANGELOG.md and LICENSE, and packs it into
//! `loops-<version>-<target>.tar.gz` with a `.sha256` beside it in the
//! format `sha256sum -c` reads. The pages and scripts come from the built
//! binary itself, so they describe exactly what it parses.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{cargo, root, run};

/// The shells `loops completions` supports, with the file name each
/// shell's completion directory expects.
const COMPLETIONS: [(&str, &str); 5] = [
    ("bash", "loops.bash"),
    ("zsh", "_loops"),
    ("fish", "loops.fish"),
    ("elvish", "loops.elv"),
    ("powershell", "_loops.ps1"),
];

pub(crate) fn dist(args: &[String]) -> Result<(), String> {
    if let Some(arg) = args.first() {
        return Err(format!(
            "dist takes no arguments, got {arg:?}: it builds for this machine's target"
        ));
    }
    let mut build = cargo();
    build.args(["build", "--release", "--locked", "-p", "loops-cli"]);
    run("cargo build --release -p loops-cli", build)?;

    let target = host_target()?;
    let version = env!("CARGO_PKG_VERSION");
    let name = format!("loops-{version}-{target}");
    let dist = root().join("target").join("dist");
    let dir = dist.join(&name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| format!("removing {}: {e}", dir.display()))?;
    }
    mkdir(&dir.join("completions"))?;
    let release = root().join("target").join("release");
    for bin in ["loops", "loops-daemon"] {
        copy(&release.join(bin), &dir.join(bin))?;
    }
    for doc in ["README.md", "CHANGELOG.md", "LICENSE"] {
        copy(&root().join(doc), &dir.join(doc))?;
    }
    let loops = dir.join("loops");
    let mut man = Command::new(&loops);
    man.arg("man").arg("--dir").arg(dir.join("man"));
    run("loops man", man)?;
    for (shell, file) in COMPLETIONS {
        let out = Command::new(&loops)
            .args(["completions", shell])
            .output()
            .map_err(|e| format!("loops completions {shell}: {e}"))?;
        if !out.status.success() || out.stdout.is_empty() {
            return Err(format!(
                "loops completions {shell} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let path = dir.join("completions").join(file);
        std::fs::write(&path, &out.stdout).map_err(|e| format!("{}: {e}", path.display()))?;
    }

    let archive = format!("{name}.tar.gz");
    let mut tar = Command::new("tar");
    tar.current_dir(&dist).args(["-czf", &archive, &name]);
    run(&format!("tar {archive}"), tar)?;
    let sum = sha256(&dist, &archive)?;
    let sum_file = dist.join(format!("{archive}.sha256"));
    std::fs::write(&sum_file, format!("{sum}  {archive}\n"))
        .map_err(|e| format!("{}: {e}", sum_file.display()))?;
    eprintln!(
        "xtask: {}\nxtask: {} ({sum})",
        dir.display(),
        dist.join(&archive).display()
    );
    Ok(())
}

/// This machine's target triple, as rustc names it.
fn host_target() -> Result<String, String> {
    let out = Command::new("rustc")
        .arg("-vV")
        .output()
        .map_err(|e| format!("rustc -vV: {e}"))?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .map(str::to_owned)
        .ok_or_else(|| "rustc -vV printed no host triple".to_owned())
}

/// The SHA-256 of `dir/file` as hex, from `sha256sum` (GNU) or `shasum -a
/// 256` (macOS).
fn sha256(dir: &Path, file: &str) -> Result<String, String> {
    let tools: [(&str, &[&str]); 2] = [("sha256sum", &[]), ("shasum", &["-a", "256"])];
    for (tool, args) in tools {
        let Ok(out) = Command::new(tool)
            .current_dir(dir)
            .args(args)
            .arg(file)
            .output()
        else {
            continue;
        };
        let text = String::from_utf8_lossy(&out.stdout);
        if let Some(hex) = text.split_whitespace().next().filter(|h| h.len() == 64) {
            return Ok(hex.to_owned());
        }
    }
    Err("neither sha256sum nor shasum is available".to_owned())
}

fn mkdir(dir: &PathBuf) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))
}

fn copy(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::copy(from, to)
        .map(drop)
        .map_err(|e| format!("copying {} to {}: {e}", from.display(), to.display()))
}
