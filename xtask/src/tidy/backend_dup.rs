//! The backend duplication figure: the share of the PostgreSQL backend's code
//! lines that stand in a run of [`RUN`] or more lines also found in the SQLite
//! backend.
//!
//! Both backends are read whole (`src/postgres.rs` with `src/postgres/`, and
//! `src/sqlite.rs` with `src/sqlite/`), so moving code between files changes
//! nothing. A code line is a line that is neither blank nor a comment. Lines
//! are compared after trimming, with placeholders (`?1`, `$1`) made one and
//! the names a connection goes by (`conn`, `tx`, `client`, `db`,
//! `transaction`) made one, so that a query written in both dialects counts as
//! the copy it is.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The shortest run of lines that counts as a copy.
pub(crate) const RUN: usize = 4;

/// The most of the PostgreSQL backend that may stand in such runs, in
/// percent.
pub(crate) const MAX_PERCENT: f64 = 8.0;

/// The figure for the tree at `root`: `(shared lines, code lines)` of the
/// PostgreSQL backend.
pub(crate) fn measure(root: &Path) -> (usize, usize) {
    let src = root.join("crates/loops-store/src");
    let postgres = backend_files(&src, "postgres");
    let sqlite = backend_files(&src, "sqlite");
    shared_lines(&read_all(&postgres), &read_all(&sqlite))
}

/// The problem to report when the figure is above [`MAX_PERCENT`].
pub(crate) fn check(root: &Path) -> Option<String> {
    let (shared, total) = measure(root);
    let percent = percent(shared, total);
    (percent > MAX_PERCENT).then(|| {
        format!(
            "crates/loops-store: {percent:.1}% of the PostgreSQL backend's code lines \
             ({shared} of {total}) stand in runs of {RUN}+ lines also in the SQLite \
             backend; the most allowed is {MAX_PERCENT}%: move the shared logic above \
             the backends (see `cargo xtask dup` for the runs)"
        )
    })
}

/// `shared` as a percentage of `total` (0 when there is nothing).
pub(crate) fn percent(shared: usize, total: usize) -> f64 {
    if total == 0 {
        0.0
    } else {
        shared as f64 * 100.0 / total as f64
    }
}

/// Prints the figure and each PostgreSQL run that stands in the SQLite
/// backend, for `cargo xtask dup`.
pub(crate) fn report(root: &Path) {
    let src = root.join("crates/loops-store/src");
    let postgres = read_all(&backend_files(&src, "postgres"));
    let sqlite = read_all(&backend_files(&src, "sqlite"));
    let windows = windows_of(&sqlite);
    for file in &postgres {
        let marked = marks(&file.lines, &windows);
        let mut start = None;
        for (i, on) in marked.iter().chain([&false]).enumerate() {
            match (on, start) {
                (true, None) => start = Some(i),
                (false, Some(s)) => {
                    let (first, last) = (file.lines[s].0, file.lines[i - 1].0);
                    println!("{}:{first}-{last} ({} lines)", file.shown, i - s);
                    start = None;
                }
                _ => {}
            }
        }
    }
    let (shared, total) = shared_lines(&postgres, &sqlite);
    println!(
        "{:.1}% of the PostgreSQL backend ({shared} of {total} code lines) stands in runs \
         of {RUN}+ lines also in the SQLite backend (at most {MAX_PERCENT}%)",
        percent(shared, total)
    );
}

/// One file's code lines: (1-based line number, normalized text).
struct Code {
    shown: String,
    lines: Vec<(usize, String)>,
}

/// `src/<name>.rs` and every `.rs` file under `src/<name>/`, sorted.
fn backend_files(src: &Path, name: &str) -> Vec<PathBuf> {
    let mut files = vec![src.join(format!("{name}.rs"))];
    collect(&src.join(name), &mut files);
    files.sort();
    files
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn read_all(files: &[PathBuf]) -> Vec<Code> {
    files
        .iter()
        .filter_map(|path| {
            let text = std::fs::read_to_string(path).ok()?;
            Some(Code {
                shown: path.display().to_string(),
                lines: code_lines(&text),
            })
        })
        .collect()
}

/// The code lines of `text`, normalized.
fn code_lines(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .enumerate()
        .filter_map(|(n, line)| {
            let trimmed = line.trim();
            (!trimmed.is_empty() && !trimmed.starts_with("//")).then(|| (n + 1, normalize(trimmed)))
        })
        .collect()
}

/// One line with its placeholders and connection names made one.
fn normalize(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if !word.is_empty() {
            let same = matches!(
                word.as_str(),
                "conn" | "tx" | "client" | "db" | "transaction"
            );
            out.push_str(if same { "CONN" } else { word });
            word.clear();
        }
    };
    while let Some(c) = chars.next() {
        if (c == '?' || c == '$') && chars.peek().is_some_and(char::is_ascii_digit) {
            flush(&mut word, &mut out);
            while chars.peek().is_some_and(char::is_ascii_digit) {
                chars.next();
            }
            out.push('?');
        } else if c.is_alphanumeric() || c == '_' {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// Every run of [`RUN`] consecutive lines in `files`, within a file.
fn windows_of(files: &[Code]) -> HashSet<Vec<String>> {
    files
        .iter()
        .flat_map(|file| {
            file.lines
                .windows(RUN)
                .map(|w| w.iter().map(|(_, l)| l.clone()).collect::<Vec<_>>())
        })
        .collect()
}

/// Which of `lines` stand in a run found in `windows`.
fn marks(lines: &[(usize, String)], windows: &HashSet<Vec<String>>) -> Vec<bool> {
    let mut marked = vec![false; lines.len()];
    for (i, w) in lines.windows(RUN).enumerate() {
        let key: Vec<String> = w.iter().map(|(_, l)| l.clone()).collect();
        if windows.contains(&key) {
            marked[i..i + RUN].iter_mut().for_each(|m| *m = true);
        }
    }
    marked
}

fn shared_lines(postgres: &[Code], sqlite: &[Code]) -> (usize, usize) {
    let windows = windows_of(sqlite);
    postgres.iter().fold((0, 0), |(shared, total), file| {
        let marked = marks(&file.lines, &windows);
        (
            shared + marked.iter().filter(|m| **m).count(),
            total + file.lines.len(),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(text: &str) -> Vec<Code> {
        vec![Code {
            shown: "f.rs".into(),
            lines: code_lines(text),
        }]
    }

    #[test]
    fn placeholders_and_connection_names_are_made_one() {
        assert_eq!(
            normalize("conn.execute(\"UPDATE t SET a = ?1 WHERE b = ?12\")"),
            normalize("tx.execute(\"UPDATE t SET a = $1 WHERE b = $3\")")
        );
        assert_ne!(normalize("connection.x"), normalize("conn.x"));
        assert_eq!(normalize("cost = $5"), "cost = ?");
        assert_eq!(normalize("a ?b $"), "a ?b $");
    }

    #[test]
    fn only_runs_of_four_or_more_count() {
        let sqlite = code("a\nb\nc\nd\nx\ne\nf\ng\n");
        // a..d is a run of four; e f g is a run of three and does not count.
        let postgres = code("a\nb\nc\nd\ny\ne\nf\ng\nz\n");
        assert_eq!(shared_lines(&postgres, &sqlite), (4, 9));
    }

    #[test]
    fn blank_and_comment_lines_are_not_code() {
        let sqlite = code("a\nb\nc\nd\n");
        let postgres = code("a\n\n// note\nb\n  c\n   // more\nd\n");
        assert_eq!(shared_lines(&postgres, &sqlite), (4, 4));
    }

    #[test]
    fn runs_do_not_cross_files() {
        let sqlite = vec![
            Code {
                shown: "one.rs".into(),
                lines: code_lines("a\nb\n"),
            },
            Code {
                shown: "two.rs".into(),
                lines: code_lines("c\nd\n"),
            },
        ];
        assert_eq!(shared_lines(&code("a\nb\nc\nd\n"), &sqlite), (0, 4));
    }

    #[test]
    fn percent_of_nothing_is_zero() {
        assert!(percent(0, 0).abs() < f64::EPSILON);
        assert!((percent(1, 4) - 25.0).abs() < f64::EPSILON);
    }
}
