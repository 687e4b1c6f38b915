//! The `loops` binary (SPEC §7). The command line lives in the library, so
//! the `loops-daemon` helper binary shares it.

use std::process::ExitCode;

fn main() -> ExitCode {
    loops_cli::loops_main()
}
