//! How much of a client's value an error quotes back (issue 25 §5): at most
//! [`QUOTED_CHARS`] characters, then `…`, so a megabyte argument does not
//! come back as a megabyte message.
//!
//! The server's own messages cut what they quote ([`cut`]). The messages of
//! the commands a tool runs are the CLI's, which quote a value whole (`loop
//! not found: <name>`), or a part of it; [`cut_arguments`] finds each long
//! argument in such a message, as it is or escaped as `{:?}` and JSON
//! escape it, and cuts it there; then it cuts every other run of more than
//! [`QUOTED_CHARS`] characters of those texts ([`cut_runs`]). Whatever such
//! a message still holds (a value quoted otherwise transformed) is capped
//! at [`MESSAGE_CHARS`] ([`cap`]), which every error the server sends also
//! passes through.

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};

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
    let mut forms: Vec<Cow<'_, str>> = Vec::new();
    for value in long {
        forms.push(Cow::Borrowed(value));
        let debug = format!("{value:?}");
        let json = Value::String(value.to_owned()).to_string();
        for escaped in [&debug[1..debug.len() - 1], &json[1..json.len() - 1]] {
            if escaped != value && !forms.iter().any(|form| form == escaped) {
                forms.push(Cow::Owned(escaped.to_owned()));
            }
        }
    }
    let mut message = message.to_owned();
    for form in &forms {
        if form.chars().nth(QUOTED_CHARS).is_some() && message.contains(&**form) {
            message = message.replace(&**form, &cut(form));
        }
    }
    let forms: Vec<&str> = forms.iter().map(|form| &**form).collect();
    cap(&cut_runs(&message, &forms)).into_owned()
}

/// The window by which [`cut_runs`] finds runs, in bytes: a run of more
/// than [`QUOTED_CHARS`] characters is at least this long.
const WINDOW: usize = QUOTED_CHARS + 1;

/// The most of a message [`cut_runs`] searches, in bytes; the rest is cut.
const SEARCHED: usize = 64 << 10;

/// `message` with each run of text found in one of `texts` cut to its first
/// [`QUOTED_CHARS`] characters, so no run of more than that many characters
/// of them is left whole.
///
/// A byte of the message is in a run when a [`WINDOW`] of the message that
/// holds it is also in one of `texts`; windows that meet make one run.
/// Windows are compared by a rolling hash, then byte for byte.
fn cut_runs<'a>(message: &'a str, texts: &[&str]) -> Cow<'a, str> {
    if message.len() < WINDOW || texts.iter().all(|text| text.len() < WINDOW) {
        return Cow::Borrowed(message);
    }
    let mut end = message.len().min(SEARCHED);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    let (searched, rest) = message.split_at(end);
    let bytes = searched.as_bytes();
    let hash = Rolling::new();
    // Where the message's windows start, by hash, until found.
    let mut starts: HashMap<u64, Vec<usize>> = HashMap::new();
    hash.windows(bytes, |at, h| starts.entry(h).or_default().push(at));
    let mut found = vec![false; bytes.len().saturating_sub(WINDOW) + 1];
    for text in texts {
        if starts.is_empty() {
            break;
        }
        let text = text.as_bytes();
        hash.windows(text, |at, h| {
            let Some(same_hash) = starts.get_mut(&h) else {
                return;
            };
            let window = &text[at..at + WINDOW];
            same_hash.retain(|&start| {
                let same = &bytes[start..start + WINDOW] == window;
                found[start] |= same;
                !same
            });
            if same_hash.is_empty() {
                starts.remove(&h);
            }
        });
    }
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for start in (0..found.len()).filter(|&at| found[at]) {
        match runs.last_mut() {
            Some((_, end)) if start <= *end => *end = start + WINDOW,
            _ => runs.push((start, start + WINDOW)),
        }
    }
    if runs.is_empty() && rest.is_empty() {
        return Cow::Borrowed(message);
    }
    let mut cut_message = String::with_capacity(searched.len());
    let mut copied = 0;
    for (mut start, mut end) in runs {
        while !searched.is_char_boundary(start) {
            start -= 1;
        }
        while !searched.is_char_boundary(end) {
            end += 1;
        }
        let start = start.max(copied);
        cut_message.push_str(&searched[copied..start]);
        cut_message.push_str(&cut(&searched[start..end]));
        copied = end;
    }
    cut_message.push_str(&searched[copied..]);
    if !rest.is_empty() {
        cut_message.push(CUT);
    }
    Cow::Owned(cut_message)
}

/// A polynomial hash of [`WINDOW`]-byte windows modulo the prime 2^61 - 1,
/// rolled from each window to the next, with a random base: a client
/// cannot choose windows whose hashes meet.
struct Rolling {
    base: u64,
    /// `base` to the power `WINDOW - 1`: the weight of a window's first
    /// byte.
    first: u64,
}

impl Rolling {
    const MODULUS: u64 = (1 << 61) - 1;

    fn new() -> Rolling {
        let base = RandomState::new().hash_one(0_u8) % (Self::MODULUS - 256) + 256;
        let first = (1..WINDOW).fold(1, |power, _| Self::mul(power, base));
        Rolling { base, first }
    }

    fn mul(a: u64, b: u64) -> u64 {
        let product = u128::from(a) * u128::from(b);
        // 2^61 is 1 modulo 2^61 - 1. Both halves are below 2^61.
        let low = u64::try_from(product & u128::from(Self::MODULUS)).unwrap_or(0);
        let high = u64::try_from(product >> 61).unwrap_or(0);
        Self::add(low, high)
    }

    fn add(a: u64, b: u64) -> u64 {
        let sum = a + b;
        if sum >= Self::MODULUS {
            sum - Self::MODULUS
        } else {
            sum
        }
    }

    /// Calls `each` with the start and the hash of every window of `bytes`.
    fn windows(&self, bytes: &[u8], mut each: impl FnMut(usize, u64)) {
        if bytes.len() < WINDOW {
            return;
        }
        let mut hash = bytes[..WINDOW].iter().fold(0, |hash, &b| {
            Self::add(Self::mul(hash, self.base), u64::from(b))
        });
        each(0, hash);
        for start in 1..=bytes.len() - WINDOW {
            let gone = Self::mul(u64::from(bytes[start - 1]), self.first);
            hash = Self::add(hash, Self::MODULUS - gone);
            hash = Self::add(
                Self::mul(hash, self.base),
                u64::from(bytes[start + WINDOW - 1]),
            );
            each(start, hash);
        }
    }
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

    /// `chars` characters of text that repeats nowhere in itself.
    fn text(chars: usize) -> String {
        let mut state: u32 = 7;
        (0..chars)
            .map(|_| {
                state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                char::from(b'a' + u8::try_from((state >> 16) % 26).unwrap_or(0))
            })
            .collect()
    }

    /// The longest run of `message` found whole in `value`, in characters.
    fn longest_run(message: &str, value: &str) -> usize {
        let chars: Vec<char> = message.chars().collect();
        let mut longest = 0;
        for start in 0..chars.len() {
            let mut end = start + longest + 1;
            while end <= chars.len()
                && value.contains(&chars[start..end].iter().collect::<String>())
            {
                longest = end - start;
                end += 1;
            }
        }
        longest
    }

    #[test]
    fn runs_of_a_value_quoted_in_part_are_cut() {
        let huge = text(20_000);
        let other = text(30_000)[25_000..].to_owned();
        let args = object(json!({"name": huge, "deep": {"x": [other]}}));
        for (message, starts) in [
            (
                format!("bad name {}: too long", &huge[100..9_000]),
                "bad name ",
            ),
            (format!("{}{}", &huge[..300], &huge[5_000..5_300]), ""),
            (format!("{} and {}", &huge[1..250], &other[3..500]), ""),
            (format!("as given: \"{}\"", &huge[7..]), "as given: \""),
        ] {
            let cut = cut_arguments(&message, &args);
            assert!(longest_run(&cut, &huge) <= QUOTED_CHARS, "{cut}");
            assert!(longest_run(&cut, &other) <= QUOTED_CHARS, "{cut}");
            assert!(cut.starts_with(starts) && cut.contains('…'), "{cut}");
            assert!(cut.chars().count() < 1_000, "{cut}");
        }
        let quoted = format!("{}…", "Q".repeat(QUOTED_CHARS));
        let queue = object(json!({"loop": "Q".repeat(10_000)}));
        let message = format!("no loop {}.", "Q".repeat(5_000));
        assert_eq!(
            cut_arguments(&message, &queue),
            format!("no loop {quoted}.")
        );
        // A run of at most 200 characters stays whole.
        let message = format!("near {} and {}", &huge[..200], &huge[900..1_000]);
        assert_eq!(cut_arguments(&message, &args), message);
    }

    #[test]
    fn runs_are_cut_between_characters() {
        let huge = "é".repeat(5_000) + &text(1_000);
        let args = object(json!({"name": huge}));
        let message = format!("x{}y", &huge[2..4_000]);
        let cut = cut_arguments(&message, &args);
        assert_eq!(cut, format!("x{}…y", "é".repeat(QUOTED_CHARS)));
    }

    #[test]
    fn a_message_that_still_quotes_too_much_is_capped() {
        let message = cut_arguments(&"z".repeat(50_000), &serde_json::Map::new());
        assert_eq!(message.chars().count(), MESSAGE_CHARS + 1);
        assert!(message.ends_with('…'));
    }
}
