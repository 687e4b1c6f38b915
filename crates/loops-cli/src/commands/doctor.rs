//! `loops doctor` (SPEC §7.5): runs the checks of `service::doctor` and
//! prints the report, a line per check for humans.
//!
//! Departure from 0.3.1, on purpose: `doctor` exits 1 whenever a check
//! fails, with or without `--json` (SPEC §9 item 31).

use anyhow::Result;

use super::daemon::absolute;
use super::now;
use crate::args::daemon::DoctorArgs;
use crate::context::Context;
use crate::exit::Outcome;
use crate::human;
use crate::render::{Column, Printer, Table};
use crate::request::{self, Document, Request, Warnings};
use crate::service::doctor::{self, CheckStatus, DoctorOptions, DoctorReport};

/// Runs `doctor`.
pub(crate) fn doctor(ctx: &Context, args: &DoctorArgs, out: &mut Printer) -> Result<Outcome> {
    let DoctorArgs {} = args;
    request::serve(ctx, out, |_| Ok(Doctor))
}

/// The typed request of `doctor`: every check, on this machine and the
/// store the context selects.
struct Doctor;

impl Request for Doctor {
    type Document = DoctorReport;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<DoctorReport> {
        let data_dir = absolute(ctx.data_dir()?)?;
        Ok(doctor::run_doctor(&DoctorOptions {
            data_dir: &data_dir,
            env: std::env::vars().collect(),
            host: loops_exec::hostname(),
            now: now(),
            database_url: ctx.database_url()?,
        }))
    }
}

/// The report is the document: the check results, and whether any failed.
impl Document for DoctorReport {
    fn json(&self, out: &mut Printer) -> Result<()> {
        Ok(out.json(&serde_json::to_value(self)?)?)
    }

    /// A line per check, as a table without a header: on a terminal the
    /// message is cut with `…` to fit its width (issue 28); the status and
    /// the check's id never are. Instants are local (`--json` keeps UTC).
    fn human(&self, _: &Context, out: &mut Printer) -> Result<()> {
        let mut table = Table::new(vec![
            Column::keep("STATUS"),
            Column::keep("CHECK"),
            Column::shrink("MESSAGE"),
        ])
        .headless();
        for (status, id, message) in doctor_rows(self) {
            let message = human::localize_instants(&message).into_owned();
            // Padded, so the messages line up whatever the statuses.
            table.row(vec![format!("{:<4}", status.as_str()), id, message]);
        }
        Ok(out.table(&table, |_| Vec::new())?)
    }

    /// SPEC §9 item 31: the exit code does not depend on the output mode.
    fn outcome(&self) -> Outcome {
        if self.ok {
            Outcome::Success
        } else {
            Outcome::Failure
        }
    }
}

/// The human report: a row per check (status, id, message), with the
/// providers no loop uses folded into one row where the first of them
/// stands.
fn doctor_rows(report: &DoctorReport) -> Vec<(CheckStatus, String, String)> {
    let folded: Vec<&doctor::Check> = report.checks.iter().filter(|c| c.folded).collect();
    let folded_line = doctor::providers::folded_line(&folded);
    let mut rows: Vec<(CheckStatus, String, String)> = Vec::new();
    for check in &report.checks {
        if check.folded {
            if let Some((status, message)) = &folded_line
                && !rows.iter().any(|r| r.1 == doctor::providers::FOLDED_ID)
            {
                rows.push((
                    *status,
                    doctor::providers::FOLDED_ID.to_owned(),
                    message.clone(),
                ));
            }
            continue;
        }
        let mut message = check.message.clone();
        if let Some(detail) = &check.detail {
            // A preflight's missing executable without the whole PATH,
            // which the `path` check already shows (`--json` keeps it).
            message.push_str(&format!(" ({})", crate::brief::without_path(detail)));
        }
        rows.push((check.status, check.id.clone(), message));
    }
    rows
}
