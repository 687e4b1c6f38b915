//! The MCP tools `loops_cancel` (issue 28) and `loops_stop`: cancel a run
//! or a loop's running runs, as `loops cancel --json` does, through the
//! same request; the cancel is recorded as by `mcp`.
//!
//! Both are mutations: refused unless the server was started with
//! `LOOPS_MCP_ALLOW_MUTATIONS=true`, as every mutation is (`tools::call`).

use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde::Deserialize;

use super::Access;
use super::params::Duration;
use super::tools::{ToolDef, one_loop, parse, run, schema};
use crate::app::Captured;
use crate::args::Command;
use crate::args::cancel::{CancelArgs, DEFAULT_CANCEL_GRACE, StopArgs};
use crate::context::Context;

/// Who a cancel through the MCP server is recorded as by.
const BY: &str = "mcp";

/// `loops_cancel`.
pub(super) const TOOL: ToolDef = ToolDef {
    name: "loops_cancel",
    description: "Cancel a running run, or every running run of a loop (loops cancel --json): \
                  its process group gets SIGTERM, then SIGKILL after grace; the run is recorded \
                  cancelled by mcp, not retried and not counted as a failure. \
                  Needs LOOPS_MCP_ALLOW_MUTATIONS=true.",
    mutation: true,
    schema: schema::<CancelParams>,
    call: cancel,
};

/// The arguments of `loops_cancel`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct CancelParams {
    /// A run id, or a loop's id or name (its running runs).
    target: String,
    /// Between SIGTERM and SIGKILL [default: 5s].
    grace: Option<Duration>,
}

fn cancel(ctx: &Context, args: &JsonObject, _: Access) -> anyhow::Result<Captured> {
    let p: CancelParams = parse("loops_cancel", args)?;
    run(ctx, request(p))
}

/// The request of `loops_cancel`: what is not given takes the command
/// line's default.
fn request(p: CancelParams) -> Command {
    Command::Cancel(CancelArgs {
        target: p.target,
        grace: p
            .grace
            .map_or_else(|| DEFAULT_CANCEL_GRACE.to_owned(), |d| d.0),
        by: Some(BY.to_owned()),
    })
}

/// `loops_stop`: `loops stop`, without `--cancel`.
pub(super) fn stop(ctx: &Context, args: &JsonObject, _: Access) -> anyhow::Result<Captured> {
    run(
        ctx,
        Command::Stop(StopArgs::of(one_loop("loops_stop", args)?)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancel_is_by_mcp_with_the_flags_default_grace() {
        let serde_json::Value::Object(args) = serde_json::json!({"target": "backup"}) else {
            panic!("not an object");
        };
        match request(parse("t", &args).unwrap()) {
            Command::Cancel(c) => {
                assert_eq!(c.target, "backup");
                assert_eq!(c.grace, "5s");
                assert_eq!(c.by.as_deref(), Some("mcp"));
            }
            other => panic!("not cancel: {other:?}"),
        }
    }
}
