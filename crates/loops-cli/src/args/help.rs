//! Help text too long to sit beside a flag: the environment variables (in
//! `loops --help`), and the "Examples:" section that ends each command's
//! `--help` (issue 16 §7). Each example is one the README shows, where one
//! fits.

/// `loops -h`: where loops keeps its data.
pub(crate) const ROOT: &str = "Loops live in $LOOPS_DATA_DIR/loops.db (default ~/.hasna/loops), \
    or in the PostgreSQL database of --database-url / $LOOPS_DATABASE_URL, which daemons on \
    several hosts can share. A runner (`loops tick`, `loops run-now` or the daemon) claims due \
    slots, runs them and records each run.";

/// `loops --help`: [`ROOT`], the environment, and examples.
pub(crate) const ROOT_LONG: &str =
    "Loops live in $LOOPS_DATA_DIR/loops.db (default ~/.hasna/loops), \
or in the PostgreSQL database of --database-url / $LOOPS_DATABASE_URL, which daemons on several \
hosts can share. A runner (`loops tick`, `loops run-now` or the daemon) claims due slots, runs \
them and records each run.

Environment:
  LOOPS_DATA_DIR            data directory: database, daemon pid file, socket, log, backups
  LOOPS_DATABASE_URL        use this PostgreSQL database instead of SQLite
  LOOPS_DAEMON_INTERVAL_MS  the daemon's longest sleep when nothing is due
  LOOPS_HOSTNAME            the host name this machine's daemon records runs under
  LOOPS_SKIP_BACKUP=1       skip the automatic backup before a migration, gc, import or restore
  NO_COLOR, CLICOLOR=0      no colour; CLICOLOR_FORCE=1 colour even when piped
  COLUMNS                   the width tables fit on a terminal (else the terminal's)
  LOOPS_FORCE_TTY=1         lay tables out as on a terminal even when piped (tests)
  TZ                        the host time zone: cron without --tz, local --at times, output

A run receives LOOPS_LOOP_ID, LOOPS_LOOP_NAME, LOOPS_RUN_ID and LOOPS_SCHEDULED_FOR (the slot, \
UTC); a workflow step also LOOPS_WORKFLOW_ID, LOOPS_WORKFLOW_NAME, LOOPS_WORKFLOW_RUN_ID and \
LOOPS_WORKFLOW_STEP_ID; a run under --account also LOOPS_ACCOUNT_PROFILE and LOOPS_ACCOUNT_TOOL.

Examples:
  loops create command backup --every 1h --cmd 'restic backup ~/work'
  loops daemon start
  loops list
  loops logs backup -f";

/// `create`.
pub(crate) const CREATE: &str = "Examples:
  loops create command backup --every 1h --cmd 'restic backup ~/work'
  loops create agent triage --every 1d --provider claude --prompt 'Triage new issues'
  loops create workflow nightly --workflow release --cron '0 2 * * *'";

/// `create command`.
pub(crate) const CREATE_COMMAND: &str = "Examples:
  loops create command backup --every 1h --cmd 'restic backup ~/work'
  loops create command report --cron '0 9 * * MON-FRI' --tz Europe/Berlin --cmd ./report.sh
  loops create command once --at 'tomorrow 09:00' --cmd 'make release'
  loops create command sync --every 5m --no-shell --cmd rsync --arg -a --arg src/ --arg dst/";

/// `create agent`.
pub(crate) const CREATE_AGENT: &str = "Examples:
  loops create agent triage --cron '0 9 * * MON-FRI' --tz Europe/Berlin \\
    --provider claude --prompt 'Triage new issues in this repo' --cwd ~/src/app
  loops create agent review --every 2h --provider codex --prompt 'Review open PRs' --account work
  loops create agent fixer --every 6h --provider codex --prompt 'Fix the failing tests' \\
    --effort high --add-dir ../shared --idle-timeout 20m --env CI=1
  loops create agent sweep --at +1h --provider claude --prompt-file task.md --timeout none \\
    --permission-mode bypass --manual-break-glass --safety-reason 'throwaway VM'";

/// `create workflow`.
pub(crate) const CREATE_WORKFLOW: &str = "Examples:
  loops create workflow nightly-release --workflow release --cron '0 2 * * *' --timeout 1h";

/// `rename`.
pub(crate) const RENAME: &str = "Examples:
  loops rename backup nightly-backup
  loops rename 3f9a1c2b4d5e backup   # by id, when two loops share a name";

/// `list`.
pub(crate) const LIST: &str = "Examples:
  loops list
  loops list --status paused
  loops list --limit 100 --offset 100   # the second page of 100
  loops --json list | jq -r '.[].name'";

/// `show`.
pub(crate) const SHOW: &str = "On a terminal (or with LOOPS_FORCE_TTY=1) it prints the card of \
loops status; piped, or with --json, the loop's JSON, as scripts expect.

Examples:
  loops show backup
  loops show backup | jq .nextRunAt";

/// `status` (issue 28).
pub(crate) const STATUS: &str = "The card of one loop, as systemctl status shows a unit: its \
state and why (a pause's reason, the circuit breaker), the schedule in words with its zone, the \
next 3 fire times, what it runs, labels and policies, the last 5 runs with their exit codes, and \
the last 10 lines of the latest run's output. On a terminal it fits the width. --json prints the \
loop as show --json does, plus nextRuns (UTC ISO-8601), recentRuns (as runs --json), outputRunId \
and outputTail.

Examples:
  loops status backup
  loops --json status backup | jq '.recentRuns[].exitCode'";

/// `runs`.
pub(crate) const RUNS: &str = "Examples:
  loops runs backup
  loops runs --status failed --limit 20
  loops runs --limit 20 --offset 20   # the 20 runs before those
  loops runs backup --show-output";

/// `labels` and its subcommands (issue 17).
pub(crate) const LABELS: &str = "Examples:
  loops labels add backup team=infra,nightly
  loops labels remove backup nightly
  loops labels set backup critical; loops labels clear backup
  loops list --label team=infra";

/// `pause`.
pub(crate) const PAUSE: &str = "Examples:
  loops pause backup; loops resume backup";

/// `resume`.
pub(crate) const RESUME: &str = "Examples:
  loops resume backup";

/// `stop`.
pub(crate) const STOP: &str = "A run still running goes on unless --cancel is given.

Examples:
  loops stop backup
  loops stop backup --cancel    # also cancels its running run";

/// `remove`.
pub(crate) const REMOVE: &str = "Examples:
  loops remove backup           # keeps its run history
  loops remove backup --purge   # deletes it too
  loops remove backup --purge --cancel   # cancels its running run first";

/// `run-now`.
pub(crate) const RUN_NOW: &str = "Examples:
  loops run-now backup --show-output
  loops run-now train --anywhere      # here, although it runs on labels this host lacks";

/// `tick`.
pub(crate) const TICK: &str = "Examples:
  loops tick                    # run whatever is due now, then exit";

/// `gc`.
pub(crate) const GC: &str = "Examples:
  loops gc                      # a dry run: what would go, per loop
  loops gc --apply --max-age-days 7 --keep-per-loop 5
  loops daemon stop && loops gc --apply --vacuum && loops daemon start   # and shrink loops.db";

/// `doctor`.
pub(crate) const DOCTOR: &str = "Examples:
  loops doctor
  loops --json doctor";

/// `backup`.
pub(crate) const BACKUP: &str = "Examples:
  loops backup                  # keeps the newest 3 (--keep N)
  loops backup --list
  loops restore loops-20261201T170512Z.db";

/// `restore`.
pub(crate) const RESTORE: &str =
    "Only for the embedded SQLite database; on PostgreSQL use pg_restore. \
    Refused while a daemon runs. The current database is kept in $LOOPS_DATA_DIR/backups first \
    (LOOPS_SKIP_BACKUP=1 skips it; one too damaged to copy is moved there as \
    loops-<time>-damaged.db). The backup is copied into the data directory and checked \
    (PRAGMA integrity_check, a schema this loops knows) before it replaces loops.db; the old \
    loops.db-wal and loops.db-shm are removed. It must be a file of yours that others cannot \
    write. --json prints {restored, from, keptCurrentAs}.

Examples:
  loops backup --list                            # the names and times to choose from
  loops daemon stop && loops restore loops-20261201T170512Z.db && loops daemon start
  loops restore ~/loops-copy.db --yes            # a path; no question asked";

/// `completions`.
pub(crate) const COMPLETIONS: &str =
    "The script asks loops itself on each Tab (it runs COMPLETE=<shell> \
loops -- <words>), so loop names and ids, run ids, workflow names, labels and every fixed value \
(--status, --catch-up, --provider, --tz, ...) complete from the data directory as it is now. It \
is the script COMPLETE=<shell> loops prints; --static prints clap's static script instead. On \
PostgreSQL only commands, flags and fixed values complete.

Examples:
  loops completions bash > ~/.local/share/bash-completion/completions/loops
  loops completions zsh > ~/.zfunc/_loops
  loops completions fish > ~/.config/fish/completions/loops.fish
  source <(COMPLETE=bash loops)          # or this line in ~/.bashrc
  source <(COMPLETE=zsh loops)           # or this line in ~/.zshrc";

/// `man`.
pub(crate) const MAN: &str = "Examples:
  loops man --dir ~/.local/share/man/man1 && man loops-create-command";

/// `mcp`.
/// `ui`.
pub(crate) const UI: &str =
    "Keys: arrows or j/k move, Enter opens a loop's status card, p pauses and
r resume (each asks first), e opens the loop's flags in $EDITOR (else vi), one
per line as loops edit takes them, and applies what changed on save, / filters
by name or label, f cycles the status filter, ? shows the keys, q or Esc goes
back or quits.

Examples:
  loops ui
  NO_COLOR=1 loops ui          # statuses as words only";

pub(crate) const MCP: &str =
    "Read tools: loops_list, loops_show, loops_runs, loops_health, loops_doctor, loops_daemon_status,
loops_workflows_list, loops_workflow_read, loops_workflow_run_inspect, loops_workflow_validate.
Mutations, refused unless the server's environment has LOOPS_MCP_ALLOW_MUTATIONS=true:
loops_create_command, loops_create_workflow, loops_pause, loops_resume, loops_stop, loops_cancel,
loops_run_now, loops_labels_update; the same goes for showOutput, and for preflight and
promptFile in loops_workflow_validate. Each tool returns what its command's --json prints.
The server runs until the client closes its stdin, or SIGINT/SIGTERM; a run it started
is then cancelled and recorded so.

Examples:
  loops mcp                                              # what a coding agent starts
  claude mcp add loops -- loops mcp                      # register it, read-only
  claude mcp add loops -e LOOPS_MCP_ALLOW_MUTATIONS=true -- loops mcp
  {\"mcpServers\": {\"loops\": {\"command\": \"loops\", \"args\": [\"mcp\"]}}}   # JSON config";

/// `workflows`.
pub(crate) const WORKFLOWS: &str = "Examples:
  loops workflows validate release.json --preflight
  loops workflows create release.json
  loops workflows run release --show-output
  loops workflows inspect <runId>";

/// `workflows validate`.
pub(crate) const WORKFLOWS_VALIDATE: &str = "Examples:
  loops workflows validate release.json --preflight   # also check that each step could start";

/// `workflows create`.
pub(crate) const WORKFLOWS_CREATE: &str = "Examples:
  loops workflows create release.json
  loops workflows create release.json --name release-v2";

/// `workflows list`.
pub(crate) const WORKFLOWS_LIST: &str = "Examples:
  loops workflows list --status active";

/// `workflows show`.
pub(crate) const WORKFLOWS_SHOW: &str = "Examples:
  loops workflows show release";

/// `workflows run`.
pub(crate) const WORKFLOWS_RUN: &str = "Examples:
  loops workflows run release --show-output     # Ctrl-C cancels it
  loops workflows run release --resume <runId>  # after `workflows recover`";

/// `workflows runs`.
pub(crate) const WORKFLOWS_RUNS: &str = "Examples:
  loops workflows runs release --limit 10";

/// `workflows inspect`.
pub(crate) const WORKFLOWS_INSPECT: &str = "Examples:
  loops workflows inspect <runId>";

/// `workflows events`.
pub(crate) const WORKFLOWS_EVENTS: &str = "Examples:
  loops workflows events <runId> --limit 50";

/// `workflows cancel`.
pub(crate) const WORKFLOWS_CANCEL: &str = "Examples:
  loops workflows cancel <runId> --reason 'bad input'";

/// `workflows recover`.
pub(crate) const WORKFLOWS_RECOVER: &str = "Examples:
  loops workflows recover <runId> && loops workflows run release --resume <runId>";

/// `workflows archive`.
pub(crate) const WORKFLOWS_ARCHIVE: &str = "Examples:
  loops workflows archive release";

/// `workflows schema`.
pub(crate) const WORKFLOWS_SCHEMA: &str = "Examples:
  loops workflows schema > workflow.schema.json";

/// `daemon`.
pub(crate) const DAEMON: &str = "Examples:
  loops daemon start
  loops daemon status
  loops daemon logs -f
  loops daemon install --enable";

/// `daemon run`.
pub(crate) const DAEMON_RUN: &str = "Examples:
  loops daemon run --max-parallel 8   # in the foreground, for a terminal or a service manager
  loops daemon run --serve 127.0.0.1:8470   # with the dashboard and API (see loops serve --help)";

/// `daemon start`.
pub(crate) const DAEMON_START: &str = "Examples:
  loops daemon start
  loops daemon start --gc-max-age 30d
  loops daemon start --label gpu      # runs the loops created with --runs-on gpu too";

/// `daemon stop`.
pub(crate) const DAEMON_STOP: &str = "Examples:
  loops daemon stop --grace 2m";

/// `daemon status`.
pub(crate) const DAEMON_STATUS: &str = "Examples:
  loops daemon status
  loops --json daemon status";

/// `daemon logs`.
pub(crate) const DAEMON_LOGS: &str = "Examples:
  loops daemon logs -n 100
  loops daemon logs -f
  loops daemon logs -f --loop nightly-backup   # only that loop's runs";

/// `daemon install`.
pub(crate) const DAEMON_INSTALL: &str = "Examples:
  loops daemon install --enable   # a systemd user unit (Linux) or a launchd agent (macOS)";

/// `daemon uninstall`.
pub(crate) const DAEMON_UNINSTALL: &str = "Examples:
  loops daemon uninstall";

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every command's `--help` ends with examples (issue 16 §7), the
    /// commands added later included.
    #[test]
    fn every_command_has_examples() {
        let mut root = crate::args::Cli::command();
        root.build();
        let mut missing = Vec::new();
        let mut stack = vec![(String::from("loops"), root)];
        while let Some((path, command)) = stack.pop() {
            let help = command
                .get_after_long_help()
                .or(command.get_after_help())
                .map(ToString::to_string)
                .unwrap_or_default();
            if !help.contains("Examples:\n  loops ") {
                missing.push(path.clone());
            }
            for sub in command.get_subcommands() {
                if sub.get_name() != "help" {
                    stack.push((format!("{path} {}", sub.get_name()), sub.clone()));
                }
            }
        }
        assert!(missing.is_empty(), "no examples in: {missing:?}");
    }
}
