//! The `loops daemon` and `loops doctor` command lines (SPEC §7.5, §7.6),
//! stage one: raw values, resolved in `commands::daemon`.

use clap::{Args, Subcommand};

/// `loops daemon <command>`.
#[derive(Debug, Subcommand)]
pub(crate) enum Daemon {}

/// `loops doctor`.
#[derive(Debug, Args)]
pub(crate) struct DoctorArgs {}
