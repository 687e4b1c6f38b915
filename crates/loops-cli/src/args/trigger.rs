//! `loops trigger` (issue 30, `docs/triggers.md` T4).

use clap::Args;

/// `loops trigger --help`, after the flags.
pub(crate) const TRIGGER_AFTER_HELP: &str = "\
The run starts on the next turn of a daemon that can run the loop (or the next
`loops tick`), under the loop's placement, pool and overlap rules, and does not
move the loop's schedule. It sees LOOPS_TRIGGER_KIND=manual, and the payload in
LOOPS_TRIGGER_PAYLOAD when it is at most 4 KiB.

Examples:
  loops trigger deploy                                 run deploy once, soon
  loops trigger deploy --payload '{\"ref\":\"main\"}'      hand it a JSON payload
  loops trigger deploy --idempotency-key build-4711    a second delivery adds nothing";

// A loop and what to hand it (a plain comment: a doc comment would become
// the help's summary).
#[derive(Debug, Args)]
pub(crate) struct TriggerArgs {
    /// Loop id, or name (refused when several loops have it).
    #[arg(value_name = "LOOP", add = crate::complete::loops())]
    pub(crate) target: String,

    /// A JSON value handed to the run (at most 64 KiB).
    #[arg(long, value_name = "JSON")]
    pub(crate) payload: Option<String>,

    /// A key that makes a repeated delivery start nothing more: the first
    /// trigger with it is returned.
    #[arg(long, value_name = "KEY")]
    pub(crate) idempotency_key: Option<String>,
}
