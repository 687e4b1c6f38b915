//! The shape of the two prose files read line by line in review (issue 26):
//! `ARCHITECTURE.md` holds one sentence per line of at most
//! [`MAX_ARCHITECTURE_CHARS`] characters, and `CHANGELOG.md` one line per
//! change of at most [`MAX_CHANGELOG_CHARS`] characters.
//!
//! "One sentence per line" is a heuristic: a line breaks it when, outside
//! code spans and fenced code blocks, a period (with any closing `)`, `"`,
//! `'`, `*` or `_` after it) is followed by a space and then an uppercase
//! letter or a code span. A numbered list item's `1. ` and the
//! abbreviations in [`ABBREVIATIONS`] are not sentence ends.

use std::path::Path;

/// The longest line of `ARCHITECTURE.md`, in characters.
pub(crate) const MAX_ARCHITECTURE_CHARS: usize = 200;

/// The longest line of `CHANGELOG.md`, in characters.
pub(crate) const MAX_CHANGELOG_CHARS: usize = 300;

/// Words whose period does not end a sentence.
const ABBREVIATIONS: [&str; 4] = ["e.g", "i.e", "cf", "vs"];

/// The problems of `ARCHITECTURE.md` and `CHANGELOG.md` under `root`; a
/// file that is not there has none.
pub(crate) fn check(root: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    if let Ok(text) = std::fs::read_to_string(root.join("ARCHITECTURE.md")) {
        problems.extend(architecture("ARCHITECTURE.md", &text));
    }
    if let Ok(text) = std::fs::read_to_string(root.join("CHANGELOG.md")) {
        problems.extend(changelog("CHANGELOG.md", &text));
    }
    problems
}

/// A problem for every line of `text` (the architecture document, shown as
/// `shown`) that is too long or holds more than one sentence.
fn architecture(shown: &str, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let mut fenced = false;
    for (n, line) in text.lines().enumerate() {
        let chars = line.chars().count();
        if chars > MAX_ARCHITECTURE_CHARS {
            problems.push(format!(
                "{shown}:{}: {chars} characters, over the {MAX_ARCHITECTURE_CHARS}-character \
                 cap; split the sentence",
                n + 1
            ));
        }
        if is_fence(line) {
            fenced = !fenced;
            continue;
        }
        if !fenced && second_sentence(line) {
            problems.push(format!(
                "{shown}:{}: more than one sentence; put each sentence on a line of its own",
                n + 1
            ));
        }
    }
    problems
}

/// A problem for every list line of `text` (the changelog, shown as
/// `shown`) over [`MAX_CHANGELOG_CHARS`] characters, and for every
/// indented line, which would continue a change on a second line.
fn changelog(shown: &str, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let mut fenced = false;
    for (n, line) in text.lines().enumerate() {
        if is_fence(line) {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let chars = line.chars().count();
        if line.starts_with("- ") && chars > MAX_CHANGELOG_CHARS {
            problems.push(format!(
                "{shown}:{}: {chars} characters, over the {MAX_CHANGELOG_CHARS}-character \
                 cap for a change; keep the gist, the details belong in the commit",
                n + 1
            ));
        } else if line.starts_with([' ', '\t']) && !line.trim().is_empty() {
            problems.push(format!(
                "{shown}:{}: a change continued on another line; keep each change on one line",
                n + 1
            ));
        }
    }
    problems
}

/// Whether `line` opens or closes a fenced code block.
fn is_fence(line: &str) -> bool {
    let trimmed = line.trim_start();
    trimmed.starts_with("```") || trimmed.starts_with("~~~")
}

/// Whether `line` holds a sentence end followed by another sentence,
/// outside its code spans.
fn second_sentence(line: &str) -> bool {
    let prose = without_code_spans(line);
    let chars: Vec<char> = prose.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if c != '.' || ends_abbreviation(&chars[..i]) || is_list_number(&chars[..i]) {
            continue;
        }
        let mut next = i + 1;
        while chars
            .get(next)
            .is_some_and(|c| matches!(c, ')' | '"' | '\'' | '*' | '_'))
        {
            next += 1;
        }
        if chars.get(next) != Some(&' ') {
            continue;
        }
        if chars
            .get(next + 1)
            .is_some_and(|&c| c.is_uppercase() || c == CODE)
        {
            return true;
        }
    }
    false
}

/// What a code span becomes in [`without_code_spans`].
const CODE: char = '`';

/// `line` with each code span (a run of backticks up to the next run of
/// the same length) replaced by one backtick; an unmatched run stays as
/// it is.
fn without_code_spans(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let after = &rest[start..];
        let run = after.len() - after.trim_start_matches('`').len();
        let body = &after[run..];
        match closing_run(body, run) {
            Some(end) => {
                out.push(CODE);
                rest = &body[end + run..];
            }
            None => {
                out.push_str(&after[..run]);
                rest = body;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Where in `text` the next run of exactly `len` backticks starts.
fn closing_run(text: &str, len: usize) -> Option<usize> {
    let mut offset = 0;
    while let Some(found) = text[offset..].find('`') {
        let start = offset + found;
        let run = text[start..].len() - text[start..].trim_start_matches('`').len();
        if run == len {
            return Some(start);
        }
        offset = start + run;
    }
    None
}

/// Whether the text before a period ends in one of [`ABBREVIATIONS`].
fn ends_abbreviation(before: &[char]) -> bool {
    let start = before
        .iter()
        .rposition(|c| c.is_whitespace() || *c == '(')
        .map_or(0, |i| i + 1);
    let word: String = before[start..].iter().collect();
    ABBREVIATIONS.iter().any(|a| word.eq_ignore_ascii_case(a))
}

/// Whether the text before a period is a numbered list item's number.
fn is_list_number(before: &[char]) -> bool {
    let mut number = before.iter().skip_while(|c| c.is_whitespace()).peekable();
    number.peek().is_some() && number.all(char::is_ascii_digit)
}

#[cfg(test)]
mod tests {
    use super::{architecture, changelog, second_sentence, without_code_spans};

    #[test]
    fn sentence_ends_followed_by_a_capital_or_code_are_reported() {
        for two in [
            "One sentence. Another one.",
            "The wait is bounded (30 s). It is reported.",
            "It ends with code `x`. `y` starts the next.",
            "A quote ends \"here.\" Then more.",
            "**The contract.** An operation's contract is its doc.",
            "  - a list item. Its second sentence.",
        ] {
            assert!(second_sentence(two), "{two}");
        }
    }

    #[test]
    fn one_sentence_lines_pass() {
        for one in [
            "One sentence, with `a.b` and `Store::open. Not prose` in code.",
            "Versions such as 0.3.1 and 1.5 times, e.g. Linux, i.e. This one.",
            "1. A numbered item.",
            "  12. Another numbered item.",
            "A period then lowercase. continues the sentence.",
            "Ends with a period.",
            "| `a` | table. cell |",
            "``code with ` inside. Still code``, then prose.",
            "An unmatched ` backtick, then prose.",
        ] {
            assert!(!second_sentence(one), "{one}");
        }
    }

    #[test]
    fn code_spans_are_replaced_by_one_backtick() {
        assert_eq!(without_code_spans("a `b. C` d"), "a ` d");
        assert_eq!(without_code_spans("a ``b ` c`` d"), "a ` d");
        assert_eq!(without_code_spans("a ` b"), "a ` b");
        assert_eq!(without_code_spans("`x`.`y`"), "`.`");
    }

    #[test]
    fn architecture_lines_are_capped_and_one_sentence_each() {
        let long = "x".repeat(super::MAX_ARCHITECTURE_CHARS + 1);
        let at_cap = "é".repeat(super::MAX_ARCHITECTURE_CHARS);
        let text = format!(
            "# Title\n\n{at_cap}\n{long}\nFirst. Second.\n```sh\necho one. Two\n```\nAfter the block.\n"
        );
        assert_eq!(
            architecture("A.md", &text),
            [
                format!(
                    "A.md:4: {} characters, over the 200-character cap; split the sentence",
                    super::MAX_ARCHITECTURE_CHARS + 1
                ),
                "A.md:5: more than one sentence; put each sentence on a line of its own".to_owned(),
            ]
        );
    }

    #[test]
    fn changelog_changes_are_capped_and_on_one_line() {
        let long = format!("- {}", "x".repeat(super::MAX_CHANGELOG_CHARS - 1));
        let at_cap = format!("- {}", "é".repeat(super::MAX_CHANGELOG_CHARS - 2));
        let intro = "y".repeat(super::MAX_CHANGELOG_CHARS + 1);
        let text = format!(
            "# Changelog\n\n{intro}\n\n### Added\n\n{at_cap}\n{long}\n- A change\n  that goes on.\n"
        );
        let problems = changelog("C.md", &text);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].starts_with("C.md:8: 301 characters"),
            "{problems:?}"
        );
        assert!(
            problems[1].starts_with("C.md:10: a change continued"),
            "{problems:?}"
        );
    }

    #[test]
    fn the_tree_s_prose_files_pass() {
        let root = super::super::super::root();
        let problems = super::check(&root);
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }
}
