//! The workflow pages: the active workflows (`/workflows`), one workflow's DAG as an
//! SVG graph with its runs (`/workflows/{id}`), and one workflow run's
//! steps (`/workflow-runs/{id}`), which update live.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::Response;
use maud::{Markup, html};
use serde_json::Value;

use super::layout::{self, Section, badge, duration, instant, text, when};
use super::{Shared, doc, gather};
use crate::args::Command;
use crate::args::workflow::{self, Workflows};
use crate::context::Context;
use crate::human;

/// A node's box in the graph, and the room between columns and rows.
const NODE_W: usize = 150;
const NODE_H: usize = 36;
const GAP_X: usize = 50;
const GAP_Y: usize = 20;

/// The runs a workflow's page lists.
const RUNS: &str = "20";

/// `workflows show <id>`'s document: the workflow with its steps.
pub(super) fn definition(ctx: &Context, id: &str) -> anyhow::Result<Value> {
    doc(
        ctx,
        Command::Workflows(Workflows::Show(workflow::WorkflowRef {
            target: id.to_owned(),
        })),
    )
}

/// `GET /workflows`: the active workflows.
pub(in crate::serve) async fn index(State(shared): State<Arc<Shared>>) -> Response {
    let read = gather(&shared, |ctx| {
        doc(
            ctx,
            Command::Workflows(Workflows::List(workflow::ListArgs {
                status: workflow::DEFAULT_LIST_STATUS.to_owned(),
                limit: None,
            })),
        )
    })
    .await;
    let list = match read {
        Ok(list) => list,
        Err(page) => return page,
    };
    let now = human::display_now();
    let empty = Vec::new();
    let workflows = list.as_array().unwrap_or(&empty);
    let body = html! {
        h1 { "Workflows" }
        div #workflows-region data-region {
            table #workflows {
                thead { tr { th { "Name" } th { "Version" } th { "Status" } th { "Steps" } th { "Changed" } } }
                tbody {
                    @for w in workflows {
                        tr data-id=(text(w, "id")) {
                            td { a href={ "/workflows/" (text(w, "id")) } { (text(w, "name")) } }
                            td.num { (w["version"]) }
                            td { (badge(text(w, "status"))) }
                            td.num { (w["steps"].as_array().map_or(0, Vec::len)) }
                            td { (when(instant(w, "updatedAt"), now)) }
                        }
                    }
                }
            }
            @if workflows.is_empty() {
                p.empty { "No workflows yet. Store one with: loops workflows create <file>" }
            }
        }
    };
    layout::page("Workflows", Section::Workflows, true, body)
}

/// `GET /workflows/{id}`: the DAG and the latest runs.
pub(in crate::serve) async fn one(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
) -> Response {
    let read = gather(&shared, move |ctx| {
        let workflow = definition(ctx, &id)?;
        let runs = doc(
            ctx,
            Command::Workflows(Workflows::Runs(workflow::RunsArgs {
                target: Some(text(&workflow, "id").to_owned()),
                limit: RUNS.to_owned(),
            })),
        )?;
        Ok((workflow, runs))
    })
    .await;
    let (workflow, runs) = match read {
        Ok(read) => read,
        Err(page) => return page,
    };
    let now = human::display_now();
    let empty = Vec::new();
    let body = html! {
        h1 { "Workflow " (text(&workflow, "name")) " " small.id { (text(&workflow, "id")) } }
        @if let Some(d) = workflow["description"].as_str() { p.description { (d) } }
        (graph(&workflow, None))
        h2 { "Runs" }
        div #workflow-runs-region data-region {
            (runs_table(runs.as_array().unwrap_or(&empty), now))
        }
    };
    layout::page(text(&workflow, "name"), Section::Workflows, true, body)
}

fn runs_table(runs: &[Value], now: loops_core::Timestamp) -> Markup {
    html! {
        table #workflow-runs {
            thead { tr { th { "Run" } th { "Status" } th { "Started" } th { "Duration" } } }
            tbody {
                @for r in runs {
                    tr data-run=(text(r, "id")) {
                        td { a href={ "/workflow-runs/" (text(r, "id")) } { (text(r, "id")) } }
                        td { (badge(text(r, "status"))) }
                        td { (when(instant(r, "startedAt"), now)) }
                        td.num { (duration(r, "durationMs")) }
                    }
                }
            }
        }
        @if runs.is_empty() { p.empty { "No runs yet." } }
    }
}

/// `GET /workflow-runs/{id}`: a run's steps, live.
pub(in crate::serve) async fn run(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
) -> Response {
    let read = gather(&shared, move |ctx| {
        let inspected = doc(
            ctx,
            Command::Workflows(Workflows::Inspect(workflow::InspectArgs {
                run: workflow::RunRef { run: id },
                show_output: false,
            })),
        )?;
        let workflow_id = text(&inspected["workflowRun"], "workflowId").to_owned();
        let workflow = definition(ctx, &workflow_id)?;
        Ok((inspected, workflow))
    })
    .await;
    let (inspected, workflow) = match read {
        Ok(read) => read,
        Err(page) => return page,
    };
    let now = human::display_now();
    let run = &inspected["workflowRun"];
    let empty = Vec::new();
    let steps = inspected["steps"].as_array().unwrap_or(&empty);
    let status: HashMap<String, String> = steps
        .iter()
        .map(|s| (text(s, "stepId").to_owned(), text(s, "status").to_owned()))
        .collect();
    let body = html! {
        h1 {
            "Run " (text(run, "id")) " of workflow "
            a href={ "/workflows/" (text(run, "workflowId")) } { (text(run, "workflowName")) }
        }
        div #workflow-run-region data-region {
            dl #run {
                dt { "Status" } dd data-field="status" { (badge(text(run, "status"))) }
                dt { "Started" } dd { (when(instant(run, "startedAt"), now)) }
                dt { "Duration" } dd { (duration(run, "durationMs")) }
                @if let Some(e) = run["error"].as_str() { dt { "Error" } dd.error { (e) } }
            }
            (graph(&workflow, Some(&status)))
            table #steps {
                thead { tr { th { "Step" } th { "Status" } th { "Exit" } th { "Duration" } th { "Started" } } }
                tbody {
                    @for s in steps {
                        tr data-step=(text(s, "stepId")) data-status=(text(s, "status")) {
                            td { (text(s, "stepId")) }
                            td { (badge(text(s, "status"))) }
                            td.num { @if let Some(c) = s["exitCode"].as_i64() { (c) } @else { "-" } }
                            td.num { (duration(s, "durationMs")) }
                            td { (when(instant(s, "startedAt"), now)) }
                        }
                    }
                }
            }
        }
    };
    layout::page("Workflow run", Section::Workflows, true, body)
}

/// Where each step goes: its column is its depth (the longest chain of
/// steps before it), its row its place among the steps of that depth.
fn layout_steps(steps: &[Value]) -> Vec<(String, usize, usize, Vec<String>)> {
    let ids: Vec<String> = steps.iter().map(|s| text(s, "id").to_owned()).collect();
    let needs: Vec<Vec<String>> = steps
        .iter()
        .map(|s| {
            s["dependsOn"]
                .as_array()
                .map(|d| {
                    d.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default()
        })
        .collect();
    let index: HashMap<&str, usize> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i))
        .collect();
    let mut depth = vec![0usize; ids.len()];
    // A stored workflow is acyclic; `ids.len()` passes settle any order.
    for _ in 0..ids.len() {
        for (i, deps) in needs.iter().enumerate() {
            for dep in deps {
                if let Some(&j) = index.get(dep.as_str()) {
                    depth[i] = depth[i].max(depth[j] + 1);
                }
            }
        }
    }
    let mut rows_used: HashMap<usize, usize> = HashMap::new();
    ids.into_iter()
        .zip(needs)
        .enumerate()
        .map(|(i, (id, deps))| {
            let row = rows_used.entry(depth[i]).or_default();
            let placed = (id, depth[i], *row, deps);
            *row += 1;
            placed
        })
        .collect()
}

/// The workflow's steps as an SVG graph, each node coloured by its
/// status in `status` when given.
pub(super) fn graph(workflow: &Value, status: Option<&HashMap<String, String>>) -> Markup {
    let empty = Vec::new();
    let steps = workflow["steps"].as_array().unwrap_or(&empty);
    let placed = layout_steps(steps);
    let at: HashMap<&str, (usize, usize)> = placed
        .iter()
        .map(|(id, col, row, _)| (id.as_str(), (*col, *row)))
        .collect();
    let cols = placed.iter().map(|p| p.1 + 1).max().unwrap_or(1);
    let rows = placed.iter().map(|p| p.2 + 1).max().unwrap_or(1);
    let width = cols * (NODE_W + GAP_X) + GAP_X;
    let height = rows * (NODE_H + GAP_Y) + GAP_Y;
    let x = |col: usize| GAP_X / 2 + col * (NODE_W + GAP_X);
    let y = |row: usize| GAP_Y / 2 + row * (NODE_H + GAP_Y);
    html! {
        svg #dag xmlns="http://www.w3.org/2000/svg" role="img"
            aria-label="the workflow's steps and what each depends on"
            width=(width) height=(height) viewBox={ "0 0 " (width) " " (height) } {
            @for (id, col, row, deps) in &placed {
                @for dep in deps {
                    @if let Some(&(dc, dr)) = at.get(dep.as_str()) {
                        path.edge data-from=(dep) data-to=(id) d=(format!(
                            "M{} {} C{} {} {} {} {} {}",
                            x(dc) + NODE_W, y(dr) + NODE_H / 2,
                            x(dc) + NODE_W + GAP_X / 2, y(dr) + NODE_H / 2,
                            x(*col) - GAP_X / 2, y(*row) + NODE_H / 2,
                            x(*col), y(*row) + NODE_H / 2
                        )) {}
                    }
                }
            }
            @for (id, col, row, _) in &placed {
                @let state = status.and_then(|s| s.get(id)).map_or("none", String::as_str);
                g class={ "node s-" (state) } data-step=(id) {
                    rect x=(x(*col)) y=(y(*row)) width=(NODE_W) height=(NODE_H) rx="6" {}
                    text x=(x(*col) + NODE_W / 2) y=(y(*row) + NODE_H / 2 + 5) text-anchor="middle" { (id) }
                    title { (id) @if status.is_some() { ": " (state) } }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_sits_one_column_right_of_its_deepest_dependency() {
        let steps: Vec<Value> = serde_json::from_str(
            r#"[{"id":"ship","dependsOn":["test","lint"]},{"id":"build"},
                {"id":"test","dependsOn":["build"]},{"id":"lint","dependsOn":["build"]}]"#,
        )
        .unwrap();
        let placed: Vec<(String, usize, usize)> = layout_steps(&steps)
            .into_iter()
            .map(|(id, col, row, _)| (id, col, row))
            .collect();
        assert_eq!(
            placed,
            [
                ("ship".to_owned(), 2, 0),
                ("build".to_owned(), 0, 0),
                ("test".to_owned(), 1, 0),
                ("lint".to_owned(), 1, 1),
            ]
        );
        let svg = graph(&serde_json::json!({ "steps": steps }), None).into_string();
        assert_eq!(svg.matches("class=\"node s-none\"").count(), 4);
        assert_eq!(svg.matches("class=\"edge\"").count(), 4);
    }
}
