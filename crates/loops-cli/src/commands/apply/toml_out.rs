//! Writing a loops file's TOML (issue 31's export): JSON values as TOML,
//! keys in their order, with every string a basic string whose control,
//! bidi and zero-width characters are escapes (`\u202E`), so the file
//! shows on a terminal as it reads and means what it shows.
//!
//! A table of only plain values (an `env`) is written inline; other
//! tables and arrays of tables get their own `[a.b]` and `[[a.b]]`
//! headers, after the plain keys of the table they are in.

use std::fmt::Write as _;

use serde_json::{Map, Value};

/// The longest inline table, in characters, before it gets a header.
const INLINE_MAX: usize = 100;

/// `top` (an object) as a TOML document. `null`s are left out: TOML has
/// none, and every reader of these files takes a null as an absent key.
pub(crate) fn document(top: &Map<String, Value>) -> String {
    let mut out = String::new();
    table_body(&mut out, &[], top);
    out
}

/// The keys of `table` under the header `path` (already written): plain
/// keys first, then each sub-table and array of tables with its header.
fn table_body(out: &mut String, path: &[&str], table: &Map<String, Value>) {
    for (key, value) in table {
        if let Some(text) = inline(value) {
            let _ = writeln!(out, "{} = {text}", key_text(key));
        }
    }
    for (key, value) in table {
        if inline(value).is_some() || value.is_null() {
            continue;
        }
        let mut sub: Vec<&str> = path.to_vec();
        sub.push(key);
        let header = sub
            .iter()
            .map(|k| key_text(k))
            .collect::<Vec<_>>()
            .join(".");
        match value {
            Value::Object(inner) => {
                let _ = writeln!(out, "\n[{header}]");
                table_body(out, &sub, inner);
            }
            Value::Array(items) => {
                for item in items {
                    let _ = writeln!(out, "\n[[{header}]]");
                    if let Value::Object(inner) = item {
                        table_body(out, &sub, inner);
                    }
                }
            }
            _ => {}
        }
    }
}

/// `value` on one line, or `None` when it needs a header (a table with a
/// table in it, or too long; an array of tables).
fn inline(value: &Value) -> Option<String> {
    Some(match value {
        Value::Null => return None,
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => string_text(s),
        Value::Array(items) if items.iter().any(Value::is_object) => return None,
        Value::Array(items) => {
            let items: Vec<String> = items
                .iter()
                .filter(|v| !v.is_null())
                .map(inline)
                .collect::<Option<_>>()?;
            format!("[{}]", items.join(", "))
        }
        Value::Object(map) => {
            if map.values().any(Value::is_object) {
                return None;
            }
            let pairs: Vec<String> = map
                .iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| Some(format!("{} = {}", key_text(k), inline(v)?)))
                .collect::<Option<_>>()?;
            let text = format!("{{ {} }}", pairs.join(", "));
            if map.is_empty() {
                "{}".to_owned()
            } else if text.chars().count() > INLINE_MAX {
                return None;
            } else {
                text
            }
        }
    })
}

/// A key: bare when TOML allows it, else quoted.
fn key_text(key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if bare {
        key.to_owned()
    } else {
        string_text(key)
    }
}

/// `s` as a TOML basic string.
fn string_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() || loops_core::hides_on_terminal(c) => {
                let n = u32::from(c);
                if n > 0xFFFF {
                    let _ = write!(out, "\\U{n:08X}");
                } else {
                    let _ = write!(out, "\\u{n:04X}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(value: Value) -> String {
        document(value.as_object().unwrap())
    }

    #[test]
    fn what_it_writes_reads_back_as_the_same_values() {
        let value = json!({
            "workflow": [{"name": "w", "steps": [
                {"id": "a", "target": {"type": "command", "command": "echo \"hi\" \\ there"}},
                {"id": "b", "needs": ["a"], "env": {"K": "v"}}
            ]}],
            "loop": [
                {"name": "x y", "kind": "command", "cmd": "a\u{202e}b\u{200b}\u{1b}[31m", "env": {"A B": "1", "C": "line\nnext"}, "attempts": 3, "no-shell": true, "label": ["a", "b"]},
                {"name": "z", "kind": "agent", "prompt": "tab\there", "max-cost-per-day": "0.5"}
            ]
        });
        let text = doc(value.clone());
        let back: toml::Table = toml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(serde_json::to_value(back).unwrap(), value, "{text}");
        assert!(text.contains("[[loop]]\nname = \"x y\""), "{text}");
        assert!(text.contains("[[workflow.steps]]"), "{text}");
        assert!(
            text.contains("env = { \"A B\" = \"1\", C = \"line\\nnext\" }"),
            "{text}"
        );
    }

    #[test]
    fn hidden_characters_are_escapes() {
        let text = string_text("a\u{202e}b\u{200b}c\u{1b}d\u{7f}");
        assert_eq!(text, "\"a\\u202Eb\\u200Bc\\u001Bd\\u007F\"");
        assert!(!text.chars().any(loops_core::hides_on_terminal));
    }

    #[test]
    fn a_long_or_nested_table_gets_a_header() {
        let long = "v".repeat(INLINE_MAX);
        let text = doc(json!({"t": {"k": long}, "n": {"inner": {"k": 1}}}));
        assert!(text.contains("\n[t]\nk = "), "{text}");
        // A table with a table in it gets a header; the inner one of plain
        // values stays inline.
        assert!(text.contains("\n[n]\ninner = { k = 1 }"), "{text}");
        let back: toml::Table = toml::from_str(&text).unwrap();
        assert_eq!(back["n"]["inner"]["k"].as_integer(), Some(1));
    }
}
