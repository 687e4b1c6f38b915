//! Relative paths in a workflow file (issue 28): a step's `cwd`, and a
//! command step's program given as `./script` or `../bin/tool`, resolve
//! against the workflow file's own directory when the workflow is read,
//! and are stored absolute. Otherwise they would resolve against whatever
//! directory the daemon runs in, so a step that `validate --preflight`
//! passed in the file's directory failed at run time.
//!
//! A program is resolved only when the step has no `cwd`: with one, the
//! program is found from that (now absolute) directory at run time, as the
//! file meant. In a shell command (`"shell": true`) only a first word that
//! is a plain relative path is rewritten, quoted for the shell.

use std::path::Path;

use loops_core::CommandTarget;
use serde_json::Value;

use crate::render::shell_word;

/// Resolves the relative `cwd` and program paths of every step of
/// `workflow`, a workflow's raw JSON, against `dir`, the workflow file's
/// absolute directory.
pub(super) fn resolve(workflow: &mut Value, dir: &Path) {
    let Some(steps) = workflow.get_mut("steps").and_then(Value::as_array_mut) else {
        return;
    };
    for step in steps {
        let Some(target) = step.get_mut("target").and_then(Value::as_object_mut) else {
            continue;
        };
        let cwd = target.get("cwd").and_then(Value::as_str).map(str::to_owned);
        match cwd {
            Some(cwd) => {
                if let Some(absolute) = absolute(dir, &cwd) {
                    target.insert("cwd".to_owned(), Value::from(absolute));
                }
            }
            None if target.get("type").and_then(Value::as_str) == Some("command") => {
                let shell = target.get("shell").and_then(Value::as_bool) == Some(true);
                let Some(command) = target.get("command").and_then(Value::as_str) else {
                    continue;
                };
                if let Some(resolved) = program(dir, command, shell) {
                    target.insert("command".to_owned(), Value::from(resolved));
                }
            }
            None => {}
        }
    }
}

/// `path` joined to `dir` when it is relative and not empty, as UTF-8.
fn absolute(dir: &Path, path: &str) -> Option<String> {
    if path.trim().is_empty() || Path::new(path).is_absolute() {
        return None;
    }
    // `components` drops the `.` parts: `/flows/./x` reads `/flows/x`.
    let joined: std::path::PathBuf = dir.join(path).components().collect();
    joined.to_str().map(str::to_owned)
}

/// The command with its program resolved against `dir`, when the program
/// is a relative path (`./x`, `../x`, `bin/x`): a bare name is looked up on
/// `PATH` and stays as it is.
fn program(dir: &Path, command: &str, shell: bool) -> Option<String> {
    if !shell {
        return relative_path(command).then(|| absolute(dir, command))?;
    }
    let first = CommandTarget::shell_program(command)?;
    if !relative_path(first) {
        return None;
    }
    let rest = &command.trim_start()[first.len()..];
    Some(format!("{}{rest}", shell_word(&absolute(dir, first)?)))
}

/// A relative path with a directory part: what a shell or `execve` looks up
/// from the working directory rather than on `PATH`.
fn relative_path(program: &str) -> bool {
    program.contains('/') && !program.starts_with('/')
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn resolved(steps: Value) -> Value {
        let mut workflow = json!({ "name": "w", "steps": steps });
        resolve(&mut workflow, Path::new("/work/flows"));
        workflow["steps"].clone()
    }

    #[test]
    fn a_relative_program_and_cwd_resolve_against_the_files_directory() {
        let steps = resolved(json!([
            {"id": "a", "target": {"type": "command", "command": "./hello.sh"}},
            {"id": "b", "target": {"type": "command", "command": "../bin/tool", "args": ["./x"]}},
            {"id": "c", "target": {"type": "command", "command": "./run.sh", "cwd": "sub"}},
            {"id": "d", "target": {"type": "agent", "provider": "claude", "prompt": "p", "cwd": "repo"}},
            {"id": "e", "target": {"type": "command", "command": "echo", "cwd": "/abs"}},
        ]));
        assert_eq!(steps[0]["target"]["command"], "/work/flows/hello.sh");
        assert_eq!(steps[1]["target"]["command"], "/work/flows/../bin/tool");
        // Arguments are the program's to read.
        assert_eq!(steps[1]["target"]["args"], json!(["./x"]));
        // With a cwd, the cwd is resolved and the program found from it.
        assert_eq!(steps[2]["target"]["cwd"], "/work/flows/sub");
        assert_eq!(steps[2]["target"]["command"], "./run.sh");
        assert_eq!(steps[3]["target"]["cwd"], "/work/flows/repo");
        assert_eq!(steps[4]["target"]["cwd"], "/abs");
        assert_eq!(steps[4]["target"]["command"], "echo");
    }

    #[test]
    fn bare_names_absolute_paths_and_shell_words_the_shell_reads_stay() {
        let steps = resolved(json!([
            {"id": "a", "target": {"type": "command", "command": "make"}},
            {"id": "b", "target": {"type": "command", "command": "/usr/bin/env"}},
            {"id": "c", "target": {"type": "command", "command": "./build.sh --fast && echo ok", "shell": true}},
            {"id": "d", "target": {"type": "command", "command": "\"./my script.sh\"", "shell": true}},
            {"id": "e", "target": {"type": "command", "command": "$HOME/x.sh", "shell": true}},
            {"id": "f", "target": {"type": "command", "command": "echo ./x", "shell": true}},
            {"id": "g", "target": {"type": "command", "command": ""}},
        ]));
        assert_eq!(steps[0]["target"]["command"], "make");
        assert_eq!(steps[1]["target"]["command"], "/usr/bin/env");
        assert_eq!(
            steps[2]["target"]["command"],
            "/work/flows/build.sh --fast && echo ok"
        );
        assert_eq!(steps[3]["target"]["command"], "\"./my script.sh\"");
        assert_eq!(steps[4]["target"]["command"], "$HOME/x.sh");
        assert_eq!(steps[5]["target"]["command"], "echo ./x");
        assert_eq!(steps[6]["target"]["command"], "");
    }

    #[test]
    fn a_directory_the_shell_would_misread_is_quoted() {
        let mut workflow = json!({"steps": [
            {"id": "a", "target": {"type": "command", "command": "./go.sh now", "shell": true}},
        ]});
        resolve(&mut workflow, Path::new("/my flows"));
        assert_eq!(
            workflow["steps"][0]["target"]["command"],
            "'/my flows/go.sh' now"
        );
    }
}
