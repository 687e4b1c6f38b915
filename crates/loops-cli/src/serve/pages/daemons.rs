//! The daemons page (`/daemons`): `daemon status --json` as a table, the
//! daemon of this host's data directory, and on PostgreSQL every daemon
//! registered on the database, on any host.

use std::sync::Arc;

use axum::extract::State;
use axum::response::Response;
use maud::html;

use super::layout::{self, Section, badge, instant, text, when};
use super::{Shared, doc, gather};
use crate::args::Command;
use crate::args::daemon::Daemon;
use crate::human;

/// `GET /daemons`.
pub(in crate::serve) async fn index(State(shared): State<Arc<Shared>>) -> Response {
    let read = gather(&shared, |ctx| doc(ctx, Command::Daemon(Daemon::Status))).await;
    let status = match read {
        Ok(status) => status,
        Err(page) => return page,
    };
    let now = human::display_now();
    let members = status["daemons"].as_array();
    let running = status["running"].as_bool().unwrap_or(false);
    let body = html! {
        h1 { "Daemons" }
        div #daemons-region data-region {
            p.header {
                "Backend " (text(&status, "backend")) " · "
                (status["loops"]["total"]) " loops, "
                (status["loops"]["active"]) " active · "
                (status["runs"]["running"]) " runs in flight"
            }
            table #daemons {
                thead { tr {
                    th { "Host" } th { "State" } th { "Pid" } th { "Started" }
                    th { "Heartbeat" } th { "Clock skew" } th { "Runs in flight" } th { "Labels" }
                } }
                tbody {
                    @match members {
                        Some(members) => {
                            @for d in members {
                                tr data-host=(text(d, "hostname")) {
                                    td { (text(d, "hostname")) }
                                    td { (badge(if d["live"].as_bool().unwrap_or(false) { "live" } else { "gone" })) }
                                    td.num { (d["pid"]) }
                                    td { (when(instant(d, "startedAt"), now)) }
                                    td { (when(instant(d, "heartbeatAt"), now)) }
                                    td.num { @if let Some(ms) = d["clockSkewMs"].as_i64() { (ms) " ms" } @else { "-" } }
                                    td.num { (d["runningRuns"]) }
                                    td.labels { (labels(&d["labels"])) }
                                }
                            }
                        }
                        None => {
                            tr data-host=(text(&status, "host")) {
                                td { (text(&status, "host")) }
                                td { (badge(if running { "running" } else { "stopped" })) }
                                td.num { @if let Some(pid) = status["pid"].as_u64() { (pid) } @else { "-" } }
                                td { (when(instant(&status["lease"], "createdAt"), now)) }
                                td { (when(instant(&status["lease"], "heartbeatAt"), now)) }
                                td.num { "-" }
                                td.num { (status["runs"]["running"]) }
                                td.labels { (labels(&status["labels"])) }
                            }
                        }
                    }
                }
            }
            @if !running && members.is_none_or(|m| m.iter().all(|d| !d["live"].as_bool().unwrap_or(false))) {
                p.note { "No daemon runs here: start one with loops daemon start." }
            }
            p.meta { "Data directory " code { (text(&status, "dataDir")) } " · database " code { (text(&status, "database")) } }
        }
    };
    layout::page("Daemons", Section::Daemons, true, body)
}

/// A daemon's labels (issue 30, P2), comma-separated; `-` for none.
fn labels(value: &serde_json::Value) -> String {
    let labels: Vec<&str> = value
        .as_array()
        .map(|a| a.iter().filter_map(|l| l.as_str()).collect())
        .unwrap_or_default();
    if labels.is_empty() {
        "-".to_owned()
    } else {
        labels.join(", ")
    }
}
