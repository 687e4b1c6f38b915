//! Passwords from a password file, libpq's `~/.pgpass` format (issue 32),
//! so that no password needs to sit in a URL, a service file or a process
//! environment.
//!
//! When the connection string holds no password, the password comes from
//! the file named by `passfile=` in the string, else by `$PGPASSFILE`,
//! else `~/.pgpass`. A file that does not exist gives no password, as in
//! libpq. Each line is `hostname:port:database:username:password`; `*`
//! matches anything in the first four fields, `\:` and `\\` stand for `:`
//! and `\`, a line starting with `#` is a comment, and the first matching
//! line wins. A socket directory matches its path, and the default ones
//! (`/tmp`, `/run/postgresql`, `/var/run/postgresql`) `localhost` as well.
//!
//! As libpq requires, the file must be a regular file owned by the user
//! loops runs as, with no permissions for group or others; unlike libpq,
//! which warns and ignores such a file, loops refuses it with an error
//! saying how to fix it. At most 64 KiB of it is read.

use std::borrow::Cow;
use std::fs::{Metadata, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use postgres::Config;
use postgres::config::Host;

use crate::error::OpenError;
use crate::secure;

mod moved;
pub use self::moved::{MovedPassword, move_password};

/// The longest password file read.
const MAX_LEN: u64 = 64 * 1024;
/// The connection parameter naming the file.
const PARAM: &str = "passfile";
/// What refusals call the file.
const WHAT: &str = "password file";
/// Socket directories libpq treats as `localhost`.
const DEFAULT_SOCKET_DIRS: [&str; 3] = ["/tmp", "/run/postgresql", "/var/run/postgresql"];

/// `url` without its `passfile` parameter (which the client library does
/// not know), and that parameter's value; the last one wins, as in libpq.
pub(super) fn take_param(url: &str) -> (Cow<'_, str>, Option<PathBuf>) {
    let (rest, taken) = super::connect::take_keys(url, &[PARAM]);
    let path = taken
        .into_iter()
        .next_back()
        .map(|(_, value)| PathBuf::from(value));
    (rest, path)
}

/// Gives `config` the password of the password file when it has none:
/// the file `param` names, else `$PGPASSFILE`, else `~/.pgpass`.
pub(super) fn fill_password(config: &mut Config, param: Option<PathBuf>) -> Result<(), OpenError> {
    if config.get_password().is_some() {
        return Ok(());
    }
    let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    // A file named is refused when unsafe; `~/.pgpass`, which nobody
    // named, is then passed over, as libpq passes it over, so a URL that
    // needs no password still connects.
    let (path, named) = match (param, env("PGPASSFILE"), env("HOME")) {
        (Some(path), _, _) => (path, true),
        (None, Some(path), _) => (PathBuf::from(path), true),
        (None, None, Some(home)) => (Path::new(&home).join(".pgpass"), false),
        (None, None, None) => return Ok(()),
    };
    let text = match read(&path) {
        Ok(text) => text,
        Err(_) if !named => None,
        Err(e) => return Err(e),
    };
    if let Some(text) = text
        && let Some(password) = password_for(config, &text)
    {
        config.password(password);
    }
    Ok(())
}

/// The password of the first line matching one of `config`'s hosts.
fn password_for(config: &Config, text: &str) -> Option<String> {
    targets(config)
        .iter()
        .find_map(|t| lookup(text, &t.host, t.port, &t.dbname, &t.user))
}

/// What a password file line is matched against, for one host.
pub(super) struct Target {
    pub(super) host: String,
    pub(super) port: u16,
    pub(super) dbname: String,
    pub(super) user: String,
}

/// One [`Target`] per host of `config` (`localhost` when it names none),
/// with libpq's defaults: port 5432, the user the OS user, the database
/// the user.
///
/// The OS user is the effective user's name in the password database, as
/// the connection takes it (tokio-postgres calls the same
/// `whoami::username`), and as libpq does: not `$USER`, which a `su` or a
/// service manager may leave naming someone else.
pub(super) fn targets(config: &Config) -> Vec<Target> {
    let os_user = whoami::username().unwrap_or_default();
    let user = config.get_user().unwrap_or(&os_user);
    let dbname = config.get_dbname().unwrap_or(user);
    let ports = config.get_ports();
    let port = |i: usize| ports.get(i).or(ports.first()).copied().unwrap_or(5432);
    let hosts: Vec<String> = match config.get_hosts() {
        [] => vec!["localhost".to_owned()],
        hosts => hosts
            .iter()
            .map(|h| match h {
                Host::Tcp(name) => name.clone(),
                Host::Unix(dir) => dir.display().to_string(),
            })
            .collect(),
    };
    hosts
        .into_iter()
        .enumerate()
        .map(|(i, host)| Target {
            host,
            port: port(i),
            dbname: dbname.to_owned(),
            user: user.to_owned(),
        })
        .collect()
}

/// The password of the first line of `text` matching, libpq's rules.
pub(super) fn lookup(
    text: &str,
    host: &str,
    port: u16,
    dbname: &str,
    user: &str,
) -> Option<String> {
    let port = port.to_string();
    let local = DEFAULT_SOCKET_DIRS.contains(&host);
    text.lines()
        .map(|line| line.strip_suffix('\r').unwrap_or(line))
        .filter(|line| !line.starts_with('#'))
        .filter_map(fields)
        .find(|f| {
            let is = |field: &str, value: &str| field == "*" || field == value;
            (is(&f[0], host) || (local && f[0] == "localhost"))
                && is(&f[1], &port)
                && is(&f[2], dbname)
                && is(&f[3], user)
        })
        .map(|mut f| f.swap_remove(4))
}

/// The five fields of a line, unescaped; `None` for a line with fewer.
/// Colons after the fourth belong to the password, as in libpq.
fn fields(line: &str) -> Option<Vec<String>> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => fields.last_mut()?.push(chars.next().unwrap_or('\\')),
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => fields.last_mut()?.push(c),
        }
    }
    (fields.len() == 5).then_some(fields)
}

/// The text of the password file at `path`, `None` when there is none;
/// refused unless a regular file of this user with no group or other
/// permissions, or larger than [`MAX_LEN`].
pub(super) fn read(path: &Path) -> Result<Option<String>, OpenError> {
    let io = |error| OpenError::Io {
        path: path.to_owned(),
        error,
    };
    // O_NONBLOCK: a FIFO at the path fails the check instead of blocking.
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    check(path, &file.metadata().map_err(io)?)?;
    let mut bytes = Vec::new();
    file.take(MAX_LEN + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > MAX_LEN {
        return Err(secure::refuse(
            WHAT,
            path,
            format!("it is larger than {} KiB", MAX_LEN / 1024),
            "keep only the lines loops needs in it".to_owned(),
        ));
    }
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

/// libpq's rule: a regular file, this user's, no group or other bits.
fn check(path: &Path, meta: &Metadata) -> Result<(), OpenError> {
    let shown = path.display();
    let refuse = |problem: String, fix: String| Err(secure::refuse(WHAT, path, problem, fix));
    if !meta.is_file() {
        return refuse(
            "it is not a regular file".to_owned(),
            "point passfile= or PGPASSFILE at a regular file".to_owned(),
        );
    }
    if meta.uid() != secure::euid() {
        return refuse(
            format!("it is owned by uid {}, not by this user", meta.uid()),
            "use a password file you own".to_owned(),
        );
    }
    if meta.mode() & 0o077 != 0 {
        return refuse(
            format!(
                "its mode is {:o}, open to group or others",
                meta.mode() & 0o777
            ),
            format!("run: chmod 600 {shown}"),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests;
