//! Restoring a backup: the round trip, the database in place kept first,
//! its stale WAL gone, and the backups refused with the database left as
//! it was.

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use super::*;
use crate::sqlite::open::testing::private_tempdir;
use crate::{DB_FILE, Store, list_backups, take_backup};

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

/// A data directory with a loops database holding a table `t` of `rows`
/// rows, the newest of them only in its WAL, as loops leaves a database.
fn database(rows: i64) -> (tempfile::TempDir, PathBuf) {
    let dir = private_tempdir();
    let db = dir.path().join(DB_FILE);
    drop(Store::open(&db, Arc::new(|_| false)).unwrap());
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch("CREATE TABLE t (x INTEGER)").unwrap();
    drop(conn);
    add_rows(&db, rows);
    (dir, db)
}

/// Adds `rows` rows to `t`, leaving them in the WAL.
fn add_rows(db: &Path, rows: i64) {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
        true,
    )
    .unwrap();
    for i in 0..rows {
        conn.execute("INSERT INTO t VALUES (?1)", [i]).unwrap();
    }
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

/// A backup of `db` at `when`.
fn backup_of(db: &Path, when: &str) -> PathBuf {
    take_backup(db, at(when), 100).unwrap().backup.path
}

#[test]
fn a_backup_comes_back_and_the_database_it_replaces_is_kept() {
    let (dir, db) = database(3);
    let from = backup_of(&db, "2026-12-01T17:00:00Z");
    add_rows(&db, 7);
    let wal = companion(&db, "-wal");
    assert!(wal.exists(), "the newest rows are in the WAL");

    let restored = restore_backup(&db, &from, Some(at("2026-12-01T18:00:00Z"))).unwrap();
    assert_eq!(rows_in(&db), 3);
    assert_eq!(restored.from, from);
    let Some(Kept::Backup(kept)) = &restored.kept else {
        panic!("kept as {:?}", restored.kept);
    };
    assert_eq!(kept.taken_at, at("2026-12-01T18:00:00Z"));
    // The kept copy holds what was only in the WAL too.
    assert_eq!(rows_in(&kept.path), 10);
    assert!(restored.removed.contains(&wal), "{:?}", restored.removed);
    // Nothing but the database and the backups is left: no copy, no stale
    // WAL beside the restored file.
    let left: Vec<String> = names(dir.path())
        .into_iter()
        .filter(|n| n != "loops.db-wal" && n != "loops.db-shm")
        .collect();
    assert_eq!(left, ["backups", "loops.db"]);
    let mode = std::fs::metadata(&db).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // loops opens it.
    drop(Store::open(&db, Arc::new(|_| false)).unwrap());
}

#[test]
fn restoring_the_oldest_backup_prunes_none() {
    let (dir, db) = database(1);
    let oldest = backup_of(&db, "2026-12-01T17:00:00Z");
    backup_of(&db, "2026-12-01T17:01:00Z");
    backup_of(&db, "2026-12-01T17:02:00Z");
    restore_backup(&db, &oldest, Some(at("2026-12-01T18:00:00Z"))).unwrap();
    assert_eq!(list_backups(&backup_dir(dir.path())).unwrap().len(), 4);
}

#[test]
fn without_keeping_the_database_in_place_is_replaced_alone() {
    let (dir, db) = database(2);
    let from = backup_of(&db, "2026-12-01T17:00:00Z");
    add_rows(&db, 1);
    let restored = restore_backup(&db, &from, None).unwrap();
    assert_eq!(restored.kept, None);
    assert_eq!(rows_in(&db), 2);
    assert_eq!(list_backups(&backup_dir(dir.path())).unwrap().len(), 1);
}

#[test]
fn a_backup_restores_into_a_new_data_directory() {
    let (_old, db) = database(4);
    let from = backup_of(&db, "2026-12-01T17:00:00Z");
    let parent = private_tempdir();
    let new_db = parent.path().join("data").join(DB_FILE);
    let restored = restore_backup(&new_db, &from, Some(at("2026-12-01T18:00:00Z"))).unwrap();
    assert_eq!(restored.kept, None);
    assert_eq!(rows_in(&new_db), 4);
}

/// Asserts that restoring `from` over `db` fails with a message holding
/// `says`, and leaves the data directory as it was.
fn refused(db: &Path, from: &Path, says: &str) {
    let dir = db.parent().unwrap();
    let before = (names(dir), std::fs::read(db).unwrap());
    let err = restore_backup(db, from, Some(at("2026-12-01T18:00:00Z"))).unwrap_err();
    assert!(err.to_string().contains(says), "{err}");
    assert_eq!((names(dir), std::fs::read(db).unwrap()), before, "{err}");
}

#[test]
fn a_damaged_or_foreign_backup_is_refused_and_changes_nothing() {
    let (dir, db) = database(3);
    let good = backup_of(&db, "2026-12-01T17:00:00Z");
    let files = private_tempdir();

    let damaged = files.path().join("damaged.db");
    let mut bytes = std::fs::read(&good).unwrap();
    let page = 4096;
    for b in &mut bytes[page + 100..2 * page] {
        *b = 0xA5;
    }
    std::fs::write(&damaged, &bytes).unwrap();
    refused(&db, &damaged, "it is damaged");

    let text = files.path().join("notes.db");
    std::fs::write(
        &text,
        "not a database, but long enough to be taken for a header",
    )
    .unwrap();
    refused(&db, &text, "it is not a SQLite database");

    let other = files.path().join("other.db");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE notes (x)")
        .unwrap();
    refused(&db, &other, "it is not a loops database");

    let newer = files.path().join("newer.db");
    std::fs::copy(&good, &newer).unwrap();
    rusqlite::Connection::open(&newer)
        .unwrap()
        .execute(
            "INSERT INTO refinery_schema_history (version, name, applied_on, checksum) \
             VALUES (999, 'future', '', '0')",
            [],
        )
        .unwrap();
    refused(&db, &newer, "schema version 999, newer than");

    refused(&db, &db, "it is the database in place itself");
    refused(&db, files.path(), "it is not a regular file");
    refused(
        &db,
        &files.path().join("missing.db"),
        "there is no such file",
    );
    // Nothing was kept along the way: the good backup is the only one.
    assert_eq!(list_backups(&backup_dir(dir.path())).unwrap().len(), 1);
}

#[test]
fn a_backup_others_could_change_or_a_link_is_refused() {
    let (_dir, db) = database(1);
    let good = backup_of(&db, "2026-12-01T17:00:00Z");
    let files = private_tempdir();
    let open = files.path().join("open.db");
    std::fs::copy(&good, &open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o666)).unwrap();
    refused(&db, &open, "writable by group or others (mode 0666)");

    let link = files.path().join("link.db");
    std::os::unix::fs::symlink(&good, &link).unwrap();
    refused(&db, &link, "symbolic link");

    // Readable by others is fine: the copy is private anyway.
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
    restore_backup(&db, &open, None).unwrap();
}

#[test]
fn a_database_too_damaged_to_copy_is_moved_aside_with_its_wal() {
    let (dir, db) = database(3);
    let from = backup_of(&db, "2026-12-01T17:00:00Z");
    add_rows(&db, 2);
    // The header and the first page are gone: SQLite cannot read it.
    let mut bytes = std::fs::read(&db).unwrap();
    for b in &mut bytes[..4096] {
        *b = 0x5A;
    }
    std::fs::write(&db, &bytes).unwrap();
    let wal = std::fs::read(companion(&db, "-wal")).unwrap();

    let restored = restore_backup(&db, &from, Some(at("2026-12-01T18:00:00Z"))).unwrap();
    assert_eq!(rows_in(&db), 3);
    let Some(Kept::Damaged { path, reason }) = &restored.kept else {
        panic!("kept as {:?}", restored.kept);
    };
    assert_eq!(
        path,
        &backup_dir(dir.path()).join("loops-20261201T180000Z-damaged.db")
    );
    assert!(reason.contains("not a database"), "{reason}");
    assert_eq!(std::fs::read(path).unwrap(), bytes);
    assert_eq!(std::fs::read(companion(path, "-wal")).unwrap(), wal);
    // Not a backup: never listed, never pruned.
    assert_eq!(list_backups(&backup_dir(dir.path())).unwrap().len(), 1);
}

#[test]
fn damaged_names_are_not_backup_names() {
    let second = at("2026-12-01T17:05:12Z");
    assert_eq!(damaged_name(second, 1), "loops-20261201T170512Z-damaged.db");
    assert_eq!(
        damaged_name(second, 2),
        "loops-20261201T170512Z-2-damaged.db"
    );
    for seq in [1, 2] {
        assert_eq!(super::super::parse_name(&damaged_name(second, seq)), None);
    }
}
