//! The command line, stage two: raw values become core types (SPEC §7.3).
//!
//! Nothing here opens the database or spawns anything, so a rejected
//! `create` writes no row and does not even create the data directory. The
//! one input from the host is its time zone, for dates without an offset,
//! as JavaScript's `Date` reads them in the original.
//!
//! Checks run in the order of the SPEC §7.3 table: the schedule, then the
//! policy options, then the target; the first failure is reported with the
//! SPEC wording. Departures from 0.3.1: `--timeout 0` is rejected (SPEC §9
//! item 28), `--tz` is new, and `--no-shell` commands get the whitespace
//! check of workflow steps (SPEC §9 item 27, done by core validation).

use std::collections::BTreeMap;
use std::str::FromStr;

use anyhow::{Context as _, Result, anyhow, bail, ensure};
use chrono::{Local, NaiveDateTime, TimeZone};
use loops_core::{
    Account, AgentProvider, AgentTarget, Anchor, CatchUp, Clock, CommandTarget, ConfigIsolation,
    DEFAULT_DYNAMIC_INTERVAL_MS, DURATION_FORMS, DurationError, LoopStatus, NewLoop, Overlap,
    RunStatus, Schedule, Target, Timestamp, WorkflowId, WorkflowTarget,
    agent_value_reads_as_option, bare_milliseconds, parse_duration, parse_positive_duration,
    prompt_option_message, prompt_reads_as_option, validate_new_loop,
};

use crate::args::{AccountOptions, CreateAgent, CreateCommand, CreateWorkflow, LoopOptions};
use crate::request::Warnings;

pub(crate) mod agent;
pub(crate) mod hooks;
pub(crate) mod listen;
pub(crate) mod policy;

/// `create command`: the validated loop.
pub(crate) fn command_loop(warnings: &mut Warnings, args: &CreateCommand) -> Result<NewLoop> {
    if args.timeout.as_deref().is_some_and(agent::is_unlimited) {
        agent::refuse_unlimited("command")?;
    }
    let (mut new, timeout_ms) = loop_options(warnings, &args.options, args.timeout.as_deref())?;
    let mut target = CommandTarget::new(args.command.clone());
    // SPEC §7.3, §10 item 91: CLI command loops run through a shell unless
    // --no-shell is given (JSON and library targets default to no shell).
    target.shell = Some(!args.no_shell);
    target.args = (!args.args.is_empty()).then(|| args.args.clone());
    target.cwd = args.cwd.clone();
    target.env = env_map(&args.env)?;
    target.timeout_ms = timeout_ms;
    target.account = account(&args.account)?;
    new.target = Target::Command(target);
    checked(new)
}

/// `create agent`: the validated loop. `file` is `--prompt-file` read by
/// the caller: its absolute path and its text, which is checked as a
/// `--prompt` would be and stored as the prompt 0.3.1 would run. `dir`
/// makes an `--add-dir` absolute.
pub(crate) fn agent_loop(
    warnings: &mut Warnings,
    args: &CreateAgent,
    file: Option<(String, String)>,
    dir: impl Fn(&str) -> Result<String>,
) -> Result<NewLoop> {
    let (mut new, _) = loop_options(warnings, &args.options, None)?;
    let timeout = args
        .timeout
        .as_deref()
        .map(agent::wall_clock)
        .transpose()?
        .unwrap_or_default();
    let provider = provider(&args.provider)?;
    let options = agent::AgentChange::of(&args.agent_options.flags(), false, dir)?;
    let isolation = isolation(&args.config_isolation)?;
    let (prompt, prompt_file) = match file {
        Some((path, text)) => (text, Some(path)),
        None => (args.prompt.clone().unwrap_or_default(), None),
    };
    let flag = if prompt_file.is_some() {
        "--prompt-file"
    } else {
        "--prompt"
    };
    let mut target = AgentTarget::new(provider, prompt);
    target.prompt_file = prompt_file;
    target.cwd = args.cwd.clone();
    target.model = args.model.clone();
    target.agent = args.agent.clone();
    target.timeout_ms = timeout;
    target.config_isolation = Some(isolation);
    target.env = env_map(&args.env)?;
    target.account = account(&args.account)?;
    options.apply(&mut target);
    new.target = Target::Agent(target);
    checked(new).map_err(|e| {
        // The file's text is checked as --prompt is; say which flag gave it.
        match flag {
            "--prompt-file" => anyhow!("{}", e.to_string().replace("--prompt", flag)),
            _ => e,
        }
    })
}

/// Runs the core checks on a command or agent loop (`create`, `edit`),
/// saying in flags what core says of the stored fields.
pub(crate) fn checked(new: NewLoop) -> Result<NewLoop> {
    validate_new_loop(&new).map_err(|e| {
        let prompt = match &new.target {
            Target::Agent(target) => Some(target.prompt.as_str()),
            _ => None,
        };
        if e.field == "target.command" && e.message.contains("without spaces") {
            anyhow!(
                "--cmd must be a single executable without spaces when --no-shell is given; \
                 pass its arguments with --arg, or drop --no-shell"
            )
        } else if e.field == "target.prompt" && prompt.is_some_and(prompt_reads_as_option) {
            anyhow!(prompt_option_message("--prompt"))
        } else if e.field == "target.env"
            && let Some(rest) = e.message.strip_prefix("target.env")
        {
            // Core names the stored field; the name came from `--env`.
            anyhow!("--env{rest}")
        } else if matches!(new.target, Target::Agent(_))
            && let Some(message) = agent::flag_message(&e)
        {
            anyhow!(message)
        } else if let Target::Agent(target) = &new.target
            && let Some(option) = agent_value_reads_as_option(target)
            && e.field == format!("target.{}", option.key)
        {
            anyhow!(option.message(&format!("--{}", option.key)))
        } else {
            e.into()
        }
    })?;
    Ok(new)
}

/// `--provider`.
pub(crate) fn provider(value: &str) -> Result<AgentProvider> {
    AgentProvider::from_str(value).map_err(|_| {
        anyhow!(
            "unsupported provider: {value} (use one of claude, cursor, codewith, aicopilot, opencode, codex)"
        )
    })
}

/// `--config-isolation`.
pub(crate) fn isolation(value: &str) -> Result<ConfigIsolation> {
    ConfigIsolation::from_str(value).map_err(|_| anyhow!("--config-isolation must be safe or none"))
}

/// `create workflow`: the validated loop. Its target names no workflow yet
/// (a placeholder id): `--workflow` is resolved against the store, which
/// this stage does not open, and the caller sets the id it finds.
pub(crate) fn workflow_loop(warnings: &mut Warnings, args: &CreateWorkflow) -> Result<NewLoop> {
    let (mut new, _) = loop_options(warnings, &args.options, None)?;
    // SPEC §1.3: a workflow timeout of 0 means none, so unlike the step
    // timeouts of command and agent loops, `--timeout 0` is accepted.
    let timeout_ms = args
        .timeout
        .as_deref()
        .map(|t| duration(t, "--timeout"))
        .transpose()?
        .filter(|ms| *ms > 0);
    new.target = Target::Workflow(WorkflowTarget {
        workflow_id: WorkflowId::from_bytes([0; 6]),
        input: None,
        timeout_ms,
    });
    validated(new)
}

/// Runs the core checks (name, schedule, options, target) before anything
/// touches the database.
fn validated(new: NewLoop) -> Result<NewLoop> {
    validate_new_loop(&new)?;
    Ok(new)
}

/// The shared options, as a loop with a placeholder target, plus the
/// resolved `--timeout`.
fn loop_options(
    warnings: &mut Warnings,
    opts: &LoopOptions,
    timeout: Option<&str>,
) -> Result<(NewLoop, Option<u64>)> {
    let schedule = schedule(warnings, opts)?;
    // The target is filled in by the caller.
    let mut new = NewLoop::new(
        opts.name.clone(),
        schedule,
        Target::Command(CommandTarget::new("")),
    );
    new.description = opts.description.clone();
    new.catch_up = catch_up(&opts.catch_up)?;
    new.catch_up_limit = positive_int(&opts.catch_up_limit, "--catch-up-limit")?;
    new.overlap = overlap(&opts.overlap)?;
    new.max_attempts = positive_int(&opts.attempts, "--attempts")?;
    new.retry_delay_ms = positive_duration(&opts.retry_delay, "--retry-delay")?;
    new.lease_ms = positive_duration(&opts.lease, "--lease")?;
    new.expires_at = opts
        .expires_at
        .as_deref()
        .map(|v| expires_at(warnings, v))
        .transpose()?;
    new.policy = self::policy::policy(&opts.policy)?;
    new.hooks = hooks::hooks(&opts.hooks)?;
    // SPEC §9 item 28: a zero timeout would time out at once.
    let timeout_ms = timeout
        .map(|t| positive_duration(t, "--timeout"))
        .transpose()?;
    Ok((new, timeout_ms))
}

/// `--catch-up`.
pub(crate) fn catch_up(value: &str) -> Result<CatchUp> {
    CatchUp::from_str(value).map_err(|_| anyhow!("--catch-up must be none, latest, or all"))
}

/// `--overlap`.
pub(crate) fn overlap(value: &str) -> Result<Overlap> {
    Overlap::from_str(value).map_err(|_| anyhow!("--overlap must be skip or allow"))
}

/// `--expires-at`.
pub(crate) fn expires_at(warnings: &mut Warnings, value: &str) -> Result<Timestamp> {
    time_option(warnings, value, "--expires-at", "the loop expires at once")
}

/// A duration option, with the SPEC's `invalid duration: <value>` and the
/// accepted forms. A value that would not show in that message (blank, or
/// holding control characters that would break the line) is quoted
/// instead, with the option it came from, so the message still says what
/// to fix. A bare number under a second is refused (issue 28): `--every 10`
/// is rarely meant as 10 ms, so it needs its unit written out. A bare
/// number of 1000 or more keeps the original's meaning, milliseconds.
pub(crate) fn duration(value: &str, flag: &str) -> Result<u64> {
    refuse_bare_milliseconds(value, flag)?;
    parse_duration(value).map_err(|e| with_flag(e, value, flag))
}

/// [`duration`], which must also be greater than zero.
pub(crate) fn positive_duration(value: &str, flag: &str) -> Result<u64> {
    refuse_bare_milliseconds(value, flag)?;
    parse_positive_duration(value, flag).map_err(|e| with_flag(e, value, flag))
}

pub(crate) fn refuse_bare_milliseconds(value: &str, flag: &str) -> Result<()> {
    if bare_milliseconds(value) {
        let n = value.trim();
        bail!("{flag} {n} is {n} ms; write {n}s, or {n}ms if you mean it");
    }
    Ok(())
}

fn with_flag(e: DurationError, value: &str, flag: &str) -> anyhow::Error {
    let unreadable = value.trim().is_empty() || value.chars().any(char::is_control);
    if unreadable && matches!(e, DurationError::Invalid { .. }) {
        return anyhow!("invalid duration: {value:?} for {flag} ({DURATION_FORMS})");
    }
    e.into()
}

/// The forms `--at` and `--expires-at` take, as their messages list them.
const TIME_FORMS: &str = "use ISO-8601 such as 2026-01-01T09:00:00Z, a local 2026-01-01T09:00, \
     now, +10m, in 1h30m, today 17:00 or tomorrow 09:00";

/// A time option (`--at`, `--expires-at`): [`instant`] relative to now,
/// with a warning when it is already past (`past` says what that means).
pub(crate) fn time_option(
    warnings: &mut Warnings,
    value: &str,
    flag: &str,
    past: &str,
) -> Result<Timestamp> {
    let now = loops_exec::SystemClock.now();
    // A blank value, or one with control characters, is quoted so the
    // message still shows what was given.
    let unreadable = value.trim().is_empty() || value.chars().any(char::is_control);
    let shown = if unreadable {
        format!("{value:?}")
    } else {
        value.to_owned()
    };
    let at = instant_from(value, now)
        .ok_or_else(|| anyhow!("invalid {flag}: {shown} ({TIME_FORMS})"))?;
    if at < now {
        warnings.push(format!("{flag} {at} is in the past; {past}"));
    }
    Ok(at)
}

/// The schedule flags of `opts` (`--at`, `--every`, `--cron` with `--tz`,
/// `--dynamic`): exactly one schedule.
pub(crate) fn schedule(warnings: &mut Warnings, opts: &LoopOptions) -> Result<Schedule> {
    let chosen = [
        opts.at.is_some(),
        opts.every.is_some(),
        opts.cron.is_some(),
        opts.dynamic,
    ];
    if opts.policy.trigger_only {
        // Issue 30, T1: never due; the schedule stored is a placeholder
        // that nothing reads while the loop runs on triggers only.
        ensure!(
            !chosen.contains(&true),
            "--trigger-only runs the loop on triggers only; leave out --at, --every, --cron \
             and --dynamic"
        );
        return Ok(Schedule::Once {
            at: loops_core::Clock::now(&loops_exec::SystemClock),
        });
    }
    ensure!(
        chosen.iter().filter(|c| **c).count() == 1,
        "choose exactly one schedule: --at, --every, --cron, or --dynamic"
    );
    if opts.tz.is_some() && opts.cron.is_none() {
        bail!("--tz requires --cron: only cron schedules are evaluated in a time zone");
    }
    if let Some(at) = &opts.at {
        let at = time_option(warnings, at, "--at", "the loop runs at the next tick")?;
        return Ok(Schedule::Once { at });
    }
    if let Some(every) = &opts.every {
        // The original says `interval everyMs must be > 0` (SPEC §10 item
        // 11); issue 16 §6 keeps stored field names out of messages.
        return Ok(Schedule::Interval {
            every_ms: positive_duration(every, "--every")?,
            anchor: Some(Anchor::FixedRate),
        });
    }
    if let Some(expression) = &opts.cron {
        return Ok(Schedule::Cron {
            expression: expression.clone(),
            timezone: match &opts.tz {
                Some(tz) => Some(tz.trim().to_owned()),
                None => creating_zone(warnings),
            },
        });
    }
    // SPEC §7.3: `--dynamic` stores its default interval, as the original
    // does, so the schedule prints `"minIntervalMs": 60000`.
    Ok(Schedule::Dynamic {
        min_interval_ms: Some(DEFAULT_DYNAMIC_INTERVAL_MS),
    })
}

/// The zone a cron loop without `--tz` records (issue 28): the creating
/// shell's, so that it fires on its maker's clock. Without one (a `TZ`
/// that names no zone, an unnamed system zone) it runs on the daemon's
/// local time, as the original's rows do.
fn creating_zone(warnings: &mut Warnings) -> Option<String> {
    let tz = std::env::var("TZ").ok();
    match crate::zone::shell_zone(tz.as_deref()) {
        Ok(zone) => zone,
        Err(tz) => {
            warnings.push(format!(
                "TZ={} names no zone such as Europe/Berlin; the loop runs on the daemon's local time; give --tz to choose its zone",
                tz.chars().take(64).collect::<String>()
            ));
            None
        }
    }
}

/// `--account`/`--account-tool`.
pub(crate) fn account(opts: &AccountOptions) -> Result<Option<Account>> {
    match (&opts.account, &opts.account_tool) {
        (None, Some(_)) => bail!("--account-tool requires --account"),
        (None, None) => Ok(None),
        (Some(profile), tool) => Ok(Some(Account {
            profile: profile.clone(),
            tool: tool.clone(),
        })),
    }
}

/// Repeated `--env KEY=VALUE`, split at the first `=`, a later key
/// winning; `None` when there are none. A pair without `=` gets 0.5.11's
/// message (agents note §10.3); the name is checked by core, which says
/// what a name may hold (an empty one too).
pub(crate) fn env_map(pairs: &[String]) -> Result<Option<BTreeMap<String, String>>> {
    if pairs.is_empty() {
        return Ok(None);
    }
    let mut env = BTreeMap::new();
    for pair in pairs {
        let (key, value) = pair
            .split_once('=')
            .with_context(|| format!("invalid --env value, expected key=value: {pair}"))?;
        env.insert(key.to_owned(), value.to_owned());
    }
    Ok(Some(env))
}

/// A date as JavaScript's `Date` parses it (SPEC §7.3): ISO-8601 with `Z`
/// or an offset is exact, a bare date is UTC midnight, and a date-time
/// without an offset is host local time.
pub(crate) fn instant(input: &str) -> Option<Timestamp> {
    if let Ok(t) = Timestamp::parse(input) {
        return Some(t);
    }
    let naive = Timestamp::parse_naive(input)?;
    local_instant(naive)
}

/// [`instant`], plus the relative forms of issue 16 §6: `now`, `+10m` and
/// `in 10m` (any duration, sums included), and `today 17:00` or `tomorrow
/// 09:00[:30]` in host local time.
fn instant_from(input: &str, now: Timestamp) -> Option<Timestamp> {
    if let Some(t) = instant(input) {
        return Some(t);
    }
    let text = input.trim();
    if text.eq_ignore_ascii_case("now") {
        return Some(now);
    }
    let ahead = text
        .strip_prefix('+')
        .or_else(|| strip_word(text, "in"))
        .filter(|rest| !rest.starts_with(char::is_whitespace));
    if let Some(rest) = ahead {
        let ms = parse_duration(rest).ok()?;
        return now.checked_add_ms(i64::try_from(ms).ok()?);
    }
    let (days, clock) = if let Some(rest) = strip_word(text, "today") {
        (0, rest)
    } else {
        (1, strip_word(text, "tomorrow")?)
    };
    let time = chrono::NaiveTime::parse_from_str(clock.trim(), "%H:%M")
        .or_else(|_| chrono::NaiveTime::parse_from_str(clock.trim(), "%H:%M:%S"))
        .ok()?;
    let today = now.to_datetime().with_timezone(&Local).date_naive();
    let date = today.checked_add_days(chrono::Days::new(days))?;
    local_instant(date.and_time(time))
}

/// `text` after a leading `word` and at least one space, ignoring case.
fn strip_word<'a>(text: &'a str, word: &str) -> Option<&'a str> {
    let head = text.get(..word.len())?;
    let rest = &text[word.len()..];
    (head.eq_ignore_ascii_case(word) && rest.starts_with(' ')).then(|| rest.trim_start())
}

/// A host-local wall time as an instant. A repeated wall time (DST fall
/// back) is the earlier instant; a skipped one (spring forward) moves
/// forward by the gap, as JavaScript does.
fn local_instant(naive: NaiveDateTime) -> Option<Timestamp> {
    let resolved = Local.from_local_datetime(&naive).earliest().or_else(|| {
        let later = naive.checked_add_signed(chrono::TimeDelta::hours(1))?;
        Local.from_local_datetime(&later).earliest()
    })?;
    Timestamp::from_datetime(&resolved)
}

/// A positive integer option, with the SPEC wording
/// `<flag> must be a positive integer`.
pub(crate) fn positive_int(value: &str, flag: &str) -> Result<u32> {
    value
        .trim()
        .parse::<u32>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| anyhow!("{flag} must be a positive integer"))
}

/// `--offset` of `list` and `runs`: how many to skip, 0 or more.
pub(crate) fn offset(value: Option<&str>) -> Result<Option<u32>> {
    value
        .map(|v| {
            v.trim()
                .parse::<u32>()
                .map_err(|_| anyhow!("--offset must be a whole number, 0 or more, not {v:?}"))
        })
        .transpose()
}

/// `--status` of `list`.
pub(crate) fn loop_status(value: &str) -> Result<LoopStatus> {
    LoopStatus::from_str(value)
        .map_err(|_| anyhow!("--status must be active, paused, stopped, or expired"))
}

/// `--status` of `runs`.
pub(crate) fn run_status(value: &str) -> Result<RunStatus> {
    RunStatus::from_str(value).map_err(|_| {
        anyhow!("--status must be running, succeeded, failed, timed_out, abandoned, or skipped")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daemon_grace_default_is_the_schedulers() {
        // `daemon install` leaves the default out of the service.
        let ms = duration(crate::args::daemon::DEFAULT_GRACE_FLAG, "--grace").unwrap();
        assert_eq!(u128::from(ms), loops_scheduler::DEFAULT_GRACE.as_millis());
    }

    #[test]
    fn a_bare_number_under_a_second_is_refused_and_a_past_time_warned_about() {
        assert_eq!(
            duration("10", "--every").unwrap_err().to_string(),
            "--every 10 is 10 ms; write 10s, or 10ms if you mean it"
        );
        assert_eq!(
            positive_duration(" 999 ", "--lease")
                .unwrap_err()
                .to_string(),
            "--lease 999 is 999 ms; write 999s, or 999ms if you mean it"
        );
        assert_eq!(duration("10ms", "--every").unwrap(), 10);
        assert_eq!(duration("1000", "--every").unwrap(), 1000);
        assert_eq!(duration("0", "--since").unwrap(), 0);
        let mut warnings = Warnings::default();
        time_option(&mut warnings, "2001-01-01T00:00:00Z", "--at", "it runs now").unwrap();
        assert_eq!(
            warnings.into_vec(),
            ["--at 2001-01-01T00:00:00.000Z is in the past; it runs now"]
        );
    }

    #[test]
    fn dates_parse_like_javascript() {
        let utc = |s: &str| instant(s).map(|t| t.to_string());
        assert_eq!(
            utc("2026-01-01").as_deref(),
            Some("2026-01-01T00:00:00.000Z")
        );
        assert_eq!(
            utc("2026-01-01T09:00:00+01:00").as_deref(),
            Some("2026-01-01T08:00:00.000Z")
        );
        assert!(utc("soon").is_none());
        // A naive date-time is host local: it round-trips through Local.
        let local = instant("2026-06-01T12:30:00").unwrap();
        let back = local.to_datetime().with_timezone(&Local).naive_local();
        assert_eq!(back.to_string(), "2026-06-01 12:30:00");
    }

    #[test]
    fn relative_times_count_from_now() {
        let now = Timestamp::parse("2026-03-10T12:00:00Z").unwrap();
        let at = |s: &str| instant_from(s, now).map(|t| t.to_string());
        assert_eq!(at("now").as_deref(), Some("2026-03-10T12:00:00.000Z"));
        assert_eq!(at("+10m").as_deref(), Some("2026-03-10T12:10:00.000Z"));
        assert_eq!(at("in 1h30m").as_deref(), Some("2026-03-10T13:30:00.000Z"));
        assert_eq!(at("IN  2d").as_deref(), Some("2026-03-12T12:00:00.000Z"));
        // The ISO forms come first, unchanged.
        assert_eq!(
            at("2026-01-01T00:00:00Z").as_deref(),
            Some("2026-01-01T00:00:00.000Z")
        );
        for bad in [
            "+ 10m",
            "in",
            "in10m",
            "+",
            "tomorrow",
            "tomorrow 25:00",
            "yesterday 9:00",
        ] {
            assert_eq!(at(bad), None, "{bad}");
        }
        // Today and tomorrow are host local: they round-trip through Local.
        let local = |s: &str| {
            let t = instant_from(s, now).unwrap();
            t.to_datetime().with_timezone(&Local).naive_local()
        };
        let today = now.to_datetime().with_timezone(&Local).date_naive();
        assert_eq!(local("tomorrow 09:00").date(), today.succ_opt().unwrap());
        assert_eq!(local("today 17:30:15").time().to_string(), "17:30:15");
    }

    #[test]
    fn positive_ints_use_the_spec_wording() {
        assert_eq!(positive_int("3", "--attempts").unwrap(), 3);
        for bad in ["0", "-1", "x", "1.5", ""] {
            assert_eq!(
                positive_int(bad, "--attempts").unwrap_err().to_string(),
                "--attempts must be a positive integer"
            );
        }
    }

    #[test]
    fn env_pairs_split_on_the_first_equals_sign() {
        let env = env_map(&["A=1=2".into(), "B=".into()]).unwrap().unwrap();
        assert_eq!(env["A"], "1=2");
        assert_eq!(env["B"], "");
        assert_eq!(
            env_map(&["nope".into()]).unwrap_err().to_string(),
            "invalid --env value, expected key=value: nope"
        );
    }
}
