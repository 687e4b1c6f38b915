//! `loops apply <file|dir>` (issue 31): loops as code.
//!
//! The whole file is read and every loop resolved exactly as `create`
//! resolves its flags (`apply/flags.rs`) before the store is opened, so a
//! bad file changes nothing and names `file:line:col`. Then, in one store
//! transaction, the loops of the same names are read, the plan is made
//! (`apply/plan.rs`) and carried out: creates, edits in place (id and
//! history kept; a schedule change recomputes the next run, as `edit`
//! does), replacements of loops whose kind changed (with `--yes`), and
//! with `--prune` removals of the scope's loops the file no longer has.
//! A conflict (a loop of the same name made by hand or by another scope,
//! without `--adopt`) stops it before anything is written.
//!
//! The loops an apply writes carry its scope (`loops.scope`): `--scope`,
//! else the canonical path of the file or directory.

pub(crate) mod export;
pub(crate) mod file;
mod flags;
mod plan;
mod schema;
mod toml_out;
mod workflows;

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Result, anyhow, bail};
use loops_core::{Loop, LoopId, NewLoop, Target};
use loops_store::{DeleteHistory, LoopFilter, Store};
use serde_json::json;

use self::file::Origin;
use self::plan::{Step, kind};
use self::workflows::{WantedWorkflow, WorkflowStep};
use super::now;
use crate::args::Create;
use crate::args::apply::{ApplyArgs, SchemaOf};
use crate::context::Context;
use crate::exit::Outcome;
use crate::render::Printer;
use crate::request::{self, Document, Request, Warnings};

/// The longest scope, in characters.
const MAX_SCOPE_CHARS: usize = 1024;

/// `loops apply`.
pub(crate) fn run(ctx: &Context, args: &ApplyArgs, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |warnings| {
        let path = Path::new(&args.path);
        let read = file::read(path)?;
        let workflows = workflows::parse(&read.workflows, warnings)?;
        let scope = match &args.scope {
            Some(scope) => scope.clone(),
            None => std::fs::canonicalize(path)
                .map_err(|e| anyhow!("{}: {e}", args.path))?
                .display()
                .to_string(),
        };
        if scope.trim().is_empty()
            || scope.chars().count() > MAX_SCOPE_CHARS
            || scope.chars().any(char::is_control)
        {
            bail!("--scope must be 1 to {MAX_SCOPE_CHARS} characters with no control characters");
        }
        let mut seen: HashMap<String, Origin> = HashMap::new();
        let mut wanted = Vec::new();
        for entry in &read.loops {
            let parsed = flags::parse(entry)?;
            if let Some(first) = seen.get(&parsed.name) {
                bail!(
                    "{}: loop {:?} is in the file twice (first at {first}); a name is a loop's \
                     identity in a file",
                    entry.origin,
                    parsed.name
                );
            }
            seen.insert(parsed.name.clone(), entry.origin.clone());
            let (mut new, workflow) =
                new_loop(warnings, &parsed.create).map_err(|e| located(entry, &e))?;
            new.policy.scope = Some(scope.clone());
            wanted.push(Wanted {
                name: parsed.name,
                origin: entry.origin.clone(),
                new,
                workflow,
            });
        }
        Ok(Apply {
            wanted,
            workflows,
            scope,
            dry_run: args.dry_run,
            prune: args.prune,
            yes: args.yes,
            adopt: args.adopt,
        })
    })
}

/// `loops schema <what>`: a JSON Schema, always JSON.
pub(crate) fn schema(ctx: &Context, what: SchemaOf, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |_| Ok(PrintSchema(what)))
}

/// The typed request of `loops schema`.
struct PrintSchema(SchemaOf);

/// What `loops schema` prints.
struct SchemaDoc(serde_json::Value);

impl Request for PrintSchema {
    type Document = SchemaDoc;

    fn run(self, _: &Context, _: &mut Warnings) -> Result<SchemaDoc> {
        Ok(SchemaDoc(match self.0 {
            SchemaOf::LoopsFile => schema::loops_file_schema(),
            SchemaOf::Workflow => loops_core::workflow_file_schema(),
        }))
    }
}

impl Document for SchemaDoc {
    fn json(&self, out: &mut Printer) -> Result<()> {
        Ok(out.json(&self.0)?)
    }

    fn human(&self, _: &Context, out: &mut Printer) -> Result<()> {
        self.json(out)
    }
}

/// The loop a table makes, as `create` makes it, and for a workflow loop
/// the workflow it names (looked up in the store later).
fn new_loop(warnings: &mut Warnings, create: &Create) -> Result<(NewLoop, Option<String>)> {
    Ok(match create {
        Create::Command(args) => (super::create::command_loop(warnings, args)?, None),
        Create::Agent(args) => (super::create::agent_loop(warnings, args)?, None),
        Create::Workflow(args) => (
            crate::resolve::workflow_loop(warnings, args)?,
            Some(args.workflow.clone()),
        ),
    })
}

/// `error` at the key of `entry` whose flag it names first, else whose
/// value it quotes, else at the table.
fn located(entry: &file::Entry, error: &anyhow::Error) -> anyhow::Error {
    let text = error.to_string();
    let named = text.split_whitespace().find_map(|word| {
        let flag = word.strip_prefix("--")?;
        let flag: String = flag
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        entry.key(&flag)
    });
    let quoted = || {
        entry.keys.iter().find(|k| match &k.value {
            file::Value::String(v) => v.len() > 1 && text.contains(v.as_str()),
            _ => false,
        })
    };
    match named.or_else(quoted) {
        Some(key) if !text.contains(&format!("--{}", key.name)) => {
            anyhow!("{}: {}: {text}", key.origin, key.name)
        }
        Some(key) => anyhow!("{}: {text}", key.origin),
        None => anyhow!("{}: {text}", entry.origin),
    }
}

/// One loop of the file, resolved.
struct Wanted {
    name: String,
    origin: Origin,
    new: NewLoop,
    /// A workflow loop's workflow, by id or name.
    workflow: Option<String>,
}

/// The typed request of `apply`.
struct Apply {
    wanted: Vec<Wanted>,
    workflows: Vec<WantedWorkflow>,
    scope: String,
    dry_run: bool,
    prune: bool,
    yes: bool,
    adopt: bool,
}

/// What `apply` returns: the plan, carried out unless a dry run.
struct Applied {
    scope: String,
    dry_run: bool,
    /// Each step, with the loop's name.
    steps: Vec<(String, Step)>,
    /// Each workflow's step, with its name.
    workflow_steps: Vec<(String, WorkflowStep)>,
}

impl Request for Apply {
    type Document = Applied;

    fn run(mut self, ctx: &Context, _warnings: &mut Warnings) -> Result<Applied> {
        let store = if self.dry_run {
            ctx.open_existing_store()?
        } else {
            Some(ctx.open_store()?)
        };
        let now = now();
        for w in &self.wanted {
            super::pools::require_pool(store.as_ref(), w.new.policy.pool.as_deref())
                .map_err(|e| anyhow!("{}: {e}", w.origin))?;
        }
        let Some(store) = store else {
            // A dry run with no database: everything is new.
            for w in &self.wanted {
                if let Some(name) = &w.workflow
                    && !self.workflows.iter().any(|f| &f.name == name)
                {
                    bail!("{}: workflow not found: {name}", w.origin);
                }
            }
            return Ok(Applied {
                scope: self.scope,
                dry_run: true,
                workflow_steps: self
                    .workflows
                    .into_iter()
                    .map(|w| (w.name, WorkflowStep::Create))
                    .collect(),
                steps: self
                    .wanted
                    .into_iter()
                    .map(|w| (w.name, Step::Create { new: w.new }))
                    .collect(),
            });
        };
        let (workflow_steps, steps) = store.transaction(|| -> Result<_> {
            store.lock_applies()?;
            let workflow_steps = workflows::plan(&store, &self.workflows)?;
            if !self.dry_run {
                workflows::carry_out(&store, &self.workflows, &workflow_steps, now)?;
            }
            self.resolve_workflows(&store)?;
            let existing = store.list_loops(&LoopFilter {
                limit: Some(u32::MAX),
                ..LoopFilter::default()
            })?;
            let steps = self.plan(&existing, now)?;
            if !self.dry_run {
                for (name, step) in &steps {
                    carry_out(&store, name, step, &existing, now)?;
                }
            }
            Ok((workflow_steps, steps))
        })?;
        let names = self.workflows.into_iter().map(|w| w.name);
        Ok(Applied {
            scope: self.scope,
            dry_run: self.dry_run,
            workflow_steps: names.zip(workflow_steps).collect(),
            steps,
        })
    }
}

impl Apply {
    /// Points each workflow loop at the active workflow it names. In a
    /// dry run a workflow the file creates is not stored yet: its loops
    /// keep the target they have.
    fn resolve_workflows(&mut self, store: &Store) -> Result<()> {
        for w in &mut self.wanted {
            let (Some(name), Target::Workflow(target)) = (&w.workflow, &mut w.new.target) else {
                continue;
            };
            let in_file = self.workflows.iter().any(|f| &f.name == name);
            let spec = match workflows::active(store, name)? {
                Some(spec) => spec,
                None if in_file && self.dry_run => continue,
                None => store
                    .require_workflow(name)
                    .map_err(|e| anyhow!("{}: {e}", w.origin))?,
            };
            super::pools::refuse_shared_pool(w.new.policy.pool.as_deref(), &spec)
                .map_err(|e| anyhow!("{}: {e}", w.origin))?;
            target.workflow_id = spec.id;
        }
        Ok(())
    }

    /// The plan against the `existing` loops; an error for conflicts, and
    /// for a replacement without `--yes`.
    fn plan(&self, existing: &[Loop], now: loops_core::Timestamp) -> Result<Vec<(String, Step)>> {
        let mut steps = Vec::new();
        let mut conflicts = Vec::new();
        for w in &self.wanted {
            let same: Vec<&Loop> = existing.iter().filter(|l| l.name == w.name).collect();
            let step = match same.as_slice() {
                [] => Step::Create { new: w.new.clone() },
                [lp] if lp.policy.scope.as_deref() != Some(&self.scope) && !self.adopt => {
                    let by = match &lp.policy.scope {
                        Some(other) => format!("by scope {other:?}"),
                        None => "by hand".to_owned(),
                    };
                    conflicts.push(format!(
                        "{}: loop {} ({}) exists, made {by}; pass --adopt to manage it from \
                         this file, or rename one of them",
                        w.origin, w.name, lp.id
                    ));
                    continue;
                }
                [lp] if kind(&lp.target) != kind(&w.new.target) => Step::Replace {
                    id: lp.id,
                    new: w.new.clone(),
                },
                [lp] => {
                    let mut wanted = loops_store::loop_to_create(&w.new, now)?;
                    after_ids(&mut wanted.policy.after, existing);
                    let changes = plan::diff(lp, &wanted);
                    if changes.is_empty() {
                        Step::Unchanged { id: lp.id }
                    } else {
                        Step::Update {
                            id: lp.id,
                            new: w.new.clone(),
                            changes,
                        }
                    }
                }
                many => {
                    let ids: Vec<String> = many.iter().map(|l| l.id.to_string()).collect();
                    conflicts.push(format!(
                        "{}: {} loops are named {} ({}); rename all but one",
                        w.origin,
                        many.len(),
                        w.name,
                        ids.join(", ")
                    ));
                    continue;
                }
            };
            steps.push((w.name.clone(), step));
        }
        if !conflicts.is_empty() {
            bail!("nothing was changed:\n{}", conflicts.join("\n"));
        }
        if self.prune {
            for lp in existing {
                let ours = lp.policy.scope.as_deref() == Some(&self.scope);
                if ours && !self.wanted.iter().any(|w| w.name == lp.name) {
                    steps.push((lp.name.clone(), Step::Remove { id: lp.id }));
                }
            }
        }
        let replaced: Vec<&str> = steps
            .iter()
            .filter(|(_, s)| matches!(s, Step::Replace { .. }))
            .map(|(n, _)| n.as_str())
            .collect();
        if !replaced.is_empty() && !self.yes && !self.dry_run {
            bail!(
                "the kind of {} changed, so it is replaced: a new id, the old history kept \
                 under the old one; pass --yes to go on, or see the plan with --dry-run",
                replaced.join(", ")
            );
        }
        Ok(steps)
    }
}

/// `edges` naming their upstream loops by id where `existing` has exactly
/// one loop of the name written, as the store will hold them, so an
/// unchanged `after` compares equal.
fn after_ids(edges: &mut [loops_core::AfterEdge], existing: &[Loop]) {
    for edge in edges {
        if existing.iter().any(|l| l.id.to_string() == edge.loop_id) {
            continue;
        }
        if let [one] = existing
            .iter()
            .filter(|l| l.name == edge.loop_id)
            .collect::<Vec<_>>()
            .as_slice()
        {
            edge.loop_id = one.id.to_string();
        }
    }
}

/// Writes one step.
fn carry_out(
    store: &Store,
    name: &str,
    step: &Step,
    existing: &[Loop],
    now: loops_core::Timestamp,
) -> Result<()> {
    let create = |new: &NewLoop| -> Result<Loop> {
        let mut new = new.clone();
        crate::resolve::policy::resolve_after(store, &mut new.policy.after, None)?;
        Ok(store.create_loop(&new, now)?)
    };
    match step {
        Step::Create { new } => {
            create(new).map_err(|e| anyhow!("loop {name}: {e}"))?;
        }
        Step::Update { id, new, .. } => {
            let mut new = new.clone();
            let stored = existing.iter().find(|l| l.id == *id);
            crate::resolve::policy::resolve_after(store, &mut new.policy.after, stored)?;
            store
                .edit_loop(id, now, |_| Ok::<_, anyhow::Error>(new))
                .map_err(|e| anyhow!("loop {name}: {e}"))?;
        }
        Step::Replace { id, new } => {
            store.delete_loop(id, DeleteHistory::Keep)?;
            create(new).map_err(|e| anyhow!("loop {name}: {e}"))?;
        }
        Step::Remove { id } => {
            store.delete_loop(id, DeleteHistory::Keep)?;
        }
        Step::Unchanged { .. } => {}
    }
    Ok(())
}

impl Applied {
    fn changed(&self) -> bool {
        self.steps.iter().any(|(_, s)| s.changes())
            || self
                .workflow_steps
                .iter()
                .any(|(_, s)| !matches!(s, WorkflowStep::Unchanged(_)))
    }

    /// The workflows' plan: `(action, name, id)`.
    fn workflow_rows(&self) -> impl Iterator<Item = (&'static str, &str, Option<String>)> {
        self.workflow_steps.iter().map(|(name, step)| match step {
            WorkflowStep::Create => ("create", name.as_str(), None),
            WorkflowStep::Replace(id) => ("replace", name.as_str(), Some(id.to_string())),
            WorkflowStep::Unchanged(id) => ("unchanged", name.as_str(), Some(id.to_string())),
        })
    }

    fn count(&self, f: impl Fn(&Step) -> bool) -> usize {
        self.steps.iter().filter(|(_, s)| f(s)).count()
    }
}

fn step_id(step: &Step) -> Option<&LoopId> {
    match step {
        Step::Create { .. } => None,
        Step::Update { id, .. }
        | Step::Replace { id, .. }
        | Step::Unchanged { id }
        | Step::Remove { id } => Some(id),
    }
}

fn action(step: &Step) -> &'static str {
    match step {
        Step::Create { .. } => "create",
        Step::Update { .. } => "update",
        Step::Replace { .. } => "replace",
        Step::Unchanged { .. } => "unchanged",
        Step::Remove { .. } => "remove",
    }
}

impl Document for Applied {
    fn json(&self, out: &mut Printer) -> Result<()> {
        let steps: Vec<_> = self
            .steps
            .iter()
            .map(|(name, step)| {
                let mut v = json!({"action": action(step), "name": name});
                if let Some(id) = step_id(step) {
                    v["id"] = json!(id);
                }
                if let Step::Update { changes, .. } = step {
                    v["changes"] = changes
                        .iter()
                        .map(|c| json!({"field": c.field, "old": c.old, "new": c.new}))
                        .collect();
                }
                v
            })
            .collect();
        let workflows: Vec<_> = self
            .workflow_rows()
            .map(|(action, name, id)| json!({"action": action, "name": name, "id": id}))
            .collect();
        Ok(out.json(&json!({
            "scope": self.scope,
            "dryRun": self.dry_run,
            "changed": self.changed(),
            "workflows": workflows,
            "steps": steps,
        }))?)
    }

    fn human(&self, ctx: &Context, out: &mut Printer) -> Result<()> {
        let shown = |s: &str| crate::render::escape_controls(s, &[]).into_owned();
        for (action, name, id) in self.workflow_rows() {
            let name = shown(name);
            match (action, id) {
                ("create", _) => out.line(&format!("+ create workflow {name}"))?,
                ("replace", Some(id)) => out.line(&format!(
                    "~ replace workflow {name} ({id}): a new version; its loops run it"
                ))?,
                (_, Some(id)) if ctx.verbose => {
                    out.line(&format!("= unchanged workflow {name} ({id})"))?;
                }
                _ => {}
            }
        }
        for (name, step) in &self.steps {
            let name = shown(name);
            match step {
                Step::Create { new } => {
                    out.line(&format!("+ create {name} ({})", kind(&new.target)))?;
                }
                Step::Update { id, changes, .. } => {
                    out.line(&format!("~ update {name} ({id})"))?;
                    for c in changes {
                        out.line(&format!(
                            "    {}: {} → {}",
                            c.field,
                            shown(&c.old),
                            shown(&c.new)
                        ))?;
                    }
                }
                Step::Replace { id, new } => out.line(&format!(
                    "± replace {name} ({id}): its kind is now {}",
                    kind(&new.target)
                ))?,
                Step::Remove { id } => out.line(&format!("- remove {name} ({id})"))?,
                Step::Unchanged { id } if ctx.verbose => {
                    out.line(&format!("= unchanged {name} ({id})"))?;
                }
                Step::Unchanged { .. } => {}
            }
        }
        let unchanged = self.count(|s| matches!(s, Step::Unchanged { .. }));
        if !self.changed() {
            return Ok(out.line(&format!("no changes ({unchanged} unchanged)"))?);
        }
        let mut summary = format!(
            "{} to create, {} to update, {} to replace, {} to remove, {unchanged} unchanged",
            self.count(|s| matches!(s, Step::Create { .. })),
            self.count(|s| matches!(s, Step::Update { .. })),
            self.count(|s| matches!(s, Step::Replace { .. })),
            self.count(|s| matches!(s, Step::Remove { .. })),
        );
        if !self.workflow_steps.is_empty() {
            let count = |action: &str| self.workflow_rows().filter(|r| r.0 == action).count();
            summary = format!(
                "workflows: {} to create, {} to replace; loops: {summary}",
                count("create"),
                count("replace")
            );
        }
        if self.dry_run {
            out.line(&format!("plan: {summary}; nothing was written (--dry-run)"))?;
        } else {
            let done = summary
                .replace(" to create", " created")
                .replace(" to update", " updated")
                .replace(" to replace", " replaced")
                .replace(" to remove", " removed");
            out.line(&format!("applied: {done}"))?;
        }
        Ok(())
    }

    fn outcome(&self) -> Outcome {
        if self.dry_run && self.changed() {
            Outcome::Changes
        } else {
            Outcome::Success
        }
    }
}
