//! Migrating a PostgreSQL database: the migrations of
//! `migrations/postgres/` (versions shared with `migrations/sqlite/`),
//! applied under a session advisory lock so hosts starting at once migrate
//! one at a time, and the minimum compatible version every newer schema
//! records, so an older binary refuses a schema it cannot use instead of
//! writing to it.

use std::path::PathBuf;

use postgres::Client;

use super::connect::DatabaseUrl;
use crate::error::{OpenError, Result};
use crate::migrations::{self, Applied};
use crate::schema::SCHEMA_VERSION;

/// The advisory lock key of migrations: "loopsmig" as a big-endian i64.
const MIGRATION_LOCK_KEY: i64 = 0x6c6f_6f70_736d_6967;

/// What a database says about its schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SchemaState {
    /// The newest migration applied, `None` on an empty database.
    pub(crate) version: Option<i64>,
    /// The oldest binary schema version that may use it.
    pub(crate) min_compatible: Option<i64>,
}

fn db(context: &'static str) -> impl FnOnce(postgres::Error) -> OpenError {
    OpenError::db(context)
}

/// Reads the schema version and the minimum compatible version.
pub(crate) fn schema_state(client: &mut Client) -> Result<SchemaState, OpenError> {
    let row = client
        .query_one(
            "SELECT to_regclass('refinery_schema_history') IS NOT NULL,
                    to_regclass('schema_compat') IS NOT NULL",
            &[],
        )
        .map_err(db("reading the schema version"))?;
    let (history, compat): (bool, bool) = (row.get(0), row.get(1));
    let version = if history {
        let row = client
            .query_one(
                "SELECT MAX(version)::bigint FROM refinery_schema_history",
                &[],
            )
            .map_err(db("reading the schema version"))?;
        row.get::<_, Option<i64>>(0)
    } else {
        None
    };
    let min_compatible = if compat {
        client
            .query_opt("SELECT min_compatible_version FROM schema_compat", &[])
            .map_err(db("reading the minimum compatible version"))?
            .map(|r| r.get::<_, i64>(0))
    } else {
        None
    };
    Ok(SchemaState {
        version,
        min_compatible,
    })
}

/// What to do with a database in `state`: `Ok(true)` to migrate,
/// `Ok(false)` to use it as it is, or the refusal of a newer schema this
/// binary is too old for.
fn decide(state: SchemaState, url: &DatabaseUrl) -> Result<bool, OpenError> {
    match state.version {
        Some(v) if v == SCHEMA_VERSION => Ok(false),
        Some(v) if v > SCHEMA_VERSION => {
            // A newer schema that still admits this binary is used as it is.
            if state
                .min_compatible
                .is_some_and(|min| SCHEMA_VERSION >= min)
            {
                Ok(false)
            } else {
                Err(OpenError::NewerSchema {
                    path: PathBuf::from(url.shown()),
                    found: v,
                    supported: SCHEMA_VERSION,
                })
            }
        }
        _ => Ok(true),
    }
}

/// Brings the database to [`SCHEMA_VERSION`], unless it is there already
/// (the common case: one round trip of reads, no lock).
pub(crate) fn migrate(client: &mut Client, url: &DatabaseUrl) -> Result<(), OpenError> {
    if !decide(schema_state(client)?, url)? {
        return Ok(());
    }
    client
        .query("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK_KEY])
        .map_err(db("waiting for another host's migration"))?;
    let out = (|| {
        // Another host may have migrated while this one waited.
        if !decide(schema_state(client)?, url)? {
            return Ok(());
        }
        apply(client)
    })();
    let unlocked = client
        .query("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK_KEY])
        .map_err(db("releasing the migration lock"));
    out.and(unlocked.map(drop))
}

/// Applies each migration [`migrations::plan`] returns, with its history
/// row, in a transaction of its own.
fn apply(client: &mut Client) -> Result<(), OpenError> {
    client
        .batch_execute(migrations::CREATE_HISTORY)
        .map_err(db("creating the migration history"))?;
    let applied: Vec<Applied> = client
        .query(migrations::READ_HISTORY, &[])
        .map_err(db("reading the migration history"))?
        .iter()
        .map(|r| Applied {
            version: r.get(0),
            name: r.get(1),
            checksum: r.get(2),
        })
        .collect();
    for migration in
        migrations::plan(&applied, migrations::POSTGRES).map_err(OpenError::Migration)?
    {
        let failed = |e: postgres::Error| {
            OpenError::Migration(format!(
                "applying V{}__{}: {e}",
                migration.version, migration.name
            ))
        };
        let mut tx = client.transaction().map_err(failed)?;
        tx.batch_execute(migration.sql).map_err(failed)?;
        tx.execute(
            migrations::INSERT_HISTORY,
            &[
                &migration.version,
                &migration.name,
                &migrations::applied_on(),
                &migration.checksum().to_string(),
            ],
        )
        .map_err(failed)?;
        tx.commit().map_err(failed)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_newer_schema_is_used_only_when_it_admits_this_binary() {
        let url = DatabaseUrl::parse("postgresql://u:pw@h/db").unwrap();
        let newer = SCHEMA_VERSION + 1;
        let admits = SchemaState {
            version: Some(newer),
            min_compatible: Some(SCHEMA_VERSION),
        };
        assert!(!decide(admits, &url).unwrap());
        let refuses = SchemaState {
            version: Some(newer),
            min_compatible: Some(newer),
        };
        let err = decide(refuses, &url).unwrap_err().to_string();
        assert!(
            err.contains("Upgrade loops") && !err.contains("pw@"),
            "{err}"
        );
        let empty = SchemaState {
            version: None,
            min_compatible: None,
        };
        assert!(decide(empty, &url).unwrap());
    }
}
