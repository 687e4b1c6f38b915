//! Connection strings and (re)connecting.
//!
//! A database URL is what libpq accepts: `postgres://` or `postgresql://`
//! URLs (a Unix socket as `?host=/path` or a percent-encoded host) and
//! `key=value` strings (`host=/run/postgresql dbname=loops`). Every session
//! gets `application_name=loops:<role>`, `target_session_attrs=read-write`
//! and per-session `statement_timeout`, `lock_timeout` and
//! `idle_in_transaction_session_timeout`, so a stuck statement or a
//! forgotten transaction ends instead of holding locks. A lost connection
//! is opened again on the next operation, waiting 100 ms doubling to 5 s
//! between failed attempts.

use std::cell::Cell;
use std::str::FromStr;
use std::time::{Duration, Instant};

use openssl::ssl::{SslConnector, SslMethod};
use postgres::config::{SslMode, TargetSessionAttrs};
use postgres::{Client, Config, NoTls};
use postgres_openssl::MakeTlsConnector;

use crate::error::{Result, StoreError};

/// A statement running longer than this is cancelled by the server.
const STATEMENT_TIMEOUT_MS: u64 = 30_000;
/// Waiting longer than this for a row lock fails the statement.
const LOCK_TIMEOUT_MS: u64 = 10_000;
/// A session idle inside a transaction longer than this is ended by the
/// server, releasing its locks.
const IDLE_IN_TRANSACTION_TIMEOUT_MS: u64 = 60_000;
/// How long connecting may take, when the URL does not say.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The first and the longest wait between failed reconnects.
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// A PostgreSQL connection string, parsed, with a masked form to show.
#[derive(Clone)]
pub struct DatabaseUrl {
    config: Config,
    shown: String,
}

impl std::fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("DatabaseUrl").field(&self.shown).finish()
    }
}

impl DatabaseUrl {
    /// Parses a libpq connection string: a `postgres://` or
    /// `postgresql://` URL, or `key=value` pairs. The error names what was
    /// wrong without repeating the string (it may hold a password).
    pub fn parse(url: &str) -> Result<DatabaseUrl> {
        let config = Config::from_str(url).map_err(|e| StoreError::BadDatabaseUrl {
            reason: e.to_string(),
        })?;
        Ok(DatabaseUrl {
            config,
            shown: mask_database_url(url),
        })
    }

    /// True when `s` looks like a PostgreSQL connection string rather than
    /// a path.
    pub fn looks_like_one(s: &str) -> bool {
        s.starts_with("postgres://") || s.starts_with("postgresql://") || s.contains('=')
    }

    /// The string with its password masked, for messages and status.
    pub fn shown(&self) -> &str {
        &self.shown
    }
}

/// `url` with any password replaced by `***`: the user-info password of a
/// URL, and `password=` in a `key=value` string or a URL's query.
pub fn mask_database_url(url: &str) -> String {
    let mut out = url.to_owned();
    // postgres://user:secret@host/db
    if let Some(scheme_end) = out.find("://") {
        let rest_start = scheme_end + 3;
        let authority_end = out[rest_start..]
            .find(['/', '?'])
            .map_or(out.len(), |i| rest_start + i);
        if let Some(at) = out[rest_start..authority_end].rfind('@') {
            let userinfo = &out[rest_start..rest_start + at];
            if let Some(colon) = userinfo.find(':') {
                out.replace_range(rest_start + colon + 1..rest_start + at, "***");
            }
        }
    }
    // password=secret (key=value, or a URL query parameter); a quoted
    // key=value password may hold spaces.
    let mut masked = String::with_capacity(out.len());
    let mut rest = out.as_str();
    while let Some(i) = rest.find("password=") {
        // Any key ending in `password` (`sslpassword` too): masking one
        // that is not a secret costs nothing.
        let value_start = i + "password=".len();
        masked.push_str(&rest[..value_start]);
        let tail = &rest[value_start..];
        let value_len = if let Some(quoted) = tail.strip_prefix('\'') {
            let mut end = 0;
            let b = quoted.as_bytes();
            while end < b.len() && b[end] != b'\'' {
                end += if b[end] == b'\\' { 2 } else { 1 };
            }
            (end + 2).min(tail.len())
        } else {
            tail.find([' ', '&', '\t']).unwrap_or(tail.len())
        };
        masked.push_str("***");
        rest = &tail[value_len..];
    }
    masked.push_str(rest);
    masked
}

/// Opens connections for one backend, with the session settings and the
/// backoff between failed attempts.
pub(super) struct Connector {
    config: Config,
    shown: String,
    backoff: Cell<Duration>,
    not_before: Cell<Option<Instant>>,
    /// The wake-up listener's connector: it keeps the TLS-capable client
    /// even on a Unix socket (where no TLS is negotiated), because with the
    /// plain one the client delivered no notification on a connection
    /// opened again after a loss (seen in
    /// `a_listener_wakes_on_notify_and_again_after_its_connection_is_killed`;
    /// the cause was not found). One connection per daemon, so its setup
    /// cost does not matter.
    listener: bool,
}

impl Connector {
    pub(super) fn new(url: &DatabaseUrl, role: &str) -> Result<Connector> {
        let mut config = url.config.clone();
        config.application_name(&format!("loops:{role}"));
        config.target_session_attrs(TargetSessionAttrs::ReadWrite);
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        let settings = format!(
            "-c statement_timeout={STATEMENT_TIMEOUT_MS} -c lock_timeout={LOCK_TIMEOUT_MS} \
             -c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_TIMEOUT_MS} -c TimeZone=UTC"
        );
        let options = match config.get_options() {
            Some(theirs) if !theirs.is_empty() => format!("{settings} {theirs}"),
            _ => settings,
        };
        config.options(&options);
        Ok(Connector {
            config,
            shown: url.shown.clone(),
            backoff: Cell::new(BACKOFF_MIN),
            not_before: Cell::new(None),
            listener: false,
        })
    }

    /// This connector, for the wake-up listener (see `listener`).
    pub(super) fn for_listener(mut self) -> Connector {
        self.listener = true;
        self
    }

    pub(super) fn shown(&self) -> &str {
        &self.shown
    }

    /// Connects once: in the clear when the URL says `sslmode=disable` or
    /// names only Unix sockets, which TLS does not cover, else with TLS when the
    /// server offers it (`prefer`, the default) or insists on it
    /// (`require`). The server's certificate is checked against the
    /// system's trusted roots, which is stricter than libpq's `require`.
    pub(super) fn connect(&self) -> Result<Client> {
        let connect = |e| StoreError::db("connecting to PostgreSQL")(e);
        // TLS does not apply to a Unix socket (libpq does not use it there
        // either), and setting it up reads the system's trusted roots,
        // which costs a short command tens of milliseconds.
        let only_sockets = self
            .config
            .get_hosts()
            .iter()
            .all(|h| matches!(h, postgres::config::Host::Unix(_)));
        if self.config.get_ssl_mode() == SslMode::Disable || (only_sockets && !self.listener) {
            return self.config.connect(NoTls).map_err(connect);
        }
        let tls = SslConnector::builder(SslMethod::tls_client())
            .map(|b| MakeTlsConnector::new(b.build()))
            .map_err(|e| StoreError::Tls {
                reason: e.to_string(),
            })?;
        self.config.connect(tls).map_err(connect)
    }

    /// Connects again after a lost connection, no sooner than the backoff
    /// allows: a failed attempt doubles the wait (up to 5 s), a successful
    /// one resets it.
    pub(super) fn reconnect(&self) -> Result<Client> {
        if let Some(at) = self.not_before.get() {
            let now = Instant::now();
            if now < at {
                std::thread::sleep(at - now);
            }
        }
        match self.connect() {
            Ok(client) => {
                self.backoff.set(BACKOFF_MIN);
                self.not_before.set(None);
                Ok(client)
            }
            Err(e) => {
                let wait = self.backoff.get();
                self.not_before.set(Some(Instant::now() + wait));
                self.backoff.set((wait * 2).min(BACKOFF_MAX));
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_masked_in_every_form() {
        for (url, shown) in [
            (
                "postgres://u:secret@h:5432/db",
                "postgres://u:***@h:5432/db",
            ),
            ("postgresql://u@h/db", "postgresql://u@h/db"),
            (
                "postgresql://u:p%40ss@h/db?sslmode=require",
                "postgresql://u:***@h/db?sslmode=require",
            ),
            (
                "postgresql:///db?host=/tmp&password=x&user=u",
                "postgresql:///db?host=/tmp&password=***&user=u",
            ),
            (
                "host=/tmp password=secret dbname=x",
                "host=/tmp password=*** dbname=x",
            ),
            (
                "host=/tmp password='a b\\' c' dbname=x",
                "host=/tmp password=*** dbname=x",
            ),
            ("host=/tmp dbname=x", "host=/tmp dbname=x"),
            (
                "host=h sslpassword=k dbname=x",
                "host=h sslpassword=*** dbname=x",
            ),
        ] {
            assert_eq!(mask_database_url(url), shown, "{url}");
        }
    }

    #[test]
    fn libpq_forms_parse_and_a_bad_one_says_why_without_the_password() {
        for ok in [
            "postgresql:///postgres?host=/tmp/sock&user=postgres",
            "postgres://u:pw@localhost:5432/loops",
            "host=/run/postgresql dbname=loops user=me",
        ] {
            assert!(DatabaseUrl::parse(ok).is_ok(), "{ok}");
        }
        let err = DatabaseUrl::parse("postgres://u:hunter2@h:notaport/db").unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }
}
