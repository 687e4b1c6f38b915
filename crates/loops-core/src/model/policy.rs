//! A loop's operating policies (issue 17): labels, expiry after a number of
//! successful runs, the circuit breaker, the retry backoff and the exit
//! codes that mean "skipped". All are off by default, which is 0.3.1's
//! behaviour, and the JSON leaves out every field still at its default, so
//! a loop that uses none of them prints exactly as before.

use serde::{Deserialize, Serialize};

use crate::status::Backoff;
use crate::usd::Usd;

/// The cap of an exponential backoff's delay when `maxRetryDelayMs` is
/// unset: six hours, as later OpenLoops.
pub const DEFAULT_MAX_RETRY_DELAY_MS: u64 = 6 * 60 * 60 * 1000;

/// The most characters a label has.
pub const MAX_LABEL_LEN: usize = 64;

/// The policies of one loop, stored in their own columns (migration V8) and
/// flattened into the loop's JSON.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LoopPolicy {
    /// Free labels for filtering (`list --label`), in the order given,
    /// without duplicates.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// The loop expires after this many successful runs in a row.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_after_runs: Option<u32>,
    /// The loop pauses after this many final failures in a row (the
    /// circuit breaker); off when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pause_after_failures: Option<u32>,
    /// How the retry delay grows.
    #[serde(skip_serializing_if = "Backoff::is_fixed")]
    pub backoff: Backoff,
    /// The cap of an exponential delay; [`DEFAULT_MAX_RETRY_DELAY_MS`] when
    /// unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_retry_delay_ms: Option<u64>,
    /// Exit codes that record the run `skipped` instead of `failed`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skip_exit_codes: Vec<i32>,
    /// Pause the loop once its runs of the current local day have cost
    /// this much (issue 27); checked before each run.
    #[serde(rename = "maxCostPerDayUsd", skip_serializing_if = "Option::is_none")]
    pub max_cost_per_day: Option<Usd>,
    /// Where the loop runs (issue 30, `docs/triggers.md` P3): every label
    /// must be one of the runner's; anywhere when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub runs_on: Vec<String>,
    /// The pool whose limit its runs count against (Q2); none when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// The upstream loops it runs after (T1), in the order given.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<crate::AfterEdge>,
    /// It runs on triggers only: no schedule of its own, never due (T1).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub trigger_only: bool,
    /// The paths whose changes trigger it (T8); none when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub watch: Option<crate::Watch>,
    /// The scope of the `loops apply` file that manages the loop (issue
    /// 31); none for a loop made by hand.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

impl LoopPolicy {
    /// The cap of an exponential delay.
    pub fn max_retry_delay(&self) -> u64 {
        self.max_retry_delay_ms
            .unwrap_or(DEFAULT_MAX_RETRY_DELAY_MS)
    }
}
