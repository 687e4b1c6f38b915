//! The operating-policy flags of `create` and `edit` (issue 17) resolved
//! into a [`LoopPolicy`], or for `edit` into a [`PolicyChange`] to apply to
//! the stored one: labels, expiry after runs, the circuit breaker, the
//! retry backoff and skip exit codes.

use std::str::FromStr;

use anyhow::{Result, anyhow, bail};
use loops_core::{
    AfterEdge, AfterOn, Backoff, LoopPolicy, Usd, Watch, validate_label, validate_pool_name,
};

use crate::args::policy::PolicyOptions;

/// The policy of a new loop from `create`'s flags.
pub(crate) fn policy(opts: &PolicyOptions) -> Result<LoopPolicy> {
    let mut policy = LoopPolicy::default();
    change(opts, false)?.apply(&mut policy)?;
    Ok(policy)
}

/// The policy flags given, resolved: each field is `None` when its flag
/// is not given, and the stored value then stays.
#[derive(Debug, Default)]
pub(crate) struct PolicyChange {
    labels: Option<Vec<String>>,
    expires_after_runs: Option<Option<u32>>,
    pause_after_failures: Option<Option<u32>>,
    backoff: Option<Backoff>,
    max_retry_delay_ms: Option<u64>,
    skip_exit_codes: Option<Vec<i32>>,
    max_cost_per_day: Option<Option<Usd>>,
    runs_on: Option<Vec<String>>,
    pool: Option<Option<String>>,
    /// `--after` edges whose `loop_id` is still the loop as given (an id or
    /// a name); [`resolve_after`] makes them ids.
    pub(crate) after: Option<Vec<AfterEdge>>,
    trigger_only: bool,
    /// `--watch`: the paths, or `None` for `''` (stop watching).
    watch: Option<Option<Vec<String>>>,
    debounce_ms: Option<u64>,
}

/// Resolves the flags given. With `edit`, `off` removes a count
/// (`--expires-after-runs off`), `--label ''` and `--skip-exit-code ''`
/// clear their lists, and a given list replaces the stored one.
pub(crate) fn change(opts: &PolicyOptions, edit: bool) -> Result<PolicyChange> {
    let mut change = PolicyChange::default();
    if !opts.labels.is_empty() {
        change.labels = Some(labels(&opts.labels)?);
    }
    let count = |v: &str, flag: &str| -> Result<Option<u32>> {
        if edit && v.trim() == "off" {
            return Ok(None);
        }
        super::positive_int(v, flag).map(Some)
    };
    if let Some(v) = &opts.expires_after_runs {
        change.expires_after_runs = Some(count(v, "--expires-after-runs")?);
    }
    if let Some(v) = &opts.pause_after_failures {
        change.pause_after_failures = Some(count(v, "--pause-after-failures")?);
    }
    if let Some(v) = &opts.backoff {
        change.backoff = Some(
            Backoff::from_str(v.trim())
                .map_err(|_| anyhow!("--backoff must be fixed or exponential"))?,
        );
    }
    if let Some(v) = &opts.max_retry_delay {
        change.max_retry_delay_ms = Some(super::positive_duration(v, "--max-retry-delay")?);
    }
    if !opts.skip_exit_codes.is_empty() {
        change.skip_exit_codes = Some(skip_exit_codes(&opts.skip_exit_codes)?);
    }
    if !opts.runs_on.is_empty() || !opts.hosts.is_empty() {
        change.runs_on = Some(placement(&opts.runs_on, &opts.hosts)?);
    }
    if let Some(v) = &opts.pool {
        let v = v.trim();
        change.pool = Some(if v.is_empty() {
            None
        } else {
            validate_pool_name(v)?;
            Some(v.to_owned())
        });
    }
    if !opts.after.is_empty() {
        change.after = Some(after_edges(&opts.after)?);
    }
    change.trigger_only = opts.trigger_only;
    if !opts.watch.is_empty() {
        let paths = watch_paths(&opts.watch)?;
        if paths.is_empty() && !edit {
            bail!("--watch needs a path, such as --watch ./src");
        }
        change.watch = Some((!paths.is_empty()).then_some(paths));
    }
    if let Some(v) = &opts.debounce {
        change.debounce_ms = Some(super::positive_duration(v, "--debounce")?);
    }
    if let Some(v) = &opts.max_cost_per_day {
        change.max_cost_per_day = Some(if edit && v.trim() == "off" {
            None
        } else {
            Some(cost_cap(v)?)
        });
    }
    Ok(change)
}

impl PolicyChange {
    /// Whether `--trigger-only` was given.
    pub(crate) fn trigger_only(&self) -> bool {
        self.trigger_only
    }

    /// The pool a loop in pool `stored` is in once the flags apply.
    pub(crate) fn pool_after<'a>(&'a self, stored: Option<&'a str>) -> Option<&'a str> {
        match &self.pool {
            Some(pool) => pool.as_deref(),
            None => stored,
        }
    }

    /// The pool `--pool` names, when it names one (not `''`).
    pub(crate) fn new_pool(&self) -> Option<&str> {
        self.pool.as_ref().and_then(Option::as_deref)
    }

    /// Applies the flags given to `policy`. A loop that starts watching
    /// with no placement is pinned to this host (T8).
    pub(crate) fn apply(self, policy: &mut LoopPolicy) -> Result<()> {
        if let Some(labels) = self.labels {
            policy.labels = labels;
        }
        if let Some(n) = self.expires_after_runs {
            policy.expires_after_runs = n;
        }
        if let Some(n) = self.pause_after_failures {
            policy.pause_after_failures = n;
        }
        if let Some(backoff) = self.backoff {
            policy.backoff = backoff;
        }
        if let Some(ms) = self.max_retry_delay_ms {
            policy.max_retry_delay_ms = Some(ms);
        }
        if let Some(codes) = self.skip_exit_codes {
            policy.skip_exit_codes = codes;
        }
        if let Some(runs_on) = self.runs_on {
            policy.runs_on = runs_on;
        }
        if let Some(pool) = self.pool {
            policy.pool = pool;
        }
        if let Some(after) = self.after {
            policy.after = after;
        }
        if self.trigger_only {
            policy.trigger_only = true;
        }
        if let Some(cap) = self.max_cost_per_day {
            policy.max_cost_per_day = cap;
        }
        apply_watch(self.watch, self.debounce_ms, policy)
    }
}

/// `--watch` and `--debounce` applied to `policy` (issue 30, T8).
fn apply_watch(
    watch: Option<Option<Vec<String>>>,
    debounce_ms: Option<u64>,
    policy: &mut LoopPolicy,
) -> Result<()> {
    let debounce = debounce_ms
        .or(policy.watch.as_ref().map(|w| w.debounce_ms))
        .unwrap_or(loops_core::DEFAULT_WATCH_DEBOUNCE_MS);
    match watch {
        Some(None) => policy.watch = None,
        Some(Some(paths)) => {
            policy.watch = Some(Watch {
                paths,
                debounce_ms: debounce,
            });
            if policy.runs_on.is_empty() {
                policy.runs_on = vec![loops_core::host_label(&loops_exec::hostname())];
            }
        }
        None => {}
    }
    match &mut policy.watch {
        Some(w) => w.debounce_ms = debounce,
        None if debounce_ms.is_some() => {
            bail!("--debounce applies to --watch; give the paths to watch with --watch PATH")
        }
        None => {}
    }
    Ok(())
}

/// `--watch` values made absolute against the working directory, in
/// order, without duplicates; empty values are dropped, so `--watch ''`
/// stops watching on edit.
fn watch_paths(values: &[String]) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for v in values.iter().filter(|v| !v.trim().is_empty()) {
        let path = std::path::absolute(v)
            .map_err(|e| anyhow!("--watch {v:?}: cannot make the path absolute: {e}"))?;
        let path = path
            .to_str()
            .ok_or_else(|| anyhow!("--watch {v:?}: the path is not valid UTF-8; rename it"))?;
        // `/a/b/` and `/a/b` are one path.
        let path = match path.trim_end_matches('/') {
            "" => "/",
            trimmed => trimmed,
        };
        if !out.iter().any(|p| p == path) {
            out.push(path.to_owned());
        }
    }
    Ok(out)
}

/// `--max-cost-per-day`: dollars above zero (a cap of nothing would pause
/// the loop before its first run).
fn cost_cap(v: &str) -> Result<Usd> {
    v.parse::<Usd>()
        .ok()
        .filter(|cap| *cap > Usd::ZERO)
        .ok_or_else(|| {
            anyhow!(
                "--max-cost-per-day must be an amount of US dollars above 0, such as 5 or \
                 0.50, not {v:?}"
            )
        })
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

/// `--runs-on` labels and `--host` names (as `host:<name>`), checked, in
/// order, without duplicates; empty values are dropped, so `--runs-on ''`
/// clears the placement on edit (issue 30, P3).
fn placement(runs_on: &[String], hosts: &[String]) -> Result<Vec<String>> {
    let hosts: Vec<String> = hosts
        .iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(loops_core::host_label)
        .collect();
    let mut out: Vec<String> = Vec::new();
    for label in runs_on
        .iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .chain(hosts.iter().map(String::as_str))
    {
        if label.is_empty() {
            continue;
        }
        validate_label(label).map_err(|e| anyhow!("--runs-on: {}", e.message))?;
        if !out.iter().any(|l| l == label) {
            out.push(label.to_owned());
        }
    }
    Ok(out)
}

/// `--after` values, `LOOP[:OUTCOME]`, in order, without duplicates; `''`
/// alone clears them (issue 30, T1). The loops stay as given.
fn after_edges(values: &[String]) -> Result<Vec<AfterEdge>> {
    let mut out: Vec<AfterEdge> = Vec::new();
    for v in values.iter().map(|v| v.trim()).filter(|v| !v.is_empty()) {
        let (loop_ref, on) = match v.rsplit_once(':') {
            Some((l, on)) => (
                l,
                on.parse::<AfterOn>()
                    .map_err(|e| anyhow!("--after {v:?}: {e}"))?,
            ),
            None => (v, AfterOn::Succeeded),
        };
        if loop_ref.is_empty() {
            bail!("--after {v:?}: name the loop to run after, as LOOP or LOOP:succeeded");
        }
        let edge = AfterEdge {
            loop_id: loop_ref.to_owned(),
            on,
        };
        if !out.contains(&edge) {
            out.push(edge);
        }
    }
    Ok(out)
}

/// `edges` (from [`change`]) with each loop resolved to its id, refused
/// when one would close a cycle through `this` (the loop being edited;
/// `None` on create, whose new loop nothing runs after yet).
pub(crate) fn resolve_after(
    store: &loops_store::Store,
    edges: &mut [AfterEdge],
    this: Option<&loops_core::Loop>,
) -> Result<()> {
    let mut names = std::collections::HashMap::new();
    for edge in edges.iter_mut() {
        let lp = store.require_loop(&edge.loop_id)?;
        names.insert(lp.id.to_string(), lp.name.clone());
        edge.loop_id = lp.id.to_string();
    }
    let Some(this) = this else {
        return Ok(());
    };
    let id = this.id.to_string();
    names.insert(id.clone(), this.name.clone());
    let stored = store.after_edges()?;
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    for (from, from_name, ups) in &stored {
        names.insert(from.to_string(), from_name.clone());
        if from.as_str() == id {
            continue;
        }
        for up in ups {
            pairs.push((from.as_str(), up.loop_id.as_str()));
        }
    }
    let upstreams: Vec<&str> = edges.iter().map(|e| e.loop_id.as_str()).collect();
    if let Some(cycle) = loops_core::after_cycle(&pairs, &id, &upstreams) {
        let named: Vec<&str> = cycle
            .iter()
            .map(|i| names.get(*i).map_or(*i, String::as_str))
            .collect();
        bail!(
            "--after would make a cycle: {}; a loop cannot run after itself, \
             directly or through others",
            loops_core::cycle_text(&named)
        );
    }
    Ok(())
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
    fn an_edit_changes_only_the_policy_given() {
        let mut policy = LoopPolicy {
            labels: vec!["a".into()],
            pause_after_failures: Some(3),
            expires_after_runs: Some(5),
            ..LoopPolicy::default()
        };
        let opts = PolicyOptions {
            expires_after_runs: Some("off".into()),
            max_retry_delay: Some("1m".into()),
            ..PolicyOptions::default()
        };
        change(&opts, true).unwrap().apply(&mut policy).unwrap();
        assert_eq!(policy.labels, ["a"]);
        assert_eq!(policy.pause_after_failures, Some(3));
        assert_eq!(policy.expires_after_runs, None);
        assert_eq!(policy.max_retry_delay_ms, Some(60_000));
        // `off` is for edit only: a new loop has no count to remove.
        assert!(change(&opts, false).is_err());
    }

    #[test]
    fn a_cost_cap_is_dollars_above_zero_and_off_on_edit() {
        let opts = |v: &str| PolicyOptions {
            max_cost_per_day: Some(v.into()),
            ..PolicyOptions::default()
        };
        let mut policy = LoopPolicy::default();
        change(&opts("2.50"), false)
            .unwrap()
            .apply(&mut policy)
            .unwrap();
        assert_eq!(policy.max_cost_per_day, Usd::from_dollars(2.5));
        change(&opts("off"), true)
            .unwrap()
            .apply(&mut policy)
            .unwrap();
        assert_eq!(policy.max_cost_per_day, None);
        for bad in ["0", "-1", "lots", "off"] {
            let err = change(&opts(bad), false).unwrap_err();
            assert!(
                err.to_string()
                    .starts_with("--max-cost-per-day must be an amount of US dollars above 0"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn skip_codes_are_exit_codes() {
        assert_eq!(skip_exit_codes(&["75,3".into()]).unwrap(), [75, 3]);
        for bad in ["0", "256", "x", "-1"] {
            assert!(skip_exit_codes(&[bad.into()]).is_err(), "{bad}");
        }
    }
}
