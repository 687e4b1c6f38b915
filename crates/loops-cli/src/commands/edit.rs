//! `loops edit <loop>` and `loops rename <loop> <new-name>` (issue 16 §5):
//! a loop changed in place, keeping its id, status, creation time and runs.
//!
//! The flags are `create`'s and are resolved by the same functions
//! (`resolve`) into a typed change (`Edit`) before the store is opened;
//! what depends on the stored loop (a zone without a new expression, flags
//! of another kind of target, the account) is decided against it. The
//! result passes the same checks (`resolve::checked`, then the store's
//! `validate_new_loop`). The change is applied by `Store::edit_loop` to the
//! loop as stored under the write lock, so a daemon advancing the loop at
//! that moment loses nothing.

mod target;

use anyhow::{Result, bail};
use loops_core::{CatchUp, Loop, NewLoop, Overlap, Schedule, Target, Timestamp};
use loops_store::{LoopEdited, loop_settings};
use serde_json::Value;

use super::create::{cwd, target_cwd, warn_if_name_shared};
use super::now;
use crate::args::LoopOptions;
use crate::args::edit::{EditArgs, RenameArgs};
use crate::context::Context;
use crate::exit::Outcome;
use crate::redact;
use crate::render::Printer;
use crate::request::{self, Document, Request, Warnings};
use crate::resolve;
use crate::resolve::hooks::HooksChange;
use crate::resolve::policy::PolicyChange;

/// `loops edit`.
pub(crate) fn edit(ctx: &Context, args: &EditArgs, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |warnings| {
        if !gives_anything(args) {
            bail!(
                "nothing to change: give at least one of --at, --every, --cron, --dynamic, --tz \
                 (schedule); --catch-up, --catch-up-limit, --overlap, --attempts, --retry-delay, \
                 --lease, --expires-at, -d/--description, --label, --expires-after-runs, \
                 --pause-after-failures, --backoff, --max-retry-delay, --skip-exit-code (policy); \
                 --cmd, --arg, --no-args, --shell, --no-shell (command loops); --provider, \
                 --prompt, --prompt-file, --model, --agent, --config-isolation, \
                 --permission-mode, --sandbox, --add-dir, --effort, --idle-timeout, \
                 --allow-tool, --allow-command, --safety-reason, --[no-]manual-break-glass \
                 (agent loops); --workflow (workflow loops); --cwd, --env, --no-env, --timeout, \
                 --account, --account-tool; --on-failure, \
                 --on-success, --hook-show-output (hooks). See `loops edit --help`"
            );
        }
        // What the target flags name outside the store first: a file or
        // directory that blocks (a FIFO, a slow mount) must not hold the
        // write lock the daemon's claims wait on.
        let outside = target::Outside::of(args)?;
        let settings = Settings::of(warnings, args)?;
        Ok(Edit {
            target: args.target.clone(),
            workflow: args.workflow.clone(),
            settings,
            target_change: target::TargetChange::of(args, outside)?,
        })
    })
}

/// `loops rename`.
pub(crate) fn rename(ctx: &Context, args: &RenameArgs, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |_| {
        Ok(Rename {
            target: args.target.clone(),
            name: args.name.clone(),
        })
    })
}

/// The typed request of `edit`: one loop, and the changes its flags give.
struct Edit {
    /// The loop, by id or name.
    target: String,
    /// `--workflow`, by id whatever its status, else the active workflow
    /// of that name, as create does.
    workflow: Option<String>,
    /// The schedule, the options, the policy and the hooks.
    settings: Settings,
    /// The target's flags.
    target_change: target::TargetChange,
}

/// What `edit` returns: the loop before and after.
struct Edited(LoopEdited);

impl Request for Edit {
    type Document = Edited;

    fn run(self, ctx: &Context, warnings: &mut Warnings) -> Result<Edited> {
        let Edit {
            target,
            workflow,
            settings,
            target_change,
        } = self;
        let store = ctx.open_store()?;
        let lp = store.require_loop(&target)?;
        // A workflow is looked up before the loop is locked.
        let workflow = match &workflow {
            Some(w) => Some(store.require_workflow(w)?.id),
            None => None,
        };
        // A pool given is checked before the loop is locked (Q2).
        super::pools::require_pool(Some(&store), settings.policy.new_pool())?;
        let workflow_id = match (&workflow, &lp.target) {
            (Some(id), _) => Some(*id),
            (None, Target::Workflow(t)) => Some(t.workflow_id),
            _ => None,
        };
        if let Some(spec) = workflow_id
            .map(|id| store.get_workflow(&id))
            .transpose()?
            .flatten()
        {
            let pool = settings.policy.pool_after(lp.policy.pool.as_deref());
            super::pools::refuse_shared_pool(pool, &spec)?;
        }
        let mut settings = settings;
        if let Some(after) = &mut settings.policy.after {
            crate::resolve::policy::resolve_after(&store, after, Some(&lp))?;
        }
        let cwd_given = target_change.cwd.is_some();
        let edited = store.edit_loop(&lp.id, now(), |stored| {
            let mut new = loop_settings(stored);
            settings.apply(stored, &mut new)?;
            target_change.apply(stored, workflow, &mut new.target)?;
            checked(new)
        })?;
        if cwd_given && let Some(dir) = target_cwd(&edited.after.target) {
            cwd::warn_if_missing(warnings, dir);
        }
        if edited.after.policy.watch != edited.before.policy.watch {
            super::create::warn_if_watch_missing(warnings, &edited.after);
        }
        Ok(Edited(edited))
    }
}

impl Document for Edited {
    fn json(&self, out: &mut Printer) -> Result<()> {
        Ok(out.json_of(&redact::loop_json(&self.0.after))?)
    }

    /// `edited <id> (<name>): schedule, timeout; next <instant>`.
    fn human(&self, _: &Context, out: &mut Printer) -> Result<()> {
        let lp = &self.0.after;
        let words = changed(&self.0);
        let what = if words.is_empty() {
            "nothing changed".to_owned()
        } else {
            words.join(", ")
        };
        let next = match lp.next_run_at {
            Some(t) => format!("next {}", crate::human::local_iso(t)),
            None => format!("no next run ({})", lp.status),
        };
        let name = crate::render::escape_controls(&lp.name, &[]);
        Ok(out.line(&format!("edited {} ({name}): {what}; {next}", lp.id))?)
    }
}

/// The typed request of `rename`: one loop, and its new name.
struct Rename {
    /// The loop, by id or name.
    target: String,
    name: String,
}

/// What `rename` returns: the loop before and after.
struct Renamed(LoopEdited);

impl Request for Rename {
    type Document = Renamed;

    /// Renames the loop, warning as `create` does when another loop has
    /// the new name (issue 28).
    fn run(self, ctx: &Context, warnings: &mut Warnings) -> Result<Renamed> {
        let store = ctx.open_store()?;
        let lp = store.require_loop(&self.target)?;
        let edited = store.edit_loop(&lp.id, now(), |stored| {
            let mut settings = loop_settings(stored);
            settings.name = self.name;
            checked(settings)
        })?;
        warn_if_name_shared(warnings, &store, &edited.after);
        Ok(Renamed(edited))
    }
}

impl Document for Renamed {
    fn json(&self, out: &mut Printer) -> Result<()> {
        Ok(out.json_of(&redact::loop_json(&self.0.after))?)
    }

    /// `renamed <id> <old> → <new>`.
    fn human(&self, _: &Context, out: &mut Printer) -> Result<()> {
        let LoopEdited { before, after } = &self.0;
        Ok(out.line(&format!(
            "renamed {} {} → {}",
            after.id,
            crate::render::escape_controls(&before.name, &[]),
            after.name
        ))?)
    }
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
        || !a.agent_options.flags().given().is_empty()
}

/// The settings flags of `edit` but the target's, resolved: each field is
/// `None` when its flag is not given, and the stored value then stays.
struct Settings {
    schedule: ScheduleChange,
    catch_up: Option<CatchUp>,
    catch_up_limit: Option<u32>,
    overlap: Option<Overlap>,
    max_attempts: Option<u32>,
    retry_delay_ms: Option<u64>,
    lease_ms: Option<u64>,
    /// `--expires-at`: `Some(None)` (from `never`) removes the expiry.
    expires_at: Option<Option<Timestamp>>,
    /// `-d/--description`: `Some(None)` (from `''`) removes it.
    description: Option<Option<String>>,
    pub(crate) policy: PolicyChange,
    hooks: HooksChange,
}

impl Settings {
    /// Resolves the flags of `args`, in the order the SPEC §7.3 table
    /// checks them: the schedule, then the options.
    fn of(warnings: &mut Warnings, args: &EditArgs) -> Result<Settings> {
        let schedule = ScheduleChange::of(warnings, args)?;
        let catch_up = args
            .catch_up
            .as_deref()
            .map(resolve::catch_up)
            .transpose()?;
        let catch_up_limit = args
            .catch_up_limit
            .as_deref()
            .map(|v| resolve::positive_int(v, "--catch-up-limit"))
            .transpose()?;
        let overlap = args.overlap.as_deref().map(resolve::overlap).transpose()?;
        let max_attempts = args
            .attempts
            .as_deref()
            .map(|v| resolve::positive_int(v, "--attempts"))
            .transpose()?;
        let retry_delay_ms = args
            .retry_delay
            .as_deref()
            .map(|v| resolve::positive_duration(v, "--retry-delay"))
            .transpose()?;
        let lease_ms = args
            .lease
            .as_deref()
            .map(|v| resolve::positive_duration(v, "--lease"))
            .transpose()?;
        let expires_at = match args.expires_at.as_deref() {
            None => None,
            Some(v) if v.trim() == "never" => Some(None),
            Some(v) => Some(Some(resolve::expires_at(warnings, v)?)),
        };
        Ok(Settings {
            schedule,
            catch_up,
            catch_up_limit,
            overlap,
            max_attempts,
            retry_delay_ms,
            lease_ms,
            expires_at,
            description: args
                .description
                .as_ref()
                .map(|v| (!v.is_empty()).then(|| v.clone())),
            policy: resolve::policy::change(&args.policy, true)?,
            hooks: resolve::hooks::change(&args.hooks)?,
        })
    }

    /// Applies the flags to `new`, the settings of `stored`.
    fn apply(self, stored: &Loop, new: &mut NewLoop) -> Result<()> {
        let scheduled = match self.schedule.apply(&stored.schedule)? {
            Some(schedule) => {
                new.schedule = schedule;
                true
            }
            None => false,
        };
        if let Some(v) = self.catch_up {
            new.catch_up = v;
        }
        if let Some(v) = self.catch_up_limit {
            new.catch_up_limit = v;
        }
        if let Some(v) = self.overlap {
            new.overlap = v;
        }
        if let Some(v) = self.max_attempts {
            new.max_attempts = v;
        }
        if let Some(v) = self.retry_delay_ms {
            new.retry_delay_ms = v;
        }
        if let Some(v) = self.lease_ms {
            new.lease_ms = v;
        }
        if let Some(v) = self.expires_at {
            new.expires_at = v;
        }
        if let Some(v) = self.description {
            new.description = v;
        }
        let trigger_only = self.policy.trigger_only();
        if scheduled && trigger_only {
            bail!("--trigger-only runs the loop on triggers only; leave out the schedule flags");
        }
        self.policy.apply(&mut new.policy)?;
        // A schedule puts a loop on triggers only back on the clock.
        if scheduled {
            new.policy.trigger_only = false;
        }
        self.hooks.apply(&mut new.hooks);
        Ok(())
    }
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

/// The schedule flags, resolved as far as they go without the stored
/// schedule.
enum ScheduleChange {
    /// No schedule flag: the stored schedule stays.
    Keep,
    /// A new schedule. `keep_zone`: `--cron` came without `--tz`, so a
    /// stored cron schedule's zone stays.
    Set { schedule: Schedule, keep_zone: bool },
    /// `--tz` alone: a cron schedule moves to that zone and keeps its
    /// expression.
    Zone(String),
}

impl ScheduleChange {
    fn of(warnings: &mut Warnings, args: &EditArgs) -> Result<ScheduleChange> {
        let chosen =
            args.at.is_some() || args.every.is_some() || args.cron.is_some() || args.dynamic;
        if !chosen {
            return Ok(match &args.tz {
                None => ScheduleChange::Keep,
                Some(tz) => ScheduleChange::Zone(tz.clone()),
            });
        }
        // The schedule flags go through create's own resolution; the other
        // fields of `LoopOptions` are not read by it.
        let opts = LoopOptions {
            name: String::new(),
            at: args.at.clone(),
            every: args.every.clone(),
            cron: args.cron.clone(),
            dynamic: args.dynamic,
            tz: args.tz.clone(),
            catch_up: String::new(),
            catch_up_limit: String::new(),
            overlap: String::new(),
            attempts: String::new(),
            retry_delay: String::new(),
            lease: String::new(),
            expires_at: None,
            description: None,
            dry_run: false,
            policy: Default::default(),
            hooks: Default::default(),
        };
        Ok(ScheduleChange::Set {
            schedule: resolve::schedule(warnings, &opts)?,
            keep_zone: args.cron.is_some() && args.tz.is_none(),
        })
    }

    /// The new schedule over `stored`, if the flags give one.
    fn apply(self, stored: &Schedule) -> Result<Option<Schedule>> {
        match (self, stored) {
            (ScheduleChange::Keep, _) => Ok(None),
            (
                ScheduleChange::Set {
                    mut schedule,
                    keep_zone,
                },
                stored,
            ) => {
                // A new expression alone keeps the stored zone.
                if keep_zone
                    && let (
                        Schedule::Cron { timezone, .. },
                        Schedule::Cron {
                            timezone: stored, ..
                        },
                    ) = (&mut schedule, stored)
                {
                    *timezone = stored.as_ref().map(|tz| tz.trim().to_owned());
                }
                Ok(Some(schedule))
            }
            (ScheduleChange::Zone(tz), Schedule::Cron { expression, .. }) => {
                Ok(Some(Schedule::Cron {
                    expression: expression.clone(),
                    timezone: Some(tz.trim().to_owned()),
                }))
            }
            (ScheduleChange::Zone(_), stored) => bail!(
                "--tz requires a cron schedule: this loop's schedule is {}; give --cron with it",
                schedule_kind(stored)
            ),
        }
    }
}

fn schedule_kind(schedule: &Schedule) -> &'static str {
    match schedule {
        Schedule::Once { .. } => "once (--at)",
        Schedule::Interval { .. } => "an interval (--every)",
        Schedule::Cron { .. } => "cron",
        Schedule::Dynamic { .. } => "dynamic",
    }
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
    ("max cost per day", "maxCostPerDayUsd"),
    ("pool", "pool"),
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
    ("permission mode", "permissionMode"),
    ("sandbox", "sandbox"),
    ("add dirs", "addDirs"),
    ("effort", "variant"),
    ("idle timeout", "idleTimeoutMs"),
    ("allowlist", "allowlist"),
    ("break-glass", "manualBreakGlass"),
    ("worktree", "worktree"),
    ("keep worktree", "keepWorktree"),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn cron(expression: &str, timezone: Option<&str>) -> Schedule {
        Schedule::Cron {
            expression: expression.into(),
            timezone: timezone.map(Into::into),
        }
    }

    #[test]
    fn a_zone_or_an_expression_alone_keeps_the_other() {
        let stored = cron("0 9 * * *", Some("UTC"));
        let zone = ScheduleChange::Zone(" Asia/Tokyo ".into());
        assert_eq!(
            zone.apply(&stored).unwrap(),
            Some(cron("0 9 * * *", Some("Asia/Tokyo")))
        );
        let expression = ScheduleChange::Set {
            schedule: cron("0 10 * * *", None),
            keep_zone: true,
        };
        assert_eq!(
            expression.apply(&stored).unwrap(),
            Some(cron("0 10 * * *", Some("UTC")))
        );
        assert_eq!(ScheduleChange::Keep.apply(&stored).unwrap(), None);
        let interval = Schedule::Interval {
            every_ms: 60_000,
            anchor: None,
        };
        let err = ScheduleChange::Zone("UTC".into())
            .apply(&interval)
            .unwrap_err();
        assert!(
            err.to_string().starts_with("--tz requires a cron schedule"),
            "{err}"
        );
    }
}
