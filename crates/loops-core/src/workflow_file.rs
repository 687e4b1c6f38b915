//! The workflow file format as a type, and its JSON Schema (SPEC §6.1).
//!
//! [`WorkflowFile`] has the serde shape of a workflow file: what
//! `loops workflows create` reads. The schema is generated from it (and from
//! [`Step`] and the target types it contains) with `schemars`, so the
//! published schema and the types that read the file cannot drift apart.
//!
//! The schema describes the shape; it cannot express every rule of
//! [`workflow_from_json`](crate::workflow_from_json), which stays the
//! authority (unique step ids, known dependencies, no cycles, commands
//! without spaces unless `shell` is true).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::Step;

/// The largest accepted `maxParallel` of a workflow. New in loops: the
/// original always runs steps one at a time (SPEC §9 item 35).
pub const MAX_WORKFLOW_PARALLEL: u32 = 64;

/// A workflow file: `{name, description?, version?, maxParallel?, steps[]}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(title = "loops workflow file")]
pub struct WorkflowFile {
    /// The workflow's name; unique among active workflows. `--name`
    /// overrides it. Trimmed when stored.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A version number; 1 when unset. Stored as given, never changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub version: Option<u32>,
    /// Most steps that run at once; 1 (one at a time, in the order of SPEC
    /// §6.2) when unset. Independent steps whose dependencies are done run
    /// side by side up to this limit. New in loops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = MAX_WORKFLOW_PARALLEL))]
    pub max_parallel: Option<u32>,
    /// The steps, at least one. A step runs after the steps in its
    /// `dependsOn`.
    #[schemars(length(min = 1))]
    pub steps: Vec<Step>,
}

/// The JSON Schema (draft 2020-12) of a workflow file, generated from
/// [`WorkflowFile`].
///
/// ```
/// let schema = loops_core::workflow_file_schema();
/// assert_eq!(schema["required"], serde_json::json!(["name", "steps"]));
/// ```
pub fn workflow_file_schema() -> serde_json::Value {
    schemars::schema_for!(WorkflowFile).to_value()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schema_has_the_file_properties() {
        let schema = workflow_file_schema();
        assert_eq!(schema["type"], json!("object"));
        let properties = schema["properties"]
            .as_object()
            .expect("the schema describes an object");
        let keys: Vec<&str> = properties.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["name", "description", "version", "maxParallel", "steps"]
        );
        assert_eq!(schema["required"], json!(["name", "steps"]));
        assert_eq!(properties["maxParallel"]["maximum"], json!(64));
        assert_eq!(properties["maxParallel"]["minimum"], json!(1));
        // Steps and both target kinds are described, with the tag.
        let text = schema.to_string();
        for needle in [
            "\"dependsOn\"",
            "\"continueOnFailure\"",
            "\"provider\"",
            "\"command\"",
            "\"claude\"",
        ] {
            assert!(text.contains(needle), "{needle} missing from {text}");
        }
    }

    #[test]
    fn the_type_reads_a_workflow_file() {
        let file: WorkflowFile = serde_json::from_value(json!({
            "name": "w",
            "maxParallel": 4,
            "steps": [{"id": "a", "target": {"type": "command", "command": "true"}}]
        }))
        .unwrap();
        assert_eq!(file.max_parallel, Some(4));
        assert_eq!(file.steps[0].id, "a");
        assert_eq!(MAX_WORKFLOW_PARALLEL, 64);
    }
}
