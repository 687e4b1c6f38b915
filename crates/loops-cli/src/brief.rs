//! Errors as a person reads them (issue 16 §6): a missing executable is one
//! line naming it. The stored error, and `--json`, keep the SPEC §5.6 text
//! with the whole effective PATH (17 entries on a typical machine); human
//! output shows it only with `--verbose`, and `loops doctor` always does.

use std::borrow::Cow;

/// What follows the program's name in the SPEC's message.
const EFFECTIVE_PATH: &str = ". Effective PATH=";

/// `text` (an error, possibly several lines) for human output: each
/// `Executable not found in PATH: <program>. Effective PATH=<…>` loses its
/// PATH, which a pointer to `doctor` and `--verbose` replaces, unless
/// `verbose` (`--verbose`).
pub(crate) fn error(text: &str, verbose: bool) -> Cow<'_, str> {
    if verbose {
        return Cow::Borrowed(text);
    }
    shorten(text)
}

/// [`error`] on one line for a terminal: every control character, line
/// breaks included, escaped.
pub(crate) fn error_line(text: &str, verbose: bool) -> String {
    crate::render::escape_controls(&error(text, verbose), &[]).into_owned()
}

/// `text` with each missing executable's effective PATH dropped and
/// nothing said instead: for `doctor`, whose `path` check shows it.
pub(crate) fn without_path(text: &str) -> Cow<'_, str> {
    replace_path(text, "")
}

fn shorten(text: &str) -> Cow<'_, str> {
    replace_path(
        text,
        " (not on the PATH runs get: `loops doctor` shows it, --verbose prints it here)",
    )
}

/// `text` with the effective PATH of each missing executable's message
/// replaced by `instead`.
fn replace_path<'a>(text: &'a str, instead: &str) -> Cow<'a, str> {
    if !text.contains(EFFECTIVE_PATH) {
        return Cow::Borrowed(text);
    }
    let lines: Vec<String> = text
        .split('\n')
        .map(|line| match line.find(EFFECTIVE_PATH) {
            // The PATH runs to the end of its line: a PATH entry may hold
            // `: `, so nothing after it can be told apart from it.
            Some(at) if line[..at].contains("Executable not found in PATH: ") => {
                format!("{}{instead}", &line[..at])
            }
            _ => line.to_owned(),
        })
        .collect();
    Cow::Owned(lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_executable_is_one_short_line() {
        let stored =
            "workflow step a: Executable not found in PATH: nosuch. Effective PATH=/a:/b:/c";
        assert_eq!(
            shorten(stored),
            "workflow step a: Executable not found in PATH: nosuch (not on the PATH runs get: \
             `loops doctor` shows it, --verbose prints it here)"
        );
        assert_eq!(
            shorten("first\nExecutable not found in PATH: x. Effective PATH=(empty)\nlast"),
            "first\nExecutable not found in PATH: x (not on the PATH runs get: `loops doctor` \
             shows it, --verbose prints it here)\nlast"
        );
        assert_eq!(
            without_path("Executable not found in PATH: x. Effective PATH=/a"),
            "Executable not found in PATH: x"
        );
        // Anything else is left as it is, borrowed.
        for other in ["exit code 1", "Effective PATH=/a said the script"] {
            assert!(matches!(shorten(other), Cow::Borrowed(t) if t == other));
        }
    }
}
