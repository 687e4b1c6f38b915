//! The MCP tool `loops_health` (issue 27; agents note §7.2 "Surfaces"):
//! the failing loops by failure class and fingerprint, as `loops health
//! --json` prints them, through the same request.
//!
//! A read tool: the sample it returns is already bounded and masked by the
//! command, and the document is masked again as every tool's is.

use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde::Deserialize;

use super::Access;
use super::params::Duration;
use super::tools::{ToolDef, parse, run, schema};
use crate::app::Captured;
use crate::args::Command;
use crate::args::report::{DEFAULT_HEALTH_SINCE, HealthArgs};
use crate::context::Context;

/// `loops_health`.
pub(super) const TOOL: ToolDef = ToolDef {
    name: "loops_health",
    description: "List failing loops grouped by failure class (rate_limit, auth, timeout, ...) \
                  and fingerprint, with counts, first and last seen and a sample of the newest \
                  error (loops health --json).",
    mutation: false,
    schema: schema::<HealthParams>,
    call: health,
};

/// The arguments of `loops_health`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct HealthParams {
    /// Count the runs that finished within this duration [default: 7d].
    since: Option<Duration>,
}

fn health(ctx: &Context, args: &JsonObject, _: Access) -> anyhow::Result<Captured> {
    let p: HealthParams = parse("loops_health", args)?;
    run(ctx, request(p))
}

/// The request of `loops_health`: what is not given takes the command
/// line's default.
fn request(p: HealthParams) -> Command {
    Command::Health(HealthArgs {
        since: p
            .since
            .map_or_else(|| DEFAULT_HEALTH_SINCE.to_owned(), |d| d.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_is_the_flags_value_or_its_default() {
        let parsed = |v: serde_json::Value| {
            let serde_json::Value::Object(args) = v else {
                panic!("not an object");
            };
            match request(parse("t", &args).unwrap()) {
                Command::Health(h) => h.since,
                other => panic!("not health: {other:?}"),
            }
        };
        assert_eq!(parsed(serde_json::json!({})), "7d");
        assert_eq!(parsed(serde_json::json!({"since": "--1d"})), "--1d");
        assert_eq!(parsed(serde_json::json!({"since": 60000})), "60000ms");
        assert_eq!(parsed(serde_json::json!({"since": "500"})), "500");
    }
}
