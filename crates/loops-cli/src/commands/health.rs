//! `loops health [--since 7d]` (issue 27; agents note §7.2 "Surfaces"):
//! the loops whose runs failed since an instant, one row per loop, failure
//! class and fingerprint, with how many runs, when first and last, and a
//! sample of the newest one's error. The MCP tool `loops_health` returns
//! the same `--json`.
//!
//! The sample is bounded and redacted here, whatever the surface: the
//! first line of the error, at most [`SAMPLE_CHARS`] characters, with the
//! shapes of tokens masked as in run output. A table escapes what a
//! terminal would not show as itself.

use anyhow::Result;
use loops_core::{FailureClass, LoopId, Timestamp};
use loops_store::FailureGroup;
use serde::Serialize;

use super::now;
use crate::args::report::HealthArgs;
use crate::context::Context;
use crate::exit::Outcome;
use crate::human;
use crate::render::{self, Printer, Table};
use crate::request::{self, Document, Request, Warnings};
use crate::resolve;

/// The most characters of an error's first line a sample keeps.
pub(crate) const SAMPLE_CHARS: usize = 200;

/// `health`.
pub(crate) fn run(ctx: &Context, args: &HealthArgs, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |_| resolve_health(args))
}

/// The typed request of `health` from its command line.
fn resolve_health(args: &HealthArgs) -> Result<Health> {
    Ok(Health {
        since_ms: resolve::duration(&args.since, "--since")?,
    })
}

/// The typed request of `health`: the failures of the last `since_ms`.
struct Health {
    since_ms: u64,
}

/// One row of `health`, as `--json` prints it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Failure {
    loop_id: LoopId,
    loop_name: String,
    failure_class: FailureClass,
    failure_fingerprint: String,
    count: u64,
    first_seen: Timestamp,
    last_seen: Timestamp,
    /// The newest run's error, bounded and masked ([`sample`]); `null`
    /// when it recorded none.
    sample: Option<String>,
}

impl From<FailureGroup> for Failure {
    fn from(g: FailureGroup) -> Failure {
        Failure {
            loop_id: g.loop_id,
            loop_name: g.loop_name,
            failure_class: g.failure_class,
            failure_fingerprint: g.failure_fingerprint,
            count: g.count,
            first_seen: g.first_seen,
            last_seen: g.last_seen,
            sample: g.sample.as_deref().map(sample),
        }
    }
}

/// What `health` returns: the failures, most recently seen first, and
/// the instant they were counted from.
struct Failing {
    since: Timestamp,
    since_ms: u64,
    failures: Vec<Failure>,
}

impl Request for Health {
    type Document = Failing;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<Failing> {
        let since = now().add_ms(-i64::try_from(self.since_ms).unwrap_or(i64::MAX));
        let store = ctx.open_store()?;
        let failures = store
            .failure_groups_since(since)?
            .into_iter()
            .map(Failure::from)
            .collect();
        Ok(Failing {
            since,
            since_ms: self.since_ms,
            failures,
        })
    }
}

impl Document for Failing {
    fn json(&self, out: &mut Printer) -> Result<()> {
        Ok(out.json_of(&self.failures)?)
    }

    fn human(&self, ctx: &Context, out: &mut Printer) -> Result<()> {
        if self.failures.is_empty() {
            ctx.hint(&format!(
                "no failures since {} (the last {})",
                human::local(self.since),
                human::period(self.since_ms)
            ));
            return Ok(());
        }
        let now = human::display_now();
        let mut table = Table::with_headers(&[
            "LOOP",
            "CLASS",
            "FINGERPRINT",
            "COUNT",
            "FIRST SEEN",
            "LAST SEEN",
            "SAMPLE",
        ]);
        let failed = render::status_style("failed");
        let plain = anstyle::Style::new();
        for f in &self.failures {
            let sample = f.sample.as_deref().unwrap_or_default();
            table.styled_row(vec![
                (f.loop_name.clone(), plain),
                (f.failure_class.to_string(), failed),
                (f.failure_fingerprint.clone(), plain),
                (f.count.to_string(), plain),
                (human::when(f.first_seen, now), plain),
                (human::when(f.last_seen, now), plain),
                (ctx.error_text(sample).into_owned(), plain),
            ]);
        }
        out.table(&table, |_| Vec::new())?;
        Ok(())
    }
}

/// The sample of a stored error: tokens masked, then its first non-blank
/// line, cut to [`SAMPLE_CHARS`] characters with `…`.
fn sample(error: &str) -> String {
    let masked = loops_exec::mask_credentials(error);
    human::first_line(&masked, SAMPLE_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_is_one_masked_line_of_at_most_200_characters() {
        assert_eq!(sample("\n  boom  \nmore"), "boom");
        let long = "x".repeat(500);
        let cut = sample(&long);
        assert_eq!(cut.chars().count(), SAMPLE_CHARS);
        assert!(cut.ends_with('…'), "{cut}");
        let token = "ghp_16C7e42F292c6912E7710c838347Ae178B4a";
        let masked = sample(&format!("push failed with {token}"));
        assert!(!masked.contains(token), "{masked}");
        assert!(masked.starts_with("push failed with "), "{masked}");
    }

    #[test]
    fn since_takes_the_duration_grammar_with_its_message() {
        let ok = resolve_health(&HealthArgs { since: "7d".into() }).unwrap();
        assert_eq!(ok.since_ms, 7 * 86_400_000);
        let err = resolve_health(&HealthArgs {
            since: "soon".into(),
        })
        .err()
        .unwrap()
        .to_string();
        assert!(err.starts_with("invalid duration: soon"), "{err}");
    }
}
