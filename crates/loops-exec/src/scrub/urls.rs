//! Credentials inside URLs, which no token prefix announces (issue 25 §4):
//! - the secret part of a webhook URL ([`WEBHOOKS`]): whoever holds
//!   `https://hooks.slack.com/services/T…/B…/X…` can post as its owner, so
//!   everything after the well-known path is masked, up to the end of the
//!   URL;
//! - the password of a URL's user information, `scheme://user:PASSWORD@host`
//!   (a database URL, a token given to `git clone`); the user is kept.
//!
//! Masking is idempotent: [`super::REDACTED`] starts with `[`, which ends a
//! URL here, so an already masked URL has nothing left to mask.

use std::borrow::Cow;

use super::REDACTED;

/// Hosts and paths after which the rest of a URL is a credential, matched
/// without regard to ASCII case and also inside a longer host name
/// (`ptb.discord.com`, `<tenant>.webhook.office.com`).
const WEBHOOKS: &[&str] = &[
    "hooks.slack.com/services/",      // Slack incoming webhook
    "hooks.slack.com/workflows/",     // Slack workflow webhook
    "hooks.slack.com/triggers/",      // Slack workflow trigger
    "discord.com/api/webhooks/",      // Discord
    "discordapp.com/api/webhooks/",   // Discord, its older host
    "webhook.office.com/webhookb2/",  // Microsoft Teams incoming webhook
    "outlook.office.com/webhook/",    // Microsoft Teams, its older host
    "chat.googleapis.com/v1/spaces/", // Google Chat (key and token in the query)
    "api.telegram.org/bot",           // Telegram bot token
    "hooks.zapier.com/hooks/catch/",  // Zapier catch hook
    "maker.ifttt.com/trigger/",       // IFTTT webhook key
];

/// Whether `b` ends a URL: whitespace, a control character, or what
/// delimits a URL in shell, JSON, Markdown or HTML.
fn ends_url(b: u8) -> bool {
    b.is_ascii_whitespace()
        || b.is_ascii_control()
        || matches!(
            b,
            b'"' | b'\''
                | b'`'
                | b'<'
                | b'>'
                | b'\\'
                | b'('
                | b')'
                | b'['
                | b']'
                | b'{'
                | b'}'
                | b'|'
                | b','
                | b';'
        )
}

/// `text` with the secret parts of webhook URLs and the passwords of URLs
/// replaced by [`REDACTED`].
pub(super) fn mask_url_secrets(text: &str) -> Cow<'_, str> {
    // Every webhook path and every `://` holds a `/`: most output has
    // none, and the searches below cost even on empty text.
    if !text.as_bytes().contains(&b'/') {
        return Cow::Borrowed(text);
    }
    let mut ranges = webhook_secrets(text);
    ranges.extend(url_passwords(text));
    if ranges.is_empty() {
        return Cow::Borrowed(text);
    }
    ranges.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(ranges.len());
    for (start, end) in ranges {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for (start, end) in merged {
        out.push_str(&text[copied..start]);
        out.push_str(REDACTED);
        copied = end;
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

/// The byte range of the rest of the URL after each [`WEBHOOKS`] path.
///
/// A match inside the range already found for the same path is skipped:
/// its range is a part of that one, and finding its end again would scan
/// the rest of the URL once per match, quadratic in output that repeats a
/// path (issue 25 review). So each path scans each byte at most once.
fn webhook_secrets(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut ranges = Vec::new();
    // ASCII lowercasing keeps every byte where it was.
    let lower = text.to_ascii_lowercase();
    for path in WEBHOOKS {
        let mut masked_to = 0;
        for (at, _) in lower.match_indices(path) {
            if at < masked_to {
                continue;
            }
            let start = at + path.len();
            let end = url_end(bytes, start);
            if end > start {
                ranges.push((start, end));
                masked_to = end;
            }
        }
    }
    ranges
}

/// Where the URL going on at `from` ends.
fn url_end(bytes: &[u8], from: usize) -> usize {
    let end = bytes[from..]
        .iter()
        .position(|&b| ends_url(b))
        .map_or(bytes.len(), |n| from + n);
    #[cfg(test)]
    tests::SCANNED.with(|scanned| scanned.set(scanned.get() + (end - from)));
    end
}

/// The byte range of the password in each `scheme://user:password@`.
fn url_passwords(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut ranges = Vec::new();
    for (at, _) in text.match_indices("://") {
        let has_scheme = at > 0 && bytes[at - 1].is_ascii_alphanumeric();
        if !has_scheme {
            continue;
        }
        let start = at + 3;
        // The authority: up to the path, query or fragment, or the URL's end.
        let end = bytes[start..]
            .iter()
            .position(|&b| matches!(b, b'/' | b'?' | b'#') || ends_url(b))
            .map_or(bytes.len(), |n| start + n);
        let authority = &text[start..end];
        // The last `@` ends the user information, as URL parsers read it.
        let Some(userinfo) = authority.rfind('@').map(|at| &authority[..at]) else {
            continue;
        };
        if let Some(colon) = userinfo.find(':')
            && colon + 1 < userinfo.len()
        {
            ranges.push((start + colon + 1, start + userinfo.len()));
        }
    }
    ranges
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    thread_local! {
        /// Bytes [`url_end`] has looked at on this thread.
        pub(super) static SCANNED: Cell<usize> = const { Cell::new(0) };
    }

    /// Issue 25 review: each match of a webhook path scanned to the end of
    /// its URL, so output repeating the path scanned the rest of the text
    /// once per match: about 1.3e9 byte checks at the 256 KiB output cap.
    /// The work is counted, never timed.
    #[test]
    fn repeated_webhook_paths_are_scanned_once() {
        let path = "hooks.slack.com/services/";
        let text = path.repeat((256 << 10) / path.len());
        SCANNED.with(|scanned| scanned.set(0));
        let masked = mask_url_secrets(&text);
        let scanned = SCANNED.with(Cell::get);
        assert_eq!(masked, format!("{path}{REDACTED}"));
        assert!(
            scanned <= text.len(),
            "scanned {scanned} bytes of a text of {}",
            text.len()
        );
        // Matches of different paths inside one URL, and URLs one after
        // another, are each scanned once too.
        let mixed = "https://discord.com/api/webhooks/hooks.slack.com/services/x y ".repeat(4000);
        SCANNED.with(|scanned| scanned.set(0));
        let masked = mask_url_secrets(&mixed);
        assert!(SCANNED.with(Cell::get) <= 2 * mixed.len());
        assert_eq!(
            masked,
            "https://discord.com/api/webhooks/[redacted] y ".repeat(4000)
        );
    }

    /// [`mask_url_secrets`] passes over text without a `/`, which holds
    /// for what it masks only while every webhook path has one.
    #[test]
    fn text_without_a_slash_holds_nothing_to_mask() {
        for path in WEBHOOKS {
            assert!(path.contains('/'), "{path} has no /");
        }
        for text in ["", "plain output", "user:secret@host", "ftp:\\u:p@h"] {
            assert!(matches!(mask_url_secrets(text), Cow::Borrowed(t) if t == text));
        }
        // One `/` is enough to be looked at.
        assert_eq!(
            mask_url_secrets("x://u:secretpass@h/"),
            format!("x://u:{REDACTED}@h/")
        );
    }

    #[test]
    fn webhook_secrets_and_url_passwords_are_masked() {
        for (text, expected) in [
            (
                "curl -d ok https://hooks.slack.com/services/T0001/B0001/XXXXXXXX",
                "curl -d ok https://hooks.slack.com/services/[redacted]",
            ),
            (
                "post 'https://discord.com/api/webhooks/1234/aBc-_9' now",
                "post 'https://discord.com/api/webhooks/[redacted]' now",
            ),
            (
                "https://PTB.Discord.com/api/webhooks/1/x and https://canary.discordapp.com/api/webhooks/2/y",
                "https://PTB.Discord.com/api/webhooks/[redacted] and https://canary.discordapp.com/api/webhooks/[redacted]",
            ),
            (
                "\"url\":\"https://acme.webhook.office.com/webhookb2/a@b/IncomingWebhook/c/d\"",
                "\"url\":\"https://acme.webhook.office.com/webhookb2/[redacted]\"",
            ),
            (
                "https://chat.googleapis.com/v1/spaces/AAA/messages?key=k&token=t%3D",
                "https://chat.googleapis.com/v1/spaces/[redacted]",
            ),
            (
                "https://api.telegram.org/bot123456:ABC-DEF/sendMessage",
                "https://api.telegram.org/bot[redacted]",
            ),
            (
                "psql postgres://loops:s3cret%40x@db:5432/loops",
                "psql postgres://loops:[redacted]@db:5432/loops",
            ),
            (
                "git clone https://x-access-token:abc@d@github.com/o/r.git",
                "git clone https://x-access-token:[redacted]@github.com/o/r.git",
            ),
        ] {
            assert_eq!(mask_url_secrets(text), expected, "{text}");
            // Masking again changes nothing.
            assert_eq!(mask_url_secrets(expected), expected, "{expected}");
        }
    }

    #[test]
    fn other_urls_are_left_alone() {
        for text in [
            "https://hooks.slack.com/services/",
            "https://example.com/hooks.slack.com",
            "https://user@example.com/path:x@y",
            "ssh://git@github.com:22/o/r",
            "http://[::1]:8080/a@b",
            "see https://api.github.com/user?a=b:c@d",
            "://x:y@z",
            "ünïcödé ✓ https://example.com/ü",
        ] {
            assert!(
                matches!(mask_url_secrets(text), Cow::Borrowed(_)),
                "{text}: {}",
                mask_url_secrets(text)
            );
        }
    }
}
