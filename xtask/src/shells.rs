//! The shells the completion tests drive (issue 28): bash, zsh and fish;
//! and tmux, the terminal `loops ui`'s tests drive (issue 29).
//! CI installs zsh, fish and tmux with `apt-get` when they are missing and this
//! is a root shell, as it installs PostgreSQL; the tests fail in CI (where
//! `CI` is set) without them, and skip, saying so, elsewhere.

use std::process::{Command, Stdio};

/// The shells `tests/blackbox/complete.rs` needs beyond bash, and the
/// terminal `tests/blackbox/ui.rs` runs `loops ui` in.
const SHELLS: [&str; 3] = ["zsh", "fish", "tmux"];

/// Installs the missing shells, or says why it cannot.
pub(crate) fn install_missing() {
    let missing: Vec<&str> = SHELLS.into_iter().filter(|s| !installed(s)).collect();
    if missing.is_empty() {
        return;
    }
    if !crate::postgres::is_root() || Command::new("apt-get").arg("--version").output().is_err() {
        eprintln!(
            "shells: {} missing and cannot be installed here",
            missing.join(", ")
        );
        return;
    }
    eprintln!("shells: apt-get install -y {}", missing.join(" "));
    // Without package lists (a fresh machine), once more after an update.
    let install = || apt_get(&["install", "-y", "--no-install-recommends"], &missing);
    let installed = install() || (apt_get(&["update"], &[]) && install());
    if !installed {
        eprintln!("shells: apt-get install {} failed", missing.join(" "));
    }
}

/// Runs `apt-get <args> <packages>` quietly; whether it succeeded.
fn apt_get(args: &[&str], packages: &[&str]) -> bool {
    Command::new("apt-get")
        .args(args)
        .args(packages)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether `shell` runs.
fn installed(shell: &str) -> bool {
    Command::new(shell)
        .args(["-c", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
