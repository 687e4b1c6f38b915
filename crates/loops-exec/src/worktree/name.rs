//! Where a run's worktree lives and what its branch is called (agents note
//! §8.2), as 0.5.11 names them, so a worktree upstream made is the one
//! loops finds again:
//!
//! - the root is `$HOME/.hasna/repos/worktrees` (0.5.3's, §14 item 9);
//! - `repoSlug` is the slug of the repository's directory name (`repo`
//!   when that slug is empty);
//! - `seedSlug` is the seed's slug (`run` when empty) cut to 48 characters,
//!   `-`, and 8 hex digits of the 32-bit FNV-1a hash of
//!   `"<repoRoot>:<seed>"` over UTF-16 code units, modulo `0xffffffff`;
//! - the path is `<root>/<repoSlug>/<seedSlug>` and the branch
//!   `openloops/<repoSlug>/<seedSlug>`.
//!
//! A slug is the text lowercased, each run of characters outside
//! `[a-z0-9._-]` turned into one `-`, leading and trailing `-` trimmed,
//! and cut to 72 characters.

use std::path::{Path, PathBuf};

/// The root's place under `$HOME`.
pub(crate) const ROOT_UNDER_HOME: &str = ".hasna/repos/worktrees";

/// The branch prefix (upstream's default `worktreeBranchPrefix`).
const BRANCH_PREFIX: &str = "openloops";

/// A run's worktree: its directory and its branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Names {
    /// `<root>/<repoSlug>/<seedSlug>`.
    pub(crate) path: PathBuf,
    /// `openloops/<repoSlug>/<seedSlug>`.
    pub(crate) branch: String,
}

/// The names of the worktree of `seed` in the repository whose top level
/// (as `git rev-parse --show-toplevel` prints it) is `repo_root`.
pub(crate) fn names(root: &Path, repo_root: &str, seed: &str) -> Names {
    let base = Path::new(repo_root)
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let repo_slug = slug(&base, "repo");
    let seed_slug = format!(
        "{}-{}",
        slug(seed, "run").chars().take(48).collect::<String>(),
        hash8(&format!("{repo_root}:{seed}"))
    );
    Names {
        path: root.join(&repo_slug).join(&seed_slug),
        branch: format!("{BRANCH_PREFIX}/{repo_slug}/{seed_slug}"),
    }
}

/// The slug of `text`, or `fallback` when it is empty.
fn slug(text: &str, fallback: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_run = false;
    for c in text.to_lowercase().chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-') {
            out.push(c);
            in_run = false;
        } else if !in_run {
            out.push('-');
            in_run = true;
        }
    }
    // Only ASCII is left, so characters are bytes.
    let cut: String = out.trim_matches('-').chars().take(72).collect();
    if cut.is_empty() {
        fallback.to_owned()
    } else {
        cut
    }
}

/// 32-bit FNV-1a over the UTF-16 code units of `text`, modulo
/// `0xffffffff`, as 8 hex digits.
fn hash8(text: &str) -> String {
    let mut hash: u32 = 2_166_136_261;
    for unit in text.encode_utf16() {
        hash ^= u32::from(unit);
        hash = hash.wrapping_mul(16_777_619);
    }
    format!("{:08x}", hash % 0xffff_ffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_fnv_1a_over_utf_16_units() {
        // The published FNV-1a 32 vectors, where a unit is a byte.
        assert_eq!(hash8("a"), "e40c292c");
        assert_eq!(hash8("foobar"), "bf9cf968");
        // One unit, 0xe9, where UTF-8 would hash two bytes; and a
        // surrogate pair for a character outside the BMP.
        assert_eq!(hash8("é"), "6c0b6c44");
        assert_eq!(hash8("😀"), "cb31c4b8");
        assert_eq!(hash8(""), "811c9dc5");
    }

    #[test]
    fn slugs() {
        let cases = [
            ("My Repo", "my-repo"),
            ("a- b", "a--b"),
            ("--Ünïcode--", "n-code"),
            ("wf1:build", "wf1-build"),
            ("a.b_c-d", "a.b_c-d"),
            ("???", "run"),
            ("", "run"),
        ];
        for (text, want) in cases {
            assert_eq!(slug(text, "run"), want, "{text}");
        }
        assert_eq!(slug(&"x".repeat(100), "run").len(), 72);
    }

    #[test]
    fn names_follow_the_notes_recipe() {
        let root = Path::new("/home/u/.hasna/repos/worktrees");
        let got = names(root, "/home/u/src/app", "0123456789ab");
        // hash8("/home/u/src/app:0123456789ab"), computed independently.
        assert_eq!(
            got,
            Names {
                path: root.join("app/0123456789ab-f6195c46"),
                branch: "openloops/app/0123456789ab-f6195c46".to_owned(),
            }
        );
        let step = names(root, "/srv/repo", "wf1:build");
        assert_eq!(step.branch, "openloops/repo/wf1-build-ed4208f0");
        // A long seed keeps 48 characters before the hash; the root
        // directory's empty name becomes `repo`.
        let long = names(root, "/", &"s".repeat(80));
        assert_eq!(
            long.path.file_name().unwrap().to_str().unwrap().len(),
            48 + 1 + 8
        );
        assert!(long.branch.starts_with("openloops/repo/"));
        // Two seeds, two worktrees; one seed, always the same.
        assert_ne!(names(root, "/r", "a").path, names(root, "/r", "b").path);
        assert_eq!(names(root, "/r", "a"), names(root, "/r", "a"));
    }
}
