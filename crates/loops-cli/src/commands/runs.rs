//! `loops runs [loop]` (SPEC §7.4): recorded runs, newest first, with
//! their output redacted unless `--show-output` is given (SPEC §7.2).

use anyhow::Result;
use loops_core::{LoopId, LoopRun};
use loops_store::{RunFilter, Store, StoreError};

use crate::args::RunsArgs;
use crate::exit::Outcome;
use crate::paths;
use crate::redact::{self, Output};
use crate::render::{self, Column, Printer, Table};
use crate::resolve;

/// `runs`.
pub(crate) fn list(args: &RunsArgs, out: &mut Printer) -> Result<Outcome> {
    let limit = resolve::positive_int(&args.limit, "--limit")?;
    let status = args
        .status
        .as_deref()
        .map(resolve::run_status)
        .transpose()?;
    let output = Output::from_flag(args.show_output);
    let store = paths::open_store()?;
    let loop_id = args
        .target
        .as_deref()
        .map(|t| history_of(&store, t))
        .transpose()?;
    let runs = store.list_runs(&RunFilter {
        loop_id,
        status,
        limit: Some(limit),
    })?;
    print_runs(&runs, output, out)?;
    Ok(Outcome::Success)
}

/// Prints runs as a JSON array or a table with output blocks.
pub(crate) fn print_runs(runs: &[LoopRun], output: Output, out: &mut Printer) -> Result<()> {
    if out.json {
        out.json(&runs.iter().map(|r| redact::run_json(r, output)).collect())?;
        return Ok(());
    }
    let mut table = Table::new(vec![
        Column {
            header: "RUN",
            plain_prefix: "",
        },
        Column {
            header: "STATUS",
            plain_prefix: "",
        },
        Column {
            header: "ATTEMPT",
            plain_prefix: "attempt=",
        },
        Column {
            header: "SLOT",
            plain_prefix: "slot=",
        },
        Column {
            header: "LOOP",
            plain_prefix: "",
        },
    ]);
    for run in runs {
        table.row(vec![
            run.id.to_string(),
            run.status.to_string(),
            run.attempt.to_string(),
            run.scheduled_for.to_string(),
            run.loop_name.clone(),
        ]);
    }
    out.table(&table, |i| match (output, runs.get(i)) {
        (Output::Shown, Some(run)) => render::output_blocks(run),
        _ => Vec::new(),
    })?;
    Ok(())
}

/// The loop whose runs to list: a loop by id or name, or the id of a
/// removed loop whose history was kept (SPEC §9 item 34).
fn history_of(store: &Store, target: &str) -> Result<LoopId> {
    let missing = match store.require_loop(target) {
        Ok(lp) => return Ok(lp.id),
        Err(e @ StoreError::NotFound { .. }) => e,
        Err(e) => return Err(e.into()),
    };
    if let Ok(id) = LoopId::parse(target) {
        let kept = store.list_runs(&RunFilter {
            loop_id: Some(id),
            status: None,
            limit: Some(1),
        })?;
        if !kept.is_empty() {
            return Ok(id);
        }
    }
    Err(missing.into())
}
