//! The command lines of the commands that look after the store and the
//! installation rather than the loops: `backup`, `restore`, `gc`,
//! `export`, `import`, `completions` and `man`. As in the parent module, values stay strings
//! until `resolve` checks them.

use clap::Args;

pub(super) const EXPORT_AFTER_HELP: &str = "Each record is a whole row, ids included, so `loops import` \
    can rebuild the database elsewhere: on SQLite or on PostgreSQL. The file holds the loops' \
    commands, environment values and prompts as stored: it is created with mode 0600; keep it \
    private, as the trigger payloads it holds are. Runs that are running are exported as they \
    are.\n\n\
    --format toml writes the loops instead as a loops file for `loops apply` (defaults left \
    out, a loop after the loops it runs after, its workflows inline), which applied to an \
    empty store makes the same loops; a setting no flag can say is named in a warning.\n\n\
    Examples:\n  \
    loops export --file loops-export.json     # every pool, workflow, loop and run (mode 0600)\n  \
    loops export --file defs.json --no-runs   # only pools, workflows and loops\n  \
    loops export --format toml --file loops.toml --label nightly   # a loops file to keep in git";

pub(super) const IMPORT_AFTER_HELP: &str = "Ids are kept. A record whose id is already stored is left as it \
    is (or, with --replace, overwritten when it differs); one whose slot, step, trigger key or \
    active workflow name another row holds is refused and listed, and the rest go on. A loop may share \
    its name with a stored one (names need not be unique); such loops are listed. Loops imported \
    as active keep their next run: a daemon running on this database picks them up and runs \
    what is due. Runs exported while running arrive abandoned, as recovery would record \
    them, and their slots run again. With --apply, records are written in transactions of 500; an SQLite database \
    is backed up first into $LOOPS_DATA_DIR/backups (at most one an hour; LOOPS_SKIP_BACKUP=1 \
    skips it).\n\n\
    Examples:\n  \
    loops import loops-export.json            # a dry run: what is new, there, different or refused\n  \
    loops import loops-export.json --apply\n  \
    loops import loops-export.json --apply --replace";

#[derive(Debug, Args)]
pub(crate) struct BackupArgs {
    /// Keep the newest N backups, the new one included, and delete older
    /// ones (only files named as loops backups).
    #[arg(long, value_name = "N", default_value = "3", conflicts_with = "list")]
    pub(crate) keep: String,

    /// List the backups, newest first, instead of taking one.
    #[arg(long)]
    pub(crate) list: bool,
}

// `loops restore` (issue 28).
#[derive(Debug, Args)]
pub(crate) struct RestoreArgs {
    /// The backup: a name from `loops backup --list` (loops-20261201T170512Z.db)
    /// or the path of a copy of a loops database.
    #[arg(value_name = "BACKUP", add = crate::complete::backups())]
    pub(crate) backup: String,

    /// Restore without asking [default: ask on a terminal, refuse
    /// without one].
    #[arg(short = 'y', long)]
    pub(crate) yes: bool,
}

// `loops export` (issue 15).
#[derive(Debug, Args)]
pub(crate) struct ExportArgs {
    /// The file to write, or - for stdout. It must not exist yet unless
    /// --force is given; a symbolic link is never written through.
    #[arg(long, value_name = "PATH", value_hint = clap::ValueHint::FilePath)]
    pub(crate) file: String,

    /// Leave out the run history (runs, triggers, workflow runs, step
    /// runs and events): only pools, workflows and loops.
    #[arg(long)]
    pub(crate) no_runs: bool,

    /// Replace the file if it exists (the new file takes its place only
    /// once complete).
    #[arg(long)]
    pub(crate) force: bool,

    /// What to write: json, the whole store for `loops import`; or toml,
    /// the loops and their workflows as a loops file for `loops apply`.
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = ExportFormat::Json)]
    pub(crate) format: ExportFormat,

    /// With --format toml: only loops with this label (repeatable, or
    /// comma-separated; all must match) [default: every loop].
    #[arg(long = "label", value_name = "LABEL", add = crate::complete::labels())]
    pub(crate) labels: Vec<String>,

    /// With --format toml: only the loops `loops apply` manages under this
    /// scope (its --scope, or the applied file's canonical path).
    #[arg(long, value_name = "NAME")]
    pub(crate) scope: Option<String>,
}

/// What `loops export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ExportFormat {
    /// Every table, ids kept, for `loops import`.
    Json,
    /// A loops file, for `loops apply`.
    Toml,
}

// `loops import` (issue 15).
#[derive(Debug, Args)]
pub(crate) struct ImportArgs {
    /// The file `loops export` wrote, or - for stdin.
    #[arg(value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub(crate) file: String,

    /// Write the records; without it, only say per table what would be
    /// new, already there, different or refused.
    #[arg(long)]
    pub(crate) apply: bool,

    /// Overwrite stored rows whose id the file has but whose columns
    /// differ, except runs this database has further along [default:
    /// leave them as they are].
    #[arg(long)]
    pub(crate) replace: bool,
}

// `loops completions` (issue 16 §7).
#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_name = "SHELL")]
    pub(crate) shell: clap_complete::Shell,

    /// Print the static script instead: commands and flags only, no loop,
    /// run, workflow or label names, and no `loops` process on each Tab.
    #[arg(long = "static")]
    pub(crate) static_script: bool,
}

// `loops man` (issue 16 §7).
#[derive(Debug, Args)]
pub(crate) struct ManArgs {
    /// Where to write the pages; created if missing, pages in it replaced.
    #[arg(long, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    pub(crate) dir: String,
}

// `loops gc` (issue 14): retention.
#[derive(Debug, Args)]
pub(crate) struct GcArgs {
    /// Delete finished runs created more than N days ago (a run's age counts
    /// from its claim, `createdAt`) and the triggers catch-up coalesced more
    /// than N days ago, and remove the agent worktrees under
    /// ~/.hasna/repos/worktrees that runs kept and no run has entered for N
    /// days: only clean, unlocked, registered git worktrees (git worktree
    /// remove, then prune; their branches stay).
    #[arg(long, value_name = "N", default_value = "30")]
    pub(crate) max_age_days: String,

    /// Always keep the newest N runs of each loop (and the newest N runs of
    /// each workflow run by `workflows run`), whatever their age; the
    /// newest one always stays, even with 0.
    #[arg(long, value_name = "N", default_value = "20")]
    pub(crate) keep_per_loop: String,

    /// Only count what would be deleted (the default).
    #[arg(long, conflicts_with = "apply")]
    pub(crate) dry_run: bool,

    /// Delete, in short batches that a daemon running alongside hardly
    /// notices, after an automatic backup into $LOOPS_DATA_DIR/backups (at
    /// most one an hour; LOOPS_SKIP_BACKUP=1 skips it).
    #[arg(long)]
    pub(crate) apply: bool,

    /// Then give the database's free pages back to the file system:
    /// SQLite's VACUUM rewrites the file, holding the database meanwhile,
    /// so it is refused while a daemon runs. It runs after a dry run too
    /// (it changes no row). On PostgreSQL it does nothing: autovacuum
    /// reclaims the space there.
    #[arg(long)]
    pub(crate) vacuum: bool,

    /// Remove old worktrees with uncommitted changes or untracked files
    /// too, which loses those changes (git worktree remove --force). A
    /// locked worktree, or one a run is in, stays even so.
    #[arg(long)]
    pub(crate) force: bool,
}
