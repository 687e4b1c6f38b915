//! `POST /api/v1/loops`: creates a loop from a JSON body, the arguments of
//! the MCP tool `loops_create_command` (or, with a `workflow` field,
//! `loops_create_workflow`), through the same request builders, so a
//! client that knows one knows the other, and what it leaves out takes the
//! command line's default.

use anyhow::{Result, bail};
use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde_json::Value;

use crate::args::{self, Command, Create};
use crate::mcp::params::CreateWorkflowParams;
use crate::mcp::tools::{create_command_request, loop_options, parse, schema};

/// The create request of `body`; a body that is not an object, or has a
/// field the tool's schema does not know, is refused before anything runs.
pub(super) fn request(body: &[u8]) -> Result<Command> {
    let fields = object(body, "a JSON object of the loop's fields")?;
    if fields.contains_key("workflow") {
        let p: CreateWorkflowParams = params("the loop", &fields)?;
        return Ok(Command::Create(Create::Workflow(args::CreateWorkflow {
            options: loop_options(p.options)?,
            workflow: p.workflow,
            timeout: p.timeout.map(|d| d.0),
        })));
    }
    create_command_request(params("the loop", &fields)?)
}

/// `POST /api/v1/apply`: the request of `body`, the arguments of the MCP
/// tool `loops_apply` (issue 31); an unknown field is refused.
pub(super) fn apply_request(body: &[u8]) -> Result<Command> {
    let fields = object(body, "a JSON object such as {\"path\": \"loops.toml\"}")?;
    Ok(crate::mcp::tools::apply_request(params(
        "the apply",
        &fields,
    )?))
}

/// `body` as a JSON object; `shape` says what it should be.
fn object(body: &[u8], shape: &str) -> Result<JsonObject> {
    match serde_json::from_slice(body) {
        Ok(Value::Object(fields)) => Ok(fields),
        Ok(_) => bail!("the body must be {shape}"),
        Err(e) => bail!("the body must be {shape}: {e}"),
    }
}

/// The tool arguments `P` of `fields`, none unknown to its schema; `what`
/// names them in errors.
fn params<P: JsonSchema + serde::de::DeserializeOwned + 'static>(
    what: &str,
    fields: &JsonObject,
) -> Result<P> {
    known::<P>(fields)?;
    parse(what, fields)
}

/// Refuses a field `P`'s schema does not name.
fn known<P: JsonSchema + 'static>(fields: &JsonObject) -> Result<()> {
    let schema = schema::<P>();
    let names = schema.get("properties").and_then(Value::as_object);
    match fields
        .keys()
        .find(|k| !names.is_some_and(|n| n.contains_key(*k)))
    {
        Some(key) => {
            let names: Vec<&str> = names
                .map(|n| n.keys().map(String::as_str).collect())
                .unwrap_or_default();
            bail!(
                "a loop has no field {key:?}; its fields are: {}",
                names.join(", ")
            )
        }
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_becomes_the_create_request_or_is_refused() {
        let made = request(br#"{"name": "n", "cmd": "true", "every": "5m"}"#).unwrap();
        assert!(
            matches!(made, Command::Create(Create::Command(_))),
            "{made:?}"
        );
        let made = request(br#"{"name": "n", "workflow": "w", "every": "5m"}"#).unwrap();
        assert!(
            matches!(made, Command::Create(Create::Workflow(_))),
            "{made:?}"
        );
        let err = request(br#"{"name": "n", "cmd": "true", "evry": "5m"}"#).unwrap_err();
        assert!(err.to_string().contains("no field \"evry\""), "{err}");
        assert!(request(b"[1]").is_err());
    }
}
