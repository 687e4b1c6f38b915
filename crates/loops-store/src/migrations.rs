//! The embedded schema migrations of both backends, and the one decision
//! they share: which migrations a database still needs, given the history
//! it records.
//!
//! The history is refinery's table, `refinery_schema_history`, with the
//! same columns and checksums refinery wrote, so a database migrated by an
//! older loops (which ran refinery) is continued here and the other way
//! round. refinery itself is gone from the binary: its runner compiled a
//! regex for every migration name and pulled in regex's Unicode tables,
//! pages the loader relocated in every process (`docs/perf.md`, "Process
//! start"). Each backend reads the history and applies what [`plan`]
//! returns in its own dialect; unlike refinery, a migration and its history
//! row commit in one transaction.

use std::hash::{Hash, Hasher};

/// One embedded migration: `migrations/<backend>/V<version>__<name>.sql`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Migration {
    pub(crate) version: i32,
    pub(crate) name: &'static str,
    pub(crate) sql: &'static str,
}

impl Migration {
    /// refinery's checksum: SipHash-1-3, keys zero, of the name, the
    /// version and the SQL, each hashed as `Hash` hashes it.
    pub(crate) fn checksum(&self) -> u64 {
        let mut hasher = siphasher::sip::SipHasher13::new();
        self.name.hash(&mut hasher);
        self.version.hash(&mut hasher);
        self.sql.hash(&mut hasher);
        hasher.finish()
    }
}

/// A row of `refinery_schema_history`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Applied {
    pub(crate) version: i32,
    pub(crate) name: String,
    /// As stored: the decimal checksum, text in refinery's table.
    pub(crate) checksum: String,
}

/// The history table, as refinery creates it.
pub(crate) const CREATE_HISTORY: &str = "CREATE TABLE IF NOT EXISTS refinery_schema_history(
             version int4 PRIMARY KEY,
             name VARCHAR(255),
             applied_on VARCHAR(255),
             checksum VARCHAR(255))";

/// The history, oldest first.
pub(crate) const READ_HISTORY: &str =
    "SELECT version, name, checksum FROM refinery_schema_history ORDER BY version ASC";

/// One history row: version, name, applied on, checksum. SQLite numbers
/// `$`-named parameters in the order they first appear, so the same text
/// binds by position on both backends.
pub(crate) const INSERT_HISTORY: &str = "INSERT INTO refinery_schema_history \
     (version, name, applied_on, checksum) VALUES ($1, $2, $3, $4)";

/// The `applied_on` of a history row: now, in RFC 3339 as refinery wrote
/// it. Only people read it.
#[expect(
    clippy::disallowed_methods,
    reason = "a note for people in the history, as refinery wrote it; no decision reads it"
)]
pub(crate) fn applied_on() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    loops_core::Timestamp::from_millis(ms)
        .unwrap_or(loops_core::Timestamp::EPOCH)
        .to_string()
}

macro_rules! embed {
    ($dir:literal: $($version:literal $name:literal),* $(,)?) => {
        &[$(Migration {
            version: $version,
            name: $name,
            sql: include_str!(concat!(
                "../migrations/", $dir, "/V", $version, "__", $name, ".sql"
            )),
        }),*]
    };
}

/// The SQLite backend's migrations, oldest first.
pub(crate) const SQLITE: &[Migration] = embed!("sqlite":
    1 "initial",
    2 "process_start",
    3 "workflow_max_parallel",
    4 "spawn_id_paused_reason",
    5 "history_indexes",
    6 "status_counts",
    7 "claim_token",
    8 "loop_policies",
    9 "loop_hooks",
    10 "claimed_host",
    11 "run_facts",
    12 "run_cancel",
    13 "placement_pools_triggers",
    14 "watches_step_pools",
    15 "apply_scope",
);

/// The PostgreSQL backend's migrations, oldest first, versions shared with
/// [`SQLITE`].
pub(crate) const POSTGRES: &[Migration] = embed!("postgres":
    1 "initial",
    2 "process_start",
    3 "workflow_max_parallel",
    4 "spawn_id_paused_reason",
    5 "history_indexes",
    6 "status_counts",
    7 "multi_host",
    8 "loop_policies",
    9 "loop_hooks",
    10 "claimed_host",
    11 "run_facts",
    12 "run_cancel",
    13 "placement_pools_triggers",
    14 "watches_step_pools",
    15 "apply_scope",
);

/// The migrations `applied` (the history, oldest first) still needs, in
/// order, as refinery decided it: every applied row must be an embedded
/// migration with the same name and checksum, and every embedded one at or
/// below the newest applied must have been applied. A history that breaks
/// either rule was written by another build or edited by hand; migrating it
/// could corrupt it, so it is refused, saying which migration disagrees.
pub(crate) fn plan<'m>(
    applied: &[Applied],
    embedded: &'m [Migration],
) -> Result<Vec<&'m Migration>, String> {
    for row in applied {
        let Some(known) = embedded.iter().find(|m| m.version == row.version) else {
            return Err(format!(
                "the database records migration V{}__{}, which this loops does not have; \
                 it was migrated by another build of loops",
                row.version, row.name
            ));
        };
        if known.name != row.name || known.checksum().to_string() != row.checksum {
            return Err(format!(
                "the database records migration V{}__{} differently from this loops' \
                 V{}__{}; it was migrated by another build of loops",
                row.version, row.name, known.version, known.name
            ));
        }
    }
    let newest = applied.iter().map(|a| a.version).max();
    let mut todo = Vec::new();
    for migration in embedded {
        if applied.iter().any(|a| a.version == migration.version) {
            continue;
        }
        if newest.is_some_and(|newest| migration.version <= newest) {
            return Err(format!(
                "migration V{}__{} was never applied to the database, though newer ones were",
                migration.version, migration.name
            ));
        }
        todo.push(migration);
    }
    Ok(todo)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::SCHEMA_VERSION;

    /// The checksums refinery 0.10 computed for every migration, recorded
    /// before it was replaced: a database it migrated must still verify.
    const REFINERY_SQLITE: [u64; 15] = [
        13971214627646777177,
        12477601693503689955,
        14237315464994973447,
        127207744751775128,
        6180040312863315578,
        14251552342394589911,
        5758589807109114948,
        15297866128998991469,
        12339761997710389213,
        2145149151544160198,
        4402335691769748636,
        9292470020517807104,
        6174171149656088042,
        14213803833242990959,
        6904896441688874449,
    ];
    const REFINERY_POSTGRES: [u64; 15] = [
        11732137162723814419,
        6102844408670182815,
        7513128119420055974,
        15812037703695193617,
        8163065823975077792,
        1153725724448816694,
        1459574547338183857,
        4520531165976294144,
        14802692197031048037,
        9547350196067275405,
        4298450852989270169,
        2999360447042849751,
        13224855757041450729,
        7211904248615093007,
        15164979794660604217,
    ];

    #[test]
    fn checksums_are_refinerys() {
        let sqlite: Vec<u64> = SQLITE.iter().map(Migration::checksum).collect();
        let postgres: Vec<u64> = POSTGRES.iter().map(Migration::checksum).collect();
        assert_eq!(sqlite, REFINERY_SQLITE);
        assert_eq!(postgres, REFINERY_POSTGRES);
    }

    /// Every file in `migrations/<dir>`, as (version, name), by version.
    fn files(dir: &str) -> Vec<(i32, String)> {
        let dir = format!("{}/migrations/{dir}", env!("CARGO_MANIFEST_DIR"));
        let mut found: Vec<(i32, String)> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let name = e.unwrap().file_name().into_string().unwrap();
                let (version, name) = name
                    .strip_prefix('V')
                    .and_then(|n| n.strip_suffix(".sql"))
                    .and_then(|n| n.split_once("__"))
                    .unwrap_or_else(|| panic!("{name} is not V<n>__<name>.sql"));
                (version.parse().unwrap(), name.to_owned())
            })
            .collect();
        found.sort();
        found
    }

    #[test]
    fn every_migration_file_is_embedded_in_order_up_to_the_schema_version() {
        for (dir, embedded) in [("sqlite", SQLITE), ("postgres", POSTGRES)] {
            let listed: Vec<(i32, String)> = embedded
                .iter()
                .map(|m| (m.version, m.name.to_owned()))
                .collect();
            assert_eq!(listed, files(dir), "list every file of migrations/{dir}");
            assert_eq!(
                embedded.last().map(|m| i64::from(m.version)),
                Some(SCHEMA_VERSION),
                "bump schema::SCHEMA_VERSION to the newest migration"
            );
        }
        let versions = |m: &[Migration]| m.iter().map(|m| m.version).collect::<Vec<_>>();
        assert_eq!(versions(SQLITE), versions(POSTGRES));
    }

    #[test]
    fn a_history_row_records_when_it_was_applied_in_rfc_3339() {
        let at = loops_core::Timestamp::parse(&applied_on()).unwrap();
        assert!(at > loops_core::Timestamp::EPOCH, "{at}");
    }

    fn applied(m: &Migration) -> Applied {
        Applied {
            version: m.version,
            name: m.name.to_owned(),
            checksum: m.checksum().to_string(),
        }
    }

    fn versions(todo: &[&Migration]) -> Vec<i32> {
        todo.iter().map(|m| m.version).collect()
    }

    #[test]
    fn a_new_database_gets_every_migration_and_a_partial_one_the_rest() {
        assert_eq!(
            versions(&plan(&[], SQLITE).unwrap()),
            (1..=15).collect::<Vec<_>>()
        );
        let first: Vec<Applied> = SQLITE[..4].iter().map(applied).collect();
        assert_eq!(
            versions(&plan(&first, SQLITE).unwrap()),
            (5..=15).collect::<Vec<_>>()
        );
        let all: Vec<Applied> = SQLITE.iter().map(applied).collect();
        assert!(plan(&all, SQLITE).unwrap().is_empty());
    }

    #[test]
    fn a_history_that_disagrees_is_refused() {
        let mut edited: Vec<Applied> = SQLITE[..3].iter().map(applied).collect();
        edited[1].checksum = "1".into();
        let err = plan(&edited, SQLITE).unwrap_err();
        assert!(err.contains("V2__process_start differently"), "{err}");

        let mut renamed: Vec<Applied> = SQLITE[..3].iter().map(applied).collect();
        renamed[2].name = "other".into();
        let err = plan(&renamed, SQLITE).unwrap_err();
        assert!(err.contains("V3__other differently"), "{err}");

        let mut unknown: Vec<Applied> = SQLITE.iter().map(applied).collect();
        unknown.push(Applied {
            version: 99,
            name: "later".into(),
            checksum: "0".into(),
        });
        let err = plan(&unknown, SQLITE).unwrap_err();
        assert!(
            err.contains("V99__later, which this loops does not have"),
            "{err}"
        );

        let gap: Vec<Applied> = [&SQLITE[0], &SQLITE[2]].into_iter().map(applied).collect();
        let err = plan(&gap, SQLITE).unwrap_err();
        assert!(err.contains("V2__process_start was never applied"), "{err}");
    }
}
