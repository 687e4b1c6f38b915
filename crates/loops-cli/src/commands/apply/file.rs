//! Reading a loops file (issue 31): TOML, or the same structure as JSON,
//! with its `include`s, into [`Entry`]s that remember where each key was
//! written, so every later error names `file:line:col`.
//!
//! Each file is read bounded ([`MAX_FILE_BYTES`]) and refused unless it is
//! a regular file; includes resolve against the including file's
//! directory, at most [`MAX_FILES`] files, and a file included twice (a
//! cycle too) is read once.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow, bail};
use toml::Spanned;

/// The most bytes one loops file holds.
pub(crate) const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// The most files one apply reads, includes and the directory's files
/// together.
pub(crate) const MAX_FILES: usize = 256;

/// Where something was written: a file, and a line and column when the
/// format tells them (TOML; JSON only for syntax errors).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Origin {
    pub(crate) file: PathBuf,
    /// 1-based line and column.
    pub(crate) at: Option<(usize, usize)>,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.file.display().to_string();
        let file = crate::render::escape_controls(&path, &[]);
        match self.at {
            Some((line, col)) => write!(f, "{file}:{line}:{col}"),
            None => f.write_str(&file),
        }
    }
}

/// A value of a key, as either format gives it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    String(String),
    Integer(i64),
    Float(f64),
    Bool(bool),
    Array(Vec<Value>),
    Table(Vec<(String, Value)>),
}

impl Value {
    /// What kind of value it is, for messages.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Value::String(_) => "a string",
            Value::Integer(_) => "an integer",
            Value::Float(_) => "a number",
            Value::Bool(_) => "a boolean",
            Value::Array(_) => "an array",
            Value::Table(_) => "a table",
        }
    }
}

/// One key of a `[[loop]]` table.
#[derive(Debug, Clone)]
pub(crate) struct Key {
    pub(crate) name: String,
    pub(crate) value: Value,
    pub(crate) origin: Origin,
}

/// One `[[loop]]` table: its keys in the order written.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// Where the table starts.
    pub(crate) origin: Origin,
    pub(crate) keys: Vec<Key>,
}

impl Entry {
    /// The key `name`, if written.
    pub(crate) fn key(&self, name: &str) -> Option<&Key> {
        self.keys.iter().find(|k| k.name == name)
    }

    /// The directory the entry's relative paths resolve against.
    pub(crate) fn dir(&self) -> &Path {
        self.origin.file.parent().unwrap_or(Path::new("/"))
    }
}

/// One `[[workflow]]` table: a workflow inline, or `file`, the path of a
/// workflow JSON file; `name` names it either way.
#[derive(Debug, Clone)]
pub(crate) struct WorkflowEntry {
    pub(crate) origin: Origin,
    pub(crate) name: String,
    /// The workflow's JSON, as `workflows create` reads a file.
    pub(crate) text: String,
    /// What its relative paths (`promptFile`, `cwd`) resolve against.
    pub(crate) dir: PathBuf,
}

/// What a loops file holds.
#[derive(Debug, Default)]
pub(crate) struct Read {
    pub(crate) loops: Vec<Entry>,
    pub(crate) workflows: Vec<WorkflowEntry>,
}

/// Every loop and workflow table of `path` (a file, or a directory whose
/// `*.toml` and `*.json` files are read in name order) and of what it
/// includes.
pub(crate) fn read(path: &Path) -> Result<Read> {
    let path = std::path::absolute(path)
        .map_err(|e| anyhow!("{}: cannot make the path absolute: {e}", path.display()))?;
    let mut queue: Vec<PathBuf> = if path.is_dir() {
        directory_files(&path)?
    } else {
        vec![path]
    };
    queue.reverse();
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut all = Read::default();
    while let Some(file) = queue.pop() {
        let canonical = std::fs::canonicalize(&file).unwrap_or_else(|_| file.clone());
        if seen.contains(&canonical) {
            continue;
        }
        if seen.len() == MAX_FILES {
            bail!(
                "{}: more than {MAX_FILES} files to read; split the setup",
                file.display()
            );
        }
        seen.push(canonical);
        let (found, includes) = read_one(&file)?;
        all.loops.extend(found.loops);
        all.workflows.extend(found.workflows);
        // Includes are read before the files after this one.
        for include in includes.into_iter().rev() {
            queue.push(include);
        }
    }
    Ok(all)
}

/// The `*.toml` and `*.json` files of `dir`, by name.
fn directory_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for item in std::fs::read_dir(dir).map_err(|e| anyhow!("{}: {e}", dir.display()))? {
        let path = item.map_err(|e| anyhow!("{}: {e}", dir.display()))?.path();
        let loops_file = matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("toml" | "json")
        );
        if loops_file && path.is_file() {
            files.push(path);
        }
        if files.len() > MAX_FILES {
            bail!(
                "{}: more than {MAX_FILES} files; split the setup",
                dir.display()
            );
        }
    }
    files.sort();
    if files.is_empty() {
        bail!("{}: no .toml or .json file to apply", dir.display());
    }
    Ok(files)
}

/// The tables and the includes (absolute) of one file.
fn read_one(file: &Path) -> Result<(Read, Vec<PathBuf>)> {
    let text = loops_exec::read_user_file(file, "loops file", MAX_FILE_BYTES)
        .map_err(|e| anyhow!("{e}"))?;
    let json = file.extension().and_then(|e| e.to_str()) == Some("json");
    if json {
        read_json(file, &text)
    } else {
        read_toml(file, &text)
    }
}

/// A file's top level, in TOML.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlFile {
    #[serde(default)]
    include: Vec<Spanned<String>>,
    #[serde(default, rename = "loop")]
    loops: Vec<Spanned<BTreeMap<Spanned<String>, Spanned<toml::Value>>>>,
    #[serde(default, rename = "workflow")]
    workflows: Vec<Spanned<toml::Table>>,
}

fn read_toml(file: &Path, text: &str) -> Result<(Read, Vec<PathBuf>)> {
    let at = |offset: usize| Origin {
        file: file.to_path_buf(),
        at: Some(line_col(text, offset)),
    };
    let parsed: TomlFile = toml::from_str(text).map_err(|e| {
        let origin = match e.span() {
            Some(span) => at(span.start),
            None => Origin {
                file: file.to_path_buf(),
                at: None,
            },
        };
        anyhow!("{origin}: {}", e.message())
    })?;
    let dir = file.parent().unwrap_or(Path::new("/"));
    let includes = parsed
        .include
        .iter()
        .map(|i| dir.join(i.get_ref()))
        .collect();
    let mut entries = Vec::new();
    for table in parsed.loops {
        let origin = at(table.span().start);
        let mut keys: Vec<Key> = table
            .into_inner()
            .into_iter()
            .map(|(name, value)| Key {
                origin: at(name.span().start),
                name: name.into_inner(),
                value: from_toml(value.into_inner()),
            })
            .collect();
        keys.sort_by_key(|k| k.origin.at);
        entries.push(Entry { origin, keys });
    }
    let mut workflows = Vec::new();
    for table in parsed.workflows {
        let origin = at(table.span().start);
        let document =
            serde_json::to_value(table.into_inner()).map_err(|e| anyhow!("{origin}: {e}"))?;
        workflows.push(workflow_entry(origin, document)?);
    }
    Ok((
        Read {
            loops: entries,
            workflows,
        },
        includes,
    ))
}

/// A `[[workflow]]` table: `name`, and either `file` (read here, against
/// the table's file's directory) or the workflow's own keys.
fn workflow_entry(origin: Origin, document: serde_json::Value) -> Result<WorkflowEntry> {
    let Some(name) = document
        .get("name")
        .and_then(serde_json::Value::as_str)
        .filter(|n| !n.trim().is_empty())
        .map(str::to_owned)
    else {
        bail!("{origin}: a workflow needs a name");
    };
    let dir = origin.file.parent().unwrap_or(Path::new("/")).to_path_buf();
    let Some(path) = document.get("file") else {
        return Ok(WorkflowEntry {
            text: document.to_string(),
            origin,
            name,
            dir,
        });
    };
    let Some(path) = path.as_str() else {
        bail!("{origin}: file is the path of a workflow JSON file");
    };
    if document.as_object().is_some_and(|o| o.len() > 2) {
        bail!("{origin}: workflow {name:?} has a file; its other keys belong in the file");
    }
    let path = dir.join(path);
    let text = loops_exec::read_user_file(
        &path,
        "workflow file",
        crate::commands::workflows::specs::WORKFLOW_FILE_MAX_BYTES,
    )
    .map_err(|e| anyhow!("{origin}: workflow {name:?}: {e}"))?;
    Ok(WorkflowEntry {
        origin,
        name,
        text,
        dir: path.parent().unwrap_or(Path::new("/")).to_path_buf(),
    })
}

fn from_toml(value: toml::Value) -> Value {
    match value {
        toml::Value::String(s) => Value::String(s),
        toml::Value::Integer(i) => Value::Integer(i),
        toml::Value::Float(f) => Value::Float(f),
        toml::Value::Boolean(b) => Value::Bool(b),
        // A date is written as the CLI takes it.
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(items) => Value::Array(items.into_iter().map(from_toml).collect()),
        toml::Value::Table(table) => {
            Value::Table(table.into_iter().map(|(k, v)| (k, from_toml(v))).collect())
        }
    }
}

fn read_json(file: &Path, text: &str) -> Result<(Read, Vec<PathBuf>)> {
    let origin = |at: Option<(usize, usize)>| Origin {
        file: file.to_path_buf(),
        at,
    };
    let doc: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| anyhow!("{}: {e}", origin(Some((e.line(), e.column())))))?;
    let serde_json::Value::Object(top) = doc else {
        bail!(
            "{}: a loops file is an object with \"loop\" and \"include\"",
            origin(None)
        );
    };
    let mut includes = Vec::new();
    let mut entries = Vec::new();
    let mut workflows = Vec::new();
    let dir = file.parent().unwrap_or(Path::new("/"));
    for (key, value) in top {
        match (key.as_str(), value) {
            ("include", serde_json::Value::Array(items)) => {
                for item in items {
                    let serde_json::Value::String(s) = item else {
                        bail!("{}: include: each item is a path", origin(None));
                    };
                    includes.push(dir.join(s));
                }
            }
            ("loop", serde_json::Value::Array(tables)) => {
                for (i, table) in tables.into_iter().enumerate() {
                    let serde_json::Value::Object(table) = table else {
                        bail!("{}: loop[{i}]: each loop is an object", origin(None));
                    };
                    let keys = table
                        .into_iter()
                        .map(|(name, value)| {
                            Ok(Key {
                                value: from_json(value, &name)?,
                                name,
                                origin: origin(None),
                            })
                        })
                        .collect::<Result<_>>()?;
                    entries.push(Entry {
                        origin: origin(None),
                        keys,
                    });
                }
            }
            ("workflow", serde_json::Value::Array(tables)) => {
                for table in tables {
                    workflows.push(workflow_entry(origin(None), table)?);
                }
            }
            (other, _) => bail!(
                "{}: unknown key {other:?}: a loops file has \"loop\" and \"workflow\" (arrays \
                 of tables) and \"include\" (an array of paths)",
                origin(None)
            ),
        }
    }
    Ok((
        Read {
            loops: entries,
            workflows,
        },
        includes,
    ))
}

pub(super) fn from_json(value: serde_json::Value, key: &str) -> Result<Value> {
    Ok(match value {
        serde_json::Value::String(s) => Value::String(s),
        serde_json::Value::Bool(b) => Value::Bool(b),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Value::Integer(i),
            None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        serde_json::Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(|v| from_json(v, key))
                .collect::<Result<_>>()?,
        ),
        serde_json::Value::Object(map) => Value::Table(
            map.into_iter()
                .map(|(k, v)| Ok((k, from_json(v, key)?)))
                .collect::<Result<_>>()?,
        ),
        serde_json::Value::Null => bail!("{key}: null is not a value; leave the key out"),
    })
}

/// The 1-based line and column (in characters) of byte `offset` of
/// `text`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[start..].chars().count() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_columns_count_from_one_in_characters() {
        let text = "a = 1\nbé = 2\n";
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, 4), (1, 5));
        assert_eq!(line_col(text, 6), (2, 1));
        // After the two-byte é.
        assert_eq!(line_col(text, 9), (2, 3));
        assert_eq!(line_col(text, 999), (3, 1));
    }

    #[test]
    fn toml_keys_keep_their_place_and_order() {
        let text = "[[loop]]\nname = \"a\"\nevery = \"5m\"\nenv = { A = \"1\" }\n";
        let (read, includes) = read_toml(Path::new("/x/loops.toml"), text).unwrap();
        let entries = read.loops;
        assert!(includes.is_empty());
        let names: Vec<_> = entries[0].keys.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["name", "every", "env"]);
        let every = entries[0].key("every").unwrap();
        assert_eq!(every.origin.to_string(), "/x/loops.toml:3:1");
        assert_eq!(every.value, Value::String("5m".into()));
        assert_eq!(
            entries[0].key("env").unwrap().value,
            Value::Table(vec![("A".into(), Value::String("1".into()))])
        );
        assert_eq!(entries[0].dir(), Path::new("/x"));
    }

    #[test]
    fn a_toml_error_names_its_line_and_column() {
        let err = read_toml(Path::new("/x/l.toml"), "[[loop]]\nname = \n").unwrap_err();
        assert!(err.to_string().starts_with("/x/l.toml:2:"), "{err}");
        let err = read_toml(Path::new("/x/l.toml"), "[[loops]]\n").unwrap_err();
        assert!(err.to_string().contains("unknown field"), "{err}");
    }

    #[test]
    fn json_takes_the_same_structure() {
        let text = r#"{"include": ["more.json"], "loop": [{"name": "a", "attempts": 3}]}"#;
        let (read, includes) = read_json(Path::new("/x/l.json"), text).unwrap();
        let entries = read.loops;
        assert_eq!(includes, [PathBuf::from("/x/more.json")]);
        assert_eq!(entries[0].key("attempts").unwrap().value, Value::Integer(3));
        let err = read_json(Path::new("/x/l.json"), "{\"loop\": [1]}").unwrap_err();
        assert!(err.to_string().contains("each loop is an object"), "{err}");
    }
}
