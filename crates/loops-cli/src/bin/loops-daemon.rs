//! The `loops-daemon` helper binary (SPEC §7.6): `run [--interval-ms]`,
//! `start`, `stop`, `status` and `install`, always printing JSON. Scripts
//! and service units written for the original call it; it is built and
//! installed beside `loops` and shares its code.

use std::process::ExitCode;

fn main() -> ExitCode {
    loops_cli::loops_daemon_main()
}
