//! `loops mcp` (issue 18): the Model Context Protocol server, over stdio,
//! on the official SDK (rmcp).
//!
//! Every tool is a CLI command: its arguments become that command's typed
//! request directly, with no command line in between (`tools`), the
//! request runs through the same code as on the command line with a
//! printer that keeps its output (`app::run_request`), and the result is
//! what `--json` prints. So the store, the rules, the redaction
//! and the error messages are the command line's, with no second copy. A
//! client is not the owner, so on top of that redaction the tokens and
//! webhook URLs written into commands and hooks are masked (`mask`), and an
//! error quotes at most 200 characters of a value (`quote`).
//!
//! The session runs on a transport of its own (`transport`), which answers
//! every line it cannot use with a JSON-RPC error instead of dropping it.
//!
//! The server reads nothing but its tool calls: mutations, output that may
//! hold secrets (`showOutput`), a workflow's `promptFile` and preflight
//! (which runs local programs) are refused unless the server process has
//! `LOOPS_MCP_ALLOW_MUTATIONS=true`.
//!
//! The async runtime (tokio, current-thread) is built only here, so the
//! other commands start as before; each tool call runs its command on a
//! blocking thread of its own (`server`).

mod cancel;
mod health;
mod mask;
mod options;
pub(crate) mod params;
mod quote;
mod server;
pub(crate) mod tools;
mod transport;

use std::io::IsTerminal;

use anyhow::{Context as _, Result};

use crate::args::McpArgs;
use crate::context::Context;
use crate::exit::Outcome;

/// The variable that allows mutations.
pub(crate) const ALLOW_MUTATIONS: &str = "LOOPS_MCP_ALLOW_MUTATIONS";

/// Whether the server may change loops, show run output, read prompt
/// files and run preflight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Read tools only (the default).
    ReadOnly,
    /// `LOOPS_MCP_ALLOW_MUTATIONS=true`.
    Mutations,
}

impl Access {
    /// Reads [`ALLOW_MUTATIONS`]: `true`, `1`, `yes` or `on` (any case)
    /// allow mutations, as in later OpenLoops; unset, empty, `false`, `0`,
    /// `no` and `off` do not. Any other value does not either, and comes
    /// back as a warning, since it was probably meant to.
    fn from_env() -> (Access, Option<String>) {
        Access::parse(std::env::var_os(ALLOW_MUTATIONS).as_deref())
    }

    /// [`Access::from_env`] of the variable's value.
    fn parse(value: Option<&std::ffi::OsStr>) -> (Access, Option<String>) {
        let Some(value) = value else {
            return (Access::ReadOnly, None);
        };
        let value = value.to_string_lossy();
        match value.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => (Access::Mutations, None),
            "" | "false" | "0" | "no" | "off" => (Access::ReadOnly, None),
            _ => (
                Access::ReadOnly,
                Some(format!(
                    "{ALLOW_MUTATIONS}={value:?} is not true, 1, yes or on; mutations stay refused"
                )),
            ),
        }
    }
}

/// `loops mcp`: serves until the client closes stdin, or SIGINT/SIGTERM.
pub(crate) fn run(ctx: &Context, _args: &McpArgs) -> Result<Outcome> {
    let (access, warning) = Access::from_env();
    if let Some(warning) = warning {
        ctx.note("warning", &warning);
    }
    if std::io::stdin().is_terminal() {
        ctx.note(
            "note",
            "loops mcp speaks the Model Context Protocol on stdin and stdout, for a coding \
             agent to start; register it with e.g. `claude mcp add loops -- loops mcp`",
        );
    }
    // Opening the store first reports a bad data directory or database URL
    // at once, not as the first tool's error.
    drop(ctx.open_store()?);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the MCP server's runtime")?;
    // SIGINT and SIGTERM end the session; the handlers stay installed until
    // the calls have ended (signal-hook never restores the default action).
    let signals =
        loops_exec::SignalCancel::install().context("installing the SIGINT/SIGTERM handlers")?;
    let calls = std::sync::Arc::new(server::Calls::default());
    let served = runtime.block_on(server::serve(
        std::sync::Arc::new(ctx.for_call()),
        access,
        calls.clone(),
        &signals,
    ));
    // The session's end has cancelled the runs of the calls still in
    // flight; each is recorded before the process exits.
    calls.wait_idle();
    // Not a plain drop: that would wait for the thread blocked reading
    // stdin, which nothing can interrupt while the client keeps it open
    // (after SIGTERM).
    runtime.shutdown_background();
    drop(signals);
    served?;
    Ok(Outcome::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_a_schema_and_its_gate_in_its_description() {
        for tool in tools::TOOLS {
            let listed = tools::listed(tool);
            assert_eq!(listed.input_schema.get("type"), Some(&"object".into()));
            let description = listed.description.unwrap_or_default();
            assert!(description.len() <= 300, "{}: {description}", tool.name);
            assert_eq!(
                description.contains(ALLOW_MUTATIONS),
                tool.mutation || tool.name == "loops_workflow_validate",
                "{}: {description}",
                tool.name
            );
            assert!(tool.name.starts_with("loops_"), "{}", tool.name);
        }
    }

    #[test]
    fn only_a_true_value_allows_mutations() {
        let parse = |v: Option<&str>| Access::parse(v.map(std::ffi::OsStr::new));
        for yes in ["true", "TRUE", " 1 ", "yes", "On"] {
            assert_eq!(parse(Some(yes)), (Access::Mutations, None), "{yes}");
        }
        for no in ["", "false", "0", "no", "off"] {
            assert_eq!(parse(Some(no)), (Access::ReadOnly, None), "{no}");
        }
        assert_eq!(parse(None), (Access::ReadOnly, None));
        let (access, warning) = parse(Some("ture"));
        assert_eq!(access, Access::ReadOnly);
        assert!(warning.is_some_and(|w| w.contains("\"ture\"")));
    }
}
