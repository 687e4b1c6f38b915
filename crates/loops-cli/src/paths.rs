//! Where the data lives (SPEC §7.1, §10 item 101): `$LOOPS_DATA_DIR`, else
//! `$HOME/.hasna/loops`. The store creates the directory with mode 0700,
//! and refuses one that another user owns or can write, or a database file
//! that is a symbolic link (`loops_store::check_data_dir`, issue 12 §3).

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use anyhow::{Context, Result, bail};
use loops_exec::SystemProbe;
use loops_store::{DatabaseUrl, Store};

/// The variable that selects PostgreSQL.
pub(crate) const DATABASE_URL_VAR: &str = "LOOPS_DATABASE_URL";

/// `--database-url`, when given (it wins over the variable).
static DATABASE_URL_FLAG: OnceLock<String> = OnceLock::new();

/// Records `--database-url` for [`open_store`].
pub(crate) fn set_database_url(url: Option<String>) {
    if let Some(url) = url {
        let _ = DATABASE_URL_FLAG.set(url);
    }
}

/// Where `--database-url` came from, for a daemon started in the
/// background, which must get it through its environment (never its
/// command line, where `ps` would show a password).
pub(crate) fn database_url_flag() -> Option<&'static str> {
    DATABASE_URL_FLAG.get().map(String::as_str)
}

/// The PostgreSQL database selected by `--database-url` or
/// `$LOOPS_DATABASE_URL` (an empty variable counts as unset), or `None`
/// for SQLite in the data directory.
pub(crate) fn database_url() -> Result<Option<DatabaseUrl>> {
    Ok(database_url_with_text()?.map(|(_, url)| url))
}

/// [`database_url`], with the string it was parsed from (for a service
/// file, which carries it as `$LOOPS_DATABASE_URL`).
pub(crate) fn database_url_with_text() -> Result<Option<(String, DatabaseUrl)>> {
    let raw = match DATABASE_URL_FLAG.get() {
        Some(url) => (url.clone(), "--database-url"),
        None => match std::env::var(DATABASE_URL_VAR) {
            Ok(url) if !url.trim().is_empty() => (url, DATABASE_URL_VAR),
            Ok(_) | Err(std::env::VarError::NotPresent) => return Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => {
                bail!(
                    "{DATABASE_URL_VAR} is not valid UTF-8; set it to a PostgreSQL URL or unset it"
                )
            }
        },
    };
    let (url, source) = raw;
    if !DatabaseUrl::looks_like_one(&url) {
        bail!(
            "{source} must be a PostgreSQL connection string (postgresql://user@host/dbname, \
             postgresql:///dbname?host=/socket/dir, or key=value pairs such as \
             'host=/run/postgresql dbname=loops'); unset it to use SQLite in $LOOPS_DATA_DIR"
        );
    }
    let parsed = DatabaseUrl::parse(&url).with_context(|| format!("reading {source}"))?;
    Ok(Some((url, parsed)))
}

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
    open_store_as("cli")
}

/// [`open_store`], naming the connection's `role` on PostgreSQL
/// (`application_name` `loops:<role>`).
pub(crate) fn open_store_as(role: &str) -> Result<Store> {
    if let Some(url) = database_url()? {
        // The data directory still holds this host's pid file, socket and
        // log, as with SQLite.
        let dir = data_dir()?;
        Store::prepare_data_dir(&dir)
            .with_context(|| format!("preparing the loops data directory {}", dir.display()))?;
        let host = loops_exec::hostname();
        return Store::open_postgres(&url, role, &host, Arc::new(SystemProbe))
            .with_context(|| format!("opening the loops database {}", url.shown()));
    }
    let dir = data_dir()?;
    let auto = crate::auto_backup::automatic();
    let (store, backup) = Store::open_in_dir_with(&dir, Arc::new(SystemProbe), auto)
        .with_context(|| format!("opening the loops database in {}", dir.display()))?;
    if let Some(backup) = &backup {
        crate::auto_backup::report(backup, "before migrating its schema");
    }
    // Recorded with each run it claims, as on PostgreSQL, so a run's
    // record is the same on both backends.
    Ok(store.with_host(&loops_exec::hostname()))
}
