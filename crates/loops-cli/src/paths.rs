//! Where the data lives (SPEC §7.1, §10 item 101): `$LOOPS_DATA_DIR`, else
//! `$HOME/.hasna/loops`. The store creates the directory with mode 0700,
//! and refuses one that another user owns or can write, or a database file
//! that is a symbolic link (`loops_store::check_data_dir`, issue 12 §3).

use std::path::PathBuf;

use anyhow::{Context as _, Result, bail};
use loops_store::DatabaseUrl;

/// The variable that selects PostgreSQL.
pub(crate) const DATABASE_URL_VAR: &str = "LOOPS_DATABASE_URL";

/// The PostgreSQL database selected by `flag` (`--database-url`) or
/// `$LOOPS_DATABASE_URL` (an empty variable counts as unset), with the
/// string it was parsed from, or `None` for SQLite in the data directory.
pub(crate) fn database_url_with_text(flag: Option<&str>) -> Result<Option<(String, DatabaseUrl)>> {
    let raw = match flag {
        Some(url) => (url.to_owned(), "--database-url"),
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
