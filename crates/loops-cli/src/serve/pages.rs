//! The dashboard's pages (issue 29): server-rendered HTML, readable
//! without JavaScript, from the same documents `--json` prints (each page
//! runs the CLI commands' typed requests, or for the loops table the rows
//! `loops ui` shows). A small embedded script (`assets/app.js`, no inline
//! script: the CSP forbids it) adds live updates: it listens to
//! `/api/v1/events` and swaps in the page's live regions when the store
//! changed, and follows a running run's output.
//!
//! - `/` the loops, `/loops/{id}` one loop, `/runs/{id}` one run,
//!   `/workflows`, `/workflows/{id}` (the DAG as SVG),
//!   `/workflow-runs/{id}`, `/daemons`;
//! - `POST /loops/{id}/{pause|resume|run-now|cancel}` from the loop page's
//!   buttons, answered by a redirect back (run-now and cancel go on in a
//!   `loops` process of their own, as from `loops ui`);
//! - `/assets/…`, the stylesheet and the script, from the binary.
//!
//! Every page needs the access token's cookie (or bearer), as the API
//! does; a write needs this server's own `Origin`.

mod daemons;
mod layout;
mod loops;
mod runs;
mod workflows;

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::Response;
use axum::routing::{get, post};
use serde_json::Value;

use super::Shared;
use super::guard::{authorized, own_origin};
use crate::args::{Command, LoopRef};
use crate::context::Context;

/// The stylesheet, embedded.
const CSS: &str = include_str!("assets/app.css");

/// The script, embedded.
const JS: &str = include_str!("assets/app.js");

/// The pages' routes, behind the page guard; the assets are open.
pub(super) fn router(shared: &Arc<Shared>) -> Router<Arc<Shared>> {
    let pages = Router::new()
        .route("/", get(loops::index))
        .route("/loops/{id}", get(loops::one))
        .route("/loops/{id}/{action}", post(act))
        .route("/runs/{id}", get(runs::one))
        .route("/workflows", get(workflows::index))
        .route("/workflows/{id}", get(workflows::one))
        .route("/workflow-runs/{id}", get(workflows::run))
        .route("/daemons", get(daemons::index))
        .layer(from_fn_with_state(Arc::clone(shared), guard));
    Router::new()
        .route("/assets/app.css", get(css))
        .route("/assets/app.js", get(js))
        .merge(pages)
}

/// Refuses a page without the token, and a write from another origin (a
/// browser always sends `Origin` with a form's POST).
async fn guard(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    if !authorized(&shared.token, request.headers()) {
        return layout::failure(
            StatusCode::UNAUTHORIZED,
            "Log in first",
            "This dashboard needs its access token: open the login URL that loops serve printed \
             (it ends in /login?token=…), or run loops serve again to see it.",
        );
    }
    if request.method() == Method::POST {
        let own = request
            .headers()
            .get(header::ORIGIN)
            .is_some_and(|origin| own_origin(&shared, origin));
        if !own {
            return layout::failure(
                StatusCode::FORBIDDEN,
                "Refused",
                "A change must come from this dashboard's own pages.",
            );
        }
    }
    next.run(request).await
}

async fn css() -> Response {
    asset(CSS, "text/css; charset=utf-8")
}

async fn js() -> Response {
    asset(JS, "text/javascript; charset=utf-8")
}

fn asset(body: &'static str, kind: &'static str) -> Response {
    let mut response = Response::new(Body::from(body));
    let set = response.headers_mut();
    set.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    set.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, max-age=300"),
    );
    response
}

/// A failed read: the command's message and the HTTP status of its kind.
pub(super) struct Failed {
    status: StatusCode,
    message: String,
}

impl Failed {
    fn of(err: &anyhow::Error, verbose: bool) -> Failed {
        let (fault, message) = match err.downcast_ref::<PageError>() {
            Some(e) => (e.fault, e.message.clone()),
            None => (
                crate::fault::Fault::of(err),
                crate::exit::message(err, verbose),
            ),
        };
        let (status, _) = fault.status();
        Failed {
            status: StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST),
            message,
        }
    }

    /// The error page.
    fn page(&self) -> Response {
        let title = if self.status == StatusCode::NOT_FOUND {
            "Not found"
        } else {
            "Cannot show this"
        };
        layout::failure(self.status, title, &self.message)
    }
}

/// Runs `read` on a blocking thread (the store is synchronous) with the
/// server's context; its value, or the error page.
async fn gather<T: Send + 'static>(
    shared: &Shared,
    read: impl FnOnce(&Context) -> anyhow::Result<T> + Send + 'static,
) -> Result<T, Response> {
    let ctx = Arc::clone(&shared.ctx);
    let verbose = ctx.verbose;
    match tokio::task::spawn_blocking(move || read(&ctx)).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(err)) => Err(Failed::of(&err, verbose).page()),
        Err(join) => Err(layout::failure(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Cannot show this",
            &format!("the request failed: {join}"),
        )),
    }
}

/// The document `--json` prints for `request`, or its error.
fn doc(ctx: &Context, request: Command) -> anyhow::Result<Value> {
    let (captured, fault) = crate::app::run_request_classified(ctx, request);
    match captured.error {
        None => Ok(serde_json::from_str(&captured.text)?),
        Some(message) => Err(anyhow::Error::new(PageError {
            message,
            fault: fault.unwrap_or(crate::fault::Fault::Internal),
        })),
    }
}

/// A request's error, kept with its kind for the page's status.
#[derive(Debug)]
struct PageError {
    message: String,
    fault: crate::fault::Fault,
}

impl std::fmt::Display for PageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for PageError {}

/// `POST /loops/{id}/{action}`: the loop page's buttons.
async fn act(
    State(shared): State<Arc<Shared>>,
    Path((id, action)): Path<(String, String)>,
) -> Response {
    let target = LoopRef { target: id.clone() };
    let request = match action.as_str() {
        "pause" => Some(Command::Pause(target)),
        "resume" => Some(Command::Resume(target)),
        // These take as long as they take: they go on beside the server.
        "run-now" | "cancel" => None,
        _ => {
            return layout::failure(
                StatusCode::NOT_FOUND,
                "Not found",
                "the action must be pause, resume, run-now or cancel",
            );
        }
    };
    let loop_id = id.clone();
    let done = gather(&shared, move |ctx| match request {
        Some(request) => doc(ctx, request).map(drop),
        None => {
            // The loop by id, so a name or id that names none is said
            // here, not lost in the process started beside.
            let lp = ctx.open_store()?.require_loop(&loop_id)?;
            Ok(crate::app::start_beside(ctx, &action, &lp.id.to_string())?)
        }
    })
    .await;
    if let Err(page) = done {
        return page;
    }
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::SEE_OTHER;
    let back = format!("/loops/{}", layout::path_segment(&id));
    if let Ok(location) = HeaderValue::from_str(&back) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response
}
