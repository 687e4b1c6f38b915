//! `PATCH /api/v1/loops/{loop}`: `loops edit` from a JSON body. Each field
//! is a flag of `loops edit`, its long name in camelCase (`catchUp` for
//! `--catch-up`, `cmd`, `label`, `noArgs`): a string or number is the
//! flag's value, an array repeats the flag, `true` gives a switch. The
//! flags then go through the command line's own parser, so the API takes
//! exactly what `loops edit` takes, with its messages.

use anyhow::{Result, anyhow, bail};
use serde_json::Value;

use crate::args::Command;
use crate::args::edit::{EditFlag, edit_flags, parse_edit};

/// The edit request of `body` for `target`; a body that is not an object,
/// or names a flag `loops edit` does not have, is refused before anything
/// runs.
pub(super) fn request(target: &str, body: &[u8]) -> Result<Command> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| anyhow!("the body must be a JSON object of the flags to change: {e}"))?;
    let Value::Object(fields) = value else {
        bail!("the body must be a JSON object of the flags to change");
    };
    let flags = edit_flags();
    let mut argv = Vec::new();
    for (name, value) in &fields {
        let Some(flag) = flags.iter().find(|f| camel(&f.long) == *name) else {
            let names: Vec<String> = flags.iter().map(|f| camel(&f.long)).collect();
            bail!(
                "loops edit has no flag {name:?}; the fields are: {}",
                names.join(", ")
            );
        };
        push(&mut argv, flag, name, value)?;
    }
    if argv.is_empty() {
        bail!("nothing to change: give at least one field, such as {{\"every\": \"2h\"}}");
    }
    let args = parse_edit(target, &argv).map_err(|e| anyhow!(e))?;
    Ok(Command::Edit(args))
}

/// Appends the command-line form of field `name` (flag `flag`) = `value`.
fn push(argv: &mut Vec<String>, flag: &EditFlag, name: &str, value: &Value) -> Result<()> {
    let long = &flag.long;
    match value {
        Value::Bool(on) if !flag.takes_value => {
            if *on {
                argv.push(format!("--{long}"));
            }
        }
        _ if !flag.takes_value => bail!("{name:?} is a switch: give true or false"),
        Value::String(text) => argv.push(format!("--{long}={text}")),
        Value::Number(n) => argv.push(format!("--{long}={n}")),
        Value::Array(items) => {
            for item in items {
                match item {
                    Value::String(text) => argv.push(format!("--{long}={text}")),
                    Value::Number(n) => argv.push(format!("--{long}={n}")),
                    _ => bail!("{name:?} takes strings or numbers"),
                }
            }
        }
        _ => bail!("{name:?} takes a string (or a list of them), as --{long} does"),
    }
    Ok(())
}

/// `catch-up` as `catchUp`.
fn camel(long: &str) -> String {
    let mut out = String::with_capacity(long.len());
    let mut upper = false;
    for c in long.chars() {
        if c == '-' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(body: &str) -> Result<crate::args::edit::EditArgs> {
        match request("nightly", body.as_bytes())? {
            Command::Edit(args) => Ok(args),
            other => bail!("not an edit: {other:?}"),
        }
    }

    #[test]
    fn fields_are_the_flags_in_camel_case() {
        let args = edit(
            r#"{"every": "2h", "catchUp": "all", "label": ["a", "b"], "noArgs": true,
                "attempts": 3, "shell": false, "cmd": "-x"}"#,
        )
        .unwrap();
        assert_eq!(args.target, "nightly");
        assert_eq!(args.every.as_deref(), Some("2h"));
        assert_eq!(args.catch_up.as_deref(), Some("all"));
        assert_eq!(args.policy.labels, ["a", "b"]);
        assert_eq!(args.attempts.as_deref(), Some("3"));
        assert_eq!(args.command.as_deref(), Some("-x"));
        assert!(args.no_args && !args.shell);
    }

    #[test]
    fn what_the_command_line_refuses_is_refused() {
        let err = edit(r#"{"evry": "2h"}"#).unwrap_err().to_string();
        assert!(
            err.contains("no flag \"evry\"") && err.contains("catchUp"),
            "{err}"
        );
        let err = edit(r#"{"noArgs": "yes"}"#).unwrap_err().to_string();
        assert!(err.contains("switch"), "{err}");
        let err = edit(r#"{"every": true}"#).unwrap_err().to_string();
        assert!(err.contains("takes a string"), "{err}");
        assert!(edit("{}").is_err());
        assert!(edit("[]").is_err());
        // Flags that conflict on the command line conflict here, in its
        // words.
        let err = edit(r#"{"arg": ["a"], "noArgs": true}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("cannot be used with"), "{err}");
    }
}
