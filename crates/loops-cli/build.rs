//! Links the release `loops` with the functions an idle daemon runs laid
//! out together (`hot-functions.txt`, made by `cargo xtask hot-functions`).
//!
//! The kernel maps a binary's text 64 KiB around every page a process
//! touches, and a daemon's start and idle loop touch about a thousand
//! functions scattered over the whole text: with them together, the
//! daemon keeps far fewer pages of text resident (`docs/perf.md`, "Idle
//! daemon memory").
//!
//! Only where rustc links with its own LLD (x86_64 Linux, the default
//! since Rust 1.90): GNU ld has no `--symbol-ordering-file`. A configured
//! linker (`target.<triple>.linker`, `-C linker=`, a linker flavour) or
//! `LOOPS_NO_FUNCTION_ORDER=1` leaves the order to the linker. A name the
//! build does not have (the list is older than a dependency update) is
//! skipped without a warning.

use std::env;
use std::path::Path;

/// The file of symbol names, beside this script.
const HOT: &str = "hot-functions.txt";

fn main() {
    println!("cargo::rerun-if-changed={HOT}");
    println!("cargo::rerun-if-env-changed=LOOPS_NO_FUNCTION_ORDER");
    let var = |name: &str| env::var(name).unwrap_or_default();
    let linker_chosen =
        env::var_os("RUSTC_LINKER").is_some() || var("CARGO_ENCODED_RUSTFLAGS").contains("link");
    if var("TARGET") != "x86_64-unknown-linux-gnu"
        || var("PROFILE") != "release"
        || linker_chosen
        || env::var_os("LOOPS_NO_FUNCTION_ORDER").is_some()
    {
        return;
    }
    let hot = Path::new(&var("CARGO_MANIFEST_DIR")).join(HOT);
    if !hot.is_file() {
        return;
    }
    println!(
        "cargo::rustc-link-arg-bin=loops=-Wl,--symbol-ordering-file={}",
        hot.display()
    );
    println!("cargo::rustc-link-arg-bin=loops=-Wl,--no-warn-symbol-ordering");
}
