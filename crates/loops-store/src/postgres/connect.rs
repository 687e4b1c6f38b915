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

use std::borrow::Cow;
use std::cell::Cell;
use std::ops::Range;
use std::str::FromStr;
use std::time::{Duration, Instant};

use postgres::config::TargetSessionAttrs;
use postgres::{Client, Config, NoTls};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::tls::{SslMode, TlsSettings};
use crate::error::{OpenError, Result};

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
    /// Its `sslmode` and `sslrootcert`, which the driver does not take.
    tls: TlsSettings,
    shown: String,
    /// The password in each spelling the string holds (see
    /// [`DatabaseUrl::password_spellings`]).
    spellings: Vec<String>,
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
    pub fn parse(url: &str) -> Result<DatabaseUrl, OpenError> {
        let (known, passfile) = super::passfile::take_param(url);
        let (rest, tls) = TlsSettings::split(&known)?;
        let mut config = Config::from_str(&rest).map_err(|e| OpenError::BadDatabaseUrl {
            reason: e.to_string(),
        })?;
        config.ssl_mode(tls.mode.driver());
        super::passfile::fill_password(&mut config, passfile)?;
        let mut spellings: Vec<String> = Vec::new();
        let mut add = |value: &str| {
            if !value.is_empty() && !spellings.iter().any(|s| s == value) {
                spellings.push(value.to_owned());
            }
        };
        if let Some(password) = config.get_password() {
            add(&String::from_utf8_lossy(password));
        }
        for span in password_spans(url) {
            let raw = &url[span];
            add(raw);
            if let Some(inner) = raw.strip_prefix('\'') {
                add(inner.strip_suffix('\'').unwrap_or(inner));
            }
        }
        Ok(DatabaseUrl {
            config,
            tls,
            shown: mask_database_url(url),
            spellings,
        })
    }

    /// The password, and the other passwords of the string (`sslpassword`),
    /// in each spelling it holds: as the server gets it, and as it is
    /// written (percent-encoded, quoted, escaped). What a run writes is
    /// masked of them (issue 25 §2). Empty without a password.
    pub fn password_spellings(&self) -> &[String] {
        &self.spellings
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
/// URL, a `password=` parameter of its query, and the whole value of a
/// `password` key in a `key=value` string, quoted (`'a b'`) or with
/// escaped spaces (`a\ b`) (issue 25 §2). Any key ending in `password`
/// (`sslpassword` too) is masked: masking one that is not a secret costs
/// nothing.
pub fn mask_database_url(url: &str) -> String {
    let mut out = String::with_capacity(url.len());
    let mut copied = 0;
    for span in password_spans(url) {
        out.push_str(&url[copied..span.start]);
        out.push_str("***");
        copied = span.end;
    }
    out.push_str(&url[copied..]);
    out
}

/// Where the passwords of `url` are written, in order, without overlaps.
fn password_spans(url: &str) -> Vec<Range<usize>> {
    match url_authority(url) {
        Some(start) => url_password_spans(url, start),
        None => conninfo_pairs(url)
            .into_iter()
            .filter(|(key, value)| url[key.clone()].ends_with("password") && !value.is_empty())
            .map(|(_, value)| value)
            .collect(),
    }
}

/// Where the authority of a `postgres://` or `postgresql://` URL starts;
/// `None` for a `key=value` string.
fn url_authority(url: &str) -> Option<usize> {
    ["postgres://", "postgresql://"]
        .iter()
        .find_map(|p| url.strip_prefix(p).map(|_| p.len()))
}

/// The first and the last `@` of the user info of a URL whose authority
/// starts at `start`. The client reads the user info up to the first `@`
/// anywhere, libpq up to the last one of the authority.
fn user_info_ats(url: &str, start: usize) -> Option<(usize, usize)> {
    let rest = &url[start..];
    let first_at = rest.find('@')?;
    let authority_end = rest[first_at..]
        .find(['/', '?'])
        .map_or(rest.len(), |i| first_at + i);
    let last_at = rest[..authority_end].rfind('@').unwrap_or(first_at);
    Some((start + first_at, start + last_at))
}

/// Where the query of a `postgres://` URL starts (its `?`), past any user
/// info; `None` without one, or for a `key=value` string.
pub(super) fn url_query(url: &str) -> Option<usize> {
    let start = url_authority(url)?;
    let from = user_info_ats(url, start).map_or(start, |(_, last_at)| last_at);
    url[from..].find('?').map(|q| from + q)
}

/// The passwords of a URL whose authority starts at `start`: the user
/// info's, and the `…password=` parameters of its query.
fn url_password_spans(url: &str, start: usize) -> Vec<Range<usize>> {
    let mut spans = Vec::new();
    // Masked up to the later `@` (see `user_info_ats`), so a password
    // holding `/` or `@` is masked whole either way.
    if let Some((first_at, last_at)) = user_info_ats(url, start)
        && let Some(colon) = url[start..first_at].find(':')
    {
        spans.push(start + colon + 1..last_at);
    }
    if let Some(q) = url_query(url) {
        let mut at = q + 1;
        for param in url[at..].split('&') {
            if let Some((key, value)) = param.split_once('=')
                && key.trim().ends_with("password")
            {
                let value_start = at + key.len() + 1;
                spans.push(value_start..value_start + value.len());
            }
            at += param.len() + 1;
        }
    }
    spans
}

/// The keys and values of a libpq `key=value` string, where they are
/// written, read as libpq reads them: blanks around `=`, a value either
/// single-quoted (the quotes are part of its span) or up to the next
/// blank, a backslash escaping the character after it in both. A value
/// that never ends runs to the end of the string.
pub(super) fn conninfo_pairs(conninfo: &str) -> Vec<(Range<usize>, Range<usize>)> {
    let b = conninfo.as_bytes();
    let skip_blanks = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    };
    let mut pairs = Vec::new();
    let mut i = skip_blanks(0);
    while i < b.len() {
        let key_start = i;
        while i < b.len() && b[i] != b'=' && !b[i].is_ascii_whitespace() {
            i += 1;
        }
        let key = key_start..i;
        i = skip_blanks(i);
        if i >= b.len() || b[i] != b'=' {
            // Not `key=value`: go on with what follows as the next key.
            continue;
        }
        i = skip_blanks(i + 1);
        let value_start = i;
        let quoted = b.get(i) == Some(&b'\'');
        if quoted {
            i += 1;
        }
        while i < b.len() {
            match b[i] {
                b'\\' => i += 2,
                b'\'' if quoted => {
                    i += 1;
                    break;
                }
                c if !quoted && c.is_ascii_whitespace() => break,
                _ => i += 1,
            }
        }
        i = i.min(b.len());
        pairs.push((key, value_start..i));
        i = skip_blanks(i);
    }
    pairs
}

/// Takes `keys` out of `url` (a URL's query parameters or `key=value`
/// pairs), keys the client library does not know or must not see: the
/// rest of the string and the values taken, decoded (percent-decoded in a
/// URL, unquoted and unescaped in a `key=value` string), in order.
pub(super) fn take_keys<'a>(
    url: &'a str,
    keys: &[&'static str],
) -> (Cow<'a, str>, Vec<(&'static str, String)>) {
    let key_of = |k: &str| keys.iter().copied().find(|key| *key == k.trim());
    let mut taken = Vec::new();
    let is_url = url.starts_with("postgres://") || url.starts_with("postgresql://");
    if is_url {
        let Some(q) = url_query(url) else {
            return (Cow::Borrowed(url), taken);
        };
        let mut kept = Vec::new();
        for param in url[q + 1..].split('&') {
            match param
                .split_once('=')
                .and_then(|(k, v)| Some((key_of(k)?, v)))
            {
                Some((key, value)) => taken.push((key, percent_decode(value))),
                None => kept.push(param),
            }
        }
        if taken.is_empty() {
            return (Cow::Borrowed(url), taken);
        }
        let mut rest = url[..q].to_owned();
        if !kept.is_empty() {
            rest.push('?');
            rest.push_str(&kept.join("&"));
        }
        return (Cow::Owned(rest), taken);
    }
    let mut rest = String::with_capacity(url.len());
    let mut copied = 0;
    for (key, value) in conninfo_pairs(url) {
        if let Some(k) = key_of(&url[key.clone()]) {
            rest.push_str(&url[copied..key.start]);
            taken.push((k, unquote(&url[value.clone()])));
            copied = value.end;
        }
    }
    if taken.is_empty() {
        return (Cow::Borrowed(url), taken);
    }
    rest.push_str(&url[copied..]);
    (Cow::Owned(rest), taken)
}

/// A URL query value with its `%XX` escapes decoded.
fn percent_decode(value: &str) -> String {
    let b = value.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A `key=value` value without its quotes and backslash escapes.
fn unquote(value: &str) -> String {
    let inner = value
        .strip_prefix('\'')
        .map_or(value, |v| v.strip_suffix('\'').unwrap_or(v));
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            c => out.push(c),
        }
    }
    out
}

/// Opens connections for one backend, with the session settings and the
/// backoff between failed attempts.
pub(super) struct Connector {
    config: Config,
    tls: TlsSettings,
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
    pub(super) fn new(url: &DatabaseUrl, role: &str) -> Result<Connector, OpenError> {
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
            tls: url.tls.clone(),
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
    /// names only Unix sockets, which TLS does not cover, else with TLS as
    /// its `sslmode` and `sslrootcert` ask (see `tls.rs`): when the server
    /// offers it (`prefer`, the default) or always (`require` and
    /// stricter), checking the server's certificate as libpq does.
    pub(super) fn connect(&self) -> Result<Client, OpenError> {
        // TLS does not apply to a Unix socket (libpq does not use it there
        // either), and checking a certificate reads the trusted roots,
        // which costs a short command milliseconds.
        let only_sockets = self
            .config
            .get_hosts()
            .iter()
            .all(|h| matches!(h, postgres::config::Host::Unix(_)));
        if self.tls.mode == SslMode::Disable || (only_sockets && !self.listener) {
            return self
                .config
                .connect(NoTls)
                .map_err(OpenError::db("connecting to PostgreSQL"));
        }
        let tls = MakeRustlsConnect::new(self.tls.client_config()?);
        self.config
            .connect(tls)
            .map_err(|e| self.tls.connect_error(e))
    }

    /// Connects again after a lost connection, no sooner than the backoff
    /// allows: a failed attempt doubles the wait (up to 5 s), a successful
    /// one resets it.
    pub(super) fn reconnect(&self) -> Result<Client, OpenError> {
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
            // Issue 25 §2: a value is masked whole, however it is written.
            (
                "host=/tmp password=first\\ SECRET-TAIL dbname=x",
                "host=/tmp password=*** dbname=x",
            ),
            (
                "host=/tmp password='first SECRET-TAIL' dbname=x",
                "host=/tmp password=*** dbname=x",
            ),
            (
                "host=/tmp password = 'first SECRET-TAIL'",
                "host=/tmp password = ***",
            ),
            ("password=a&b\\\\\\ c\tdbname=x", "password=***\tdbname=x"),
            ("password='unterminated SECRET-TAIL", "password=***"),
            (
                "dbname='not password=x' user=u",
                "dbname='not password=x' user=u",
            ),
            ("host password=x", "host password=***"),
            (
                "postgres://u:pa/ss@h/db?password=q",
                "postgres://u:***@h/db?password=***",
            ),
            ("postgres://u:p@ss@h/db", "postgres://u:***@h/db"),
        ] {
            assert_eq!(mask_database_url(url), shown, "{url}");
        }
    }

    #[test]
    fn every_spelling_of_the_password_is_known() {
        let spellings = |url: &str| {
            DatabaseUrl::parse(url)
                .unwrap()
                .password_spellings()
                .to_vec()
        };
        assert_eq!(
            spellings("postgresql://u:p%40ss-word@h/db"),
            ["p@ss-word", "p%40ss-word"]
        );
        assert_eq!(
            spellings("host=h password='first \\'SECRET-TAIL'"),
            [
                "first 'SECRET-TAIL",
                "'first \\'SECRET-TAIL'",
                "first \\'SECRET-TAIL"
            ]
        );
        assert_eq!(
            spellings("host=h password=first\\ SECRET-TAIL"),
            ["first SECRET-TAIL", "first\\ SECRET-TAIL"]
        );
        assert!(spellings("host=h user=u").is_empty());
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
