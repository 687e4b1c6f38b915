//! `e` in `loops ui`: the selected loop's flags in `$EDITOR` (else `vi`),
//! one per line as `loops edit` takes them (`--every 2h`), and on save
//! `loops edit` with the flags that changed, through the same request as
//! the command. The terminal is given back to the editor and taken again
//! around it; what changed, or the error, goes on the message line, and
//! a file saved unchanged changes nothing.
//!
//! A line is `--flag` and, for a flag that takes one, its value: the rest
//! of the line, as typed (no quotes), with `\n` for a new line and `\\`
//! for a backslash. A list flag (`--label`, `--arg`) is one line per item;
//! changing any item gives the whole new list. A flag whose lines are
//! all deleted is given empty (`--description ''`), which clears what
//! `loops edit` can clear and is refused, with its message, where it
//! cannot. Blank lines and lines starting with `#` are left out.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

use anyhow::{Context as _, Result, bail};
use loops_core::{Loop, Schedule, Target};
use ratatui::crossterm;

use super::model::Board;
use crate::args::Command;
use crate::args::edit::{edit_flags, parse_edit};
use crate::context::Context;
use crate::human::period;

/// Edits the selected loop's flags in the editor; the result goes on the
/// message line.
pub(super) fn edit(ctx: &Context, board: &mut Board, terminal: &mut ratatui::DefaultTerminal) {
    let Some((id, name)) = board.target() else {
        return;
    };
    board.message = Some(match edit_in_editor(ctx, &id.to_string(), terminal) {
        Ok(None) => format!("edit {name}: no change"),
        Ok(Some(changed)) => format!("edited {name}: {}", changed.join(" ")),
        Err(e) => format!("edit {name}: {e:#}"),
    });
    board.reload(ctx);
}

/// The editing of loop `id`: the flags that changed, once applied, or
/// `None` when none did.
fn edit_in_editor(
    ctx: &Context,
    id: &str,
    terminal: &mut ratatui::DefaultTerminal,
) -> Result<Option<Vec<String>>> {
    let lp = ctx.open_store()?.require_loop(id)?;
    let before = flags_text(&lp);
    // New (never a file or link already there), the owner's alone, and
    // removed once read.
    let path =
        std::env::temp_dir().join(format!("loops-edit-{}-{}.flags", lp.id, std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .and_then(|mut f| f.write_all(before.as_bytes()))
        .with_context(|| format!("writing {}", path.display()))?;
    let edited = with_terminal_given_back(terminal, || run_editor(&path));
    let after = std::fs::read_to_string(&path);
    let _removed = std::fs::remove_file(&path);
    if !edited? {
        bail!("the editor failed; nothing was changed");
    }
    let after = after.with_context(|| format!("reading {}", path.display()))?;
    let changed = changed_flags(&parse_lines(&before)?, &parse_lines(&after)?);
    if changed.is_empty() {
        return Ok(None);
    }
    let args = parse_edit(id, &changed).map_err(anyhow::Error::msg)?;
    let done = crate::app::run_request(ctx, Command::Edit(args));
    match done.error {
        None => Ok(Some(changed)),
        Some(error) => bail!(error),
    }
}

/// Runs `work` with the terminal as the shell had it, then takes it back
/// and redraws from scratch.
fn with_terminal_given_back<T>(
    terminal: &mut ratatui::DefaultTerminal,
    work: impl FnOnce() -> T,
) -> Result<T> {
    ratatui::restore();
    let done = work();
    crossterm::terminal::enable_raw_mode().context("taking the terminal back")?;
    crossterm::execute!(std::io::stdout(), crossterm::terminal::EnterAlternateScreen)
        .context("taking the terminal back")?;
    terminal.clear().context("redrawing the dashboard")?;
    Ok(done)
}

/// `$EDITOR path` (else `vi`), through the shell so an editor with its
/// own flags (`code --wait`) works; whether it exited 0.
fn run_editor(path: &Path) -> bool {
    let editor = std::env::var("EDITOR")
        .ok()
        .filter(|e| !e.trim().is_empty())
        .unwrap_or_else(|| "vi".to_owned());
    std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("sh")
        .arg(path)
        .status()
        .is_ok_and(|s| s.success())
}

/// The loop's flags, one per line, as `loops edit` takes them, under a
/// comment that says how.
pub(super) fn flags_text(lp: &Loop) -> String {
    let mut lines = vec![
        format!(
            "# loops edit {}: one flag per line; save to apply what changed,",
            lp.name
        ),
        "# or quit without saving to change nothing. Values run to the end of".to_owned(),
        "# the line (\\n is a new line); a deleted flag is given empty.".to_owned(),
    ];
    let mut flag = |name: &str, value: Option<String>| match value {
        Some(value) => lines.push(format!("--{name} {}", escape(&value))),
        None => lines.push(format!("--{name}")),
    };
    match &lp.schedule {
        Schedule::Once { at } => flag("at", Some(at.to_string())),
        Schedule::Interval { every_ms, .. } => flag("every", Some(period(*every_ms))),
        Schedule::Cron {
            expression,
            timezone,
        } => {
            flag("cron", Some(expression.clone()));
            if let Some(zone) = timezone {
                flag("tz", Some(zone.clone()));
            }
        }
        Schedule::Dynamic { .. } => flag("dynamic", None),
    }
    match &lp.target {
        Target::Command(t) => {
            flag("cmd", Some(t.command.clone()));
            for arg in t.args.iter().flatten() {
                flag("arg", Some(arg.clone()));
            }
            flag(
                if t.shell == Some(false) {
                    "no-shell"
                } else {
                    "shell"
                },
                None,
            );
            if let Some(cwd) = &t.cwd {
                flag("cwd", Some(cwd.clone()));
            }
            if let Some(ms) = t.timeout_ms {
                flag("timeout", Some(period(ms)));
            }
        }
        Target::Agent(t) => {
            flag("provider", Some(t.provider.to_string()));
            match &t.prompt_file {
                Some(file) => flag("prompt-file", Some(file.clone())),
                None => flag("prompt", Some(t.prompt.clone())),
            }
            for (name, value) in [("model", &t.model), ("agent", &t.agent), ("cwd", &t.cwd)] {
                if let Some(value) = value {
                    flag(name, Some(value.clone()));
                }
            }
        }
        Target::Workflow(t) => {
            flag("workflow", Some(t.workflow_id.to_string()));
            if let Some(ms) = t.timeout_ms {
                flag("timeout", Some(period(ms)));
            }
        }
    }
    flag("catch-up", Some(lp.catch_up.to_string()));
    flag("catch-up-limit", Some(lp.catch_up_limit.to_string()));
    flag("overlap", Some(lp.overlap.to_string()));
    flag("attempts", Some(lp.max_attempts.to_string()));
    flag("retry-delay", Some(period(lp.retry_delay_ms)));
    flag("lease", Some(period(lp.lease_ms)));
    if let Some(at) = lp.expires_at {
        flag("expires-at", Some(at.to_string()));
    }
    if let Some(text) = &lp.description {
        flag("description", Some(text.clone()));
    }
    for label in &lp.policy.labels {
        flag("label", Some(label.clone()));
    }
    let mut text = lines.join("\n");
    text.push('\n');
    text
}

/// The flags of a flags text, by name, each with its values in order (an
/// empty list for a switch).
pub(super) fn parse_lines(text: &str) -> Result<BTreeMap<String, Vec<String>>> {
    let flags = edit_flags();
    let mut parsed: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let (name, value) = line.split_once(' ').unwrap_or((line, ""));
        let Some(flag) = name
            .strip_prefix("--")
            .and_then(|long| flags.iter().find(|f| f.long == long))
        else {
            bail!(
                "line {}: {name:?} is not a flag of loops edit (see loops edit --help)",
                n + 1
            );
        };
        let values = parsed.entry(flag.long.clone()).or_default();
        if flag.takes_value {
            values.push(unescape(value));
        }
    }
    Ok(parsed)
}

/// The command-line arguments that turn `before` into `after`: each flag
/// whose values differ, with all its new values (an empty one when its
/// lines were deleted); a switch only when it was added.
pub(super) fn changed_flags(
    before: &BTreeMap<String, Vec<String>>,
    after: &BTreeMap<String, Vec<String>>,
) -> Vec<String> {
    let mut argv = Vec::new();
    for (name, values) in after {
        if before.get(name) == Some(values) {
            continue;
        }
        if values.is_empty() {
            argv.push(format!("--{name}"));
        }
        argv.extend(values.iter().map(|v| format!("--{name}={v}")));
    }
    for (name, values) in before {
        if !after.contains_key(name) && !values.is_empty() {
            argv.push(format!("--{name}="));
        }
    }
    argv
}

/// `\` as `\\` and a new line as `\n`, so a value stays on its line.
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('\n', "\\n")
}

/// The inverse of [`escape`]; a `\` before anything else is kept.
fn unescape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('\\') => out.push('\\'),
            Some(other) => out.extend(['\\', other]),
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(text: &str) -> BTreeMap<String, Vec<String>> {
        parse_lines(text).unwrap()
    }

    #[test]
    fn values_with_new_lines_and_backslashes_round_trip() {
        for value in [
            "plain",
            "two\nlines",
            r"a\nb is not a new line",
            "end\\",
            "",
        ] {
            assert_eq!(unescape(&escape(value)), value, "{value:?}");
            let text = format!("--description {}\n", escape(value));
            assert_eq!(flags(&text)["description"], [value]);
        }
    }

    #[test]
    fn only_what_changed_is_given() {
        let before = flags("# a comment\n--every 1h\n--shell\n--label a\n--label b\n");
        assert!(changed_flags(&before, &before).is_empty());
        let after = flags("--every 2h\n--shell\n--label a\n--label c\n");
        assert_eq!(
            changed_flags(&before, &after),
            ["--every=2h", "--label=a", "--label=c"]
        );
        // A deleted flag is given empty; a switch added is given.
        let before = flags("--every 1h\n--description old\n");
        let after = flags("--every 1h\n--no-shell\n");
        assert_eq!(
            changed_flags(&before, &after),
            ["--no-shell", "--description="]
        );
        assert!(parse_lines("--evry 2h").is_err());
        assert!(parse_lines("every 2h").is_err());
    }

    #[test]
    fn a_loops_flags_parse_back_as_loops_edit_takes_them() {
        let lp: Loop = serde_json::from_value(serde_json::json!({
            "id": "0123456789ab", "name": "nightly", "status": "active",
            "schedule": {"type": "cron", "expression": "0 9 * * *", "timezone": "UTC"},
            "target": {"type": "command", "command": "backup --all", "args": ["-v", "x y"],
                       "shell": false},
            "catchUp": "latest", "catchUpLimit": 50, "overlap": "skip", "maxAttempts": 2,
            "retryDelayMs": 60000, "leaseMs": 1800000, "description": "two\nlines",
            "labels": ["ops"],
            "createdAt": "2026-01-01T00:00:00.000Z", "updatedAt": "2026-01-01T00:00:00.000Z"
        }))
        .unwrap();
        let text = flags_text(&lp);
        let parsed = flags(&text);
        assert_eq!(parsed["cron"], ["0 9 * * *"]);
        assert_eq!(parsed["arg"], ["-v", "x y"]);
        assert_eq!(parsed["description"], ["two\nlines"]);
        assert!(parsed["no-shell"].is_empty());
        // Every line is a flag `loops edit` takes, with its value.
        let none = BTreeMap::new();
        let args = parse_edit("nightly", &changed_flags(&none, &parsed)).unwrap();
        assert_eq!(args.cron.as_deref(), Some("0 9 * * *"));
        assert_eq!(args.command.as_deref(), Some("backup --all"));
        assert_eq!(args.args, ["-v", "x y"]);
        assert_eq!(args.retry_delay.as_deref(), Some("1m"));
        assert_eq!(args.attempts.as_deref(), Some("2"));
        assert!(args.no_shell);
    }
}
