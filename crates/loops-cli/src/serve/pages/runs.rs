//! A run's page (`/runs/{id}`): how it stands (exit, duration, error,
//! attempt, and for agents the failure class, cost and session), and with
//! `?output=1` its output, followed live while it runs (the script reads
//! `/api/v1/runs/{id}/output?follow=1&showOutput=1`). Output may hold
//! secrets, so it is shown only on request, as `--show-output` does.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::Response;
use loops_core::{LoopRun, RunStatus};
use maud::{Markup, html};

use super::layout::{self, Section, badge, path_segment, when};
use super::{Shared, doc, gather};
use crate::args::{self, Command};
use crate::human;

/// What a run's page shows.
struct OneRun {
    run: LoopRun,
    /// The output, when asked for.
    output: Option<String>,
}

/// `GET /runs/{id}`.
pub(in crate::serve) async fn one(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    Query(params): Query<HashMap<String, String>>,
) -> Response {
    let show = params.get("output").is_some_and(|v| v == "1");
    let read = gather(&shared, move |ctx| {
        let runs = doc(
            ctx,
            Command::Runs(args::RunsArgs {
                target: Some(id),
                limit: "1".to_owned(),
                offset: None,
                status: None,
                show_output: false,
                labels: Vec::new(),
            }),
        )?;
        let mut runs: Vec<LoopRun> = serde_json::from_value(runs)?;
        let run = runs.pop().ok_or_else(|| anyhow::anyhow!("run not found"))?;
        let output = if show {
            let store = ctx.open_store()?;
            // The run as stored, its output unredacted: asked for.
            let stored = store.get_run(&run.id)?.unwrap_or_else(|| run.clone());
            Some(crate::commands::logs::output_text(ctx, &stored)?)
        } else {
            None
        };
        Ok(OneRun { run, output })
    })
    .await;
    match read {
        Ok(one) => {
            let title = format!("run {} of {}", one.run.id, one.run.loop_name);
            // A running run's page follows its output instead of
            // reloading.
            let live = one.run.status != RunStatus::Running;
            layout::page(&title, Section::Loops, live, run_page(&one))
        }
        Err(page) => page,
    }
}

fn run_page(one: &OneRun) -> Markup {
    let run = &one.run;
    let now = human::display_now();
    let id = run.id.to_string();
    let facts = &run.facts;
    html! {
        h1 {
            "Run " (id) " of "
            a href={ "/loops/" (run.loop_id) } { (run.loop_name) }
        }
        div #run-region data-region {
            dl #run {
                dt { "Status" } dd data-field="status" { (badge(run.status.as_str())) }
                dt { "Attempt" } dd data-field="attempt" { (run.attempt) }
                dt { "Slot" } dd { (human::local(run.scheduled_for)) }
                dt { "Started" } dd { (when(run.started_at, now)) }
                dt { "Finished" } dd { (when(run.finished_at, now)) }
                dt { "Duration" } dd data-field="duration" {
                    (run.duration_ms.map_or_else(|| "-".to_owned(), human::duration))
                }
                dt { "Exit code" } dd data-field="exit" {
                    @if let Some(code) = run.exit_code { (code) } @else { "-" }
                }
                @if let Some(error) = &run.error {
                    dt { "Error" } dd.error data-field="error" { (error) }
                }
                @if let Some(host) = &run.claimed_host { dt { "Host" } dd { (host) } }
                @if let Some(class) = &facts.failure_class {
                    dt { "Failure class" } dd data-field="failure-class" { (class) }
                }
                @if let Some(cost) = &facts.cost_usd {
                    dt { "Cost" } dd data-field="cost" { "$" (cost) }
                }
                @if let Some(session) = &facts.session_id {
                    dt { "Session" } dd data-field="session" { code { (session) } }
                }
                @if let Some(by) = &run.cancelled_by {
                    dt { "Cancelled by" } dd { (by) }
                }
            }
        }
        h2 { "Output" }
        @match &one.output {
            Some(text) => {
                @let follow = (run.status == RunStatus::Running).then(|| format!(
                    "/api/v1/runs/{}/output?follow=1&showOutput=1", path_segment(&id)
                ));
                pre #output data-follow=[follow] { (escaped(text)) }
            }
            None => p {
                a #show-output href={ "/runs/" (id) "?output=1" } { "Show output" }
                " (it may hold secrets)"
            },
        }
    }
}

/// `text` with its control characters other than tabs and line breaks
/// escaped, as `loops logs` prints it.
fn escaped(text: &str) -> String {
    text.split('\n')
        .map(|line| crate::render::escape_controls(line.trim_end_matches('\r'), &['\t']))
        .collect::<Vec<_>>()
        .join("\n")
}
