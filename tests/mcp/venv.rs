//! The Python virtual environment with the official MCP SDK that the
//! black-box test `mcp_python` drives `loops mcp` through (issue 18).
//!
//! One file, included with `#[path]` by the test and by `cargo xtask
//! mcp-python`, so both build the same venv the same way. It lives under
//! the cargo target directory, `target/mcp-python/venv-<key>`, where the
//! key hashes the pinned `requirements.txt` and the base interpreter, so a
//! new pin or another Python gets a fresh venv and `cargo clean` removes
//! them all. A file lock (`target/mcp-python/lock`) makes parallel test
//! processes wait for the one that installs; a marker file written last
//! tells a finished venv from one an interrupted install left behind.
//! Only PyPI (or whatever pip is configured to use) is reached.

use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Names the Python interpreter the venv is created with; `python3` on
/// `PATH` when unset.
pub(crate) const PYTHON_ENV: &str = "LOOPS_MCP_PYTHON";

/// The SDK and its dependencies, pinned exactly.
const REQUIREMENTS: &str = include_str!("requirements.txt");

/// Written into a venv once its install finished.
const READY: &str = ".loops-ready";

/// The venv's interpreter, creating the venv under `target` (the cargo
/// target directory) first when there is none for the current pins and
/// base interpreter. The error says which step failed and why: no Python,
/// no `venv` module, or pip could not install (often: no network).
pub(crate) fn prepare(target: &Path) -> Result<PathBuf, String> {
    let base = std::env::var_os(PYTHON_ENV).unwrap_or_else(|| "python3".into());
    prepare_with(Path::new(&base), target)
}

/// [`prepare`] with `base` as the interpreter that creates the venv.
pub(crate) fn prepare_with(base: &Path, target: &Path) -> Result<PathBuf, String> {
    // The base interpreter's identity is part of the key: a venv points at
    // the Python that made it and breaks when that one changes.
    let identity = output(
        Command::new(base).args(["-c", "import sys; print(sys.executable, sys.version)"]),
        &format!("{} (set {PYTHON_ENV} to another Python 3)", base.display()),
    )?;
    let key = fnv1a(&[REQUIREMENTS.as_bytes(), identity.stdout.as_slice()]);

    let dir = target.join("mcp-python");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let lock_path = dir.join("lock");
    let lock = File::create(&lock_path)
        .map_err(|e| format!("cannot open {}: {e}", lock_path.display()))?;
    let locked = match lock.try_lock() {
        Err(TryLockError::WouldBlock) => {
            eprintln!("mcp-python: waiting for another process to finish the venv");
            lock.lock()
        }
        Err(TryLockError::Error(e)) => Err(e),
        Ok(()) => Ok(()),
    };
    locked.map_err(|e| format!("cannot lock {}: {e}", lock_path.display()))?;

    let venv = dir.join(format!("venv-{key:016x}"));
    let python = venv.join("bin").join("python");
    if venv.join(READY).exists() {
        return Ok(python);
    }
    // Whatever is there is an install that did not finish.
    if venv.exists() {
        std::fs::remove_dir_all(&venv)
            .map_err(|e| format!("cannot remove the unfinished {}: {e}", venv.display()))?;
    }
    eprintln!(
        "mcp-python: creating {} with {} (once; tens of seconds)",
        venv.display(),
        base.display()
    );
    output(
        Command::new(base).arg("-m").arg("venv").arg(&venv),
        &format!("{} -m venv", base.display()),
    )?;
    let requirements = venv.join("requirements.txt");
    std::fs::write(&requirements, REQUIREMENTS)
        .map_err(|e| format!("cannot write {}: {e}", requirements.display()))?;
    output(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--no-input",
            ])
            // Wheels only: no compiler needed, nothing built from source.
            .args([
                "--only-binary",
                ":all:",
                "--retries",
                "2",
                "--timeout",
                "30",
            ])
            .arg("-r")
            .arg(&requirements),
        "pip install -r tests/mcp/requirements.txt",
    )?;
    std::fs::write(venv.join(READY), "")
        .map_err(|e| format!("cannot mark {} ready: {e}", venv.display()))?;
    Ok(python)
    // `lock` drops here, letting the next process in.
}

/// Runs `cmd` to completion; its output when it succeeded, else an error
/// naming `what` with the end of its stderr.
fn output(cmd: &mut Command, what: &str) -> Result<Output, String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    if out.status.success() {
        return Ok(out);
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    let tail = lines[lines.len().saturating_sub(5)..].join("\n");
    Err(format!("{what} failed ({}):\n{tail}", out.status))
}

/// FNV-1a over `parts`: a key that stays the same across Rust versions,
/// unlike `DefaultHasher`'s.
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in parts.iter().flat_map(|part| part.iter()) {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}
