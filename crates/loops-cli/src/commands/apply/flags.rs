//! A `[[loop]]` table as the `create` command line it stands for (issue
//! 31): its keys are `create`'s long flags without the dashes, `kind` is
//! the subcommand and `name` the loop's name. The line is parsed by the
//! CLI's own parser, so a file accepts exactly what `create` accepts, and
//! a refusal is mapped back to the key that caused it.
//!
//! A boolean key is a switch (`dynamic = true`); an array repeats its flag
//! (`label = ["a", "b"]`); a table gives `KEY=VALUE` flags (`env = { A =
//! "1" }`). A path key (`cwd`, `prompt-file`, `watch`) resolves against the
//! file's directory, and a command or agent loop without `cwd` runs there.

use anyhow::{Result, anyhow, bail};
use clap::{ArgAction, Parser, ValueHint};

use super::file::{Entry, Key, Value};
use crate::args::{Cli, Command, Create};

/// The loop kinds, as `create`'s subcommands.
pub(crate) const KINDS: [&str; 3] = ["command", "agent", "workflow"];

/// The flags of `loops create <kind>`, from its clap definitions alone
/// (the subcommand is deferred in the CLI, and built there only when run).
pub(crate) fn create_flags(kind: &str) -> Option<clap::Command> {
    use clap::Args as _;
    use clap::Command as C;
    Some(match kind {
        "command" => crate::args::CreateCommand::augment_args(C::new("command")),
        "agent" => crate::args::CreateAgent::augment_args(C::new("agent")),
        "workflow" => crate::args::CreateWorkflow::augment_args(C::new("workflow")),
        _ => return None,
    })
}

/// Keys a file may not use: they are about one command line, not a loop.
pub(crate) const NOT_IN_A_FILE: [&str; 1] = ["dry-run"];

/// What one table stands for.
#[derive(Debug)]
pub(crate) struct Parsed {
    pub(crate) name: String,
    pub(crate) create: Create,
}

/// The `create` arguments of `entry`.
pub(crate) fn parse(entry: &Entry) -> Result<Parsed> {
    let name = match entry.key("name") {
        Some(Key {
            value: Value::String(name),
            ..
        }) if !name.trim().is_empty() => name.clone(),
        Some(key) => bail!("{}: name must be a non-empty string", key.origin),
        None => bail!("{}: a loop needs a name", entry.origin),
    };
    let kind = match entry.key("kind") {
        Some(Key {
            value: Value::String(kind),
            origin,
            ..
        }) => KINDS
            .iter()
            .find(|k| **k == kind.as_str())
            .copied()
            .ok_or_else(|| anyhow!("{origin}: kind must be command, agent or workflow"))?,
        Some(key) => bail!("{}: kind must be command, agent or workflow", key.origin),
        None => bail!(
            "{}: loop {name:?} needs a kind: command, agent or workflow",
            entry.origin
        ),
    };
    let sub = create_flags(kind).ok_or_else(|| anyhow!("create {kind} is missing from the CLI"))?;
    let mut argv = vec!["loops".to_owned(), "create".to_owned(), kind.to_owned()];
    let mut cwd_given = false;
    for key in entry
        .keys
        .iter()
        .filter(|k| k.name != "name" && k.name != "kind")
    {
        if NOT_IN_A_FILE.contains(&key.name.as_str()) {
            bail!("{}: {} is not a key of a loop", key.origin, key.name);
        }
        let Some(arg) = sub
            .get_arguments()
            .find(|a| a.get_long() == Some(key.name.as_str()))
        else {
            bail!(
                "{}: unknown key {:?} for a {kind} loop; its keys are the long flags of \
                 `loops create {kind} --help`, without the dashes",
                key.origin,
                key.name
            );
        };
        cwd_given |= key.name == "cwd";
        let path = matches!(
            arg.get_value_hint(),
            ValueHint::DirPath | ValueHint::FilePath | ValueHint::AnyPath
        );
        for value in flag_values(key, arg.get_action(), path.then(|| entry.dir()))? {
            argv.push(match value {
                Some(v) => format!("--{}={v}", key.name),
                None => format!("--{}", key.name),
            });
        }
    }
    if kind != "workflow" && !cwd_given {
        argv.push(format!("--cwd={}", entry.dir().display()));
    }
    argv.push("--".to_owned());
    argv.push(name.clone());
    let parsed = Cli::try_parse_from(&argv).map_err(|e| clap_error(&e, entry))?;
    match parsed.command {
        Command::Create(create) => Ok(Parsed { name, create }),
        _ => bail!("create {kind} parsed as another command"),
    }
}

/// The values `key` gives its flag: `None` for a switch given.
fn flag_values(
    key: &Key,
    action: &ArgAction,
    dir: Option<&std::path::Path>,
) -> Result<Vec<Option<String>>> {
    let scalar = |v: &Value| -> Result<String> {
        let text = match v {
            Value::String(s) => s.clone(),
            Value::Integer(i) => i.to_string(),
            Value::Float(f) => f.to_string(),
            Value::Bool(b) => b.to_string(),
            other => bail!(
                "{}: {} takes a string or a number, not {}",
                key.origin,
                key.name,
                other.kind()
            ),
        };
        Ok(match dir {
            Some(dir) if !text.is_empty() && !text.starts_with('/') => {
                dir.join(&text).display().to_string()
            }
            _ => text,
        })
    };
    match (action, &key.value) {
        (ArgAction::SetTrue, Value::Bool(true)) => Ok(vec![None]),
        (ArgAction::SetTrue, Value::Bool(false)) => Ok(Vec::new()),
        (ArgAction::SetTrue, other) => bail!(
            "{}: {} is a switch: write {} = true, not {}",
            key.origin,
            key.name,
            key.name,
            other.kind()
        ),
        (ArgAction::Append, Value::Array(items)) => {
            items.iter().map(|v| scalar(v).map(Some)).collect()
        }
        (ArgAction::Append, Value::Table(pairs)) => pairs
            .iter()
            .map(|(k, v)| Ok(Some(format!("{k}={}", scalar(v)?))))
            .collect(),
        (_, Value::Array(_) | Value::Table(_)) => bail!(
            "{}: {} takes one value, not {}",
            key.origin,
            key.name,
            key.value.kind()
        ),
        (_, v) => Ok(vec![Some(scalar(v)?)]),
    }
}

/// A refusal of the parser, at the key it names, else at the table.
fn clap_error(e: &clap::Error, entry: &Entry) -> anyhow::Error {
    use clap::error::{ContextKind, ContextValue};
    let flag = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        Some(ContextValue::Strings(s)) => s.first().cloned(),
        _ => None,
    };
    let key = flag.as_deref().and_then(|flag| {
        let long = flag.trim_start_matches('-');
        let long = long.split([' ', '=']).next().unwrap_or(long);
        entry.key(long)
    });
    let origin = key.map_or(&entry.origin, |k| &k.origin);
    // clap's own text up to its usage, on one line, without `error: `.
    let text = e.render().to_string();
    let line: Vec<&str> = text
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .filter(|l| !l.is_empty())
        .collect();
    let line = line.join(" ");
    anyhow!("{origin}: {}", line.trim_start_matches("error: "))
}
