//! Doctor's `accounts` check: the `accounts` CLI that account loops run
//! through answers `--version` on the PATH runs get.

use std::time::Duration;

use loops_core::{CommandTarget, ExecutorStatus, ProcessTarget};
use loops_exec::{ExecOptions, RunContext, RunMetadata, execute_target};

use super::*;

pub(super) fn check_accounts(exec: &ExecOptions) -> Check {
    let mut target = CommandTarget::new("accounts");
    target.args = Some(vec!["--version".to_owned()]);
    target.timeout_ms = Some(ACCOUNTS_TIMEOUT_MS);
    let opts = ExecOptions {
        kill_grace: Duration::from_millis(500),
        ..exec.clone()
    };
    let missing = |detail: String| {
        Check::new(
            "accounts",
            CheckStatus::Warn,
            "accounts CLI is not available; account-routed steps will fail",
        )
        .detail(detail)
    };
    match execute_target(
        &ProcessTarget::Command(target),
        &RunMetadata::default(),
        &opts,
        &RunContext::default(),
        &mut |_| {},
    ) {
        Ok(r) if r.status == ExecutorStatus::Succeeded => {
            let version = r.stdout.lines().next().unwrap_or("").trim().to_owned();
            let check = Check::new("accounts", CheckStatus::Ok, "accounts is available");
            if version.is_empty() {
                check
            } else {
                check.detail(version)
            }
        }
        // The PATH is the `path` check's detail; the error would repeat it.
        Ok(r) if r.exit_code.is_none() && r.pid.is_none() => {
            missing("not found on the PATH runs get".to_owned())
        }
        Ok(r) => missing(
            r.error
                .unwrap_or_else(|| "accounts --version failed".to_owned()),
        ),
        Err(e) => missing(e.to_string()),
    }
}
