//! Doctor's `path` check: the PATH runs get (SPEC §5.5), and the entries of
//! this PATH that loops drops (issue 25 §9).
//!
//! An empty or relative PATH entry (`.`, `::`, `bin`) names the current
//! directory or one under it, so a program planted there would run in
//! place of the one meant: `doctor` once ran `./accounts --version`. Loops
//! drops such entries from the PATH it probes with and gives to runs, and
//! this check says so, naming them.

use std::collections::BTreeMap;

use super::{Check, CheckStatus};

/// The `path` check of the environment `env` the daemon would start from:
/// `ok` with the normalized PATH as its detail, a warning naming the
/// entries that were dropped.
pub(super) fn check(env: &BTreeMap<String, String>) -> Check {
    let path = loops_exec::normalize_path(env);
    let count = path.split(':').filter(|p| !p.is_empty()).count();
    let own = env.get("PATH").map_or("", String::as_str);
    let dropped = loops_exec::dropped_path_entries(own);
    let check = if dropped.is_empty() {
        Check::new(
            "path",
            CheckStatus::Ok,
            format!("runs get a normalized PATH of {count} entries"),
        )
    } else {
        // Quoted and escaped: an entry is the user's text, and may be empty.
        let named: Vec<String> = dropped.iter().map(|e| format!("{e:?}")).collect();
        Check::new(
            "path",
            CheckStatus::Warn,
            format!(
                "runs get a normalized PATH of {count} entries; dropped the relative or \
                 empty PATH entries {}, which would run programs from the current directory",
                named.join(", ")
            ),
        )
    };
    check.detail(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(path: &str) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("PATH".to_owned(), path.to_owned()),
            ("HOME".to_owned(), "/h".to_owned()),
        ])
    }

    #[test]
    fn relative_and_empty_entries_are_named_as_dropped() {
        let clean = check(&env("/usr/bin:/bin"));
        assert_eq!(clean.status, CheckStatus::Ok);
        assert!(!clean.message.contains("dropped"), "{}", clean.message);

        let dirty = check(&env(".:/usr/bin::bin\u{1b}[2J"));
        assert_eq!(dirty.status, CheckStatus::Warn);
        assert!(
            dirty
                .message
                .contains(r#"dropped the relative or empty PATH entries ".", "", "bin\u{1b}[2J""#),
            "{}",
            dirty.message
        );
        let detail = dirty.detail.unwrap();
        assert!(detail.starts_with("/usr/bin:/h/.local/bin:"), "{detail}");
    }
}
