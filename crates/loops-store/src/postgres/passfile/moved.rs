//! Moving a connection string's password into a password file, for a
//! service file that must hold no secret (issue 32: `daemon install`).

use std::path::Path;
use std::str::FromStr;

use postgres::Config;

use super::super::connect::take_keys;
use super::{take_param, targets};
use crate::error::OpenError;

/// A connection string whose password was moved into a password file.
#[derive(Clone, PartialEq, Eq)]
pub struct MovedPassword {
    /// The string without its password, with `passfile=` naming the file.
    pub url: String,
    /// The file's text: one line per host of the string, with its port,
    /// database and user, and the password.
    pub lines: String,
}

impl MovedPassword {
    /// Writes [`lines`](Self::lines) to `path`, mode 0600, through one
    /// descriptor: a symbolic link, a FIFO or anything else that is not a
    /// regular file already at `path` is refused, not followed or opened,
    /// and is left as it was.
    pub fn write_to(&self, path: &Path) -> std::io::Result<()> {
        use std::io::{Error, ErrorKind, Write};
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .mode(0o600)
            // A FIFO without a reader fails to open instead of blocking.
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)?;
        if !file.metadata()?.is_file() {
            return Err(Error::new(ErrorKind::InvalidInput, "not a regular file"));
        }
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        file.set_len(0)?;
        file.write_all(self.lines.as_bytes())?;
        file.sync_all()
    }
}

impl std::fmt::Debug for MovedPassword {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MovedPassword")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// `url` without its password and naming `passfile` instead, with the
/// lines to write there; `None` when `url` holds no password. A
/// `passfile=` already in `url` is replaced.
pub fn move_password(url: &str, passfile: &Path) -> Result<Option<MovedPassword>, OpenError> {
    let (known, _) = take_param(url);
    let config = Config::from_str(&known).map_err(|e| OpenError::BadDatabaseUrl {
        reason: e.to_string(),
    })?;
    let Some(password) = config.get_password() else {
        return Ok(None);
    };
    let password = escape(&String::from_utf8_lossy(password));
    let lines: String = targets(&config)
        .iter()
        .map(|t| {
            format!(
                "{}:{}:{}:{}:{password}\n",
                escape(&t.host),
                t.port,
                escape(&t.dbname),
                escape(&t.user)
            )
        })
        .collect();
    let path = passfile.display().to_string();
    let url = if known.starts_with("postgres://") || known.starts_with("postgresql://") {
        let bare = without_user_info_password(&known);
        let bare = take_keys(&bare, &["password"]).0.into_owned();
        let sep = if bare.contains('?') { '&' } else { '?' };
        format!("{bare}{sep}passfile={}", percent_encode(&path))
    } else {
        let bare = take_keys(&known, &["password"]).0.into_owned();
        let quoted = path.replace('\\', "\\\\").replace('\'', "\\'");
        format!("{} passfile='{quoted}'", bare.trim_end())
    };
    Ok(Some(MovedPassword { url, lines }))
}

/// A URL without the `:password` of its user info. The client reads the
/// user info up to the first `@`, libpq up to the last of the authority:
/// removed up to the later, as [`super::super::mask_database_url`] masks.
fn without_user_info_password(url: &str) -> String {
    let start = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[start..];
    let Some(first_at) = rest.find('@') else {
        return url.to_owned();
    };
    let authority_end = rest[first_at..]
        .find(['/', '?'])
        .map_or(rest.len(), |i| first_at + i);
    let last_at = rest[..authority_end].rfind('@').unwrap_or(first_at);
    match rest[..first_at].find(':') {
        Some(colon) => format!("{}{}", &url[..start + colon], &url[start + last_at..]),
        None => url.to_owned(),
    }
}

/// `:` and `\` escaped for a password file field.
fn escape(field: &str) -> String {
    field.replace('\\', "\\\\").replace(':', "\\:")
}

/// Everything but unreserved characters and `/` percent-encoded.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::postgres::passfile::lookup;

    #[test]
    fn the_password_leaves_the_url_for_the_file_in_every_form() {
        let file = Path::new("/data/my dir/pgpass");
        for (url, bare, line) in [
            (
                "postgresql://app:s%3Acret@db:6543/loops",
                "postgresql://app@db:6543/loops?passfile=/data/my%20dir/pgpass",
                "db:6543:loops:app:s\\:cret\n",
            ),
            (
                "postgres://app:pw@db/loops?sslmode=disable&password=q",
                "postgres://app@db/loops?sslmode=disable&passfile=/data/my%20dir/pgpass",
                "db:5432:loops:app:q\n",
            ),
            (
                "host=/run/pg user=u password='a b\\\\c' dbname=d",
                "host=/run/pg user=u  dbname=d passfile='/data/my dir/pgpass'",
                "/run/pg:5432:d:u:a b\\\\c\n",
            ),
            (
                "postgresql://u:x@h1:1,h2:2/d?passfile=/old",
                "postgresql://u@h1:1,h2:2/d?passfile=/data/my%20dir/pgpass",
                "h1:1:d:u:x\nh2:2:d:u:x\n",
            ),
        ] {
            let moved = move_password(url, file).unwrap().unwrap();
            assert_eq!(moved.url, bare, "{url}");
            assert_eq!(moved.lines, line, "{url}");
        }
        assert!(move_password("postgresql://u@h/d", file).unwrap().is_none());
    }

    #[test]
    fn the_file_is_written_private_and_nothing_else_is_followed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let moved = move_password("postgresql://u:pw@h/d", &dir.path().join("pgpass"))
            .unwrap()
            .unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;

        // A file open to others, longer than the lines: made 0600, replaced.
        let path = dir.path().join("pgpass");
        std::fs::write(&path, "x".repeat(200)).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        moved.write_to(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), moved.lines);
        assert_eq!(mode(&path), 0o600);

        // A link is not followed: its target keeps its text and its mode.
        let target = dir.path().join("target");
        std::fs::write(&target, "theirs").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(moved.write_to(&link).is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "theirs");
        assert_eq!(mode(&target), 0o644);

        // Nor is a FIFO opened and written (nor waited on).
        let fifo = dir.path().join("fifo");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        assert!(moved.write_to(&fifo).is_err());
        // Even with a reader at its other end, which lets the open succeed.
        let reader = {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&fifo)
                .unwrap()
        };
        let err = moved.write_to(&fifo).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
        drop(reader);
        // A directory is not a file either.
        assert!(moved.write_to(dir.path()).is_err());
    }

    #[test]
    fn the_lines_written_are_found_again() {
        let moved = move_password("postgresql://a%3Ab:p%5Cw%3A@h/d", Path::new("/f"))
            .unwrap()
            .unwrap();
        assert_eq!(
            lookup(&moved.lines, "h", 5432, "d", "a:b").as_deref(),
            Some("p\\w:")
        );
    }
}
