//! The `loops workflows` command line (SPEC §7.4 "workflows"), stage one:
//! raw values, resolved in `commands::workflows`.

use clap::Subcommand;

/// `loops workflows <command>`.
#[derive(Debug, Subcommand)]
pub(crate) enum Workflows {}
