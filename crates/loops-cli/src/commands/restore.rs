//! `loops restore <backup> [--yes]` (issue 28): a backup put back in place
//! of the SQLite database, the current one kept as a backup first.
//!
//! New in loops; the original has no backups. The work is `loops_store`'s
//! (`restore_backup`: the ownership check, the bounded copy, the integrity
//! check, keeping the current database, the stale WAL and shared-memory
//! file, the atomic rename). This module refuses while a daemon runs and
//! on PostgreSQL, finds the backup a name stands for, asks for
//! confirmation, and prints.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use loops_store::{DB_FILE, Kept, Restored, backup_dir, list_backups, restore_backup};
use serde::Serialize;

use super::now;
use crate::args::RestoreArgs;
use crate::context::Context;
use crate::exit::Outcome;
use crate::render::Printer;
use crate::request::{self, Document, Request, Warnings};

/// `restore`.
pub(crate) fn run(ctx: &Context, args: &RestoreArgs, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |_| {
        if ctx.database_url()?.is_some() {
            bail!(
                "loops restore is for the embedded SQLite database; on PostgreSQL restore a \
                 pg_dump with pg_restore"
            );
        }
        let dir = ctx.data_dir()?;
        super::refuse_while_daemon_runs(ctx, "restoring a backup over the database")?;
        let from = find_backup(&dir, &args.backup)?;
        let db = dir.join(DB_FILE);
        if !args.yes {
            confirm(&from, &db)?;
        }
        Ok(Restore { db, from })
    })
}

/// The backup `given` stands for: a path when it holds a `/`; otherwise a
/// backup of `backups/` by name (with or without `.db`), or else a file
/// in the current directory.
fn find_backup(data_dir: &Path, given: &str) -> Result<PathBuf> {
    if given.is_empty() {
        bail!("name a backup: see `loops backup --list`");
    }
    if !given.contains('/') {
        let dir = backup_dir(data_dir);
        let backups = list_backups(&dir)
            .with_context(|| format!("listing the backups in {}", dir.display()))?;
        let named = |b: &&loops_store::Backup| {
            b.path.file_name().is_some_and(|n| {
                n == given || n.to_str().and_then(|n| n.strip_suffix(".db")) == Some(given)
            })
        };
        if let Some(backup) = backups.iter().find(named) {
            return Ok(backup.path.clone());
        }
        if std::fs::symlink_metadata(given).is_err() {
            bail!(
                "there is no backup named {given:?} in {} and no file {given:?} here; \
                 run `loops backup --list` to see the backups",
                dir.display()
            );
        }
    }
    let path = PathBuf::from(given);
    if path.is_absolute() {
        return Ok(path);
    }
    Ok(std::env::current_dir()
        .context("reading the current directory")?
        .join(path))
}

/// Asks on the terminal whether to restore `from` over `db`; without a
/// terminal on stdin, refuses: `--yes` is how a script says so.
fn confirm(from: &Path, db: &Path) -> Result<()> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        bail!(
            "restore replaces the database and stdin is not a terminal to confirm it; pass --yes"
        );
    }
    let mut stderr = std::io::stderr().lock();
    write!(
        stderr,
        "Replace {} with {}? The current database is kept as a backup first. [y/N] ",
        db.display(),
        from.display()
    )?;
    stderr.flush()?;
    let mut answer = String::new();
    stdin.lock().read_line(&mut answer)?;
    if !is_yes(&answer) {
        bail!("nothing was restored (the answer was not yes)");
    }
    Ok(())
}

/// Whether a typed answer is yes: `y` or `yes`, in any case.
fn is_yes(answer: &str) -> bool {
    matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

/// The typed request of `restore`: the backup `from` in place of `db`.
struct Restore {
    db: PathBuf,
    from: PathBuf,
}

/// What `restore` returns: what it did, and whether it kept the database
/// in place (`LOOPS_SKIP_BACKUP` unset).
struct Done {
    restored: Restored,
    keeping: bool,
}

impl Request for Restore {
    type Document = Done;

    fn run(self, _: &Context, _: &mut Warnings) -> Result<Done> {
        // `LOOPS_SKIP_BACKUP` skips keeping the database in place, as it
        // skips the other automatic backups.
        let keep = crate::auto_backup::automatic_at(now()).map(|auto| auto.now);
        let restored = restore_backup(&self.db, &self.from, keep)?;
        Ok(Done {
            restored,
            keeping: keep.is_some(),
        })
    }
}

/// What `restore --json` prints.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RestoredJson {
    /// The database file, now a copy of the backup.
    restored: String,
    /// The backup.
    from: String,
    /// The file the database in place was kept as; `null` when there was
    /// none, or `LOOPS_SKIP_BACKUP` is set.
    kept_current_as: Option<String>,
}

impl Document for Done {
    fn json(&self, out: &mut Printer) -> Result<()> {
        let r = &self.restored;
        Ok(out.json_of(&RestoredJson {
            restored: r.db.display().to_string(),
            from: r.from.display().to_string(),
            kept_current_as: r.kept.as_ref().map(|k| k.path().display().to_string()),
        })?)
    }

    fn human(&self, ctx: &Context, out: &mut Printer) -> Result<()> {
        let r = &self.restored;
        out.line(&format!(
            "restored {} from {}",
            r.db.display(),
            r.from.display()
        ))?;
        match &r.kept {
            Some(Kept::Backup(backup)) => out.line(&format!(
                "kept the database it replaced as {}",
                backup.path.display()
            ))?,
            Some(Kept::Damaged { path, reason }) => {
                out.line(&format!(
                    "kept the database it replaced, which could not be copied, as {} (its WAL beside it)",
                    path.display()
                ))?;
                ctx.note("note", &format!("copying it failed: {reason}"));
            }
            // Not a kind this version knows: the file is all it can say.
            Some(other) => out.line(&format!(
                "kept the database it replaced as {}",
                other.path().display()
            ))?,
            None if self.keeping => out.line("there was no database in place to keep")?,
            None => out.line("did not keep the database it replaced (LOOPS_SKIP_BACKUP is set)")?,
        }
        if !r.removed.is_empty() {
            let names: Vec<String> = r.removed.iter().map(|p| p.display().to_string()).collect();
            out.line(&format!(
                "removed the old database's {}",
                names.join(" and ")
            ))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_y_or_yes_confirms() {
        for yes in ["y\n", "Y\n", "yes\n", " YES \n"] {
            assert!(is_yes(yes), "{yes:?}");
        }
        for no in ["", "\n", "n\n", "no\n", "yep\n", "y es\n"] {
            assert!(!is_yes(no), "{no:?}");
        }
    }

    #[test]
    fn a_name_is_a_backup_of_the_data_directory_and_a_slash_makes_a_path() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let backups = backup_dir(dir.path());
        std::fs::create_dir(&backups).unwrap();
        std::fs::set_permissions(&backups, std::fs::Permissions::from_mode(0o700)).unwrap();
        let name = "loops-20261201T170512Z.db";
        std::fs::write(backups.join(name), "").unwrap();
        for given in [name, "loops-20261201T170512Z"] {
            assert_eq!(find_backup(dir.path(), given).unwrap(), backups.join(name));
        }
        let missing = find_backup(dir.path(), "loops-20261201T170513Z.db").unwrap_err();
        assert!(
            missing.to_string().contains("loops backup --list"),
            "{missing}"
        );
        assert_eq!(
            find_backup(dir.path(), "/elsewhere/copy.db").unwrap(),
            PathBuf::from("/elsewhere/copy.db")
        );
        assert!(find_backup(dir.path(), "").is_err());
    }
}
