//! `loops pools set|list|remove` (issue 30, `docs/triggers.md` Q1): named
//! limits on how many runs of their member loops run at once, on every
//! host. Values stay strings for clap; `commands::pools` checks them, so a
//! bad one exits 1 with a message naming the flag.

use clap::{Args, Subcommand};

/// `loops pools --help`, after the subcommands.
pub(crate) const POOLS_AFTER_HELP: &str = "\
A loop joins a pool with `--pool NAME` on create or edit. A due run of a member waits
while the pool has --max runs running, on any host, and starts when one of them ends.

Examples:
  loops pools set agents --max 2
  loops create agent review --every 1h --provider claude --prompt 'review' --pool agents
  loops pools list
  loops edit review --pool ''; loops pools remove agents";

/// `loops pools set --help`.
const SET_AFTER_HELP: &str = "\
Setting an existing pool changes its limit; runs already running go on.

Examples:
  loops pools set agents --max 2
  loops pools set agents --max 4     # raise it: waiting members start at once";

/// `loops pools list --help`.
const LIST_AFTER_HELP: &str = "\
--json prints an array of {name, maxRunning, members, running, createdAt, updatedAt}.

Examples:
  loops pools list
  loops --json pools list";

/// `loops pools remove --help`.
const REMOVE_AFTER_HELP: &str = "\
A pool that loops still name is not removed: move them out first (`loops edit LOOP --pool ''`).

Examples:
  loops pools remove agents";

/// `loops pools set|list|remove`.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(crate) enum PoolsCommand {
    /// Create a pool, or change the limit of an existing one.
    #[command(after_help = SET_AFTER_HELP)]
    Set(PoolSetArgs),
    /// List the pools: each limit, its runs running now and its member loops.
    #[command(visible_alias = "ls", after_help = LIST_AFTER_HELP)]
    List,
    /// Remove a pool that no loop names.
    #[command(visible_alias = "rm", after_help = REMOVE_AFTER_HELP)]
    Remove(PoolRef),
}

// A pool and its limit (a plain comment: a doc comment would replace the
// command's summary).
#[derive(Debug, Args)]
pub(crate) struct PoolSetArgs {
    /// The pool's name: 1 to 64 characters of A-Z a-z 0-9 . _ -, starting
    /// with a letter or digit.
    #[arg(value_name = "NAME", add = crate::complete::pools())]
    pub(crate) name: String,

    /// The most runs of the pool's members running at once, on all hosts
    /// together (1 or more).
    #[arg(long, value_name = "N", required = true)]
    pub(crate) max: String,
}

// A pool, by name (a plain comment, as above).
#[derive(Debug, Args)]
pub(crate) struct PoolRef {
    /// The pool's name.
    #[arg(value_name = "NAME", add = crate::complete::pools())]
    pub(crate) name: String,
}
