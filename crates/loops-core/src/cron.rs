//! Cron expressions (SPEC §2.2). STUB: to be implemented.

use crate::time::Timestamp;

/// Where a cron expression is evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zone {
    /// The host's local time zone.
    Local,
    /// An IANA zone.
    Named(chrono_tz::Tz),
}

/// A cron expression that is invalid or can never fire.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CronError {
    /// The message.
    pub message: String,
}

/// A parsed, validated cron expression with its zone.
#[derive(Debug, Clone)]
pub struct CronExpr {
    source: String,
    zone: Zone,
}

impl CronExpr {
    /// Parses and validates an expression.
    pub fn parse(expression: &str, timezone: Option<&str>) -> Result<CronExpr, CronError> {
        let _ = timezone;
        Err(CronError { message: format!("unimplemented: {expression}") })
    }

    /// The first fire time strictly after `from`.
    pub fn next_after(&self, from: Timestamp) -> Result<Timestamp, CronError> {
        let _ = (from, &self.source, self.zone);
        Err(CronError { message: "unimplemented".into() })
    }
}

/// `nextCronRun(expr, from)` in host local time.
pub fn next_cron_run(expression: &str, from: Timestamp) -> Result<Timestamp, CronError> {
    CronExpr::parse(expression, None)?.next_after(from)
}
