//! Smoke test of the built binary. Its presence also makes `cargo test
//! --workspace` build `loops`, which the black-box tests in `tests/` drive.

use std::process::Command;

// SPEC §10 item 88
#[test]
fn version_is_the_original_contract() {
    let out = Command::new(env!("CARGO_BIN_EXE_loops"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "0.3.1\n");
}
