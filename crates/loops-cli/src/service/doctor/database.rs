//! Doctor's `database` check on SQLite: the file opens and its schema
//! version is one this build reads.

use std::path::Path;

use loops_store::{DatabaseState, inspect_database, schema_version};

use super::*;

pub(super) fn check_database(db: &Path) -> Check {
    let known = schema_version();
    let shown = db.display().to_string();
    match inspect_database(db) {
        Ok(DatabaseState::Missing) => Check::new(
            "database",
            CheckStatus::Ok,
            "no database yet; the first command creates it",
        )
        .detail(shown),
        Ok(DatabaseState::Loops { version }) if version == known => Check::new(
            "database",
            CheckStatus::Ok,
            format!("database schema is current (version {version})"),
        )
        .detail(shown),
        Ok(DatabaseState::Loops { version }) if version < known => Check::new(
            "database",
            CheckStatus::Ok,
            format!("database schema version {version} is migrated to {known} when next opened"),
        )
        .detail(shown),
        Ok(DatabaseState::Loops { version }) => Check::new(
            "database",
            CheckStatus::Fail,
            format!(
                "database schema version {version} is newer than the {known} this loops knows; upgrade loops"
            ),
        )
        .detail(shown),
        Err(e) => Check::new("database", CheckStatus::Fail, "database cannot be read")
            .detail(e.to_string()),
    }
}
