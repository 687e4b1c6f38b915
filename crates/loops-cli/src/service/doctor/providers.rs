//! The `provider:<bin>` checks (SPEC §7.5): one for each of the six agent
//! CLIs, `ok` when it is on the PATH a run gets, `warn` when not.
//!
//! Issue 16 wanted a machine without the six CLIs not to be warned about
//! five it never runs; issue 25 (item 11) found that dropping the unused
//! ones from `--json` broke scripts that read `provider:claude`, as the
//! original reports all six. So all six are checked and reported; the
//! ones no loop or stored workflow step uses are marked
//! [`Check::folded`], and the human report shows them on one line.

use std::collections::BTreeSet;
use std::ops::ControlFlow;

use loops_core::{AgentProvider, CommandTarget, ProcessTarget, Target};
use loops_exec::{ExecOptions, RunMetadata, preflight_target};
use loops_store::{LoopFilter, Store, WorkflowFilter};

use super::{Check, CheckStatus};

/// The provider CLIs whose presence is reported (SPEC §7.5), in its order.
pub(super) const PROVIDERS: [&str; 6] = [
    "claude",
    "cursor-agent",
    "codewith",
    "aicopilot",
    "opencode",
    "codex",
];

/// The id of the one line the human report folds unused providers into.
pub(crate) const FOLDED_ID: &str = "providers";

/// One check per provider, in the SPEC's order; those no loop or stored
/// workflow step uses are folded (none when the store cannot say).
pub(super) fn check_providers(store: Option<&Store>, exec: &ExecOptions) -> Vec<Check> {
    let used = used_providers(store);
    PROVIDERS
        .into_iter()
        .map(|bin| {
            let mut check = check_provider(bin, exec);
            check.folded = used.as_ref().is_some_and(|used| !used.contains(bin));
            check
        })
        .collect()
}

/// The provider CLIs some loop or stored workflow step runs; `None` when
/// the store cannot say.
fn used_providers(store: Option<&Store>) -> Option<BTreeSet<&'static str>> {
    let store = store?;
    let mut used = BTreeSet::new();
    store
        .for_each_loop(
            &LoopFilter {
                status: None,
                limit: Some(u32::MAX),
                offset: None,
            },
            |lp| {
                if let Target::Agent(a) = &lp.target {
                    used.insert(a.provider.binary());
                }
                ControlFlow::Continue(())
            },
        )
        .ok()?;
    let specs = store
        .list_workflows(&WorkflowFilter {
            status: None,
            limit: Some(u32::MAX),
        })
        .ok()?;
    for step in specs.iter().flat_map(|w| &w.steps) {
        if let ProcessTarget::Agent(a) = &step.target {
            used.insert(a.provider.binary());
        }
    }
    Some(used)
}

/// The check of provider CLI `bin`. Cursor's keeps the original's id,
/// `provider:cursor-agent`, but a run starts `agent` first and falls back
/// to `cursor-agent` (issue 27), so either one passes it.
fn check_provider(bin: &str, exec: &ExecOptions) -> Check {
    let id = format!("provider:{bin}");
    let cursor = AgentProvider::Cursor;
    let programs = match cursor.fallback_executable() {
        Some(fallback) if bin == cursor.binary() => vec![cursor.executable(), fallback],
        _ => vec![bin],
    };
    let found = programs.iter().find(|program| {
        let target = ProcessTarget::Command(CommandTarget::new(**program));
        preflight_target(&target, &RunMetadata::default(), exec).is_ok()
    });
    match found {
        Some(program) => Check::new(id, CheckStatus::Ok, format!("{program} is available")),
        None => Check::new(
            id,
            CheckStatus::Warn,
            format!("{} is not on PATH", programs.join(" or ")),
        ),
    }
}

/// The human report's one line for the folded provider checks: `ok`, since
/// no loop runs them, and which are on the PATH and which are not.
pub(crate) fn folded_line(folded: &[&Check]) -> Option<(CheckStatus, String)> {
    if folded.is_empty() {
        return None;
    }
    let bins = |status: CheckStatus| -> Vec<&str> {
        folded
            .iter()
            .filter(|c| c.status == status)
            .map(|c| c.id.trim_start_matches("provider:"))
            .collect()
    };
    let (available, missing) = (bins(CheckStatus::Ok), bins(CheckStatus::Warn));
    let mut parts = Vec::new();
    if !available.is_empty() {
        parts.push(format!("{} available", available.join(", ")));
    }
    if !missing.is_empty() {
        parts.push(format!("{} not on PATH", missing.join(", ")));
    }
    Some((
        CheckStatus::Ok,
        format!("not used by any loop: {}", parts.join("; ")),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(bin: &str, status: CheckStatus) -> Check {
        Check::new(format!("provider:{bin}"), status, "")
    }

    #[test]
    fn without_a_store_every_provider_counts_as_used() {
        let checks = check_providers(None, &ExecOptions::default());
        let ids: Vec<&str> = checks.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(
            ids,
            PROVIDERS
                .map(|bin| format!("provider:{bin}"))
                .map(|id| id.leak() as &str)
        );
        assert!(checks.iter().all(|c| !c.folded));
    }

    #[test]
    fn the_folded_line_names_what_is_available_and_what_is_missing() {
        let (a, b, c) = (
            check("claude", CheckStatus::Ok),
            check("codewith", CheckStatus::Warn),
            check("codex", CheckStatus::Warn),
        );
        assert_eq!(folded_line(&[]), None);
        assert_eq!(
            folded_line(&[&a, &b, &c]),
            Some((
                CheckStatus::Ok,
                "not used by any loop: claude available; codewith, codex not on PATH".to_owned()
            ))
        );
        assert_eq!(
            folded_line(&[&b]).unwrap().1,
            "not used by any loop: codewith not on PATH"
        );
    }
}
