//! Rules 8 and 9 of the classifier (agents note §7.1): a Cursor host that
//! answered `resource_exhausted`, or whose name did not resolve.
//!
//! Both fire only on a Cursor host, `cursor.sh` or a name under it, as
//! upstream's `cursorHostFromText` and `providerUnavailableSummary` decide:
//! rule 8 takes the first whitespace-separated token that is such a host,
//! bare (`host[:port]`) or as an `http(s)://` URL whose authority is
//! `host[:port]`; rule 9 reads the host after the first
//! `getaddrinfo EAI_AGAIN|ENOTFOUND` in the text. A URL's host is checked
//! as upstream's pattern checks it before handing the URL to a parser; of
//! that parser's own checks only the port's range is kept, not its IDNA
//! checks of `xn--` labels.

use std::sync::LazyLock;

use regex::Regex;

use super::{JS_SPACE, pattern};

/// `resource_exhausted` or `resource-exhausted`, any case, as a word.
static EXHAUSTED: LazyLock<Regex> =
    LazyLock::new(|| pattern("(?-u:\\b)(?i-u:resource[_-]exhausted)(?-u:\\b)"));

/// A failed DNS lookup as Node reports it, with its code and host.
static DNS: LazyLock<Regex> = LazyLock::new(|| {
    pattern(&format!(
        "(?-u:\\b)(?i-u:getaddrinfo){JS_SPACE}+((?i-u:eai_again|enotfound)){JS_SPACE}+\
         ((?i-u:[a-z0-9.-]+))"
    ))
});

/// Rule 8's summary, `provider capacity exhausted: resource_exhausted
/// <host>`, when the raw text says `resource_exhausted` and names a Cursor
/// host.
pub(super) fn capacity_summary(raw: &str) -> Option<String> {
    if !EXHAUSTED.is_match(raw) {
        return None;
    }
    let host = raw
        .split(is_js_space)
        .filter_map(host_of_token)
        .find(|host| is_cursor_host(host))?;
    Some(format!(
        "provider capacity exhausted: resource_exhausted {host}"
    ))
}

/// Rule 9's summary, `provider DNS lookup failed: <code> <host>`, when the
/// first failed lookup in the raw text is of a Cursor host. The code keeps
/// the text's case; the host is lowercased.
pub(super) fn unavailable_summary(raw: &str) -> Option<String> {
    let found = DNS.captures(raw)?;
    let code = found.get(1)?.as_str();
    let host = found.get(2)?.as_str().to_ascii_lowercase();
    is_cursor_host(&host).then(|| format!("provider DNS lookup failed: {code} {host}"))
}

/// JavaScript's `\s`, which splits the text into tokens.
fn is_js_space(c: char) -> bool {
    (c.is_whitespace() && c != '\u{85}') || c == '\u{feff}'
}

/// The host a token names, lowercased, once the brackets, quotes and
/// punctuation around it are stripped: a bare `host[:port]`, or an
/// `http(s)://` URL whose authority is `host[:port]` with a port a URL
/// allows (at most 65535) and no backslash anywhere.
fn host_of_token(raw: &str) -> Option<String> {
    let token = raw
        .trim_start_matches(['(', '[', '{', '<', '"', '\'', '`'])
        .trim_end_matches([')', ']', '}', '>', ',', '"', '\'', '`', ';']);
    let Some(rest) = url_rest(token) else {
        return host_and_port(token).map(|(host, _)| host.to_ascii_lowercase());
    };
    if token.contains('\\') {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let (host, port) = host_and_port(authority)?;
    if port.is_some_and(|port| port.parse::<u16>().is_err()) {
        return None;
    }
    Some(host.to_ascii_lowercase())
}

/// What follows `http://` or `https://` (any case), when the token is a URL.
fn url_rest(token: &str) -> Option<&str> {
    let lower = token.get(..8).unwrap_or(token).to_ascii_lowercase();
    let skip = if lower.starts_with("https://") {
        8
    } else if lower.starts_with("http://") {
        7
    } else {
        return None;
    };
    token.get(skip..)
}

/// `host[:port]` split, when the port, if there is one, is digits. The
/// host is left to [`is_cursor_host`], whose labels admit only characters
/// upstream's pattern admits.
fn host_and_port(text: &str) -> Option<(&str, Option<&str>)> {
    match text.split_once(':') {
        None => Some((text, None)),
        Some((host, port)) => (!port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()))
            .then_some((host, Some(port))),
    }
}

/// `cursor.sh` or a name under it, every label a valid DNS label.
fn is_cursor_host(host: &str) -> bool {
    is_dns_name(host) && (host == "cursor.sh" || host.ends_with(".cursor.sh"))
}

/// At most 253 characters of labels that are 1 to 63 lowercase letters,
/// digits and inner hyphens.
fn is_dns_name(host: &str) -> bool {
    host.len() <= 253 && host.split('.').all(is_dns_label)
}

fn is_dns_label(label: &str) -> bool {
    let bytes = label.as_bytes();
    let edge = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    (1..=63).contains(&bytes.len())
        && bytes.first().is_some_and(edge)
        && bytes.last().is_some_and(edge)
        && bytes.iter().all(|b| edge(b) || *b == b'-')
}
