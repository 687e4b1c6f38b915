//! Black-box tests of the `loops` binary, one module per topic. Each test
//! runs the built binary in its own temporary data directory.

mod agent_options;
mod backup;
mod checklist;
mod cli;
mod compat;
mod create;
mod daemon;
mod datadir;
mod db_credentials;
mod docs;
mod doctor;
mod edit;
mod escape;
mod gc;
mod hooks;
mod human;
mod input;
mod legacy_rows;
mod logs;
mod loops_daemon;
mod manage;
mod mcp;
mod mcp_python;
mod path_entries;
mod policies;
mod prompt_files;
mod runners;
mod runs;
mod runtime;
mod transfer;
mod workflow_control;
mod workflow_runs;
mod workflows;
mod worktrees;
