//! The options every create tool shares, as the command line's
//! `args::LoopOptions` (`loops_create_*`, and `loops serve`'s create
//! routes).

use anyhow::{Result, bail};

use super::params::LoopOptions;
use super::tools::{count, duration};
use crate::args;
use crate::args::hook::HookOptions;
use crate::args::policy::PolicyOptions;

/// The options every create command shares; what is not given takes the
/// command line's default.
///
/// A relative `watch` path is refused: the command line makes it absolute
/// against the caller's directory, but a client of the server has none
/// here, and the server's own would watch a directory the client never
/// named.
pub(crate) fn loop_options(o: LoopOptions) -> Result<args::LoopOptions> {
    if let Some(path) = o
        .watch
        .iter()
        .find(|p| !p.trim().is_empty() && !std::path::Path::new(p).is_absolute())
    {
        bail!(
            "watch path {path:?} is not absolute: the server would read it against its own \
             directory; give the full path"
        );
    }
    let or = |value: Option<String>, default: &str| value.unwrap_or_else(|| default.to_owned());
    Ok(args::LoopOptions {
        name: o.name,
        at: o.at,
        every: duration(o.every),
        cron: o.cron,
        dynamic: o.dynamic,
        tz: o.tz,
        catch_up: or(o.catch_up, args::DEFAULT_CATCH_UP),
        catch_up_limit: or(count(o.catch_up_limit), args::DEFAULT_CATCH_UP_LIMIT),
        overlap: or(o.overlap, args::DEFAULT_OVERLAP),
        attempts: or(count(o.attempts), args::DEFAULT_ATTEMPTS),
        retry_delay: or(duration(o.retry_delay), args::DEFAULT_RETRY_DELAY),
        lease: or(duration(o.lease), args::DEFAULT_LEASE),
        expires_at: o.expires_at,
        description: o.description,
        dry_run: false,
        policy: PolicyOptions {
            labels: o.label.0,
            expires_after_runs: count(o.expires_after_runs),
            pause_after_failures: count(o.pause_after_failures),
            backoff: o.backoff,
            max_retry_delay: duration(o.max_retry_delay),
            skip_exit_codes: o.skip_exit_code.into_iter().map(|c| c.0).collect(),
            max_cost_per_day: None,
            runs_on: o.runs_on.0,
            hosts: Vec::new(),
            pool: o.pool,
            after: o.after.0,
            trigger_only: o.trigger_only,
            watch: o.watch,
            debounce: duration(o.debounce),
        },
        hooks: HookOptions {
            on_failure: o.on_failure,
            on_success: o.on_success,
            hook_show_output: o.hook_show_output,
        },
    })
}
