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

use std::fmt;

use schemars::JsonSchema;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

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

/// A workflow file's text that is not JSON, or JSON that names a key twice.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct WorkflowFileError(serde_json::Error);

impl WorkflowFileError {
    /// Whether the text is JSON but names a key twice in one object (else
    /// it is not JSON at all).
    pub fn is_duplicate_key(&self) -> bool {
        // The visitor's own error is the only data error: every value is
        // accepted.
        self.0.classify() == serde_json::error::Category::Data
    }
}

/// Reads the text of a workflow file into JSON, more strictly than
/// `serde_json::from_str`: a UTF-8 byte-order mark at the start is skipped,
/// and a key given twice in one object is an error (serde_json keeps the
/// last one silently, so a second `"steps"` would replace the first).
///
/// The result is then validated by
/// [`workflow_from_json`](crate::workflow_from_json).
///
/// ```
/// let value = loops_core::read_workflow_text("\u{feff}{\"name\": \"w\"}").unwrap();
/// assert_eq!(value["name"], "w");
/// let err = loops_core::read_workflow_text(r#"{"steps": [], "steps": []}"#).unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "duplicate key \"steps\": each key may appear once in an object; remove or rename one \
///      at line 1 column 21"
/// );
/// ```
pub fn read_workflow_text(text: &str) -> Result<Value, WorkflowFileError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut de = serde_json::Deserializer::from_str(text);
    let StrictValue(value) = StrictValue::deserialize(&mut de).map_err(WorkflowFileError)?;
    de.end().map_err(WorkflowFileError)?;
    Ok(value)
}

/// A JSON value whose objects have no duplicate keys.
struct StrictValue(Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        StrictValue::deserialize(d).map(|StrictValue(v)| v)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(StrictValue(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(format!(
                    "duplicate key {key:?}: each key may appear once in an object; remove or \
                     rename one"
                )));
            }
            let StrictValue(value) = map.next_value()?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
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

    #[test]
    fn strict_reading_matches_serde_json_on_files_without_duplicates() {
        let text = r#"{"name": "w", "version": 2, "f": 1.5, "neg": -3, "n": null,
            "steps": [{"id": "a", "dependsOn": [], "x": {"deep": [true, false]}}]}"#;
        let strict = read_workflow_text(text).unwrap();
        let loose: Value = serde_json::from_str(text).unwrap();
        assert_eq!(strict, loose);
        // Key order is kept.
        let keys: Vec<&String> = strict.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["name", "version", "f", "neg", "n", "steps"]);
    }

    #[test]
    fn duplicates_at_any_depth_and_trailing_text_are_errors() {
        for (text, message) in [
            (
                r#"{"steps": [{"id": "a", "id": "b"}]}"#,
                "duplicate key \"id\"",
            ),
            (r#"{"a": 1, "\u0061": 2}"#, "duplicate key \"a\""),
            (r#"{"a": 1} x"#, "trailing characters"),
            ("", "EOF while parsing"),
            ("\u{feff}\u{feff}{}", "expected value"),
        ] {
            let err = read_workflow_text(text).unwrap_err().to_string();
            assert!(err.contains(message), "{text}: {err}");
        }
        assert_eq!(read_workflow_text("\u{feff}[]").unwrap(), json!([]));
        assert!(
            read_workflow_text(r#"{"a": 1, "a": 1}"#)
                .unwrap_err()
                .is_duplicate_key()
        );
        assert!(!read_workflow_text("{").unwrap_err().is_duplicate_key());
    }
}
