//! `loops export --format toml` (issue 31): the stored loops as a loops
//! file, the inverse of `apply/flags.rs`.
//!
//! Each loop becomes the `[[loop]]` table of the `create` flags that make
//! it, defaults left out; each workflow a loop targets becomes a
//! `[[workflow]]` table inline. Durations are written in the CLI's forms
//! (`1h30m`), instants as stored (UTC), paths absolute, and a loop comes
//! after the loops its `after` names, as `apply` needs them.
//!
//! Every table is read back as `apply` would read it, and the loop it
//! makes compared with the stored one field by field (`plan::diff`). What
//! no flag can say (a schedule anchor the original wrote, a workflow's
//! input) is named in a warning, so an export never loses a setting
//! silently.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use anyhow::Result;
use loops_core::{DEFAULT_WATCH_DEBOUNCE_MS, Loop, Target, Timestamp, WorkflowSpec, duration_text};
use loops_store::{LoopFilter, Store};
use serde_json::{Map, Value, json};

use super::file::{Entry, Key, Origin};
use super::{flags, new_loop, plan};
use crate::request::Warnings;

/// Which loops an export holds.
#[derive(Debug, Default, Clone)]
pub(crate) struct Select {
    /// Loops with every one of these labels.
    pub(crate) labels: Vec<String>,
    /// Loops an apply of this scope manages.
    pub(crate) scope: Option<String>,
}

/// A loops file, written.
#[derive(Debug)]
pub(crate) struct LoopsFile {
    pub(crate) text: String,
    pub(crate) loops: usize,
    pub(crate) workflows: usize,
    /// Settings the file cannot carry, one line per loop.
    pub(crate) lossy: Vec<String>,
}

/// The first line of every exported file.
const HEADER: &str = "# A loops file, written by `loops export --format toml`.\n\
                      # Check it with `loops apply <file> --dry-run`; carry it out with \
                      `loops apply <file>`.\n\n";

/// The loops of `store` that `select` picks, as a loops file. `dir` is
/// where the file goes: a loop with no working directory would run there
/// once applied, and the warning says so.
pub(crate) fn write(
    store: &Store,
    select: &Select,
    dir: &Path,
    now: Timestamp,
) -> Result<LoopsFile> {
    let mut all = Vec::new();
    store.for_each_labeled_loop(
        &LoopFilter {
            limit: Some(u32::MAX),
            ..LoopFilter::default()
        },
        &[],
        |lp| {
            all.push(lp);
            std::ops::ControlFlow::Continue(())
        },
    )?;
    let names: HashMap<String, String> = all
        .iter()
        .map(|lp| (lp.id.to_string(), lp.name.clone()))
        .collect();
    let picked: Vec<&Loop> = all
        .iter()
        .filter(|lp| select.labels.iter().all(|l| lp.policy.labels.contains(l)))
        .filter(|lp| {
            select
                .scope
                .as_ref()
                .is_none_or(|s| lp.policy.scope.as_ref() == Some(s))
        })
        .collect();
    let picked = upstreams_first(&picked);
    let mut lossy = Vec::new();
    let mut workflows: BTreeMap<String, (WorkflowSpec, Value)> = BTreeMap::new();
    let mut loops = Vec::new();
    for lp in &picked {
        let mut workflow = None;
        if let Target::Workflow(t) = &lp.target {
            let spec = store.require_workflow(&t.workflow_id.to_string())?;
            if let Some((kept, _)) = workflows.get(&spec.name)
                && kept.id != spec.id
            {
                lossy.push(format!(
                    "loop {}: it runs version {} of workflow {}, and the file holds one \
                     version per name ({})",
                    lp.name, spec.version, spec.name, kept.version
                ));
            } else {
                let table = workflow_table(&spec);
                workflows.insert(spec.name.clone(), (spec.clone(), table));
            }
            workflow = Some(spec.name);
        }
        let table = loop_table(lp, &names, workflow.as_deref());
        if let Some(fields) = read_back(store, lp, &table, dir, now)? {
            lossy.push(format!(
                "loop {}: {fields} cannot be written in a loops file; the file leaves it out",
                lp.name
            ));
        }
        loops.push(Value::Object(table));
    }
    let mut top = Map::new();
    let workflow_count = workflows.len();
    if !workflows.is_empty() {
        top.insert(
            "workflow".into(),
            Value::Array(workflows.into_values().map(|(_, t)| t).collect()),
        );
    }
    if !loops.is_empty() {
        top.insert("loop".into(), Value::Array(loops.clone()));
    }
    let text = super::toml_out::document(&top);
    Ok(LoopsFile {
        text: format!("{HEADER}{}", text.trim_start()),
        loops: loops.len(),
        workflows: workflow_count,
        lossy,
    })
}

/// `loops` ordered so that each comes after the loops of the list its
/// `after` names, else in the order given.
fn upstreams_first<'a>(loops: &[&'a Loop]) -> Vec<&'a Loop> {
    let by_id: HashMap<String, &Loop> = loops.iter().map(|l| (l.id.to_string(), *l)).collect();
    let mut out: Vec<&Loop> = Vec::new();
    let mut placed: HashSet<String> = HashSet::new();
    fn place<'a>(
        lp: &'a Loop,
        by_id: &HashMap<String, &'a Loop>,
        out: &mut Vec<&'a Loop>,
        placed: &mut HashSet<String>,
        depth: usize,
    ) {
        let id = lp.id.to_string();
        if placed.contains(&id) || depth > by_id.len() {
            return;
        }
        for edge in &lp.policy.after {
            if let Some(up) = by_id.get(&edge.loop_id) {
                place(up, by_id, out, placed, depth + 1);
            }
        }
        if placed.insert(id) {
            out.push(lp);
        }
    }
    for lp in loops {
        place(lp, &by_id, &mut out, &mut placed, 0);
    }
    out
}

/// The `[[workflow]]` table of `spec`: the keys a workflow file has.
fn workflow_table(spec: &WorkflowSpec) -> Value {
    let mut table = Map::new();
    table.insert("name".into(), json!(spec.name));
    if let Some(d) = &spec.description {
        table.insert("description".into(), json!(d));
    }
    if let Some(n) = spec.max_parallel {
        table.insert("maxParallel".into(), json!(n));
    }
    table.insert(
        "steps".into(),
        serde_json::to_value(&spec.steps).unwrap_or(Value::Null),
    );
    Value::Object(table)
}

/// The flags of `lp` as a table: `name` and `kind` first, then the
/// target, the schedule and the policies, defaults left out.
fn loop_table(
    lp: &Loop,
    names: &HashMap<String, String>,
    workflow: Option<&str>,
) -> Map<String, Value> {
    let mut t = Map::new();
    let mut put = |key: &str, value: Value| {
        t.insert(key.to_owned(), value);
    };
    let text = |v: &Value| {
        v.as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| v.to_string())
    };
    let dur = |ms: u64| json!(duration_text(ms));
    put("name", json!(lp.name));
    put("kind", json!(plan::kind(&lp.target)));
    if let Some(d) = &lp.description {
        put("description", json!(d));
    }
    let target = serde_json::to_value(&lp.target).unwrap_or(Value::Null);
    match &lp.target {
        Target::Command(c) => {
            put("cmd", json!(c.command));
            if let Some(args) = &c.args {
                put("arg", json!(args));
            }
            if c.shell == Some(false) {
                put("no-shell", json!(true));
            }
            if let Some(cwd) = &c.cwd {
                put("cwd", json!(cwd));
            }
            if let Some(env) = &c.env {
                put("env", json!(env));
            }
            if let Some(ms) = c.timeout_ms {
                put("timeout", dur(ms));
            }
        }
        Target::Agent(a) => {
            put("provider", target["provider"].clone());
            match &a.prompt_file {
                Some(file) => put("prompt-file", json!(file)),
                None => put("prompt", json!(a.prompt)),
            }
            for (key, field) in [
                ("cwd", "cwd"),
                ("model", "model"),
                ("agent", "agent"),
                ("effort", "variant"),
                ("permission-mode", "permissionMode"),
                ("sandbox", "sandbox"),
                ("worktree", "worktree"),
            ] {
                if let Some(v) = target.get(field) {
                    put(key, json!(text(v)));
                }
            }
            if let Some(v) = target.get("configIsolation").filter(|v| *v != "safe") {
                put("config-isolation", v.clone());
            }
            match &a.timeout_ms {
                loops_core::WallClock::Unset => {}
                loops_core::WallClock::Unlimited => put("timeout", json!("none")),
                loops_core::WallClock::Ms(ms) => put("timeout", dur(*ms)),
            }
            if let Some(ms) = a.idle_timeout_ms {
                put("idle-timeout", dur(ms));
            }
            if let Some(env) = &a.env {
                put("env", json!(env));
            }
            if let Some(dirs) = &a.add_dirs {
                put("add-dir", json!(dirs));
            }
            if let Some(allow) = &a.allowlist {
                if let Some(tools) = &allow.tools {
                    put("allow-tool", json!(tools));
                }
                if let Some(commands) = &allow.commands {
                    put("allow-command", json!(commands));
                }
                if let Some(reason) = &allow.safety_reason {
                    put("safety-reason", json!(reason));
                }
            }
            if a.manual_break_glass == Some(true) {
                put("manual-break-glass", json!(true));
            }
            if a.keep_worktree == Some(true) {
                put("keep-worktree", json!(true));
            }
        }
        Target::Workflow(w) => {
            put("workflow", json!(workflow.unwrap_or_default()));
            if let Some(ms) = w.timeout_ms {
                put("timeout", dur(ms));
            }
        }
    }
    let account = match &lp.target {
        Target::Command(c) => c.account.as_ref(),
        Target::Agent(a) => a.account.as_ref(),
        Target::Workflow(_) => None,
    };
    if let Some(account) = account {
        put("account", json!(account.profile));
        if let Some(tool) = &account.tool {
            put("account-tool", json!(tool));
        }
    }
    if !lp.policy.trigger_only {
        match &lp.schedule {
            loops_core::Schedule::Once { at } => put("at", json!(at.to_string())),
            loops_core::Schedule::Interval { every_ms, .. } => put("every", dur(*every_ms)),
            loops_core::Schedule::Cron {
                expression,
                timezone,
            } => {
                put("cron", json!(expression));
                if let Some(tz) = timezone {
                    put("tz", json!(tz));
                }
            }
            loops_core::Schedule::Dynamic { .. } => put("dynamic", json!(true)),
        }
    }
    let shown = serde_json::to_value(lp).unwrap_or(Value::Null);
    let string = |field: &str| shown.get(field).map(|v| json!(text(v)));
    // What `create` gives a loop that says nothing more.
    let d = loops_core::NewLoop::new("", lp.schedule.clone(), lp.target.clone());
    if lp.catch_up != d.catch_up {
        put("catch-up", string("catchUp").unwrap_or_default());
    }
    if lp.catch_up_limit != d.catch_up_limit {
        put("catch-up-limit", json!(lp.catch_up_limit));
    }
    if lp.overlap != d.overlap {
        put("overlap", string("overlap").unwrap_or_default());
    }
    if lp.max_attempts != d.max_attempts {
        put("attempts", json!(lp.max_attempts));
    }
    if lp.retry_delay_ms != d.retry_delay_ms {
        put("retry-delay", dur(lp.retry_delay_ms));
    }
    if lp.lease_ms != d.lease_ms {
        put("lease", dur(lp.lease_ms));
    }
    if let Some(at) = lp.expires_at {
        put("expires-at", json!(at.to_string()));
    }
    let p = &lp.policy;
    if let Some(n) = p.expires_after_runs {
        put("expires-after-runs", json!(n));
    }
    if let Some(n) = p.pause_after_failures {
        put("pause-after-failures", json!(n));
    }
    if !p.backoff.is_fixed() {
        put("backoff", string("backoff").unwrap_or_default());
    }
    if let Some(ms) = p.max_retry_delay_ms {
        put("max-retry-delay", dur(ms));
    }
    if !p.skip_exit_codes.is_empty() {
        put("skip-exit-code", json!(p.skip_exit_codes));
    }
    if let Some(usd) = shown.get("maxCostPerDayUsd") {
        put("max-cost-per-day", json!(text(usd)));
    }
    if !p.labels.is_empty() {
        put("label", json!(p.labels));
    }
    if !p.runs_on.is_empty() {
        put("runs-on", json!(p.runs_on));
    }
    if let Some(pool) = &p.pool {
        put("pool", json!(pool));
    }
    if !p.after.is_empty() {
        let edges: Vec<String> = p
            .after
            .iter()
            .map(|e| {
                let name = names.get(&e.loop_id).unwrap_or(&e.loop_id);
                match e.on {
                    loops_core::AfterOn::Succeeded => name.clone(),
                    on => format!("{name}:{}", text(&json!(on))),
                }
            })
            .collect();
        put("after", json!(edges));
    }
    if p.trigger_only {
        put("trigger-only", json!(true));
    }
    if let Some(watch) = &p.watch {
        put("watch", json!(watch.paths));
        if watch.debounce_ms != DEFAULT_WATCH_DEBOUNCE_MS {
            put("debounce", dur(watch.debounce_ms));
        }
    }
    let hooks = &lp.hooks;
    if let Some(c) = &hooks.on_failure {
        put("on-failure", json!(c));
    }
    if let Some(c) = &hooks.on_success {
        put("on-success", json!(c));
    }
    if hooks.hook_show_output {
        put("hook-show-output", json!(true));
    }
    t
}

/// Reads `table` back as `apply` would, and compares the loop it makes
/// with `lp`: the fields that differ, joined, when any.
fn read_back(
    store: &Store,
    lp: &Loop,
    table: &Map<String, Value>,
    dir: &Path,
    now: Timestamp,
) -> Result<Option<String>> {
    let origin = Origin {
        file: dir.join("export.toml"),
        at: None,
    };
    let entry = Entry {
        origin: origin.clone(),
        keys: table
            .iter()
            .filter_map(|(name, value)| {
                Some(Key {
                    name: name.clone(),
                    value: super::file::from_json(value.clone(), name).ok()?,
                    origin: origin.clone(),
                })
            })
            .collect(),
    };
    let made = flags::parse(&entry).and_then(|parsed| {
        let (mut new, _) = new_loop(&mut Warnings::default(), &parsed.create)?;
        if let (Target::Workflow(made), Target::Workflow(stored)) = (&mut new.target, &lp.target) {
            made.workflow_id = stored.workflow_id;
        }
        crate::resolve::policy::resolve_after(store, &mut new.policy.after, None)?;
        new.policy.scope.clone_from(&lp.policy.scope);
        Ok(loops_store::loop_to_create(&new, now)?)
    });
    let made = match made {
        Ok(made) => made,
        Err(e) => return Ok(Some(format!("its settings ({e})"))),
    };
    let fields: Vec<String> = plan::diff(lp, &made).into_iter().map(|c| c.field).collect();
    Ok((!fields.is_empty()).then(|| fields.join(", ")))
}

/// Where an export to `path` goes, for [`write`]'s `dir`: its directory,
/// else the working directory.
pub(crate) fn directory_of(path: Option<&Path>) -> PathBuf {
    path.and_then(|p| std::path::absolute(p).ok())
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("/"))
}
