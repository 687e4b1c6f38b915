//! `loops workflows …` (SPEC §6, §7.4 "workflows").
//!
//! - `specs`: the workflow files and stored workflows (`validate`,
//!   `create`, `list`, `show`, `archive`, `schema`);
//! - `run`: `run`, the one command that executes steps;
//! - `history`: the recorded runs (`runs`, `inspect`, `events`, `cancel`,
//!   `recover`).
//!
//! Nothing here prints run output unless `--show-output` asks for it, in
//! human or JSON form (SPEC §7.2, with the gaps of §9 item 26 closed: the
//! original printed raw step output in `inspect --json` and in the summary
//! of `run --json`). Step targets are printed with their `env` values and
//! long prompts redacted, as loop targets are.

mod history;
mod prompt_files;
mod relative_paths;
mod run;
pub(crate) mod specs;

use anyhow::Result;
use loops_core::{StepRun, WorkflowRunId};
use loops_store::StoreError;

use crate::args::workflow::Workflows;
use crate::context::Context;
use crate::exit::Outcome;
use crate::render::{self, Printer};

pub(crate) use specs::validate_text;

/// Runs one `workflows` subcommand.
pub(crate) fn run(ctx: &Context, cmd: Workflows, out: &mut Printer) -> Result<Outcome> {
    match cmd {
        Workflows::Validate(args) => specs::validate(ctx, &args, out),
        Workflows::Create(args) => specs::create(ctx, &args, out),
        Workflows::List(args) => specs::list(ctx, &args, out),
        Workflows::Show(args) => specs::show(ctx, &args, out),
        Workflows::Archive(args) => specs::archive(ctx, &args, out),
        Workflows::Schema => specs::schema(ctx, out),
        Workflows::Run(args) => run::run(ctx, &args, out),
        Workflows::Runs(args) => history::runs(ctx, &args, out),
        Workflows::Inspect(args) => history::inspect(ctx, &args, out),
        Workflows::Events(args) => history::events(ctx, &args, out),
        Workflows::Cancel(args) => history::cancel(ctx, &args, out),
        Workflows::Recover(args) => history::recover(ctx, &args, out),
    }
}

/// A workflow run id as typed: anything that is not an id cannot name a
/// run, so it gets the same `workflow run not found: <x>` as an unknown id.
fn run_id(text: &str) -> Result<WorkflowRunId> {
    WorkflowRunId::parse(text.trim()).map_err(|_| {
        StoreError::NotFound {
            kind: "workflow run",
            key: text.to_owned(),
        }
        .into()
    })
}

/// One step line: `  <seq 2 digits>  <status padEnd 10>  <stepId>  <error>`
/// (SPEC §7.4 `workflows run`), with step ids padded to `id_width` (see
/// [`id_width`]) so the errors line up. The line is ready for a terminal:
/// `workflows run` writes its progress lines to stderr as they are. A step
/// id is any non-empty string in a database the original wrote, so its
/// control, bidi and zero-width characters are escaped, like the error's.
fn step_line(ctx: &Context, step: &StepRun, id_width: usize) -> String {
    // An error is one line, whatever it holds (a cwd with a line break).
    let error = ctx.error_line(step.error.as_deref().unwrap_or(""));
    let line = format!(
        "  {:02}  {:<10}  {:<id_width$}  {error}",
        step.sequence,
        step.status.as_str(),
        render::escape_controls(&step.step_id, &[]),
    );
    line.trim_end().to_owned()
}

/// The width of the widest of `ids` as [`step_line`] shows it, escapes
/// included.
fn id_width<'a>(ids: impl IntoIterator<Item = &'a str>) -> usize {
    ids.into_iter()
        .map(|id| render::escape_controls(id, &[]).chars().count())
        .max()
        .unwrap_or(0)
}

/// Prints the step lines of a run, each followed by its output blocks when
/// `show_output` is set.
fn print_steps(
    ctx: &Context,
    steps: &[StepRun],
    show_output: bool,
    out: &mut Printer,
) -> std::io::Result<()> {
    let id_width = id_width(steps.iter().map(|s| s.step_id.as_str()));
    for step in steps {
        out.line(&step_line(ctx, step, id_width))?;
        if show_output {
            for line in render::stream_blocks(step.stdout.as_deref(), step.stderr.as_deref()) {
                out.line(&line)?;
            }
        }
    }
    Ok(())
}
