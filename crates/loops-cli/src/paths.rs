//! Where the data lives (SPEC §7.1, §10 item 101): `$LOOPS_DATA_DIR`, else
//! `$HOME/.hasna/loops`. The store creates the directory with mode 0700,
//! and refuses one that another user owns or can write, or a database file
//! that is a symbolic link (`loops_store::check_data_dir`, issue 12 §3).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use loops_exec::SystemProbe;
use loops_store::Store;

/// The data directory. An empty variable counts as unset.
pub(crate) fn data_dir() -> Result<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var("LOOPS_DATA_DIR") {
        return Ok(PathBuf::from(dir));
    }
    match var("HOME") {
        Some(home) => Ok(PathBuf::from(home).join(".hasna").join("loops")),
        None => bail!("cannot locate the loops data directory: set LOOPS_DATA_DIR or HOME"),
    }
}

/// Opens (creating and migrating if needed) the database of the data
/// directory, with the production liveness probe. An existing database is
/// backed up before a migration changes its schema (issue 14; see
/// `commands::backup`).
pub(crate) fn open_store() -> Result<Store> {
    let dir = data_dir()?;
    let auto = crate::commands::backup::automatic();
    let (store, backup) = Store::open_in_dir_with(&dir, Arc::new(SystemProbe), auto)
        .with_context(|| format!("opening the loops database in {}", dir.display()))?;
    if let Some(backup) = &backup {
        crate::commands::backup::report(backup, "before migrating its schema");
    }
    Ok(store)
}
