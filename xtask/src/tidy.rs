//! Source hygiene: every Rust file under `crates/` opens with a `//!` module
//! doc, and no file leaves a `dbg!` or `todo!` behind.

use std::path::{Path, PathBuf};

/// Returns every problem found under `root/crates` and `root/tests`.
pub(crate) fn check(root: &Path) -> Result<(), Vec<String>> {
    let mut files = Vec::new();
    for dir in ["crates", "tests", "xtask"] {
        collect(&root.join(dir), &mut files);
    }
    let mut problems = Vec::new();
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
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for banned in [concat!("dbg", "!("), concat!("todo", "!(")] {
                if code.contains(banned) {
                    problems.push(format!("{shown}:{}: remove `{banned}`", n + 1));
                }
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn tree_is_tidy() {
        let root = super::super::root();
        if let Err(problems) = super::check(&root) {
            panic!("tidy problems:\n{}", problems.join("\n"));
        }
    }
}
