//! `loops apply` (issue 31): loops as code.

use clap::Args;

/// Examples and the rules, after `loops apply --help`.
pub(crate) const APPLY_AFTER_HELP: &str = "\
A loops file is TOML (or the same structure as .json): one [[loop]] table per loop,
its identity the name. Keys are `loops create`'s long flags without the dashes,
`kind` the subcommand; a repeated flag is an array, KEY=VALUE flags a table.
Paths (cwd, prompt-file, watch) resolve against the file's directory, where a
command or agent loop runs unless `cwd` says otherwise.

  [[loop]]
  name = \"backup\"
  kind = \"command\"
  every = \"6h\"
  cmd = \"./backup.sh\"
  env = { TARGET = \"s3://bucket\" }

Examples:
  loops apply loops.toml --dry-run   # the plan; exit 2 when something would change
  loops apply loops.toml             # carry it out, in one transaction
  loops apply loops.toml --prune     # also remove the scope's loops the file dropped
  loops apply ./loops.d              # every .toml and .json file of a directory

The plan: + create, ~ update (each field, old → new), - remove (--prune), and
= unchanged (counted; listed with -v). A loop of the same name made by hand or by
another scope is a conflict, and nothing changes; --adopt takes it over.";

// `loops apply <path>`.
#[derive(Debug, Args)]
pub(crate) struct ApplyArgs {
    /// The loops file (.toml or .json), or a directory of them.
    #[arg(value_name = "PATH", value_hint = clap::ValueHint::AnyPath)]
    pub(crate) path: String,

    /// Print the plan and change nothing; exit 2 when something would
    /// change, 0 when nothing would.
    #[arg(long)]
    pub(crate) dry_run: bool,

    /// Also remove the loops of this scope that the file no longer has
    /// (their run history is kept, as `loops remove` keeps it).
    #[arg(long)]
    pub(crate) prune: bool,

    /// Allow the plan to replace a loop whose kind changed (a new id; the
    /// old loop's history is kept under its old id).
    #[arg(long)]
    pub(crate) yes: bool,

    /// Take over loops of the same name made by hand or by another scope,
    /// instead of refusing them as conflicts.
    #[arg(long)]
    pub(crate) adopt: bool,

    /// The name of the set of loops this file manages [default: the
    /// file's canonical path].
    #[arg(long, value_name = "NAME")]
    pub(crate) scope: Option<String>,
}

/// What `loops schema` prints the JSON Schema of.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum SchemaOf {
    /// A `loops apply` file.
    LoopsFile,
    /// A workflow file (as `loops workflows schema`).
    Workflow,
}

// `loops schema <what>`.
#[derive(Debug, Args)]
pub(crate) struct SchemaArgs {
    /// The file kind.
    #[arg(value_name = "WHAT")]
    pub(crate) what: SchemaOf,
}
