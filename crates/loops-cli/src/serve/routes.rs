//! The routes: each builds the typed request of one CLI command from its
//! path and query, runs it on a blocking thread, and answers with the
//! document `--json` prints, or the command's error.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{from_fn, from_fn_with_state};
use axum::response::Response;
use axum::routing::{get, post};

use super::Shared;
use super::guard::{self, COOKIE};
use super::paging::Page;
use super::token::matches;
use crate::args::cancel::{CancelArgs, CancelFlags, DEFAULT_CANCEL_GRACE, StopArgs};
use crate::args::daemon::{Daemon, DoctorArgs};
use crate::args::next::{DEFAULT_ITERATIONS, NextArgs};
use crate::args::policy::{LabelsArgs, LabelsCommand};
use crate::args::workflow::{self, Workflows};
use crate::args::{self, Command, LoopRef};

/// Who a cancel is recorded as by.
const BY: &str = "serve";

/// The query of a request, by name.
type Params = Query<HashMap<String, String>>;

/// The server's routes, behind its guards.
pub(super) fn router(shared: Arc<Shared>) -> Router {
    let api = Router::new()
        .route("/loops", get(list).post(create))
        .route("/loops/{id}", get(show).delete(remove).patch(edit))
        .route("/loops/{id}/labels/{action}", post(labels))
        .route("/loops/{id}/next", get(next))
        .route("/loops/{id}/pause", post(pause))
        .route("/loops/{id}/resume", post(resume))
        .route("/loops/{id}/stop", post(stop))
        .route("/loops/{id}/run-now", post(run_now))
        .route("/loops/{id}/cancel", post(cancel))
        .route("/loops/{id}/trigger", post(trigger))
        .route("/apply", post(apply))
        .route("/runs", get(runs))
        .route("/runs/{id}", get(run))
        .route("/runs/{id}/output", get(output))
        .route("/workflows", get(workflows))
        .route("/workflows/{id}", get(workflow))
        .route("/workflow-runs", get(workflow_runs))
        .route("/workflow-runs/{id}", get(workflow_run))
        .route("/daemons", get(daemons))
        .route("/doctor", get(doctor))
        .route("/events", get(events))
        .route("/openapi.json", get(openapi))
        .fallback(no_route)
        .layer(from_fn_with_state(Arc::clone(&shared), guard::api));
    Router::new()
        .route("/login", get(login))
        .merge(super::pages::router(&shared))
        .nest("/api/v1", api)
        .fallback(no_route)
        .layer(from_fn_with_state(Arc::clone(&shared), guard::host))
        .layer(from_fn(guard::headers))
        .with_state(shared)
}

/// An error document: `{"error": {"code", "message"}}`.
pub(super) fn error(status: StatusCode, code: &str, message: &str) -> Response {
    let body = serde_json::json!({"error": {"code": code, "message": message}});
    json(status, format!("{body}\n"))
}

fn json(status: StatusCode, body: String) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// Runs `request` on a blocking thread; its `--json` document, or its
/// error.
async fn call(shared: &Shared, request: Command) -> Response {
    let ctx = Arc::clone(&shared.ctx);
    let ran =
        tokio::task::spawn_blocking(move || crate::app::run_request_classified(&ctx, request))
            .await;
    match ran {
        Ok((captured, fault)) => match captured.error {
            None => json(StatusCode::OK, captured.text),
            Some(message) => {
                let (status, code) = fault.unwrap_or(crate::fault::Fault::Internal).status();
                let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
                error(status, code, &message)
            }
        },
        Err(join) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            &format!("the request failed: {join}"),
        ),
    }
}

/// Refuses a query parameter the route does not know; else the params.
fn known(params: Params, names: &[&str]) -> Result<HashMap<String, String>, String> {
    let Query(params) = params;
    match params.keys().find(|k| !names.contains(&k.as_str())) {
        Some(key) => Err(format!(
            "unknown query parameter {key:?}; this route takes: {}",
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            }
        )),
        None => Ok(params),
    }
}

async fn no_route() -> Response {
    error(
        StatusCode::NOT_FOUND,
        "not_found",
        "no such route; the API lives under /api/v1 (see loops serve --help)",
    )
}

/// `/login?token=…[&next=/path]`: sets the cookie and goes to `/`, or to
/// `next` when it is a path of this server.
async fn login(State(shared): State<Arc<Shared>>, params: Params) -> Response {
    let Query(params) = params;
    let given = params.get("token").map_or("", String::as_str);
    if !matches(&shared.token, given) {
        return error(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "this login URL does not carry the access token; use the URL loops serve printed",
        );
    }
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::SEE_OTHER;
    let set = response.headers_mut();
    let next = params
        .get("next")
        .filter(|n| own_path(n))
        .and_then(|n| HeaderValue::from_str(n).ok())
        .unwrap_or_else(|| HeaderValue::from_static("/"));
    set.insert(header::LOCATION, next);
    // Over HTTPS the cookie is never sent in the clear.
    let secure = if shared.scheme == "https" {
        "; Secure"
    } else {
        ""
    };
    if let Ok(cookie) = HeaderValue::from_str(&format!(
        "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/{secure}",
        shared.token
    )) {
        set.insert(header::SET_COOKIE, cookie);
    }
    response
}

/// Whether `path` is a path of this server, not another site (`//host`,
/// `/\\host` and `https://…` are not).
fn own_path(path: &str) -> bool {
    path.starts_with('/')
        && !path.starts_with("//")
        && !path.contains('\\')
        && !path.chars().any(char::is_control)
}

/// `loops list`, a page at a time (`paging`).
async fn list(State(shared): State<Arc<Shared>>, params: Params) -> Response {
    let mut p = match known(params, &["status", "limit", "offset", "label"]) {
        Ok(p) => p,
        Err(message) => return error(StatusCode::BAD_REQUEST, "bad_request", &message),
    };
    let page = match Page::of_loops(&mut p) {
        Ok(page) => page,
        Err(message) => return error(StatusCode::BAD_REQUEST, "bad_request", &message),
    };
    let (status, label) = (p.remove("status"), p.remove("label"));
    let request = Command::List(args::ListArgs {
        status: status.clone(),
        limit: Some(page.limit.clone()),
        offset: page.offset.clone(),
        labels: label.clone().into_iter().collect(),
    });
    let response = call(&shared, request).await;
    let filters = [("status", status), ("label", label)];
    page.link_next(response, "/api/v1/loops", &filters).await
}

/// `POST /loops`: the body is JSON (`Content-Type: application/json`,
/// which a page of another site cannot send without asking first).
async fn create(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    json_write(&shared, &headers, &body, super::create::request).await
}

/// A write whose JSON body `build` turns into its request: refused unless
/// sent as JSON, a bad body a 400, else the request's reply.
async fn json_write(
    shared: &Shared,
    headers: &HeaderMap,
    body: &[u8],
    build: fn(&[u8]) -> anyhow::Result<Command>,
) -> Response {
    if let Some(refused) = not_json(headers) {
        return refused;
    }
    match build(body) {
        Ok(request) => call(shared, request).await,
        Err(e) => error(StatusCode::BAD_REQUEST, "bad_request", &e.to_string()),
    }
}

/// The refusal of a body not sent as JSON (`Content-Type:
/// application/json`, which a page of another site cannot send without
/// asking first), or `None`.
fn not_json(headers: &HeaderMap) -> Option<Response> {
    let json_body = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|t| t.trim() == "application/json")
        });
    (!json_body).then(|| {
        error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "the body must be JSON, sent with Content-Type: application/json",
        )
    })
}

/// `PATCH /loops/{id}`: `loops edit`, the flags as a JSON body
/// (`serve::edit`).
async fn edit(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Some(refused) = not_json(&headers) {
        return refused;
    }
    match super::edit::request(&id, &body) {
        Ok(request) => call(&shared, request).await,
        Err(e) => error(StatusCode::BAD_REQUEST, "bad_request", &e.to_string()),
    }
}

async fn show(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    call(&shared, Command::Show(LoopRef { target: id })).await
}

async fn next(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    params: Params,
) -> Response {
    let mut p = match known(params, &["n"]) {
        Ok(p) => p,
        Err(message) => return error(StatusCode::BAD_REQUEST, "bad_request", &message),
    };
    let request = Command::Next(NextArgs {
        target: Some(id),
        iterations: p
            .remove("n")
            .unwrap_or_else(|| DEFAULT_ITERATIONS.to_owned()),
        cron: None,
        tz: None,
        every: None,
    });
    call(&shared, request).await
}

async fn pause(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    call(&shared, Command::Pause(LoopRef { target: id })).await
}

async fn resume(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    call(&shared, Command::Resume(LoopRef { target: id })).await
}

async fn stop(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    let request = Command::Stop(StopArgs::of(LoopRef { target: id }));
    call(&shared, request).await
}

async fn run_now(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    let request = Command::RunNow(args::RunNowArgs {
        target: LoopRef { target: id },
        show_output: false,
        anywhere: false,
        ignore_pool: false,
    });
    call(&shared, request).await
}

/// `POST /loops/{id}/trigger`: `loops trigger` (issue 30, T4). The body,
/// JSON (`Content-Type: application/json`) when there is one, is the
/// payload; an `Idempotency-Key` header makes a repeated delivery run once.
async fn trigger(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let payload = if body.is_empty() {
        None
    } else {
        if let Some(refused) = not_json(&headers) {
            return refused;
        }
        match String::from_utf8(body.to_vec()) {
            Ok(text) => Some(text),
            Err(_) => {
                let message = "the payload must be JSON text in UTF-8";
                return error(StatusCode::BAD_REQUEST, "bad_request", message);
            }
        }
    };
    let key = match headers.get("idempotency-key").map(|v| v.to_str()) {
        None => None,
        Some(Ok(key)) => Some(key.to_owned()),
        Some(Err(_)) => {
            let message = "the Idempotency-Key header must be printable ASCII";
            return error(StatusCode::BAD_REQUEST, "bad_request", message);
        }
    };
    let request = Command::Trigger(crate::args::trigger::TriggerArgs {
        target: id,
        payload,
        idempotency_key: key,
    });
    call(&shared, request).await
}

/// `POST /apply`: `loops apply` of a loops file on the server's host
/// (issue 31); the JSON body is the MCP tool `loops_apply`'s arguments.
async fn apply(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    json_write(&shared, &headers, &body, super::create::apply_request).await
}

async fn cancel(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    let request = Command::Cancel(CancelArgs {
        target: id,
        grace: DEFAULT_CANCEL_GRACE.to_owned(),
        by: Some(BY.to_owned()),
    });
    call(&shared, request).await
}

/// `loops remove`, with `?purge=1` as `--purge`.
async fn remove(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    params: Params,
) -> Response {
    let mut p = match known(params, &["purge"]) {
        Ok(p) => p,
        Err(message) => return error(StatusCode::BAD_REQUEST, "bad_request", &message),
    };
    let request = Command::Remove(args::RemoveArgs {
        target: LoopRef { target: id },
        purge: p.remove("purge").as_deref() == Some("1"),
        cancel: CancelFlags::none(),
    });
    call(&shared, request).await
}

/// `loops labels set|add|remove|clear`, the labels comma-separated in
/// `?labels=` as on the command line.
async fn labels(
    State(shared): State<Arc<Shared>>,
    Path((id, action)): Path<(String, String)>,
    params: Params,
) -> Response {
    let mut p = match known(params, &["labels"]) {
        Ok(p) => p,
        Err(message) => return error(StatusCode::BAD_REQUEST, "bad_request", &message),
    };
    let given: Vec<String> = p.remove("labels").into_iter().collect();
    let refuse = |message: &str| error(StatusCode::BAD_REQUEST, "bad_request", message);
    let labels = LabelsArgs {
        target: id.clone(),
        labels: given,
    };
    let command = match action.as_str() {
        "clear" if labels.labels.is_empty() => LabelsCommand::Clear(LoopRef { target: id }),
        "clear" => return refuse("clear removes every label; give no labels with it"),
        _ if labels.labels.is_empty() => {
            return refuse("give the labels in ?labels=, comma-separated");
        }
        "set" => LabelsCommand::Set(labels),
        "add" => LabelsCommand::Add(labels),
        "remove" => LabelsCommand::Remove(labels),
        _ => return refuse("the action must be set, add, remove or clear"),
    };
    call(&shared, Command::Labels(command)).await
}

/// `loops runs` of `target` (every loop when `None`), with the status
/// and page in `p`.
fn runs_request(target: Option<String>, p: &HashMap<String, String>, show: bool) -> Command {
    let page = Page::of_runs(p, args::DEFAULT_RUNS_LIMIT);
    Command::Runs(args::RunsArgs {
        target,
        limit: page.limit,
        offset: page.offset,
        status: p.get("status").cloned(),
        show_output: show,
        labels: Vec::new(),
    })
}

/// `loops runs`, a page at a time (`paging`).
async fn runs(State(shared): State<Arc<Shared>>, params: Params) -> Response {
    let mut p = match known(params, &["loop", "status", "limit", "offset"]) {
        Ok(p) => p,
        Err(message) => return error(StatusCode::BAD_REQUEST, "bad_request", &message),
    };
    let target = p.remove("loop");
    let response = call(&shared, runs_request(target.clone(), &p, false)).await;
    let page = Page::of_runs(&p, args::DEFAULT_RUNS_LIMIT);
    let filters = [("loop", target), ("status", p.remove("status"))];
    page.link_next(response, "/api/v1/runs", &filters).await
}

async fn run(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    params: Params,
) -> Response {
    let p = match known(params, &[]) {
        Ok(p) => p,
        Err(message) => return error(StatusCode::BAD_REQUEST, "bad_request", &message),
    };
    call(&shared, runs_request(Some(id), &p, false)).await
}

/// A run with its output, only on request (`--show-output`): output may
/// hold secrets. With `?follow=1`, the output as it is written, as events
/// (`sse`).
async fn output(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    params: Params,
) -> Response {
    let mut p = match known(params, &["showOutput", "follow"]) {
        Ok(p) => p,
        Err(message) => return error(StatusCode::BAD_REQUEST, "bad_request", &message),
    };
    if p.remove("showOutput").as_deref() != Some("1") {
        return error(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "output may hold secrets and is shown only on request: add ?showOutput=1, as \
             loops runs --show-output",
        );
    }
    if p.remove("follow").as_deref() == Some("1") {
        return super::sse::follow(shared, id).await;
    }
    call(&shared, runs_request(Some(id), &p, true)).await
}

async fn workflows(State(shared): State<Arc<Shared>>, params: Params) -> Response {
    let mut p = match known(params, &["status", "limit"]) {
        Ok(p) => p,
        Err(message) => return error(StatusCode::BAD_REQUEST, "bad_request", &message),
    };
    let request = Command::Workflows(Workflows::List(workflow::ListArgs {
        status: p
            .remove("status")
            .unwrap_or_else(|| workflow::DEFAULT_LIST_STATUS.to_owned()),
        limit: p.remove("limit"),
    }));
    call(&shared, request).await
}

/// `loops workflows show`: one workflow, by id or active name.
async fn workflow(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    let request = Command::Workflows(Workflows::Show(workflow::WorkflowRef { target: id }));
    call(&shared, request).await
}

/// `loops workflows runs`, of one workflow with `?workflow=`.
async fn workflow_runs(State(shared): State<Arc<Shared>>, params: Params) -> Response {
    let mut p = match known(params, &["workflow", "limit"]) {
        Ok(p) => p,
        Err(message) => return error(StatusCode::BAD_REQUEST, "bad_request", &message),
    };
    let request = Command::Workflows(Workflows::Runs(workflow::RunsArgs {
        target: p.remove("workflow"),
        limit: p
            .remove("limit")
            .unwrap_or_else(|| workflow::DEFAULT_RUNS_LIMIT.to_owned()),
    }));
    call(&shared, request).await
}

async fn workflow_run(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    let request = Command::Workflows(Workflows::Inspect(workflow::InspectArgs {
        run: workflow::RunRef { run: id },
        show_output: false,
    }));
    call(&shared, request).await
}

async fn openapi() -> Response {
    json(
        StatusCode::OK,
        format!("{:#}\n", super::openapi::document()),
    )
}

/// The store's change feed (`sse`).
async fn events(State(shared): State<Arc<Shared>>) -> Response {
    super::sse::events(shared).await
}

async fn daemons(State(shared): State<Arc<Shared>>) -> Response {
    call(&shared, Command::Daemon(Daemon::Status)).await
}

async fn doctor(State(shared): State<Arc<Shared>>) -> Response {
    call(&shared, Command::Doctor(DoctorArgs {})).await
}

#[cfg(test)]
mod tests {
    use super::own_path;

    #[test]
    fn login_goes_on_only_to_a_path_of_this_server() {
        assert!(own_path("/"));
        assert!(own_path("/loops/abc?x=1"));
        for foreign in [
            "",
            "loops",
            "//evil.example/",
            "/\\evil.example",
            "https://evil.example/",
            "/a\nb",
        ] {
            assert!(!own_path(foreign), "{foreign:?}");
        }
    }
}
