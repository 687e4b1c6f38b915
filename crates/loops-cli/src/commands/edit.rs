//! `loops edit <loop>` and `loops rename <loop> <new-name>` (issue 16 §5):
//! a loop changed in place, keeping its id, status, creation time and runs.
//!
//! The flags are `create`'s and are resolved by the same functions
//! (`resolve`), and the result passes the same checks (`resolve::checked`,
//! then the store's `validate_new_loop`). The change is applied by
//! `Store::edit_loop` to the loop as stored under the write lock, so a
//! daemon advancing the loop at that moment loses nothing.

mod target;

use anyhow::{Result, bail};
use loops_core::{Loop, NewLoop, Schedule, Target};
use loops_store::{LoopEdited, loop_settings};
use serde_json::Value;

use crate::args::LoopOptions;
use crate::args::edit::{EditArgs, RenameArgs};
use crate::context::Context;
use crate::exit::Outcome;
use crate::redact;
use crate::render::Printer;
use crate::resolve;

/// `loops edit`.
pub(crate) fn edit(ctx: &Context, args: &EditArgs, out: &mut Printer) -> Result<Outcome> {
    if !gives_anything(args) {
        bail!(
            "nothing to change: give at least one of --at, --every, --cron, --dynamic, --tz \
             (schedule); --catch-up, --catch-up-limit, --overlap, --attempts, --retry-delay, \
             --lease, --expires-at, -d/--description, --label, --expires-after-runs, \
             --pause-after-failures, --backoff, --max-retry-delay, --skip-exit-code (policy); --cmd, --arg, --no-args, \
             --shell, --no-shell, --env, --no-env (command loops); --provider, --prompt, \
             --prompt-file, --model, --agent, --config-isolation (agent loops); --workflow \
             (workflow loops); --cwd, --timeout, --account, --account-tool; --on-failure, \
             --on-success, --hook-show-output (hooks). See `loops edit --help`"
        );
    }
    let store = ctx.open_store()?;
    let lp = store.require_loop(&args.target)?;
    // A workflow is looked up before the loop is locked: by id whatever
    // its status, else the active workflow of that name, as create does.
    let workflow = match &args.workflow {
        Some(w) => Some(store.require_workflow(w)?.id),
        None => None,
    };
    let outside = target::Outside::of(args, workflow)?;
    let edited = store.edit_loop(&lp.id, super::now(), |stored| {
        apply(ctx, args, &outside, stored)
    })?;
    print_edited(&edited, out)?;
    if args.cwd.is_some()
        && let Some(dir) = super::create::target_cwd(&edited.after.target)
    {
        super::create::cwd::warn_if_missing(ctx, dir);
    }
    Ok(Outcome::Success)
}

/// `loops rename`.
pub(crate) fn rename(ctx: &Context, args: &RenameArgs, out: &mut Printer) -> Result<Outcome> {
    let store = ctx.open_store()?;
    let lp = store.require_loop(&args.target)?;
    let edited = store.edit_loop(&lp.id, super::now(), |stored| {
        let mut settings = loop_settings(stored);
        settings.name = args.name.clone();
        checked(settings)
    })?;
    if out.json {
        out.json_of(&redact::loop_json(&edited.after))?;
    } else {
        out.line(&format!(
            "renamed {} {} → {}",
            edited.after.id,
            crate::render::escape_controls(&edited.before.name, &[]),
            edited.after.name
        ))?;
    }
    Ok(Outcome::Success)
}

fn gives_anything(a: &EditArgs) -> bool {
    let options = [
        &a.at,
        &a.every,
        &a.cron,
        &a.tz,
        &a.catch_up,
        &a.catch_up_limit,
        &a.overlap,
        &a.attempts,
        &a.retry_delay,
        &a.lease,
        &a.expires_at,
        &a.description,
        &a.command,
        &a.provider,
        &a.prompt,
        &a.prompt_file,
        &a.model,
        &a.agent,
        &a.config_isolation,
        &a.workflow,
        &a.cwd,
        &a.timeout,
        &a.account,
        &a.account_tool,
    ];
    options.iter().any(|o| o.is_some())
        || [a.dynamic, a.no_args, a.shell, a.no_shell, a.no_env]
            .iter()
            .any(|b| *b)
        || !a.args.is_empty()
        || !a.env.is_empty()
        || a.policy.given()
        || a.hooks.given()
}

/// The loop's new settings: the stored ones with the given flags applied.
fn apply(
    ctx: &Context,
    args: &EditArgs,
    outside: &target::Outside,
    stored: &Loop,
) -> Result<NewLoop> {
    let mut new = loop_settings(stored);
    if let Some(schedule) = schedule(ctx, args, &stored.schedule)? {
        new.schedule = schedule;
    }
    options(ctx, args, &mut new)?;
    target::apply(ctx, args, outside, stored, &mut new.target)?;
    checked(new)
}

/// Create's checks, for any target.
fn checked(new: NewLoop) -> Result<NewLoop> {
    match new.target {
        Target::Workflow(_) => {
            loops_core::validate_new_loop(&new)?;
            Ok(new)
        }
        _ => resolve::checked(new),
    }
}

/// The new schedule, if the flags give one. `--tz` alone moves a cron
/// schedule to another zone and keeps its expression.
fn schedule(ctx: &Context, args: &EditArgs, stored: &Schedule) -> Result<Option<Schedule>> {
    let mut cron = args.cron.clone();
    let mut tz = args.tz.clone();
    // A new expression alone keeps the stored zone.
    if let (Some(_), None, Schedule::Cron { timezone, .. }) = (&cron, &tz, stored) {
        tz.clone_from(timezone);
    }
    let chosen = args.at.is_some() || args.every.is_some() || cron.is_some() || args.dynamic;
    if !chosen {
        match (&args.tz, stored) {
            (None, _) => return Ok(None),
            (Some(_), Schedule::Cron { expression, .. }) => cron = Some(expression.clone()),
            (Some(_), _) => bail!(
                "--tz requires a cron schedule: this loop's schedule is {}; give --cron with it",
                schedule_kind(stored)
            ),
        }
    }
    // The schedule flags go through create's own resolution; the other
    // fields of `LoopOptions` are not read by it.
    let opts = LoopOptions {
        name: String::new(),
        at: args.at.clone(),
        every: args.every.clone(),
        cron,
        dynamic: args.dynamic,
        tz,
        catch_up: String::new(),
        catch_up_limit: String::new(),
        overlap: String::new(),
        attempts: String::new(),
        retry_delay: String::new(),
        lease: String::new(),
        expires_at: None,
        description: None,
        policy: Default::default(),
        hooks: Default::default(),
    };
    resolve::schedule(ctx, &opts).map(Some)
}

fn schedule_kind(schedule: &Schedule) -> &'static str {
    match schedule {
        Schedule::Once { .. } => "once (--at)",
        Schedule::Interval { .. } => "an interval (--every)",
        Schedule::Cron { .. } => "cron",
        Schedule::Dynamic { .. } => "dynamic",
    }
}

/// The policy options and the description.
fn options(ctx: &Context, args: &EditArgs, new: &mut NewLoop) -> Result<()> {
    if let Some(v) = &args.catch_up {
        new.catch_up = resolve::catch_up(v)?;
    }
    if let Some(v) = &args.catch_up_limit {
        new.catch_up_limit = resolve::positive_int(v, "--catch-up-limit")?;
    }
    if let Some(v) = &args.overlap {
        new.overlap = resolve::overlap(v)?;
    }
    if let Some(v) = &args.attempts {
        new.max_attempts = resolve::positive_int(v, "--attempts")?;
    }
    if let Some(v) = &args.retry_delay {
        new.retry_delay_ms = resolve::positive_duration(ctx, v, "--retry-delay")?;
    }
    if let Some(v) = &args.lease {
        new.lease_ms = resolve::positive_duration(ctx, v, "--lease")?;
    }
    if let Some(v) = &args.expires_at {
        new.expires_at = match v.trim() {
            "never" => None,
            _ => Some(resolve::expires_at(ctx, v)?),
        };
    }
    if let Some(v) = &args.description {
        new.description = (!v.is_empty()).then(|| v.clone());
    }
    crate::resolve::policy::apply(ctx, &args.policy, &mut new.policy, true)?;
    crate::resolve::hooks::apply(&args.hooks, &mut new.hooks)
}

/// The settings a user can tell apart, as (label, JSON key) in the order
/// the summary names them. The target's keys are compared one by one.
const FIELDS: &[(&str, &str)] = &[
    ("name", "name"),
    ("description", "description"),
    ("schedule", "schedule"),
    ("catch-up", "catchUp"),
    ("catch-up limit", "catchUpLimit"),
    ("overlap", "overlap"),
    ("attempts", "maxAttempts"),
    ("retry delay", "retryDelayMs"),
    ("lease", "leaseMs"),
    ("expiry", "expiresAt"),
    ("labels", "labels"),
    ("expiry after runs", "expiresAfterRuns"),
    ("breaker", "pauseAfterFailures"),
    ("backoff", "backoff"),
    ("max retry delay", "maxRetryDelayMs"),
    ("skip exit codes", "skipExitCodes"),
    ("on-failure hook", "onFailure"),
    ("on-success hook", "onSuccess"),
    ("hook output", "hookShowOutput"),
];

const TARGET_FIELDS: &[(&str, &str)] = &[
    ("command", "command"),
    ("args", "args"),
    ("shell", "shell"),
    ("provider", "provider"),
    ("prompt", "prompt"),
    ("prompt file", "promptFile"),
    ("model", "model"),
    ("agent", "agent"),
    ("config isolation", "configIsolation"),
    ("workflow", "workflowId"),
    ("cwd", "cwd"),
    ("env", "env"),
    ("timeout", "timeoutMs"),
    ("account", "account"),
];

/// What differs between the loop before and after, in words. Values are
/// compared, not printed, so an environment value never shows.
fn changed(edited: &LoopEdited) -> Vec<&'static str> {
    let (before, after) = (json(&edited.before), json(&edited.after));
    let differs = |a: &Value, b: &Value, key: &str| a.get(key) != b.get(key);
    let mut words: Vec<&'static str> = FIELDS
        .iter()
        .filter(|(_, key)| differs(&before, &after, key))
        .map(|(label, _)| *label)
        .collect();
    let (bt, at) = (&before["target"], &after["target"]);
    words.extend(
        TARGET_FIELDS
            .iter()
            .filter(|(_, key)| differs(bt, at, key))
            .map(|(label, _)| *label),
    );
    words
}

fn json(lp: &Loop) -> Value {
    serde_json::to_value(lp).unwrap_or(Value::Null)
}

/// `edited <id> (<name>): schedule, timeout; next <instant>`, or the loop
/// as `--json`.
fn print_edited(edited: &LoopEdited, out: &mut Printer) -> std::io::Result<()> {
    let lp = &edited.after;
    if out.json {
        return out.json_of(&redact::loop_json(lp));
    }
    let words = changed(edited);
    let what = if words.is_empty() {
        "nothing changed".to_owned()
    } else {
        words.join(", ")
    };
    let next = match lp.next_run_at {
        Some(t) => format!("next {t}"),
        None => format!("no next run ({})", lp.status),
    };
    let name = crate::render::escape_controls(&lp.name, &[]);
    out.line(&format!("edited {} ({name}): {what}; {next}", lp.id))
}
