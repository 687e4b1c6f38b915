//! The MCP session: rmcp's server handler over stdio, and the tool calls
//! in flight.
//!
//! Each call runs its command on a blocking thread of its own (a command
//! may wait for a run for as long as the run takes) with a stop token of
//! its own ([`crate::commands::execute::with_stop`]): the client's cancel
//! of the call, the end of the session (the client closed stdin) and
//! SIGINT/SIGTERM all stop the runs it started, which are recorded as
//! cancelled like a `run-now` interrupted by Ctrl-C.
//!
//! An error is a tool result with `isError` and the CLI's message; a panic
//! in a command ends only its call (the blocking task's join error).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use anyhow::{Context, Result};
use loops_exec::{CancelToken, SignalCancel};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};

use super::{Access, tools};
use crate::app::Captured;

/// Why a run stops when its client cancels the call or closes the session.
const CLIENT_CANCELLED: &str = "cancelled by the MCP client";

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
                    request.name,
                    names.join(", ")
                ),
                None,
            ));
        };
        let args = request.arguments.unwrap_or_default();
        let (id, stop) = self.calls.start();
        // The client's cancel of this call stops its runs.
        let cancelled = context.ct.clone();
        let on_cancel = stop.clone();
        let watcher = tokio::spawn(async move {
            cancelled.cancelled().await;
            on_cancel.cancel(CLIENT_CANCELLED);
        });
        let access = self.access;
        // Moved into the task, so the call ends when the task is done with
        // it: its command returned or panicked, or it never ran.
        let ending = Ending(self.calls.clone(), id);
        let joined = tokio::task::spawn_blocking(move || {
            let _ending = ending;
            crate::commands::execute::with_stop(stop, || tools::call(tool, &args, access))
        })
        .await;
        watcher.abort();
        let reply = match joined {
            Ok(Ok(captured)) => captured,
            Ok(Err(err)) => Captured {
                text: String::new(),
                error: Some(crate::exit::message(&err)),
                warnings: Vec::new(),
            },
            Err(join) => Captured {
                text: String::new(),
                error: Some(format!("{} failed inside loops: {join}", tool.name)),
                warnings: Vec::new(),
            },
        };
        Ok(result(reply).into())
    }
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
pub(super) async fn serve(access: Access, calls: Arc<Calls>, signals: &SignalCancel) -> Result<()> {
    let signalled = Arc::new(tokio::sync::Notify::new());
    let _subscription = {
        let signalled = signalled.clone();
        signals.token().subscribe(move || signalled.notify_one())
    };
    if signals.token().is_cancelled() {
        return Ok(());
    }
    let handler = Loops {
        access,
        calls: calls.clone(),
    };
    let session = tokio::select! {
        session = handler.serve(rmcp::transport::stdio()) => {
            session.context("starting the MCP session (initialize)")?
        }
        () = signalled.notified() => return Ok(()),
    };
    let ended = session.cancellation_token();
    let stopper = {
        let signalled = signalled.clone();
        let calls = calls.clone();
        let token = signals.token().clone();
        tokio::spawn(async move {
            signalled.notified().await;
            // Before the session ends, which cancels every call as the
            // client's: the runs say which signal stopped them.
            calls.stop_all(&token.reason().unwrap_or_default());
            ended.cancel();
        })
    };
    let quit = session.waiting().await;
    stopper.abort();
    calls.stop_all(CLIENT_CANCELLED);
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
