//! The programs the black-box tests drive beyond the workspace: the shells
//! the completion tests run (issue 28), bash aside, zsh and fish; tmux, the
//! terminal `loops ui`'s tests run in; and Chromium with its WebDriver,
//! the browser the dashboard's tests drive (issue 29); and `faketime`, whose
//! libfaketime moves the CLI's wall clock in `tests/blackbox/identity.rs`
//! (issue 32).
//! CI installs the missing ones with `apt-get` when this is a root shell, as
//! it installs PostgreSQL; the tests fail in CI (where `CI` is set) without
//! them, and skip, saying so, elsewhere.

use std::process::{Command, Stdio};

/// A Debian package, the program it installs, and the arguments that make
/// that program show it runs.
struct Package {
    /// The package's name for `apt-get install`.
    name: &'static str,
    /// The program the tests run.
    program: &'static str,
    /// Arguments with which `program` exits 0 when it works.
    probe: &'static [&'static str],
}

/// What `tests/blackbox/complete.rs` (zsh, fish), `tests/blackbox/ui.rs`
/// (tmux), `tests/blackbox/browser.rs` (chromium, chromedriver) and
/// `tests/blackbox/identity.rs` (faketime) need.
const PACKAGES: [Package; 6] = [
    Package {
        name: "zsh",
        program: "zsh",
        probe: &["-c", "true"],
    },
    Package {
        name: "fish",
        program: "fish",
        probe: &["-c", "true"],
    },
    Package {
        name: "tmux",
        program: "tmux",
        probe: &["-c", "true"],
    },
    Package {
        name: "chromium",
        program: "/usr/bin/chromium",
        probe: &["--version"],
    },
    Package {
        name: "chromium-driver",
        program: "/usr/bin/chromedriver",
        probe: &["--version"],
    },
    Package {
        name: "faketime",
        program: "faketime",
        probe: &["-f", "+0", "true"],
    },
];

/// Installs the missing packages, or says why it cannot.
pub(crate) fn install_missing() {
    let missing: Vec<&str> = PACKAGES
        .iter()
        .filter(|p| !installed(p))
        .map(|p| p.name)
        .collect();
    if missing.is_empty() {
        return;
    }
    if !crate::postgres::is_root() || Command::new("apt-get").arg("--version").output().is_err() {
        eprintln!(
            "test programs: {} missing and cannot be installed here",
            missing.join(", ")
        );
        return;
    }
    eprintln!("test programs: apt-get install -y {}", missing.join(" "));
    // Without package lists (a fresh machine), once more after an update.
    let install = || apt_get(&["install", "-y", "--no-install-recommends"], &missing);
    let installed = install() || (apt_get(&["update"], &[]) && install());
    if !installed {
        eprintln!(
            "test programs: apt-get install {} failed",
            missing.join(" ")
        );
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

/// Whether `package`'s program runs.
fn installed(package: &Package) -> bool {
    Command::new(package.program)
        .args(package.probe)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
