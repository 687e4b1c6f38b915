//! A data directory and database no other user can subvert (issue 12 §3):
//! ssh's StrictModes rule for the directory and `loops.db` (with its
//! `-wal` and `-shm`), and no symbolic link followed at any of them.

use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use loops_store::{OpenError, Store, check_data_dir};

use crate::common::*;

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

fn open(db: &Path) -> Result<Store, OpenError> {
    Store::open(db, Arc::new(|_| false))
}

fn open_dir(dir: &Path) -> Result<Store, OpenError> {
    Store::open_in_dir(dir, Arc::new(|_| false))
}

/// The refusal's message, checking it is one.
fn refused(result: Result<Store, OpenError>) -> String {
    match result {
        Err(e @ OpenError::Unsafe { .. }) => e.to_string(),
        Err(e) => panic!("refused with another error: {e}"),
        Ok(_) => panic!("opened"),
    }
}

/// A data directory holding a migrated database, 0700.
fn data_dir() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    drop(open_dir(&data).unwrap());
    (tmp, data)
}

/// Whether this test runs as root, which can give a file to another uid.
/// Otherwise the owner checks are skipped, saying so.
fn can_chown(test: &str) -> bool {
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
        || tempfile::tempfile()
            .and_then(|f| f.metadata())
            .is_ok_and(|m| m.uid() == 0);
    if !root {
        eprintln!("{test}: skipping the part that needs another user's files: not running as root");
    }
    root
}

fn chown(path: &Path, uid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), None).unwrap();
}

#[test]
fn a_data_dir_writable_by_group_or_others_is_refused_and_left_alone() {
    sqlite_only!("the data directory and file modes guard the SQLite file");
    for m in [0o777, 0o775, 0o770, 0o1777] {
        let (_tmp, data) = data_dir();
        chmod(&data, m);
        let msg = refused(open_dir(&data));
        assert!(
            msg.contains("refusing data directory")
                && msg.contains("writable by group or others")
                && msg.contains(&format!("mode {m:04o}"))
                && if m & 0o1000 == 0 {
                    msg.contains(&format!("run chmod 700 {}", data.display()))
                } else {
                    // Not advice to close a shared directory such as /tmp.
                    msg.contains("to a new directory inside it") && !msg.contains("chmod")
                },
            "{msg}"
        );
        assert_eq!(mode(&data), m, "the directory's mode was changed");
    }
}

#[test]
fn a_data_dir_readable_by_others_is_used_as_it_is() {
    sqlite_only!("the data directory and file modes guard the SQLite file");
    let (_tmp, data) = data_dir();
    chmod(&data, 0o755);
    open_dir(&data).unwrap();
    assert_eq!(mode(&data), 0o755);
    assert_eq!(check_data_dir(&data).unwrap(), data);
}

#[test]
fn a_new_data_dir_and_database_are_private() {
    sqlite_only!("the data directory and file modes guard the SQLite file");
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("a").join("data");
    open_dir(&data).unwrap();
    assert_eq!(mode(&data), 0o700);
    assert_eq!(mode(&data.join("loops.db")), 0o600);
}

#[test]
fn a_database_writable_by_group_or_others_is_refused_and_left_alone() {
    sqlite_only!("the data directory and file modes guard the SQLite file");
    for m in [0o666, 0o660, 0o620, 0o602] {
        let (_tmp, data) = data_dir();
        let db = data.join("loops.db");
        chmod(&db, m);
        let msg = refused(open(&db));
        assert!(
            msg.contains("refusing database")
                && msg.contains(&format!("mode {m:04o}"))
                && msg.contains(&format!("chmod 600 {}", db.display())),
            "{msg}"
        );
        assert_eq!(mode(&db), m);
    }
}

#[test]
fn a_database_readable_by_others_is_made_private() {
    sqlite_only!("the data directory and file modes guard the SQLite file");
    let (_tmp, data) = data_dir();
    let db = data.join("loops.db");
    chmod(&db, 0o644);
    open(&db).unwrap();
    assert_eq!(mode(&db), 0o600);
}

#[test]
fn a_wal_or_shm_readable_by_others_is_made_private_and_writable_ones_are_refused() {
    sqlite_only!("the data directory and file modes guard the SQLite file");
    for suffix in ["-wal", "-shm"] {
        let (_tmp, data) = data_dir();
        let db = data.join("loops.db");
        let companion = data.join(format!("loops.db{suffix}"));
        std::fs::write(&companion, b"").unwrap();
        chmod(&companion, 0o644);
        open(&db).unwrap();
        assert_eq!(mode(&companion), 0o600, "{suffix}");
        chmod(&companion, 0o646);
        let msg = refused(open(&db));
        assert!(msg.contains(&companion.display().to_string()), "{msg}");
    }
}

/// The report: a `loops.db` planted as a link to another file made
/// loops change that file's mode to 0600. Now nothing follows the link.
#[test]
fn a_database_that_is_a_symlink_is_refused_and_its_target_untouched() {
    sqlite_only!("the data directory and file modes guard the SQLite file");
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir(&data).unwrap();
    chmod(&data, 0o700);
    let victim = tmp.path().join("victim");
    std::fs::write(&victim, "not yours").unwrap();
    chmod(&victim, 0o644);
    let db = data.join("loops.db");
    symlink(&victim, &db).unwrap();
    let msg = refused(open(&db));
    assert!(msg.contains("symbolic link"), "{msg}");
    assert_eq!(mode(&victim), 0o644, "the link's target changed mode");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "not yours");

    // A dangling link is refused too, and nothing is created at its target.
    std::fs::remove_file(&db).unwrap();
    let nowhere = tmp.path().join("nowhere");
    symlink(&nowhere, &db).unwrap();
    refused(open(&db));
    assert!(!nowhere.exists());
}

#[test]
fn a_wal_or_shm_that_is_a_symlink_is_refused() {
    sqlite_only!("the data directory and file modes guard the SQLite file");
    for suffix in ["-wal", "-shm"] {
        let (tmp, data) = data_dir();
        let victim = tmp.path().join("victim");
        std::fs::write(&victim, "").unwrap();
        chmod(&victim, 0o644);
        let companion = data.join(format!("loops.db{suffix}"));
        let _ = std::fs::remove_file(&companion);
        symlink(&victim, &companion).unwrap();
        let msg = refused(open(&data.join("loops.db")));
        assert!(msg.contains("symbolic link"), "{suffix}: {msg}");
        assert_eq!(mode(&victim), 0o644);
    }
}

#[test]
fn a_data_dir_that_is_a_symlink_to_a_private_dir_is_resolved_and_used() {
    sqlite_only!("the data directory and file modes guard the SQLite file");
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("real");
    std::fs::create_dir(&real).unwrap();
    chmod(&real, 0o700);
    let link = tmp.path().join("link");
    symlink(&real, &link).unwrap();
    let store = open_dir(&link).unwrap();
    store.create_loop(&interval_loop("via-link"), t0()).unwrap();
    drop(store);
    assert!(real.join("loops.db").is_file());
    assert_eq!(
        check_data_dir(&link).unwrap(),
        std::fs::canonicalize(&real).unwrap()
    );

    // The target is checked as the directory itself would be.
    chmod(&real, 0o777);
    let msg = refused(open_dir(&link));
    assert!(
        msg.contains(&format!("the target of {}", link.display())),
        "{msg}"
    );
}

#[test]
fn a_data_dir_that_is_a_file_is_refused() {
    sqlite_only!("the data directory and file modes guard the SQLite file");
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("file");
    std::fs::write(&file, "").unwrap();
    let msg = refused(open_dir(&file));
    assert!(msg.contains("not a directory"), "{msg}");
}

#[test]
fn a_data_dir_or_database_of_another_user_is_refused() {
    sqlite_only!("the data directory and file modes guard the SQLite file");
    if !can_chown("a_data_dir_or_database_of_another_user_is_refused") {
        return;
    }
    let other = 4242;

    let (_tmp, data) = data_dir();
    chown(&data, other);
    let msg = refused(open_dir(&data));
    assert!(msg.contains("owned by uid 4242"), "{msg}");

    let (_tmp, data) = data_dir();
    let db = data.join("loops.db");
    chown(&db, other);
    let msg = refused(open(&db));
    assert!(
        msg.contains("refusing database") && msg.contains("owned by uid 4242"),
        "{msg}"
    );
    assert_eq!(std::fs::metadata(&db).unwrap().uid(), other);

    let (_tmp, data) = data_dir();
    let wal = data.join("loops.db-wal");
    std::fs::write(&wal, "").unwrap();
    chown(&wal, other);
    refused(open(&data.join("loops.db")));

    // A link to someone else's directory, or a link someone else made.
    let tmp = tempfile::tempdir().unwrap();
    let theirs = tmp.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    chmod(&theirs, 0o700);
    chown(&theirs, other);
    let link = tmp.path().join("link");
    symlink(&theirs, &link).unwrap();
    let msg = refused(open_dir(&link));
    assert!(msg.contains("owned by uid 4242"), "{msg}");
    let mine = tmp.path().join("mine");
    std::fs::create_dir(&mine).unwrap();
    chmod(&mine, 0o700);
    let planted = tmp.path().join("planted");
    symlink(&mine, &planted).unwrap();
    chown(&planted, other);
    let msg = refused(open_dir(&planted));
    assert!(msg.contains("symbolic link owned by uid 4242"), "{msg}");
    assert!(!mine.join("loops.db").exists());
}
