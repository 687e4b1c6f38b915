//! The request layer under every surface (issue 26).
//!
//! A command is served in three steps, whichever surface asked for it
//! (clap, a `loops mcp` tool, later the dashboard's HTTP API):
//! 1. **Resolve**: clap's structs (strings) become a typed request
//!    ([`Request`]) of core types, such as `CreateLoop`, `Runs` or
//!    `ChangeStatus`. Nothing is opened or spawned yet, so bad input fails
//!    before any effect; warnings about the input go into [`Warnings`].
//! 2. **Run**: the request runs against the one [`Context`] (where the
//!    store is, verbosity) and returns its [`Document`], plus more warnings.
//! 3. **Render**: the document prints itself, as `--json` (the same for
//!    every surface) or for a human. Rendering changes nothing.
//!
//! [`serve`] strings the steps together. A document may keep the store
//! its run opened: for a hint that looks at it (is a daemon running?), or
//! for output that cannot wait for the end (a stream of a million rows),
//! which it then writes as it reads, in the render step.

use anyhow::Result;

use crate::context::Context;
use crate::exit::Outcome;
use crate::render::Printer;

/// Warnings about a request's input: accepted, but probably not what was
/// meant (a bare number of milliseconds, a date in the past). They are
/// printed once the command has succeeded, as `warning: <text>` on stderr,
/// or returned beside the document to a `loops mcp` client.
#[derive(Debug, Default)]
pub(crate) struct Warnings(Vec<String>);

impl Warnings {
    /// Adds one warning.
    pub(crate) fn push(&mut self, text: impl Into<String>) {
        self.0.push(text.into());
    }

    /// The warnings, in the order they came.
    pub(crate) fn into_vec(self) -> Vec<String> {
        self.0
    }
}

/// A typed request: what one command asks, resolved from any surface.
pub(crate) trait Request {
    /// What it returns.
    type Document: Document;

    /// Carries the request out against `ctx`.
    fn run(self, ctx: &Context, warnings: &mut Warnings) -> Result<Self::Document>;
}

/// What a request returns: what `--json` prints, and its rendering for a
/// human.
pub(crate) trait Document {
    /// Prints the `--json` document.
    fn json(&self, out: &mut Printer) -> Result<()>;

    /// Prints the document for a human. Hints (`ctx.hint`) and notes on
    /// stderr belong here too, after the stdout they explain.
    fn human(&self, ctx: &Context, out: &mut Printer) -> Result<()>;

    /// How the command ends: a run that failed is a document, not an error,
    /// but the exit code says it.
    fn outcome(&self) -> Outcome {
        Outcome::Success
    }

    /// Notes on stderr that follow the output in either format, `--json`
    /// too: what the document's stdout cannot carry without changing its
    /// shape (``hint: nothing was deleted; run `loops gc --apply` ``, the
    /// totals of an export streamed to stdout). Human-only notes belong in
    /// [`Document::human`].
    fn notes(&self, _ctx: &Context) {}
}

/// Resolves, runs and renders one request: the three steps of the module
/// docs. The warnings are handed to `ctx`, which prints them once the
/// command has succeeded (before any hint, after the output).
pub(crate) fn serve<R: Request>(
    ctx: &Context,
    out: &mut Printer,
    resolve: impl FnOnce(&mut Warnings) -> Result<R>,
) -> Result<Outcome> {
    let mut warnings = Warnings::default();
    let request = resolve(&mut warnings)?;
    let document = request.run(ctx, &mut warnings)?;
    ctx.queue_warnings(warnings.into_vec());
    if out.json {
        document.json(out)?;
    } else {
        document.human(ctx, out)?;
    }
    document.notes(ctx);
    Ok(document.outcome())
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use anyhow::{Result, bail};

    use super::{Document, Request, Warnings, serve};
    use crate::context::Context;
    use crate::exit::Outcome;
    use crate::render::Printer;

    /// Which of the document's steps ran, in order.
    type Log = Rc<RefCell<Vec<&'static str>>>;

    /// A request that warns at each step and says which rendering ran.
    struct Echo {
        fail: bool,
        log: Log,
    }

    struct Said {
        log: Log,
    }

    impl Request for Echo {
        type Document = Said;
        fn run(self, _: &Context, warnings: &mut Warnings) -> Result<Said> {
            warnings.push("from run");
            if self.fail {
                bail!("it failed");
            }
            Ok(Said { log: self.log })
        }
    }

    impl Document for Said {
        fn json(&self, out: &mut Printer) -> Result<()> {
            self.log.borrow_mut().push("json");
            Ok(out.line("json")?)
        }
        fn human(&self, _: &Context, out: &mut Printer) -> Result<()> {
            self.log.borrow_mut().push("human");
            Ok(out.line("human")?)
        }
        fn outcome(&self) -> Outcome {
            Outcome::Failure
        }
        /// Stands for a note on stderr: queued, so the test sees it.
        fn notes(&self, ctx: &Context) {
            self.log.borrow_mut().push("notes");
            ctx.queue_warnings(vec!["from notes".to_owned()]);
        }
    }

    /// What serving [`Echo`] gave: the outcome, stdout, the queued
    /// warnings, and the order the document's steps ran in.
    fn served(json: bool, fail: bool) -> (Result<Outcome>, String, Vec<String>, Vec<&'static str>) {
        let ctx = Context::default();
        let mut out = Printer::memory(json);
        let log = Log::default();
        let outcome = serve(&ctx, &mut out, |w| {
            w.push("from resolve");
            Ok(Echo {
                fail,
                log: Rc::clone(&log),
            })
        });
        let steps = log.borrow().clone();
        (outcome, out.text().unwrap(), ctx.take_warnings(), steps)
    }

    #[test]
    fn a_document_renders_as_asked_and_ends_as_it_says() {
        let (outcome, text, warnings, steps) = served(true, false);
        assert_eq!(outcome.unwrap(), Outcome::Failure);
        assert_eq!(text, "json\n");
        // The notes follow the output, in either format.
        assert_eq!(steps, ["json", "notes"]);
        assert_eq!(warnings, ["from resolve", "from run", "from notes"]);
        let (_, text, warnings, steps) = served(false, false);
        assert_eq!(text, "human\n");
        assert_eq!(steps, ["human", "notes"]);
        assert_eq!(warnings, ["from resolve", "from run", "from notes"]);
    }

    #[test]
    fn a_failed_request_prints_nothing_and_queues_no_warning() {
        let (outcome, text, warnings, steps) = served(false, true);
        assert_eq!(outcome.unwrap_err().to_string(), "it failed");
        assert_eq!(text, "");
        assert!(warnings.is_empty());
        assert!(steps.is_empty());
    }
}
