//! The arguments of the MCP tools: one type per tool, whose schemars schema
//! is the tool's input schema and whose serde reads its arguments.
//!
//! Field names are the CLI flags in camelCase (`--retry-delay` is
//! `retryDelay`, `--cmd` is `cmd`), and values stay what the flag takes:
//! the request they become is resolved as the command line's is, so a bad
//! value gets the CLI's message.
//! Counts and durations are read as a JSON number or a string, so
//! `"limit": "5"` and `"every": 300000` mean what they say. A duration given
//! as a JSON number is milliseconds, as in the original, whatever its size;
//! one given as a string follows the command line, which refuses a bare
//! number under a second (issue 28).

use std::borrow::Cow;
use std::collections::BTreeMap;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer};

/// A number or a string, kept as the text a flag takes.
#[derive(Deserialize)]
#[serde(untagged)]
enum NumberOrText {
    Number(serde_json::Number),
    Text(String),
}

impl NumberOrText {
    /// The text a flag takes, with `unit` after a number.
    fn text(self, unit: &str) -> String {
        match self {
            NumberOrText::Number(n) => format!("{n}{unit}"),
            NumberOrText::Text(t) => t,
        }
    }
}

/// A flag's value read as a JSON number or string and kept as the text the
/// flag takes, with the schema a client sees.
macro_rules! number_or_text {
    ($(#[$doc:meta])* $name:ident, $unit:literal, $schema:tt) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub(crate) struct $name(pub(crate) String);

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<$name, D::Error> {
                NumberOrText::deserialize(d).map(|v| $name(v.text($unit)))
            }
        }

        impl JsonSchema for $name {
            fn schema_name() -> Cow<'static, str> {
                stringify!($name).into()
            }

            fn inline_schema() -> bool {
                true
            }

            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                json_schema!($schema)
            }
        }
    };
}

number_or_text!(
    /// A count (`--limit`, `--attempts`): a positive integer, checked by
    /// the command line.
    Count,
    "",
    { "type": "integer", "minimum": 1 }
);

number_or_text!(
    /// A duration: `"500ms"`, `"30s"`, `"5m"`, `"1h30m"`, `"1d"`, or a
    /// number of milliseconds.
    Duration,
    "ms",
    {
        "type": ["string", "integer"],
        "description": "A duration: 500ms, 30s, 5m, 1h30m, 1d, or a number of milliseconds."
    }
);

/// One label or several (all of them must match, or all are given).
#[derive(Debug, Clone, Default)]
pub(crate) struct Labels(pub(crate) Vec<String>);

impl<'de> Deserialize<'de> for Labels {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Labels, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum OneOrMany {
            One(String),
            Many(Vec<String>),
        }
        Ok(Labels(match OneOrMany::deserialize(d)? {
            OneOrMany::One(label) => vec![label],
            OneOrMany::Many(labels) => labels,
        }))
    }
}

impl JsonSchema for Labels {
    fn schema_name() -> Cow<'static, str> {
        "Labels".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "array",
            "items": { "type": "string" },
            "description": "Labels of up to 64 characters of A-Z a-z 0-9 . _ : = / -; a single string is one label."
        })
    }
}

/// A loop, by id or name.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LoopParams {
    /// Loop id, or name (refused when several loops share it).
    #[serde(rename = "loop")]
    pub(crate) target: String,
}

/// `loops_show`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ShowParams {
    /// Loop id, or name (refused when several loops share it).
    #[serde(rename = "loop")]
    pub(crate) target: String,
    /// Show tokens and webhook URLs written into commands and hooks whole
    /// (needs LOOPS_MCP_ALLOW_MUTATIONS=true).
    #[serde(default)]
    pub(crate) show_output: bool,
}

/// `loops_list`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ListParams {
    /// Only loops with this status.
    #[schemars(extend("enum" = ["active", "paused", "stopped", "expired"]))]
    pub(crate) status: Option<String>,
    /// Only loops with every one of these labels.
    #[serde(default)]
    pub(crate) label: Labels,
    /// At most this many loops [default: all].
    pub(crate) limit: Option<Count>,
    /// Show tokens and webhook URLs written into commands and hooks whole
    /// (needs LOOPS_MCP_ALLOW_MUTATIONS=true).
    #[serde(default)]
    pub(crate) show_output: bool,
}

/// `loops_runs`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunsParams {
    /// Only runs of this loop: id or name [default: every loop].
    #[serde(rename = "loop")]
    pub(crate) target: Option<String>,
    /// Only runs with this status.
    #[schemars(extend("enum" = ["running", "succeeded", "failed", "timed_out", "abandoned", "skipped"]))]
    pub(crate) status: Option<String>,
    /// At most this many runs, newest first [default: 50].
    pub(crate) limit: Option<Count>,
    /// Only runs of loops with every one of these labels.
    #[serde(default)]
    pub(crate) label: Labels,
    /// Include the runs' stdout and stderr instead of their lengths, and
    /// secrets shaped like tokens whole (needs
    /// LOOPS_MCP_ALLOW_MUTATIONS=true: output may hold secrets).
    #[serde(default)]
    pub(crate) show_output: bool,
}

/// A tool without arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct NoParams {}

/// `loops_workflows_list`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WorkflowsListParams {
    /// Only workflows with this status [default: active].
    #[schemars(extend("enum" = ["active", "archived"]))]
    pub(crate) status: Option<String>,
    /// At most this many workflows [default: all].
    pub(crate) limit: Option<Count>,
    /// Show tokens and webhook URLs written into the steps whole (needs
    /// LOOPS_MCP_ALLOW_MUTATIONS=true).
    #[serde(default)]
    pub(crate) show_output: bool,
}

/// `loops_workflow_read`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WorkflowParams {
    /// Workflow id (any status), or the name of an active workflow.
    pub(crate) workflow: String,
    /// Show tokens and webhook URLs written into the steps whole (needs
    /// LOOPS_MCP_ALLOW_MUTATIONS=true).
    #[serde(default)]
    pub(crate) show_output: bool,
}

/// `loops_workflow_run_inspect`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunInspectParams {
    /// Workflow run id (from loops_runs or a workflow's runs).
    pub(crate) run_id: String,
    /// Include the steps' stdout and stderr instead of their lengths, and
    /// secrets shaped like tokens whole (needs
    /// LOOPS_MCP_ALLOW_MUTATIONS=true).
    #[serde(default)]
    pub(crate) show_output: bool,
}

/// `loops_workflow_validate`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ValidateParams {
    /// The workflow: a JSON object (name, description, maxParallel, steps),
    /// or that object as JSON text.
    pub(crate) workflow: serde_json::Value,
    /// Use this name instead of the workflow's `name`.
    pub(crate) name: Option<String>,
    /// Also check that each step could start: its directory, its program on
    /// PATH, its account (runs local programs, so it needs
    /// LOOPS_MCP_ALLOW_MUTATIONS=true).
    #[serde(default)]
    pub(crate) preflight: bool,
}

/// The options every create tool shares (`loops create … --help`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LoopOptions {
    /// Name of the new loop.
    pub(crate) name: String,
    /// Run once, at this time: ISO-8601, `+10m`, `in 1h`, `tomorrow 09:00`.
    /// Give exactly one of at, every, cron and dynamic.
    pub(crate) at: Option<String>,
    /// Run every this long, on a fixed-rate grid.
    pub(crate) every: Option<Duration>,
    /// Run on this 5-field cron expression, e.g. "0 9 * * 1-5".
    pub(crate) cron: Option<String>,
    /// Run again one minute after each run finishes.
    #[serde(default)]
    pub(crate) dynamic: bool,
    /// The IANA time zone of cron, e.g. Europe/Berlin [default: the host's].
    pub(crate) tz: Option<String>,
    /// Missed slots: none, latest or all [default: latest].
    #[schemars(extend("enum" = ["none", "latest", "all"]))]
    pub(crate) catch_up: Option<String>,
    /// Most missed slots one tick runs under catchUp all [default: 50].
    pub(crate) catch_up_limit: Option<Count>,
    /// A slot due while a run is active: skip or allow [default: skip].
    #[schemars(extend("enum" = ["skip", "allow"]))]
    pub(crate) overlap: Option<String>,
    /// Attempts per slot [default: 1].
    pub(crate) attempts: Option<Count>,
    /// Delay before a retry [default: 1m].
    pub(crate) retry_delay: Option<Duration>,
    /// How long a runner owns a run without a heartbeat [default: 30m].
    pub(crate) lease: Option<Duration>,
    /// Stop scheduling the loop at this time (as `at`) [default: never].
    pub(crate) expires_at: Option<String>,
    /// Free-text description.
    pub(crate) description: Option<String>,
    /// Labels of the loop.
    #[serde(default)]
    pub(crate) label: Labels,
    /// Expire the loop after this many successful runs in a row.
    pub(crate) expires_after_runs: Option<Count>,
    /// Pause the loop after this many failed runs in a row.
    pub(crate) pause_after_failures: Option<Count>,
    /// Retry delays: fixed or exponential [default: fixed].
    #[schemars(extend("enum" = ["fixed", "exponential"]))]
    pub(crate) backoff: Option<String>,
    /// Longest retry delay under exponential backoff [default: 6h].
    pub(crate) max_retry_delay: Option<Duration>,
    /// Exit codes (1-255) recorded as skipped, not failed.
    #[serde(default)]
    pub(crate) skip_exit_code: Vec<Count>,
    /// A shell command run after each run that finally failed.
    pub(crate) on_failure: Option<String>,
    /// A shell command run after each successful run.
    pub(crate) on_success: Option<String>,
    /// Give the hooks the run's stdout and stderr, not their lengths.
    #[serde(default)]
    pub(crate) hook_show_output: bool,
    /// Run only where every one of these labels is carried, such as
    /// `host:build-1` or `gpu` [default: anywhere].
    #[serde(default)]
    pub(crate) runs_on: Labels,
    /// The pool whose limit the loop's runs count against [default: none].
    pub(crate) pool: Option<String>,
    /// Run once after each run of these loops that succeeded, or as
    /// `LOOP:failed` / `LOOP:finished` says [default: none].
    #[serde(default)]
    pub(crate) after: Labels,
    /// Run only on triggers: give no schedule (at, every, cron, dynamic).
    #[serde(default)]
    pub(crate) trigger_only: bool,
    /// Run when files under these absolute paths change (a relative path
    /// is refused); pins the loop to this host unless runsOn places it
    /// [default: none].
    #[serde(default)]
    pub(crate) watch: Vec<String>,
    /// How long watched files must stay unchanged before the run
    /// [default: 2s].
    pub(crate) debounce: Option<Duration>,
}

/// `loops_create_command`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CreateCommandParams {
    #[serde(flatten)]
    pub(crate) options: LoopOptions,
    /// The command line, run by /bin/sh -c unless noShell.
    pub(crate) cmd: String,
    /// Arguments appended to the command.
    #[serde(default)]
    pub(crate) arg: Vec<String>,
    /// Run cmd directly, not through a shell: cmd is one program and its
    /// arguments go in arg.
    #[serde(default)]
    pub(crate) no_shell: bool,
    /// Working directory [default: the directory the server runs in].
    pub(crate) cwd: Option<String>,
    /// Environment variables of the run (stored; always shown redacted).
    /// Names match [A-Za-z_][A-Za-z0-9_]*.
    #[serde(default)]
    pub(crate) env: BTreeMap<String, String>,
    /// Kill the run after this long [default: 30m].
    pub(crate) timeout: Option<Duration>,
    /// Run under this `accounts` profile.
    pub(crate) account: Option<String>,
    /// The `accounts` tool of account.
    pub(crate) account_tool: Option<String>,
}

/// `loops_create_workflow`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CreateWorkflowParams {
    #[serde(flatten)]
    pub(crate) options: LoopOptions,
    /// The stored workflow to run: its id, or an active workflow's name.
    pub(crate) workflow: String,
    /// Stop the whole workflow run after this long; 0 means no limit.
    pub(crate) timeout: Option<Duration>,
}

/// `loops_run_now`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunNowParams {
    /// Loop id, or name (refused when several loops share it).
    #[serde(rename = "loop")]
    pub(crate) target: String,
    /// Include the run's stdout and stderr instead of their lengths, and
    /// secrets shaped like tokens whole.
    #[serde(default)]
    pub(crate) show_output: bool,
    /// Run it here even though it is placed on labels this host lacks.
    #[serde(default)]
    pub(crate) anywhere: bool,
    /// Run it now even though its pool is full, instead of waiting.
    #[serde(default)]
    pub(crate) ignore_pool: bool,
}

/// `loops_apply`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ApplyParams {
    /// The loops file (.toml or .json) or a directory of them, on the
    /// server's host; a relative path resolves against the server's
    /// working directory.
    pub(crate) path: String,
    /// Return the plan and change nothing.
    #[serde(default)]
    pub(crate) dry_run: bool,
    /// Also remove the scope's loops the file no longer has.
    #[serde(default)]
    pub(crate) prune: bool,
    /// Allow replacing a loop whose kind changed.
    #[serde(default)]
    pub(crate) yes: bool,
    /// Take over loops of the same name made by hand or by another scope.
    #[serde(default)]
    pub(crate) adopt: bool,
    /// The scope [default: the file's canonical path].
    pub(crate) scope: Option<String>,
}

/// `loops_labels_update`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LabelsParams {
    /// Loop id, or name (refused when several loops share it).
    #[serde(rename = "loop")]
    pub(crate) target: String,
    /// set replaces the labels, add and remove change some, clear removes all.
    #[schemars(extend("enum" = ["set", "add", "remove", "clear"]))]
    pub(crate) action: String,
    /// The labels to set, add or remove (none for clear).
    #[serde(default)]
    pub(crate) labels: Labels,
}
