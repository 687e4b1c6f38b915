//! Smoke test of the built binaries. Its presence also makes `cargo test
//! --workspace` build `loops` and `loops-daemon`, which the black-box tests
//! in `tests/` drive.

use std::process::Command;

// SPEC §10 item 88
#[test]
fn version_is_the_original_contract() {
    for bin in [
        env!("CARGO_BIN_EXE_loops"),
        env!("CARGO_BIN_EXE_loops-daemon"),
    ] {
        let out = Command::new(bin).arg("--version").output().unwrap();
        assert!(out.status.success(), "{bin}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "0.3.1\n", "{bin}");
    }
}
