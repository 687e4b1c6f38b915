//! Import circles inside loops-cli: the graph of `crate::` references
//! between the crate's top-level modules must have no cycle (issue 26).
//!
//! A file under `crates/loops-cli/src` belongs to the top-level module its
//! path starts with (`commands/gc.rs` to `commands`); `lib.rs`, `main.rs`
//! and `bin/` are the root, which may use anything. Every `crate::a…` and
//! every entry of a `crate::{a…, b…}` group in code (comments aside), tests
//! included, is an edge to `a`. A module's own references are not edges.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The graph: each top-level module and the modules it references.
pub(crate) type Graph = BTreeMap<String, BTreeSet<String>>;

/// One problem per import circle found in `root/crates/loops-cli/src`.
pub(crate) fn check(root: &Path) -> Vec<String> {
    let src = root.join("crates/loops-cli/src");
    let mut files = Vec::new();
    collect(&src, &mut files);
    let mut graph = Graph::new();
    for file in files {
        let Ok(relative) = file.strip_prefix(&src) else {
            continue;
        };
        let Some(module) = top_module(relative) else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let targets = graph.entry(module.clone()).or_default();
        for target in references(&text) {
            if target != module {
                targets.insert(target);
            }
        }
    }
    cycles(&graph)
        .into_iter()
        .map(|cycle| {
            format!(
                "crates/loops-cli: the modules {} import each other in a circle; \
                 move what they share into a module both may use",
                cycle.join(" -> ")
            )
        })
        .collect()
}

/// The top-level module a file under `src/` belongs to, `None` for the
/// crate roots (`lib.rs`, `main.rs`, `bin/`).
fn top_module(relative: &Path) -> Option<String> {
    let first = relative.components().next()?.as_os_str().to_str()?;
    if matches!(first, "lib.rs" | "main.rs" | "bin") {
        return None;
    }
    Some(first.strip_suffix(".rs").unwrap_or(first).to_owned())
}

/// The top-level modules `source` names through `crate::` paths.
pub(crate) fn references(source: &str) -> BTreeSet<String> {
    let code: Vec<&str> = source
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect();
    let code = code.join("\n");
    let mut found = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        let after = &rest[at + "crate::".len()..];
        rest = after;
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        if let Some(group) = after.strip_prefix('{') {
            found.extend(group_heads(group));
        } else if let Some(name) = ident(after) {
            found.insert(name);
        }
    }
    found
}

/// The first names of the entries of a `crate::{…}` group, given the text
/// after its opening brace.
fn group_heads(group: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0usize;
    let mut entry_start = true;
    for (at, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => entry_start = true,
            c if entry_start && (c.is_alphanumeric() || c == '_') => {
                entry_start = false;
                if let Some(name) = ident(&group[at..])
                    && name != "self"
                {
                    heads.push(name);
                }
            }
            _ => {}
        }
    }
    heads
}

/// The identifier `s` starts with.
fn ident(s: &str) -> Option<String> {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    (end > 0).then(|| s[..end].to_owned())
}

/// The cycles a depth-first search of `graph` meets, one per back edge, as
/// the modules along it with the first repeated at the end (`a -> b -> a`).
/// It is empty exactly when the graph has no cycle.
pub(crate) fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut done = BTreeSet::new();
    for start in graph.keys() {
        let mut path = Vec::new();
        visit(graph, start, &mut path, &mut done, &mut found);
    }
    found
}

fn visit(
    graph: &Graph,
    node: &str,
    path: &mut Vec<String>,
    done: &mut BTreeSet<String>,
    found: &mut Vec<Vec<String>>,
) {
    if done.contains(node) {
        return;
    }
    if let Some(at) = path.iter().position(|n| n == node) {
        let mut cycle = path[at..].to_vec();
        cycle.push(node.to_owned());
        found.push(cycle);
        return;
    }
    path.push(node.to_owned());
    for next in graph.get(node).into_iter().flatten() {
        visit(graph, next, path, done, found);
    }
    path.pop();
    done.insert(node.to_owned());
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

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(edges: &[(&str, &str)]) -> Graph {
        let mut g = Graph::new();
        for (from, to) in edges {
            g.entry((*from).to_owned())
                .or_default()
                .insert((*to).to_owned());
            g.entry((*to).to_owned()).or_default();
        }
        g
    }

    #[test]
    fn paths_and_groups_are_references() {
        let source = "use crate::args::Cli;\n\
                      use crate::{render, service::{control, log}, self};\n\
                      use crate::{\n    exit::Outcome,\n    paths,\n};\n\
                      fn f() { crate::hint::no_daemon(); }\n";
        let found: Vec<String> = references(source).into_iter().collect();
        assert_eq!(
            found,
            ["args", "exit", "hint", "paths", "render", "service"]
        );
    }

    #[test]
    fn comments_visibility_and_macro_paths_are_not_references() {
        let source = "pub(crate) fn f() {}\n\
                      // see crate::args\n\
                      macro_rules! m { () => { $crate::x::y() } }\n\
                      let a = notcrate::z;\n";
        assert!(references(source).is_empty(), "{:?}", references(source));
    }

    #[test]
    fn a_tree_has_no_cycle_and_a_circle_is_reported_once() {
        assert!(cycles(&graph(&[("a", "b"), ("b", "c"), ("a", "c")])).is_empty());
        let found = cycles(&graph(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]));
        assert_eq!(found, [["a", "b", "c", "a"]]);
        assert_eq!(cycles(&graph(&[("x", "y"), ("y", "x")])), [["x", "y", "x"]]);
    }

    #[test]
    fn files_belong_to_their_top_level_module() {
        assert_eq!(
            top_module(Path::new("commands/gc.rs")).as_deref(),
            Some("commands")
        );
        assert_eq!(top_module(Path::new("app.rs")).as_deref(), Some("app"));
        assert_eq!(top_module(Path::new("lib.rs")), None);
        assert_eq!(top_module(Path::new("bin/loops-daemon.rs")), None);
    }
}
