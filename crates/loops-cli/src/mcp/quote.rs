//! How much of a client's value an error quotes back (issue 25 §5): at most
//! [`QUOTED_CHARS`] characters, then `…`, so a megabyte argument does not
//! come back as a megabyte message.
//!
//! The server's own messages cut what they quote ([`cut`]). The messages of
//! the commands a tool runs are the CLI's, which quote a value whole (`loop
//! not found: <name>`); [`cut_arguments`] finds each long argument in such
//! a message, as it is or escaped as `{:?}` and JSON escape it, and cuts
//! it there. Whatever such a message still holds is capped at
//! [`MESSAGE_CHARS`] ([`cap`]), which every error the server sends also
//! passes through.

use std::borrow::Cow;

use serde_json::Value;

/// The most characters of a value an error quotes.
pub(super) const QUOTED_CHARS: usize = 200;

/// The most characters of an error message.
pub(super) const MESSAGE_CHARS: usize = 2000;

/// What marks a cut.
const CUT: char = '…';

/// `value`'s first [`QUOTED_CHARS`] characters, and `…` when there were
/// more.
pub(super) fn cut(value: &str) -> Cow<'_, str> {
    cut_at(value, QUOTED_CHARS)
}

/// `message`'s first [`MESSAGE_CHARS`] characters, and `…` when there were
/// more.
pub(super) fn cap(message: &str) -> Cow<'_, str> {
    cut_at(message, MESSAGE_CHARS)
}

fn cut_at(text: &str, chars: usize) -> Cow<'_, str> {
    match text.char_indices().nth(chars) {
        Some((at, _)) => Cow::Owned(format!("{}{CUT}", &text[..at])),
        None => Cow::Borrowed(text),
    }
}

/// `message` (an error about a call with `arguments`) with every argument
/// longer than [`QUOTED_CHARS`] characters, key or string value at any
/// depth, cut where the message quotes it; then [`cap`]ped.
pub(super) fn cut_arguments(message: &str, arguments: &serde_json::Map<String, Value>) -> String {
    let mut long = Vec::new();
    long_strings(arguments, &mut long);
    // Longest first, so a value that holds another is cut whole.
    long.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut message = message.to_owned();
    for value in long {
        let debug = format!("{value:?}");
        let json = Value::String(value.to_owned()).to_string();
        let forms = [value, &debug[1..debug.len() - 1], &json[1..json.len() - 1]];
        for form in forms {
            if form.chars().nth(QUOTED_CHARS).is_some() && message.contains(form) {
                message = message.replace(form, &cut(form));
            }
        }
    }
    cap(&message).into_owned()
}

/// The keys and string values longer than [`QUOTED_CHARS`] characters in
/// `object`, at any depth.
fn long_strings<'a>(object: &'a serde_json::Map<String, Value>, out: &mut Vec<&'a str>) {
    fn walk<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
        match value {
            Value::String(s) => push(s, out),
            Value::Array(items) => items.iter().for_each(|item| walk(item, out)),
            Value::Object(object) => long_strings(object, out),
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
    fn push<'a>(s: &'a str, out: &mut Vec<&'a str>) {
        if s.chars().nth(QUOTED_CHARS).is_some() {
            out.push(s);
        }
    }
    for (key, value) in object {
        push(key, out);
        walk(value, out);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(value: Value) -> serde_json::Map<String, Value> {
        match value {
            Value::Object(object) => object,
            _ => serde_json::Map::new(),
        }
    }

    #[test]
    fn short_values_and_messages_are_kept() {
        assert_eq!(cut("short"), "short");
        let exactly = "é".repeat(QUOTED_CHARS);
        assert_eq!(cut(&exactly), exactly);
        let args = object(json!({"loop": "nightly", "n": 5}));
        assert_eq!(
            cut_arguments("loop not found: nightly", &args),
            "loop not found: nightly"
        );
    }

    #[test]
    fn long_values_are_cut_where_quoted_raw_or_escaped() {
        let huge = "Q".repeat(10_000);
        let quoted = format!("{}…", "Q".repeat(QUOTED_CHARS));
        assert_eq!(cut(&huge), quoted);
        let args = object(json!({"loop": huge, "deep": [{"x": format!("a\"{huge}")}]}));
        assert_eq!(
            cut_arguments(&format!("loop not found: {huge}"), &args),
            format!("loop not found: {quoted}")
        );
        let escaped = format!("no {:?} here", format!("a\"{huge}"));
        let message = cut_arguments(&escaped, &args);
        assert!(message.len() < 300, "{message}");
        assert!(message.starts_with("no \"a\\\"QQQ"), "{message}");
        let key = object(json!({huge.clone(): 1}));
        let message = cut_arguments(&format!("no argument {huge:?}"), &key);
        assert_eq!(message, format!("no argument \"{quoted}\""));
    }

    #[test]
    fn a_message_that_still_quotes_too_much_is_capped() {
        let message = cut_arguments(&"z".repeat(50_000), &serde_json::Map::new());
        assert_eq!(message.chars().count(), MESSAGE_CHARS + 1);
        assert!(message.ends_with('…'));
    }
}
