//! Source hygiene: every Rust file under `crates/` opens with a `//!` module
//! doc, no source file outside tests is longer than [`MAX_SOURCE_LINES`]
//! lines, no file leaves a `dbg!` or `todo!` behind or silences a lint with
//! `#[allow]` where `#[expect]` would say when it stops firing, modules are `foo.rs`
//! beside `foo/` (never `mod.rs`), no line of a Rust, Markdown or TOML file
//! ends in whitespace, every item of SPEC §10's checklist is cited by a
//! test (`// SPEC §10 item N`), and `ARCHITECTURE.md` and `CHANGELOG.md`
//! keep their line shapes ([`prose`]: one sentence per line of at most 200
//! characters, one change per line of at most 300), loops-cli's modules
//! import each other in no circle ([`cli_cycles`]), and at most 8% of the
//! PostgreSQL backend's code lines stand in runs also in the SQLite
//! backend ([`backend_dup`]).
//!
//! The SPEC is read from `../shared/SPEC.md` beside the clone, or from
//! `$LOOPS_SPEC`; without it the citation check is skipped with a message.

pub(crate) mod backend_dup;
pub(crate) mod cli_cycles;
mod prose;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The longest a source file outside tests may be, so that it reads in one
/// sitting; a longer one is split along what it does.
const MAX_SOURCE_LINES: usize = 650;

/// The extensions of the files whose lines may not end in whitespace.
const TEXT_EXTENSIONS: [&str; 3] = ["rs", "md", "toml"];

/// Returns every problem found under `root/crates`, `root/tests` and
/// `root/xtask`, and the whitespace problems of those, `root/docs` and the
/// root's Markdown files.
pub(crate) fn check(root: &Path) -> Result<(), Vec<String>> {
    let mut files = Vec::new();
    for dir in ["crates", "tests", "xtask"] {
        collect(&root.join(dir), &["rs"], &mut files);
    }
    let mut problems = Vec::new();
    checklist(root, &files, &mut problems);
    problems.extend(cli_cycles::check(root));
    for file in text_files(root) {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let shown = file.strip_prefix(root).unwrap_or(&file).display();
        problems.extend(trailing_whitespace(&shown.to_string(), &text));
    }
    problems.extend(prose::check(root));
    problems.extend(backend_dup::check(root));
    problems.extend(openssl_in_lock(root));
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let shown = file
            .strip_prefix(root)
            .unwrap_or(&file)
            .display()
            .to_string();
        let in_src = shown.contains("/src/");
        let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        if in_src && !first.starts_with("//!") {
            problems.push(format!(
                "{shown}: missing a `//!` module doc on its first line"
            ));
        }
        if let Some(problem) = too_long(&shown, &text) {
            problems.push(problem);
        }
        if let Some(problem) = mod_rs(&shown) {
            problems.push(problem);
        }
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for banned in [concat!("dbg", "!("), concat!("todo", "!(")] {
                if code.contains(banned) {
                    problems.push(format!("{shown}:{}: remove `{banned}`", n + 1));
                }
            }
            if code.trim_start().starts_with(concat!("#[", "allow(")) {
                problems.push(format!(
                    "{shown}:{}: write `#[expect(` instead of `#[allow(`, so a lint that stops firing is noticed",
                    n + 1
                ));
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// Issue 32: no binary links OpenSSL (`ldd` shows no libssl or
/// libcrypto), TLS going through rustls with ring; a dependency that
/// brings `openssl-sys` back into `Cargo.lock` is refused here.
fn openssl_in_lock(root: &Path) -> Option<String> {
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).ok()?;
    lock.lines()
        .any(|l| l.trim() == "name = \"openssl-sys\"")
        .then(|| {
            "Cargo.lock: a dependency brings `openssl-sys` back; TLS goes through rustls with \
             the ring provider, so no binary links OpenSSL (issue 32)"
                .to_owned()
        })
}

/// Where the SPEC lives: `$LOOPS_SPEC` if set, else `shared/SPEC.md` beside
/// the clone (CI checks it out there).
fn spec_path(root: &Path) -> PathBuf {
    std::env::var_os("LOOPS_SPEC").map_or_else(
        || root.join("..").join("shared").join("SPEC.md"),
        PathBuf::from,
    )
}

/// Adds a problem for every SPEC §10 item that no test cites, and for every
/// citation of an item the checklist does not have. Without the SPEC (a
/// clone without `shared/` beside it) the check is skipped, visibly.
fn checklist(root: &Path, files: &[PathBuf], problems: &mut Vec<String>) {
    let spec = spec_path(root);
    let Ok(text) = std::fs::read_to_string(&spec) else {
        eprintln!(
            "tidy: skipping the SPEC §10 citation check: cannot read {} \
             (check out `shared/` beside the clone, or set LOOPS_SPEC)",
            spec.display()
        );
        return;
    };
    let items = checklist_items(&text);
    if items.is_empty() {
        problems.push(format!(
            "{}: found no numbered items under `## 10.`; update tidy's SPEC parser",
            spec.display()
        ));
        return;
    }
    let mut cited = BTreeSet::new();
    for file in files {
        let shown = file.strip_prefix(root).unwrap_or(file);
        if shown.starts_with("xtask") {
            continue;
        }
        let Ok(source) = std::fs::read_to_string(file) else {
            continue;
        };
        for (line, n) in citations(&source, is_test_file(shown)) {
            if !items.iter().any(|(item, _)| *item == n) {
                problems.push(format!(
                    "{}:{line}: cites SPEC §10 item {n}, which the checklist does not have",
                    shown.display()
                ));
            }
            cited.insert(n);
        }
    }
    for (n, words) in &items {
        if !cited.contains(n) {
            problems.push(format!(
                "SPEC §10 item {n} has no test citing it (`// SPEC §10 item {n}`): {words}"
            ));
        }
    }
}

/// The numbered items of SPEC §10, each with its first words.
fn checklist_items(spec: &str) -> Vec<(u32, String)> {
    let mut items = Vec::new();
    let mut inside = false;
    for line in spec.lines() {
        if line.starts_with("## ") {
            inside = line.starts_with("## 10.");
            continue;
        }
        if !inside {
            continue;
        }
        let Some((number, rest)) = line.split_once(". ") else {
            continue;
        };
        let Ok(n) = number.parse::<u32>() else {
            continue;
        };
        let words: Vec<&str> = rest.split_whitespace().take(8).collect();
        let mut first = words.join(" ");
        if rest.split_whitespace().count() > words.len() {
            first.push_str(" …");
        }
        items.push((n, first));
    }
    items
}

/// The problem with `text`, the source file at `shown` (relative to the
/// root), if it is longer than [`MAX_SOURCE_LINES`] and not test code.
fn too_long(shown: &str, text: &str) -> Option<String> {
    let lines = text.lines().count();
    (shown.contains("/src/") && !is_test_file(Path::new(shown)) && lines > MAX_SOURCE_LINES).then(
        || {
            format!(
                "{shown}: {lines} lines, over the {MAX_SOURCE_LINES}-line cap for source \
                 files; split it along what it does"
            )
        },
    )
}

/// The problem with the file at `shown` (relative to the root) if it is a
/// `mod.rs` in a crate's `src` or in `xtask/src`: a module is `foo.rs`
/// beside `foo/`. A test target's `tests/<name>/main.rs` and its modules
/// are not under `src`, and are left alone.
fn mod_rs(shown: &str) -> Option<String> {
    let path = Path::new(shown);
    let parts: Vec<&str> = path.iter().filter_map(|c| c.to_str()).collect();
    let in_src = matches!(
        parts.as_slice(),
        ["crates", _, "src", ..] | ["xtask", "src", ..]
    );
    (in_src && path.file_name().is_some_and(|n| n == "mod.rs")).then(|| {
        format!(
            "{shown}: a `mod.rs`; name the module file after the module, beside its \
             directory (`foo.rs` and `foo/`)"
        )
    })
}

/// A problem for every line of `text`, the file at `shown`, that ends in a
/// space or a tab.
fn trailing_whitespace(shown: &str, text: &str) -> Vec<String> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| line.ends_with([' ', '\t']))
        .map(|(n, _)| format!("{shown}:{}: trailing whitespace", n + 1))
        .collect()
}

/// The files [`trailing_whitespace`] checks: those with a
/// [`TEXT_EXTENSIONS`] extension under `crates/`, `tests/`, `xtask/` and
/// `docs/`, and the Markdown files at the root.
fn text_files(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in ["crates", "tests", "xtask", "docs"] {
        collect(&root.join(dir), &TEXT_EXTENSIONS, &mut files);
    }
    if let Ok(entries) = std::fs::read_dir(root) {
        files.extend(
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "md")),
        );
    }
    files
}

/// Whether a whole file is test code: anything in a `tests` directory, and
/// `tests.rs` modules.
fn is_test_file(path: &Path) -> bool {
    path.components().any(|c| c.as_os_str() == "tests")
        || path.file_name().is_some_and(|n| n == "tests.rs")
}

/// The §10 items cited in a file's test code, with the line of each
/// citation. Test code is the whole of a test file, and in other files
/// what follows the first `#[cfg(test)]`, plus comments inside doctests
/// (`/// // SPEC §10 item N`). Consecutive `//` lines form one comment, so a
/// citation may wrap; module and item docs (`//!`, `///`) are not citations.
fn citations(source: &str, test_file: bool) -> Vec<(usize, u32)> {
    let mut found = Vec::new();
    let mut in_tests = test_file;
    let mut block = String::new();
    let mut block_start = 0;
    for (index, line) in source.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]") {
            in_tests = true;
        }
        let comment = if let Some(doctest) = trimmed.strip_prefix("/// //") {
            Some(doctest)
        } else if trimmed.starts_with("//!") || trimmed.starts_with("///") {
            None
        } else if in_tests {
            trimmed.strip_prefix("//")
        } else {
            None
        };
        match comment {
            Some(text) => {
                if block.is_empty() {
                    block_start = index + 1;
                }
                block.push(' ');
                block.push_str(text);
            }
            None if !block.is_empty() => {
                found.extend(cited_items(&block).into_iter().map(|n| (block_start, n)));
                block.clear();
            }
            None => {}
        }
    }
    found.extend(cited_items(&block).into_iter().map(|n| (block_start, n)));
    found
}

/// The item numbers a comment cites: every `§10 item N` or `§10 items L`,
/// where `L` is numbers and ranges (`58–62`, `58-62`) joined by commas and
/// `and`, as in `§10 items 37 and 38` or `§10 items 79, 80 and 84`.
fn cited_items(comment: &str) -> Vec<u32> {
    let mut items = Vec::new();
    for (_, after) in comment
        .match_indices("§10 item")
        .map(|(i, m)| comment.split_at(i + m.len()))
    {
        let list = after.strip_prefix('s').unwrap_or(after);
        let mut rest = list.trim_start();
        while let Some((first, tail)) = leading_number(rest) {
            let mut last = first;
            rest = tail;
            if let Some(range) = rest.strip_prefix('–').or_else(|| rest.strip_prefix('-'))
                && let Some((end, tail)) = leading_number(range)
            {
                last = end;
                rest = tail;
            }
            items.extend(first..=last.max(first));
            let sep = rest.trim_start();
            let sep = sep.strip_prefix(',').unwrap_or(sep).trim_start();
            let sep = sep.strip_prefix("and ").unwrap_or(sep);
            if sep.len() == rest.len() {
                break;
            }
            rest = sep.trim_start();
        }
    }
    items
}

/// A number at the start of `s`, and what follows it.
fn leading_number(s: &str) -> Option<(u32, &str)> {
    let digits = s.len() - s.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let n = s.get(..digits)?.parse().ok()?;
    Some((n, &s[digits..]))
}

/// Adds the files under `dir` whose extension is one of `extensions`,
/// leaving out `target` directories.
fn collect(dir: &Path, extensions: &[&str], out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            collect(&path, extensions, out);
        } else if path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| extensions.contains(&e))
        {
            out.push(path);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn source_files_over_the_cap_are_reported_and_test_files_are_not() {
        let long = "x\n".repeat(super::MAX_SOURCE_LINES + 1);
        let short = "x\n".repeat(super::MAX_SOURCE_LINES);
        assert!(super::too_long("crates/a/src/lib.rs", &long).is_some());
        assert!(super::too_long("crates/a/src/lib.rs", &short).is_none());
        for test in [
            "crates/a/src/schedule/tests.rs",
            "crates/a/tests/store/open.rs",
            "tests/blackbox/daemon.rs",
        ] {
            assert!(super::too_long(test, &long).is_none(), "{test}");
        }
    }

    #[test]
    fn mod_rs_is_reported_in_src_only() {
        for bad in [
            "crates/a/src/mod.rs",
            "crates/a/src/schedule/mod.rs",
            "xtask/src/bench/mod.rs",
        ] {
            assert!(super::mod_rs(bad).is_some(), "{bad}");
        }
        for fine in [
            "crates/a/src/schedule.rs",
            "crates/a/src/schedule/cron.rs",
            "crates/a/tests/store/mod.rs",
            "tests/blackbox/mod.rs",
            "tests/blackbox/main.rs",
        ] {
            assert!(super::mod_rs(fine).is_none(), "{fine}");
        }
    }

    #[test]
    fn trailing_spaces_and_tabs_are_reported_by_line() {
        let text = "fine\nspace \n\nta\tb\ntab\t\n  indented\n";
        assert_eq!(
            super::trailing_whitespace("docs/a.md", text),
            [
                "docs/a.md:2: trailing whitespace",
                "docs/a.md:5: trailing whitespace"
            ]
        );
        assert!(super::trailing_whitespace("a.rs", "x\r\ny\n").is_empty());
    }

    #[test]
    fn whitespace_check_covers_docs_and_root_markdown() {
        let root = super::super::root();
        let files = super::text_files(&root);
        let has = |p: &str| {
            files
                .iter()
                .any(|f| f.strip_prefix(&root).unwrap() == Path::new(p))
        };
        for checked in [
            "README.md",
            "docs/perf.md",
            "xtask/Cargo.toml",
            "xtask/src/tidy.rs",
        ] {
            assert!(has(checked), "{checked} is not checked");
        }
        // Only the root's Markdown files, of the root's own files.
        assert!(!has("Cargo.toml"));
    }

    use std::path::Path;

    use super::{checklist_items, citations, cited_items};

    #[test]
    fn citation_forms() {
        assert_eq!(cited_items(" SPEC §10 item 36."), [36]);
        assert_eq!(cited_items(" SPEC §10 item 6: 7 is Sunday."), [6]);
        assert_eq!(cited_items(" SPEC §10 items 37 and 38."), [37, 38]);
        assert_eq!(
            cited_items(" SPEC §10 items 58–62, spelled out."),
            [58, 59, 60, 61, 62]
        );
        assert_eq!(
            cited_items(" §10 items 79, 80 and 84; §9 item 3"),
            [79, 80, 84]
        );
        assert_eq!(cited_items(" SPEC §9 item 10, §10 item 30."), [30]);
        assert_eq!(cited_items(" SPEC §10 item 43, §3.4 step 2"), [43]);
        assert_eq!(
            cited_items(" SPEC §10 items 18-20 and 29"),
            [18, 19, 20, 29]
        );
        assert_eq!(cited_items(" SPEC §9 item 10"), Vec::<u32>::new());
        assert_eq!(cited_items(" SPEC §10 item"), Vec::<u32>::new());
    }

    #[test]
    fn citations_are_test_comments_only() {
        let source = "//! Module (SPEC §10 item 1).\n\
                      /// Doc (SPEC §10 item 2).\n\
                      /// // SPEC §10 item 3: a doctest.\n\
                      fn f() {\n    // SPEC §10 item 4 in code.\n}\n\
                      #[cfg(test)]\n\
                      mod tests {\n    // SPEC §10 items\n    // 5 and 6.\n    #[test]\n    fn t() {}\n}\n";
        assert_eq!(citations(source, false), [(3, 3), (9, 5), (9, 6)]);
        assert_eq!(
            citations("// SPEC §10 item 4 in a test file.\n", true),
            [(1, 4)]
        );
    }

    #[test]
    fn spec_items() {
        let spec = "## 9. Known limits\n1. Not this.\n## 10. Behavior checklist\n\
                    **Schedules**\n1. Durations parse as follows: `500ms`=500, `2s`=2000, `3m`=180000.\n\
                    10. The first `nextRunAt` is:\n    - interval: now + everyMs;\n";
        assert_eq!(
            checklist_items(spec),
            [
                (
                    1,
                    "Durations parse as follows: `500ms`=500, `2s`=2000, `3m`=180000.".to_owned()
                ),
                (10, "The first `nextRunAt` is:".to_owned()),
            ]
        );
    }

    #[test]
    fn tree_is_tidy() {
        let root = super::super::root();
        if let Err(problems) = super::check(&root) {
            panic!("tidy problems:\n{}", problems.join("\n"));
        }
    }
}
