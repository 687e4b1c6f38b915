//! What loops learned about a run beyond its process (issue 27): the class
//! and fingerprint of a failure (agents note §7.1, §7.2), what an agent's
//! machine output said of itself (§3; [`crate::agent_output`]), and the git
//! worktree it ran in (§8).
//!
//! One record travels the whole way: the executor fills in the agent's
//! report and worktree, the store adds the class when it finalizes the run,
//! and the run's JSON shows every field that is set, flattened beside the
//! original's (all additive, omitted when unset).

use serde::{Deserialize, Serialize};

use crate::agent_output::{AgentReport, TokenUsage};
use crate::failure::{FailureClass, FailureInput, classify};
use crate::id::LoopId;
use crate::status::RunStatus;
use crate::usd::Usd;

/// The facts of one run; every field is `None` when nothing said it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunFacts {
    /// The class of a run that did not succeed (agents note §7.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_class: Option<FailureClass>,
    /// 16 hex digits naming the failure, stable across runs (§7.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_fingerprint: Option<String>,
    /// The provider's session or thread id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The agent's final message, scrubbed and bounded as stdout is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// What the run cost, when the provider said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<Usd>,
    /// Tokens the run used, when the provider said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
    /// Whether the agent's own output said the run failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// The git worktree the run worked in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<String>,
    /// The branch checked out in [`RunFacts::worktree`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree_branch: Option<String>,
}

impl RunFacts {
    /// The facts with what an agent's output said of itself: a cost that
    /// is not a finite, non-negative number is dropped.
    pub fn with_report(mut self, report: AgentReport) -> RunFacts {
        self.session_id = report.session_id;
        self.result = report.result;
        self.cost_usd = report.cost_usd.and_then(Usd::from_dollars);
        self.usage = report.usage;
        self.is_error = report.is_error;
        self
    }

    /// Classifies the run of `loop_id` that `input` describes (§7.1) and
    /// takes its fingerprint (§7.2); a run that succeeded or is still
    /// running keeps neither.
    pub fn classify(&mut self, loop_id: &LoopId, input: &FailureInput<'_>) {
        let failed = !matches!(input.status, RunStatus::Succeeded | RunStatus::Running);
        match classify(input).filter(|_| failed) {
            Some(found) => {
                self.failure_fingerprint = Some(found.fingerprint(loop_id, input));
                self.failure_class = Some(found.class);
            }
            None => {
                self.failure_class = None;
                self.failure_fingerprint = None;
            }
        }
    }

    /// Whether nothing at all is known.
    pub fn is_empty(&self) -> bool {
        *self == RunFacts::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(status: RunStatus, stderr: &'static str) -> FailureInput<'static> {
        FailureInput {
            status,
            error: Some("process exited with code 1"),
            stdout: None,
            stderr: Some(stderr),
            exit_code: Some(1),
        }
    }

    #[test]
    fn a_failed_run_gets_its_class_and_fingerprint() {
        let id: LoopId = "a1b2c3d4e5f6".parse().unwrap();
        let mut facts = RunFacts::default();
        facts.classify(&id, &input(RunStatus::Failed, "429 Too Many Requests"));
        assert_eq!(facts.failure_class, Some(FailureClass::RateLimit));
        let print = facts.failure_fingerprint.clone().unwrap();
        assert_eq!(print.len(), 16, "{print}");
        assert!(print.bytes().all(|b| b.is_ascii_hexdigit()), "{print}");
        // A success afterwards clears both.
        facts.classify(&id, &input(RunStatus::Succeeded, "429 Too Many Requests"));
        assert_eq!(facts, RunFacts::default());
    }

    #[test]
    fn a_running_run_is_not_classified() {
        let id: LoopId = "a1b2c3d4e5f6".parse().unwrap();
        let mut facts = RunFacts::default();
        facts.classify(&id, &input(RunStatus::Running, "429"));
        assert!(facts.is_empty());
    }

    #[test]
    fn a_report_keeps_only_a_finite_cost() {
        let report = |cost| AgentReport {
            session_id: Some("s-1".into()),
            cost_usd: Some(cost),
            ..AgentReport::default()
        };
        let facts = RunFacts::default().with_report(report(0.25));
        assert!(!facts.is_empty());
        assert_eq!(facts.cost_usd, Usd::from_dollars(0.25));
        assert_eq!(facts.session_id.as_deref(), Some("s-1"));
        for bad in [f64::NAN, f64::INFINITY, -1.0] {
            assert_eq!(RunFacts::default().with_report(report(bad)).cost_usd, None);
        }
    }

    #[test]
    fn unset_facts_add_nothing_to_json() {
        assert_eq!(serde_json::to_string(&RunFacts::default()).unwrap(), "{}");
        let facts = RunFacts {
            failure_class: Some(FailureClass::Auth),
            cost_usd: Usd::from_dollars(0.5),
            ..RunFacts::default()
        };
        assert_eq!(
            serde_json::to_value(&facts).unwrap(),
            serde_json::json!({"failureClass": "auth", "costUsd": 0.5})
        );
    }
}
