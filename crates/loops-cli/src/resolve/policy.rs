//! The operating-policy flags of `create` and `edit` (issue 17) resolved
//! into a [`LoopPolicy`]: labels, expiry after runs, the circuit breaker,
//! the retry backoff and skip exit codes.

use std::str::FromStr;

use anyhow::{Result, anyhow};
use loops_core::{Backoff, LoopPolicy, validate_label};

use crate::args::policy::PolicyOptions;
use crate::context::Context;

/// The policy of a new loop from `create`'s flags.
pub(crate) fn policy(ctx: &Context, opts: &PolicyOptions) -> Result<LoopPolicy> {
    let mut policy = LoopPolicy::default();
    apply(ctx, opts, &mut policy, false)?;
    Ok(policy)
}

/// Applies the flags given to `policy`. With `edit`, `off` removes a count
/// (`--expires-after-runs off`), `--label ''` and `--skip-exit-code ''`
/// clear their lists, and a given list replaces the stored one.
pub(crate) fn apply(
    ctx: &Context,
    opts: &PolicyOptions,
    policy: &mut LoopPolicy,
    edit: bool,
) -> Result<()> {
    if !opts.labels.is_empty() {
        policy.labels = labels(&opts.labels)?;
    }
    let count = |v: &str, flag: &str| -> Result<Option<u32>> {
        if edit && v.trim() == "off" {
            return Ok(None);
        }
        super::positive_int(v, flag).map(Some)
    };
    if let Some(v) = &opts.expires_after_runs {
        policy.expires_after_runs = count(v, "--expires-after-runs")?;
    }
    if let Some(v) = &opts.pause_after_failures {
        policy.pause_after_failures = count(v, "--pause-after-failures")?;
    }
    if let Some(v) = &opts.backoff {
        policy.backoff = Backoff::from_str(v.trim())
            .map_err(|_| anyhow!("--backoff must be fixed or exponential"))?;
    }
    if let Some(v) = &opts.max_retry_delay {
        policy.max_retry_delay_ms = Some(super::positive_duration(ctx, v, "--max-retry-delay")?);
    }
    if !opts.skip_exit_codes.is_empty() {
        policy.skip_exit_codes = skip_exit_codes(&opts.skip_exit_codes)?;
    }
    Ok(())
}

/// Labels from repeated and comma-separated values, checked, in order,
/// without duplicates; empty values are dropped (so `--label ''` clears).
pub(crate) fn labels(values: &[String]) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for label in values.iter().flat_map(|v| v.split(',')).map(str::trim) {
        if label.is_empty() {
            continue;
        }
        validate_label(label)?;
        if !out.iter().any(|l| l == label) {
            out.push(label.to_owned());
        }
    }
    Ok(out)
}

/// `--skip-exit-code` values: 1 to 255 each, comma-separated allowed.
fn skip_exit_codes(values: &[String]) -> Result<Vec<i32>> {
    let mut out = Vec::new();
    for v in values.iter().flat_map(|v| v.split(',')).map(str::trim) {
        if v.is_empty() {
            continue;
        }
        let code = v
            .parse::<i32>()
            .ok()
            .filter(|c| (1..=255).contains(c))
            .ok_or_else(|| {
                anyhow!("--skip-exit-code must be an exit code from 1 to 255, not {v:?}")
            })?;
        if !out.contains(&code) {
            out.push(code);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_split_dedupe_and_check() {
        let got = labels(&["a,b".into(), "b".into(), "team=x/y".into()]).unwrap();
        assert_eq!(got, ["a", "b", "team=x/y"]);
        let err = labels(&["bad label".into()]).unwrap_err().to_string();
        assert!(err.contains("invalid label \"bad label\""), "{err}");
        assert!(labels(&["x".repeat(65)]).is_err());
        assert!(labels(&[String::new()]).unwrap().is_empty());
    }

    #[test]
    fn skip_codes_are_exit_codes() {
        assert_eq!(skip_exit_codes(&["75,3".into()]).unwrap(), [75, 3]);
        for bad in ["0", "256", "x", "-1"] {
            assert!(skip_exit_codes(&[bad.into()]).is_err(), "{bad}");
        }
    }
}
