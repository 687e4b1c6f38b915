//! `loops schema loops-file` (issue 31): the JSON Schema of a loops file,
//! made from the same clap definitions `apply` parses a table with, so it
//! can never disagree with what `apply` accepts. Editors that read JSON
//! Schema (Taplo for TOML, VS Code for JSON) complete and check with it.

use clap::ArgAction;
use serde_json::{Map, Value, json};

use super::flags::{KINDS, NOT_IN_A_FILE, create_flags};

/// The schema of a loops file.
pub(crate) fn loops_file_schema() -> Value {
    let loops: Vec<Value> = KINDS
        .iter()
        .filter_map(|kind| Some((kind, create_flags(kind)?)))
        .map(|(kind, sub)| {
            let mut properties = Map::new();
            properties.insert(
                "name".into(),
                json!({"type": "string", "minLength": 1,
                       "description": "The loop's name: its identity in the file."}),
            );
            properties.insert(
                "kind".into(),
                json!({"const": kind, "description": "The `loops create` subcommand."}),
            );
            for arg in sub.get_arguments() {
                let Some(long) = arg.get_long() else { continue };
                if NOT_IN_A_FILE.contains(&long) || long == "help" {
                    continue;
                }
                let scalar = json!({"type": ["string", "number"]});
                let mut schema = match arg.get_action() {
                    ArgAction::SetTrue => json!({"type": "boolean"}),
                    ArgAction::Append => {
                        let key_value = arg
                            .get_value_names()
                            .is_some_and(|v| v.iter().any(|n| n.as_str() == "KEY=VALUE"));
                        if key_value {
                            json!({"anyOf": [
                                {"type": "object", "additionalProperties": scalar},
                                {"type": "array", "items": scalar}
                            ]})
                        } else {
                            json!({"anyOf": [{"type": "array", "items": scalar}, scalar]})
                        }
                    }
                    _ => scalar,
                };
                if let Some(help) = arg.get_help() {
                    schema["description"] = json!(help.to_string());
                }
                properties.insert(long.to_owned(), schema);
            }
            json!({
                "type": "object",
                "title": format!("{} {kind} loop", if *kind == "agent" { "an" } else { "a" }),
                "required": ["name", "kind"],
                "properties": properties,
                "additionalProperties": false,
            })
        })
        .collect();
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "loops file",
        "description": "`loops apply`: one [[loop]] table per loop, whose keys are the long \
                        flags of `loops create <kind>` without the dashes, and [[workflow]] \
                        tables.",
        "type": "object",
        "properties": {
            "include": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Other loops files, relative to this one's directory."
            },
            "loop": {"type": "array", "items": {"oneOf": loops}},
            "workflow": {
                "type": "array",
                "description": "Workflows, applied before the loops: `name` and either `file` \
                                (a workflow JSON file) or the workflow's own keys \
                                (`loops schema workflow`).",
                "items": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {
                        "name": {"type": "string", "minLength": 1},
                        "file": {"type": "string"}
                    }
                }
            },
        },
        "additionalProperties": false,
    })
}
