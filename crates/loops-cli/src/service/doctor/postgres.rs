//! The doctor's database check on PostgreSQL: the server is reachable and
//! migrated, and its clock agrees with this host's. The file checks of
//! SQLite (permissions, `quick_check`) have no counterpart: the server
//! keeps its own files.

use std::sync::Arc;

use loops_exec::SystemProbe;
use loops_scheduler::{ClockSync, DatabaseClock, SKEW_WARN_MS};
use loops_store::{DatabaseUrl, SCHEMA_VERSION, Store};

use super::{Check, CheckStatus};

/// Connects (migrating a database that needs it, as any command would) and
/// reports; the store is returned for the checks that need one.
pub(super) fn check(url: &DatabaseUrl, host: &str) -> (Check, Option<Store>) {
    let shown = format!("postgresql {}", url.shown());
    let store = match Store::open_postgres(url, "doctor", host, Arc::new(SystemProbe)) {
        Ok(store) => store,
        Err(e) => {
            return (
                Check::new(
                    "database",
                    CheckStatus::Fail,
                    "the PostgreSQL database cannot be opened; check the server, the URL in \
                     --database-url or LOOPS_DATABASE_URL, and the credentials",
                )
                .detail(format!("{shown}: {e}")),
                None,
            );
        }
    };
    let clock = DatabaseClock::new(loops_exec::SystemClock);
    let check = match clock.sync(&store) {
        Ok(Some(skew)) if skew.abs() > SKEW_WARN_MS => Check::new(
            "database",
            CheckStatus::Warn,
            format!(
                "PostgreSQL database schema is current (version {SCHEMA_VERSION}), but this \
                 host's clock is {skew} ms off the server's; loops plans from the server's clock, \
                 fix this host's time (NTP) for everything else"
            ),
        ),
        Ok(skew) => Check::new(
            "database",
            CheckStatus::Ok,
            format!(
                "PostgreSQL database schema is current (version {SCHEMA_VERSION}); this host's \
                 clock is {} ms off the server's",
                skew.unwrap_or(0)
            ),
        ),
        Err(e) => Check::new(
            "database",
            CheckStatus::Warn,
            format!("PostgreSQL database opened, but its clock cannot be read: {e}"),
        ),
    };
    (check.detail(shown), Some(store))
}
