//! The MCP session: rmcp's server handler over stdio, and the tool calls
//! in flight.
//!
//! Each call runs its command on a blocking thread of its own (a command
//! may wait for a run for as long as the run takes) with a stop token of
//! its own ([`crate::context::Context::with_stop`]): the client's cancel
//! of the call, the end of the session (the client closed stdin) and
//! SIGINT/SIGTERM all stop the runs it started, which are recorded as
//! cancelled like a `run-now` interrupted by Ctrl-C.
//!
//! An error is a tool result with `isError` and the CLI's message; a panic
//! in a command ends only its call (the blocking task's join error). An
//! error, a panic's message and a warning quote at most 200 characters of
//! a value the client sent ([`quote`]).
//!
//! On SIGINT/SIGTERM the server stops reading, stops the calls in flight,
//! and answers each with a JSON-RPC error ([`SHUTTING_DOWN`]) before the
//! session ends, so no client is left waiting for a reply.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use anyhow::{Context as _, Result};
use loops_exec::{CancelToken, SignalCancel};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest,
    CustomResult, ErrorCode, Implementation, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;

use super::{Access, quote, tools, transport};
use crate::app::Captured;
use crate::context::Context;

/// Why a run stops when its client cancels the call or closes the session.
const CLIENT_CANCELLED: &str = "cancelled by the MCP client";

/// The JSON-RPC error of a call the server's end stopped: JSON-RPC's first
/// server error, which the MCP SDKs also use for a closed connection.
const SHUTTING_DOWN: ErrorCode = ErrorCode(-32000);

/// How long the replies of the stopped calls, and the lines queued before
/// them, may take to be written at the end, all together: a client that
/// does not read its stdin cannot keep the server from exiting.
const WRITE_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// The tool calls in flight, each with its stop token.
#[derive(Default)]
pub(super) struct Calls {
    next: AtomicU64,
    state: Mutex<CallsState>,
    /// Signalled when a call ends.
    ended: Condvar,
}

#[derive(Default)]
struct CallsState {
    live: BTreeMap<u64, CancelToken>,
    /// Why the session ended, once it has: later calls start cancelled.
    ended: Option<String>,
}

impl Calls {
    fn state(&self) -> std::sync::MutexGuard<'_, CallsState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new call's id and stop token.
    fn start(&self) -> (u64, CancelToken) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let token = CancelToken::new();
        let mut state = self.state();
        if let Some(reason) = &state.ended {
            token.cancel(reason.clone());
        }
        state.live.insert(id, token.clone());
        (id, token)
    }

    /// Ends a call: run by its blocking thread when its command returns (or
    /// panics), so a call whose reply nobody awaits any more still ends.
    fn end(&self, id: u64) {
        self.state().live.remove(&id);
        self.ended.notify_all();
    }

    /// Blocks until no call is in flight. After [`Calls::stop_all`] their
    /// runs are being cancelled, which takes at most a run's kill grace.
    pub(super) fn wait_idle(&self) {
        let mut state = self.state();
        while !state.live.is_empty() {
            state = self
                .ended
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Why the session is ending, once it is.
    fn ending(&self) -> Option<String> {
        self.state().ended.clone()
    }

    /// Stops every call in flight, and every later one.
    fn stop_all(&self, reason: &str) {
        let mut state = self.state();
        state.ended.get_or_insert_with(|| reason.to_owned());
        for token in state.live.values() {
            token.cancel(reason);
        }
    }
}

/// Ends call `.1` when dropped: when its command returns or panics.
struct Ending(Arc<Calls>, u64);

impl Drop for Ending {
    fn drop(&mut self) {
        self.0.end(self.1);
    }
}

/// The server handler: what the server allows, and its calls.
#[derive(Clone)]
struct Loops {
    /// The settings `loops mcp` was started with; each call runs in a
    /// context of its own made from them.
    ctx: Arc<Context>,
    access: Access,
    calls: Arc<Calls>,
}

impl ServerHandler for Loops {
    fn get_info(&self) -> ServerConfig {
        let access = match self.access {
            Access::Mutations => "Mutations are allowed on this server.",
            Access::ReadOnly => {
                "This server is read-only: mutations, showOutput, preflight and promptFile \
                 are refused unless it is started with LOOPS_MCP_ALLOW_MUTATIONS=true."
            }
        };
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("loops", crate::args::VERSION))
            .with_instructions(format!(
                "loops keeps scheduled loops (commands, coding agents, workflows) and records \
                 every run. Each tool returns the JSON the matching `loops … --json` command \
                 prints. {access}"
            ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            tools::TOOLS.iter().map(tools::listed).collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(tool) = tools::find(&request.name) else {
            let names: Vec<&str> = tools::TOOLS.iter().map(|t| t.name).collect();
            return Err(ErrorData::invalid_params(
                format!(
                    "no tool named {:?}; the tools are: {}",
                    quote::cut(&request.name),
                    names.join(", ")
                ),
                None,
            ));
        };
        // Kept past a panic, to cut what its message quotes of them.
        let args = Arc::new(request.arguments.unwrap_or_default());
        let (id, stop) = self.calls.start();
        // The client's cancel of this call stops its runs.
        let cancelled = context.ct.clone();
        let on_cancel = stop.clone();
        let watcher = tokio::spawn(async move {
            cancelled.cancelled().await;
            on_cancel.cancel(CLIENT_CANCELLED);
        });
        let access = self.access;
        let ctx = self.ctx.for_call().with_stop(stop);
        // Moved into the task, so the call ends when the task is done with
        // it: its command returned or panicked, or it never ran.
        let ending = Ending(self.calls.clone(), id);
        let called = args.clone();
        let joined = tokio::task::spawn_blocking(move || {
            let _ending = ending;
            tools::call(&ctx, tool, &called, access)
        })
        .await;
        watcher.abort();
        let mut reply = match joined {
            Ok(Ok(captured)) => captured,
            Ok(Err(err)) => Captured {
                text: String::new(),
                error: Some(crate::exit::message(&err, self.ctx.verbose)),
                warnings: Vec::new(),
            },
            Err(join) => Captured {
                text: String::new(),
                error: Some(format!("{} failed inside loops: {join}", tool.name)),
                warnings: Vec::new(),
            },
        };
        cut_quotes(&mut reply, &args);
        if let Some(reason) = self.calls.ending() {
            return Err(shutting_down(tool.name, &reason, &reply));
        }
        Ok(result(reply).into())
    }

    /// A request of a method rmcp does not know, or of one it knows whose
    /// params did not parse (rmcp then reads it as a request of its own).
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        Err(custom_request_error(
            &request.method,
            request.params.as_ref(),
        ))
    }
}

/// The error of a request rmcp read as a method of its own: invalid params
/// (`-32602`) for a method MCP defines, method not found (`-32601`) else.
fn custom_request_error(method: &str, params: Option<&Value>) -> ErrorData {
    if !transport::MCP_REQUESTS.contains(&method) {
        return ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("no method {:?} in loops mcp", quote::cut(method)),
            None,
        );
    }
    let arguments = params.and_then(|p| p.get("arguments"));
    let why = match arguments {
        Some(arguments)
            if method == "tools/call" && !arguments.is_object() && !arguments.is_null() =>
        {
            "arguments must be a JSON object of the tool's arguments".to_owned()
        }
        _ => {
            let parsed = match method {
                "tools/call" => params
                    .cloned()
                    .map(serde_json::from_value::<CallToolRequestParams>),
                _ => None,
            };
            match parsed {
                Some(Err(e)) => e.to_string(),
                None if method == "tools/call" => "they are missing".to_owned(),
                _ => "they do not match the method's schema".to_owned(),
            }
        }
    };
    let message = format!("invalid params for {method}: {why}");
    let message = match params {
        Some(Value::Object(params)) => quote::cut_arguments(&message, params),
        _ => quote::cap(&message).into_owned(),
    };
    ErrorData::invalid_params(message, None)
}

/// `reply`'s error and warnings, with what they quote of `args` cut
/// ([`quote::cut_arguments`]). Its JSON is the command's result, which
/// holds the values it was given, as on the command line.
fn cut_quotes(reply: &mut Captured, args: &serde_json::Map<String, Value>) {
    let texts = reply.error.iter_mut().chain(reply.warnings.iter_mut());
    for text in texts {
        *text = quote::cut_arguments(text, args);
    }
}

/// The error a call in flight gets when the server stops: what it
/// recorded, if it printed anything, goes in the error's data.
fn shutting_down(tool: &str, reason: &str, reply: &Captured) -> ErrorData {
    let result = serde_json::from_str::<Value>(&reply.text).ok();
    ErrorData::new(
        SHUTTING_DOWN,
        format!(
            "loops mcp is shutting down ({reason}) and stopped {tool}: any run it started is \
             recorded as cancelled, and what it returned is in this error's data"
        ),
        result.map(|result| serde_json::json!({ "result": result })),
    )
}

/// A call's result: the JSON the command printed, then its warnings; or
/// its error, with `isError`.
fn result(reply: Captured) -> CallToolResult {
    if let Some(error) = reply.error {
        return CallToolResult::error(vec![ContentBlock::text(error)]);
    }
    let mut content = vec![ContentBlock::text(reply.text.trim_end().to_owned())];
    if !reply.warnings.is_empty() {
        let warnings: Vec<String> = reply
            .warnings
            .iter()
            // Escaped as the command line's `warning:` lines are.
            .map(|w| {
                format!(
                    "warning: {}",
                    crate::render::escape_controls(w, &['\n', '\t'])
                )
            })
            .collect();
        content.push(ContentBlock::text(warnings.join("\n")));
    }
    CallToolResult::success(content)
}

/// Serves one session on stdin and stdout, until the client closes stdin
/// or SIGINT/SIGTERM arrives; then stops the runs of the calls in flight.
///
/// `signals` are the server's handlers, which the caller keeps until the
/// calls have ended.
pub(super) async fn serve(
    ctx: Arc<Context>,
    access: Access,
    calls: Arc<Calls>,
    signals: &SignalCancel,
) -> Result<()> {
    let signalled = Arc::new(tokio::sync::Notify::new());
    let _subscription = {
        let signalled = signalled.clone();
        signals.token().subscribe(move || signalled.notify_one())
    };
    if signals.token().is_cancelled() {
        return Ok(());
    }
    let handler = Loops {
        ctx,
        access,
        calls: calls.clone(),
    };
    let (transport, link) = transport::stdio();
    let started = tokio::select! {
        session = handler.serve(transport) => Some(session),
        () = signalled.notified() => None,
    };
    let Some(Ok(session)) = started else {
        // The transport ended with the handshake: what it queued first
        // (the refusals of the lines before it) is written out.
        let _ = tokio::time::timeout(WRITE_GRACE, link.flushed()).await;
        return match started {
            Some(Err(error)) => Err(error).context("starting the MCP session (initialize)"),
            _ => Ok(()),
        };
    };
    let link = Arc::new(link);
    let ended = session.cancellation_token();
    let stopper = {
        let signalled = signalled.clone();
        let calls = calls.clone();
        let token = signals.token().clone();
        let link = link.clone();
        tokio::spawn(async move {
            signalled.notified().await;
            // Before the session ends, which cancels every call as the
            // client's: the runs say which signal stopped them, and each
            // call is answered with an error first.
            calls.stop_all(&token.reason().unwrap_or_default());
            link.stop_reading();
            let idle = calls.clone();
            let _ = tokio::task::spawn_blocking(move || idle.wait_idle()).await;
            // One grace for every write from here on.
            let grace = tokio::time::Instant::now() + WRITE_GRACE;
            let _ = tokio::time::timeout_at(grace, link.replies_written()).await;
            ended.cancel();
            grace
        })
    };
    let quit = session.waiting().await;
    stopper.abort();
    let grace = stopper
        .await
        .unwrap_or_else(|_| tokio::time::Instant::now() + WRITE_GRACE);
    calls.stop_all(CLIENT_CANCELLED);
    // What was queued before the session ended is written out.
    if let Ok(link) = Arc::try_unwrap(link) {
        let _ = tokio::time::timeout_at(grace, link.flushed()).await;
    }
    quit.context("serving the MCP session")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_follow_the_json_escaped_as_on_the_command_line() {
        let reply = result(Captured {
            text: "[]\n".to_owned(),
            error: None,
            warnings: vec!["the working directory /tmp/\u{1b}[2J does not exist".to_owned()],
        });
        let texts: Vec<String> = reply
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect();
        assert_eq!(
            texts,
            [
                "[]",
                "warning: the working directory /tmp/\\u{1b}[2J does not exist"
            ]
        );
        assert_eq!(reply.is_error, Some(false));
    }

    #[test]
    fn a_panic_and_warnings_quote_at_most_two_hundred_characters_of_an_argument() {
        let huge = "Q".repeat(10_000);
        let args = serde_json::json!({"cwd": huge});
        let mut reply = Captured {
            text: format!("{{\"cwd\":\"{huge}\"}}"),
            error: Some(format!(
                "loops_show failed inside loops: task 3 panicked with message \"no {}\"",
                &huge[5..]
            )),
            warnings: vec![format!("the working directory /x/{huge} does not exist")],
        };
        cut_quotes(
            &mut reply,
            args.as_object().unwrap_or(&serde_json::Map::new()),
        );
        for text in reply.error.iter().chain(&reply.warnings) {
            assert_eq!(text.matches('Q').count(), quote::QUOTED_CHARS, "{text}");
            assert!(text.contains('…'), "{text}");
        }
        // The result is the command's, as on the command line.
        assert_eq!(reply.text.matches('Q').count(), huge.len());
    }

    #[test]
    fn a_call_that_panics_still_ends_and_later_calls_start_stopped() {
        let calls = Arc::new(Calls::default());
        let (id, token) = calls.start();
        let ending = Ending(calls.clone(), id);
        let panicked = std::thread::spawn(move || {
            let _ending = ending;
            panic!("a command panicked");
        })
        .join();
        assert!(panicked.is_err());
        // Returns at once: the panicking call ended.
        calls.wait_idle();
        calls.stop_all("cancelled by SIGTERM");
        assert!(!token.is_cancelled(), "an ended call is not stopped");
        let (_, later) = calls.start();
        assert_eq!(later.reason().as_deref(), Some("cancelled by SIGTERM"));
    }
}
