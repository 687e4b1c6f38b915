//! The database file and its WAL, as the daemon found them (see the
//! `daemon` module docs: "Files, socket and identity").

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The identity (device and inode) of the database file and its WAL when
/// the daemon started, checked before every turn (two `stat`s): a file
/// unlinked or replaced under the daemon's open connection would take
/// every later write into a deleted file.
pub(super) struct DatabaseFiles {
    files: Vec<(PathBuf, (u64, u64))>,
}

impl DatabaseFiles {
    /// The identities of `database` and its `-wal` file, where they exist;
    /// nothing without a file.
    pub(super) fn snapshot(database: Option<&Path>) -> DatabaseFiles {
        let Some(database) = database else {
            return DatabaseFiles { files: Vec::new() };
        };
        let mut wal = database.as_os_str().to_owned();
        wal.push("-wal");
        let files = [database.to_owned(), PathBuf::from(wal)]
            .into_iter()
            .filter_map(|path| identity(&path).map(|id| (path, id)))
            .collect();
        DatabaseFiles { files }
    }

    /// The first file that is gone or is another file now. A `stat` that
    /// fails for another reason than a missing file tells nothing.
    pub(super) fn changed(&self) -> Option<&Path> {
        self.files
            .iter()
            .find(|(path, id)| match std::fs::metadata(path) {
                Ok(m) => (m.dev(), m.ino()) != *id,
                Err(e) => e.kind() == std::io::ErrorKind::NotFound,
            })
            .map(|(path, _)| path.as_path())
    }
}

fn identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}
