//! The backups: names, pruning, the hourly rule, private files, and the
//! backup an opening takes before it migrates.

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use super::*;
use crate::sqlite::open::testing::private_tempdir;
use crate::{DB_FILE, Store};

/// The tables and indexes as the original 0.3.1 creates them.
const ORIGINAL_0_3_1_SCHEMA: &str =
    include_str!("../../../../tests/fixtures/original-0.3.1-schema.sql");

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

fn mode_of(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// A data directory with a current database holding one table of `rows`
/// rows.
fn database(rows: i64) -> (tempfile::TempDir, PathBuf) {
    let dir = private_tempdir();
    let db = dir.path().join(DB_FILE);
    drop(Store::open(&db, Arc::new(|_| false)).unwrap());
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch("CREATE TABLE t (x INTEGER)").unwrap();
    for i in 0..rows {
        conn.execute("INSERT INTO t VALUES (?1)", [i]).unwrap();
    }
    (dir, db)
}

fn rows_in(db: &Path) -> i64 {
    rusqlite::Connection::open(db)
        .unwrap()
        .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .unwrap()
}

/// The names of the files in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn names_hold_the_utc_second_and_read_back() {
    let t = at("2026-12-01T17:05:12.345Z");
    assert_eq!(file_name(second_of(t), 1), "loops-20261201T170512Z.db");
    assert_eq!(file_name(second_of(t), 2), "loops-20261201T170512Z-2.db");
    assert_eq!(
        parse_name("loops-20261201T170512Z.db"),
        Some((at("2026-12-01T17:05:12Z"), 1))
    );
    assert_eq!(
        parse_name("loops-20261201T170512Z-12.db"),
        Some((at("2026-12-01T17:05:12Z"), 12))
    );
    for other in [
        "loops.db",
        "loops.db-wal",
        "loops-20261301T170512Z.db",
        "loops-20261201T170512Z-1.db",
        "loops-20261201T170512Z-02.db",
        "loops-20261201T170512Z-.db",
        "loops-20261201T170512Z.db.tmp",
        "loops-20261201 170512Z.db",
        "loops-2026120T170512Z.db",
        ".loops-backup-0123456789ab.tmp",
        "notes.txt",
    ] {
        assert_eq!(parse_name(other), None, "{other}");
    }
}

#[test]
fn a_backup_is_a_private_consistent_copy() {
    let (dir, db) = database(5);
    let now = at("2026-12-01T17:05:12.345Z");
    let taken = take_backup(&db, now, 3).unwrap();
    let backups = dir.path().join(BACKUP_DIR);
    assert_eq!(taken.backup.path, backups.join("loops-20261201T170512Z.db"));
    assert_eq!(taken.backup.taken_at, at("2026-12-01T17:05:12Z"));
    assert_eq!(
        taken.backup.size_bytes,
        std::fs::metadata(&taken.backup.path).unwrap().len()
    );
    assert!(taken.removed.is_empty());
    assert_eq!(mode_of(&backups), 0o700);
    assert_eq!(mode_of(&taken.backup.path), 0o600);
    assert_eq!(rows_in(&taken.backup.path), 5);
    // No temporary file is left behind.
    assert_eq!(names(&backups), ["loops-20261201T170512Z.db"]);
}

#[test]
fn backups_in_one_second_get_distinct_names_and_list_newest_first() {
    let (dir, db) = database(1);
    let backups = dir.path().join(BACKUP_DIR);
    let first = take_backup(&db, at("2026-12-01T17:05:12.100Z"), 10).unwrap();
    let second = take_backup(&db, at("2026-12-01T17:05:12.900Z"), 10).unwrap();
    let later = take_backup(&db, at("2026-12-01T18:00:00Z"), 10).unwrap();
    assert_eq!(
        second.backup.path,
        backups.join("loops-20261201T170512Z-2.db")
    );
    let listed = list_backups(&backups).unwrap();
    assert_eq!(listed, [later.backup, second.backup, first.backup]);
}

#[test]
fn pruning_keeps_the_newest_and_touches_nothing_else() {
    let (dir, db) = database(1);
    let backups = dir.path().join(BACKUP_DIR);
    for hour in 10..14 {
        take_backup(&db, at(&format!("2026-12-01T{hour}:00:00Z")), 10).unwrap();
    }
    for other in [
        "notes.txt",
        "loops-latest.db",
        "loops-20261201T090000Z.db.tmp",
    ] {
        std::fs::write(backups.join(other), "keep").unwrap();
    }
    // A directory with a backup's name is not a backup.
    std::fs::create_dir(backups.join("loops-20261201T080000Z.db")).unwrap();
    let removed = prune_backups(&backups, 2).unwrap();
    let removed: Vec<_> = removed.iter().map(|b| b.taken_at).collect();
    assert_eq!(
        removed,
        [at("2026-12-01T11:00:00Z"), at("2026-12-01T10:00:00Z")]
    );
    assert_eq!(
        names(&backups),
        [
            "loops-20261201T080000Z.db",
            "loops-20261201T090000Z.db.tmp",
            "loops-20261201T120000Z.db",
            "loops-20261201T130000Z.db",
            "loops-latest.db",
            "notes.txt",
        ]
    );
    // Taking one prunes too, to its `keep`.
    let taken = take_backup(&db, at("2026-12-01T14:00:00Z"), 1).unwrap();
    assert_eq!(taken.removed.len(), 2);
    assert_eq!(list_backups(&backups).unwrap(), [taken.backup]);
}

#[test]
fn a_new_backup_survives_pruning_when_the_clock_went_back() {
    let (dir, db) = database(1);
    let backups = dir.path().join(BACKUP_DIR);
    take_backup(&db, at("2026-12-02T00:00:00Z"), 1).unwrap();
    let taken = take_backup(&db, at("2026-12-01T00:00:00Z"), 1).unwrap();
    assert!(taken.removed.is_empty());
    assert!(taken.backup.path.exists());
    assert_eq!(list_backups(&backups).unwrap().len(), 2);
}

#[test]
fn automatic_backups_are_at_most_hourly() {
    let newest = Backup {
        path: PathBuf::from("loops-20261201T170000Z.db"),
        taken_at: at("2026-12-01T17:00:00Z"),
        size_bytes: 0,
    };
    let due = |now: &str| auto_backup_due(Some(&newest), at(now));
    assert!(auto_backup_due(None, at("2026-12-01T17:00:00Z")));
    assert!(!due("2026-12-01T17:00:00Z"));
    assert!(!due("2026-12-01T17:59:59.999Z"));
    assert!(due("2026-12-01T18:00:00Z"));
    assert!(due("2026-12-03T00:00:00Z"));
    // The clock was set back: the newest backup counts as recent.
    assert!(!due("2026-11-30T00:00:00Z"));

    let (dir, db) = database(1);
    let backups = dir.path().join(BACKUP_DIR);
    let before = "before a test";
    let first = auto_backup(&db, AutoBackup::at(at("2026-12-01T17:00:00Z")), before).unwrap();
    assert!(first.is_some());
    let skipped = auto_backup(&db, AutoBackup::at(at("2026-12-01T17:30:00Z")), before).unwrap();
    assert_eq!(skipped, None);
    let auto = AutoBackup {
        now: at("2026-12-01T18:00:00Z"),
        keep: 1,
    };
    let second = auto_backup(&db, auto, before).unwrap().unwrap();
    assert_eq!(second.removed, [first.unwrap().backup]);
    assert_eq!(list_backups(&backups).unwrap(), [second.backup]);
}

#[test]
fn a_backups_path_another_user_could_change_is_refused() {
    let (dir, db) = database(1);
    let backups = dir.path().join(BACKUP_DIR);
    let now = at("2026-12-01T17:00:00Z");

    // A link, even to a private directory of this user's.
    let elsewhere = private_tempdir();
    std::os::unix::fs::symlink(elsewhere.path(), &backups).unwrap();
    let refused = take_backup(&db, now, 3).unwrap_err();
    assert!(
        matches!(&refused, OpenError::Unsafe { .. })
            && refused.to_string().contains("symbolic link"),
        "{refused}"
    );
    assert!(list_backups(&backups).is_err());
    assert_eq!(names(elsewhere.path()), Vec::<String>::new());
    std::fs::remove_file(&backups).unwrap();

    // Writable by group.
    std::fs::create_dir(&backups).unwrap();
    std::fs::set_permissions(&backups, std::fs::Permissions::from_mode(0o770)).unwrap();
    let refused = take_backup(&db, now, 3).unwrap_err();
    assert!(
        refused.to_string().contains("writable by group or others"),
        "{refused}"
    );

    // Only readable by others: made private.
    std::fs::set_permissions(&backups, std::fs::Permissions::from_mode(0o755)).unwrap();
    take_backup(&db, now, 3).unwrap();
    assert_eq!(mode_of(&backups), 0o700);
}

#[test]
fn a_failed_automatic_backup_names_its_cause_and_the_way_round() {
    let (dir, db) = database(1);
    std::fs::write(dir.path().join(BACKUP_DIR), "in the way").unwrap();
    let failed =
        auto_backup(&db, AutoBackup::at(at("2026-12-01T17:00:00Z")), "before x").unwrap_err();
    let shown = failed.to_string();
    assert!(matches!(failed, OpenError::Backup { .. }), "{shown}");
    assert!(shown.contains("before x"), "{shown}");
    assert!(shown.contains("not a directory"), "{shown}");
    assert!(shown.contains("LOOPS_SKIP_BACKUP=1"), "{shown}");
}

#[test]
fn a_missing_database_is_not_backed_up() {
    let dir = private_tempdir();
    let err = take_backup(&dir.path().join(DB_FILE), at("2026-12-01T17:00:00Z"), 3).unwrap_err();
    assert!(err.to_string().contains("no database to back up"), "{err}");
    assert!(!dir.path().join(BACKUP_DIR).exists());
}

#[test]
fn a_backup_does_not_wait_for_a_writer() {
    let (dir, db) = database(3);
    let writer = rusqlite::Connection::open(&db).unwrap();
    writer
        .execute_batch("BEGIN IMMEDIATE; INSERT INTO t VALUES (99);")
        .unwrap();
    let started = std::time::Instant::now();
    let taken = take_backup(&db, at("2026-12-01T17:00:00Z"), 3).unwrap();
    assert!(
        started.elapsed() < std::time::Duration::from_millis(BUSY_WAIT_MS),
        "the backup waited for the writer"
    );
    writer.execute_batch("COMMIT").unwrap();
    // The copy is the last committed state.
    assert_eq!(rows_in(&taken.backup.path), 3);
    assert_eq!(rows_in(&db), 4);
    drop(dir);
}

/// Half the busy timeout: a backup that waited for the writer would take
/// all of it.
const BUSY_WAIT_MS: u64 = crate::sqlite::open::BUSY_TIMEOUT_MS / 2;

/// A database as the original 0.3.1 writes it, in a private data
/// directory.
fn original() -> (tempfile::TempDir, PathBuf) {
    let dir = private_tempdir();
    let db = dir.path().join(DB_FILE);
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch("PRAGMA journal_mode = WAL;").unwrap();
    conn.execute_batch(ORIGINAL_0_3_1_SCHEMA).unwrap();
    drop(conn);
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o600)).unwrap();
    (dir, db)
}

fn has_history(db: &Path) -> bool {
    rusqlite::Connection::open(db)
        .unwrap()
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'refinery_schema_history'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .unwrap()
        > 0
}

#[test]
fn opening_an_older_database_backs_it_up_before_migrating() {
    let (dir, db) = original();
    let now = at("2026-12-01T17:00:00Z");
    let auto = Some(AutoBackup::at(now));
    let (store, backup) = Store::open_with(&db, Arc::new(|_| false), auto).unwrap();
    drop(store);
    let backup = backup.expect("a backup before the migration");
    assert_eq!(
        backup.path.parent(),
        Some(dir.path().join(BACKUP_DIR).as_path())
    );
    // The copy is the file as it was: the original's schema, unmigrated.
    assert!(!has_history(&backup.path));
    assert!(has_history(&db));
    // Migrated now: opening again, even hours later, takes none.
    let later = Some(AutoBackup::at(at("2026-12-02T17:00:00Z")));
    let (_store, again) = Store::open_with(&db, Arc::new(|_| false), later).unwrap();
    assert_eq!(again, None);
    assert_eq!(list_backups(&dir.path().join(BACKUP_DIR)).unwrap().len(), 1);
}

#[test]
fn a_new_database_is_not_backed_up() {
    let dir = private_tempdir();
    let auto = Some(AutoBackup::at(at("2026-12-01T17:00:00Z")));
    let (_store, backup) = Store::open_in_dir_with(dir.path(), Arc::new(|_| false), auto).unwrap();
    assert_eq!(backup, None);
    assert!(!dir.path().join(BACKUP_DIR).exists());
}

#[test]
fn a_failed_backup_stops_the_migration() {
    let (dir, db) = original();
    std::fs::write(dir.path().join(BACKUP_DIR), "in the way").unwrap();
    let auto = Some(AutoBackup::at(at("2026-12-01T17:00:00Z")));
    let failed = Store::open_with(&db, Arc::new(|_| false), auto).unwrap_err();
    assert!(matches!(failed, OpenError::Backup { .. }), "{failed}");
    assert!(
        failed.to_string().contains("before migrating its schema"),
        "{failed}"
    );
    assert!(!has_history(&db), "the database was migrated");
    // Without the backup (what LOOPS_SKIP_BACKUP asks for), it migrates.
    drop(Store::open(&db, Arc::new(|_| false)).unwrap());
    assert!(has_history(&db));
}
