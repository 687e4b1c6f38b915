//! Doctor's `data-dir` check: the data directory exists or can be made,
//! and no other user owns it or can write it (issue 12 §3).

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use super::*;

pub(super) fn check_data_dir(dir: &Path) -> Check {
    let shown = dir.display().to_string();
    let writable = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .and_then(|()| {
            // A new file under a fresh name: an exclusive create never
            // follows a link another user may have planted.
            #[expect(
                clippy::disallowed_methods,
                reason = "entropy for a unique name, not a reading of time"
            )]
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let probe = dir.join(format!(".doctor-{}-{nanos:09}", std::process::id()));
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&probe)?;
            let written = std::io::Write::write_all(&mut file, b"ok");
            drop(file);
            let removed = std::fs::remove_file(&probe);
            written.and(removed)
        });
    if let Err(e) = writable {
        return Check::new(
            "data-dir",
            CheckStatus::Fail,
            "data directory is not writable",
        )
        .detail(format!("{shown}: {e}"));
    }
    // The same rule every command applies (ssh's StrictModes): another
    // user must not own or be able to write the directory.
    if let Err(e) = loops_store::check_data_dir(dir) {
        return Check::new(
            "data-dir",
            CheckStatus::Fail,
            "data directory could be changed by another user; loops refuses it",
        )
        .detail(e.to_string());
    }
    match std::fs::metadata(dir).map(|m| m.permissions().mode() & 0o777) {
        Ok(mode) if mode & 0o077 != 0 => Check::new(
            "data-dir",
            CheckStatus::Warn,
            format!(
                "data directory is accessible to other users (mode {mode:o}); run chmod 700 on it"
            ),
        )
        .detail(shown),
        _ => Check::new("data-dir", CheckStatus::Ok, "data directory is writable").detail(shown),
    }
}
