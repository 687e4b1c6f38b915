//! Masking secrets in what loops stores: a run's stdout, stderr and error,
//! and the stderr of a failing `accounts env` (issue 12 §2).
//!
//! Two things are replaced by [`REDACTED`], the word the CLI already uses
//! for `env` values (SPEC §7.2):
//! - the exact values a run was given: its target's `env` values and the
//!   variables `accounts env` exported ([`Secrets`]), and the password of
//!   loops' own database (issue 25 §2). Values shorter than
//!   [`MIN_SECRET_LEN`] characters are left alone: `1`, `true` or `prod`
//!   are everywhere in ordinary output. The database password keeps this
//!   floor too, on purpose: one of 4 to 7 characters is usually a word
//!   (`test`, `admin`), and masking it alone would rewrite ordinary output
//!   and show its reader which word it is. It is never passed to a run,
//!   and a URL's password (below) is masked whatever its length;
//! - anything shaped like a credential ([`mask_token_shapes`]): the
//!   prefixed tokens of the providers loops runs (`sk-…`, `ghp_…`,
//!   `github_pat_…`, `xoxb-…`, …) and the credentials inside URLs (a
//!   webhook's secret path, a URL's password; `urls`) everywhere, and long
//!   random-looking
//!   base64 or hex runs ([`Shapes::PrefixedAndBlobs`]) only in the stderr of
//!   a failing `accounts env`. A run's own output keeps such runs: git
//!   object ids, checksums and image digests are ordinary output there, and
//!   the values the run was given are masked exactly anyway.
//!
//! Both are linear scans over at most the output cap (256 KiB a stream by
//! default), without a regex engine: a substring search per secret value,
//! then one pass over the bytes for the shapes.
//!
//! What is not caught: a secret that was re-encoded on its way out
//! (JSON-escaped, URL-encoded, base64'd when it is short), and a secret
//! split by the output cap except at the start of the kept tail, which is
//! handled.

mod urls;

use std::borrow::Cow;
use std::fmt;

/// What a masked secret is replaced by.
pub(crate) const REDACTED: &str = "[redacted]";

/// Secret values shorter than this many bytes are not masked.
pub(crate) const MIN_SECRET_LEN: usize = 8;

/// A base64 or hex run at least this long is masked as a token.
const MIN_BLOB_LEN: usize = 32;

/// The exact values to mask in one run's output. Its `Debug` shows only how
/// many there are.
#[derive(Clone, Default)]
pub(crate) struct Secrets {
    /// Longest first, so a value that contains another is masked whole.
    values: Vec<String>,
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secrets({} values)", self.values.len())
    }
}

impl Secrets {
    /// Adds values to mask; short ones (see [`MIN_SECRET_LEN`]) are skipped.
    pub(crate) fn extend<'a>(&mut self, values: impl IntoIterator<Item = &'a str>) {
        for value in values {
            if value.len() >= MIN_SECRET_LEN && !self.values.iter().any(|v| v == value) {
                self.values.push(value.to_owned());
            }
        }
        self.values.sort_by_key(|v| std::cmp::Reverse(v.len()));
    }

    /// Adds the values of `other`.
    pub(crate) fn merge(&mut self, other: Secrets) {
        self.extend(other.values.iter().map(String::as_str));
    }

    /// `text` with every secret value masked. For the errors loops writes
    /// itself, which hold paths and names from the target, never a token
    /// of their own.
    pub(crate) fn mask_values<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let mut text = Cow::Borrowed(text);
        for value in &self.values {
            if text.contains(value.as_str()) {
                text = Cow::Owned(text.replace(value.as_str(), REDACTED));
            }
        }
        text
    }

    /// `text` with every secret value and the token `shapes` masked: for
    /// what a process wrote.
    pub(crate) fn scrub<'t>(&self, text: &'t str, shapes: Shapes) -> Cow<'t, str> {
        let text = self.mask_values(text);
        match mask_token_shapes(&text, shapes) {
            Cow::Borrowed(_) => text,
            Cow::Owned(masked) => Cow::Owned(masked),
        }
    }

    /// [`Secrets::scrub`] of captured run output ([`Shapes::Prefixed`]),
    /// which may start with the
    /// `[truncated <n> bytes]\n` marker (SPEC §10 item 70): the marker is
    /// kept as it is, and when the cut left only the end of a secret at the
    /// start of the tail, that end is masked too.
    pub(crate) fn scrub_output(&self, text: String) -> String {
        let (marker, tail) = split_truncation_marker(&text);
        let tail = match marker {
            Some(_) => self.mask_cut_secret(tail),
            None => Cow::Borrowed(tail),
        };
        let scrubbed = self.scrub(&tail, Shapes::Prefixed);
        if matches!((&tail, &scrubbed), (Cow::Borrowed(_), Cow::Borrowed(_))) {
            return text;
        }
        format!("{}{scrubbed}", marker.unwrap_or(""))
    }

    /// Masks the longest end of a secret value (at least 4 bytes, and not the
    /// whole value, which [`Secrets::scrub`] finds) that `tail` starts with.
    fn mask_cut_secret<'t>(&self, tail: &'t str) -> Cow<'t, str> {
        let cut = self
            .values
            .iter()
            .filter_map(|value| {
                (1..value.len().saturating_sub(3))
                    .filter(|&i| value.is_char_boundary(i))
                    .map(|i| &value[i..])
                    .find(|end| tail.starts_with(end))
                    .map(str::len)
            })
            .max();
        match cut {
            Some(len) => Cow::Owned(format!("{REDACTED}{}", &tail[len..])),
            None => Cow::Borrowed(tail),
        }
    }
}

/// Splits off the `[truncated <n> bytes]\n` marker the output cap adds.
fn split_truncation_marker(text: &str) -> (Option<&str>, &str) {
    let Some(rest) = text.strip_prefix("[truncated ") else {
        return (None, text);
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || !rest[digits..].starts_with(" bytes]\n") {
        return (None, text);
    }
    let len = "[truncated ".len() + digits + " bytes]\n".len();
    (Some(&text[..len]), &text[len..])
}

/// Token prefixes: the prefix, the fewest characters that must follow it,
/// and whether those must include a digit (to spare words like
/// `sk-learn-…`). Documented by each vendor's token format.
const PREFIXES: &[(&str, usize, bool)] = &[
    ("sk-", 20, true), // OpenAI (`sk-proj-…`), Anthropic (`sk-ant-…`), OpenRouter (`sk-or-…`)
    ("ghp_", 20, false), // GitHub personal access token (classic)
    ("gho_", 20, false), // GitHub OAuth token
    ("ghu_", 20, false), // GitHub user-to-server token
    ("ghs_", 20, false), // GitHub server-to-server token
    ("ghr_", 20, false), // GitHub refresh token
    ("github_pat_", 20, false), // GitHub fine-grained personal access token
    ("glpat-", 20, false), // GitLab personal access token
    ("xoxa-", 10, false), // Slack app token (legacy)
    ("xoxb-", 10, false), // Slack bot token
    ("xoxe-", 10, false), // Slack refresh token
    ("xoxo-", 10, false), // Slack token
    ("xoxp-", 10, false), // Slack user token
    ("xoxr-", 10, false), // Slack refresh token (legacy)
    ("xoxs-", 10, false), // Slack session token
    ("AKIA", 16, false), // AWS access key id
    ("ASIA", 16, false), // AWS temporary access key id
    ("AIza", 30, false), // Google API key
];

/// `text` with everything shaped like a credential masked as in run output
/// (the prefixed shapes): tokens with a known prefix (`ghp_…`, `sk-…`),
/// the secret part of webhook URLs and the passwords of URLs. For what
/// loops shows of the commands, hooks and prompts it stores to whoever may
/// not see them whole (the MCP server's results).
pub fn mask_credentials(text: &str) -> Cow<'_, str> {
    mask_token_shapes(text, Shapes::Prefixed)
}

/// Which credential shapes [`mask_token_shapes`] masks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shapes {
    /// Words that start with a known token prefix ([`PREFIXES`]), and the
    /// credentials inside URLs (`urls`).
    Prefixed,
    /// Those, and runs of at least 32 base64 or hex characters that look
    /// random ([`is_blob`]).
    PrefixedAndBlobs,
}

/// `text` with everything shaped like a credential replaced by
/// [`REDACTED`]: the credentials inside URLs, a word that starts with a
/// known token prefix, and with [`Shapes::PrefixedAndBlobs`] also a run of
/// at least 32 base64 or hex characters that looks random (see
/// [`is_blob`]).
pub(crate) fn mask_token_shapes(text: &str, shapes: Shapes) -> Cow<'_, str> {
    match urls::mask_url_secrets(text) {
        Cow::Borrowed(text) => mask_words(text, shapes),
        Cow::Owned(text) => Cow::Owned(mask_words(&text, shapes).into_owned()),
    }
}

/// [`mask_token_shapes`] of words and base64 runs. Words are maximal runs
/// of `[A-Za-z0-9_-]`; a base64 run may also hold `+` and `/`, and its `=`
/// padding is masked with it.
fn mask_words(text: &str, shapes: Shapes) -> Cow<'_, str> {
    let blobs = shapes == Shapes::PrefixedAndBlobs;
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        if !is_base64_byte(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && is_base64_byte(bytes[i]) {
            i += 1;
        }
        let mut end = i;
        while end < bytes.len() && end - i < 2 && bytes[end] == b'=' {
            end += 1;
        }
        // Masked ranges of this run, in order.
        let mut masked: Vec<(usize, usize)> = Vec::new();
        if blobs && is_blob(&text[start..i]) {
            masked.push((start, end));
        } else {
            let mut w = start;
            while w < i {
                if !is_word_byte(bytes[w]) {
                    w += 1;
                    continue;
                }
                let ws = w;
                while w < i && is_word_byte(bytes[w]) {
                    w += 1;
                }
                let word = &text[ws..w];
                if has_token_prefix(word) || (blobs && is_blob(word)) {
                    masked.push((ws, w));
                }
            }
        }
        for (s, e) in masked {
            let out = out.get_or_insert_with(|| String::with_capacity(text.len()));
            out.push_str(&text[copied..s]);
            out.push_str(REDACTED);
            copied = e;
        }
        i = end.max(i);
    }
    match out {
        Some(mut out) => {
            out.push_str(&text[copied..]);
            Cow::Owned(out)
        }
        None => Cow::Borrowed(text),
    }
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

fn is_base64_byte(b: u8) -> bool {
    is_word_byte(b) || b == b'+' || b == b'/'
}

fn has_token_prefix(word: &str) -> bool {
    PREFIXES.iter().any(|&(prefix, min, digit)| {
        word.strip_prefix(prefix).is_some_and(|rest| {
            rest.len() >= min && (!digit || rest.bytes().any(|b| b.is_ascii_digit()))
        })
    })
}

/// Whether `run` (base64 or word characters) looks like an encoded secret:
/// at least 32 characters, letters and digits both, and either all hex or
/// random-looking, which is measured by how often consecutive letters and
/// digits change class (upper, lower, digit). Random base64 changes class
/// at about two in three characters; words, paths and identifiers, even
/// long ones with a number in them, rarely do. A canonical UUID is an
/// identifier and is kept.
fn is_blob(run: &str) -> bool {
    if run.len() < MIN_BLOB_LEN || is_uuid(run) {
        return false;
    }
    // Class of each letter or digit: 0 digit, 1 lower, 2 upper.
    let (mut alnum, mut digits, mut changes, mut last) = (0, 0, 0, None);
    for b in run.bytes() {
        let class = match b {
            b'0'..=b'9' => 0,
            b'a'..=b'z' => 1,
            b'A'..=b'Z' => 2,
            _ => continue,
        };
        alnum += 1;
        digits += usize::from(class == 0);
        changes += usize::from(last.is_some_and(|l| l != class));
        last = Some(class);
    }
    if digits == 0 || digits == alnum {
        return false;
    }
    if run.bytes().all(|b| b.is_ascii_hexdigit()) {
        return true;
    }
    changes * 4 >= alnum
}

/// `8-4-4-4-12` hex digits.
fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets(values: &[&str]) -> Secrets {
        let mut s = Secrets::default();
        s.extend(values.iter().copied());
        s
    }

    #[test]
    fn exact_values_are_masked_longest_first_and_short_ones_kept() {
        let s = secrets(&["hunter2-hunter2", "hunter2-hunter2-and-more", "true", "1"]);
        assert_eq!(
            s.scrub(
                "a hunter2-hunter2-and-more b hunter2-hunter2 c true 1",
                Shapes::Prefixed
            ),
            "a [redacted] b [redacted] c true 1"
        );
        assert!(matches!(
            s.scrub("nothing here", Shapes::Prefixed),
            Cow::Borrowed(_)
        ));
        assert_eq!(format!("{s:?}"), "Secrets(2 values)");
    }

    #[test]
    fn token_shapes_are_masked() {
        let cases = [
            (
                "key sk-ant-api03-AbCdEfGh1234567890abcd end",
                "key [redacted] end",
            ),
            ("sk-proj-0123456789abcdefghij", "[redacted]"),
            (
                "GH_TOKEN=ghp_16C7e42F292c6912E7710c838347Ae178B4a rest",
                "GH_TOKEN=[redacted] rest",
            ),
            (
                "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
                "[redacted]",
            ),
            ("token: xoxb-1234567890-abcdefghij", "token: [redacted]"),
            ("id AKIAIOSFODNN7EXAMPLE.", "id [redacted]."),
            (
                "url https://api.example.com/v1/keys/ghp_aaaaaaaaaaaaaaaaaaaaaaaa?x=1",
                "url https://api.example.com/v1/keys/[redacted]?x=1",
            ),
            // A 40-character hex run (a hex token, or a git object id).
            (
                "sha 3f786850e387550fdab836ed7e6dc881de23001b.",
                "sha [redacted].",
            ),
            // Base64 with `+`, `/` and padding, and base64url.
            (
                "b64 dGhpcyBpcyBhIHNlY3JldCB0b2tlbiB2YWx1ZSE/+xY2Zw== done",
                "b64 [redacted] done",
            ),
            (
                "jwt eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.x",
                "jwt [redacted].x",
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(
                mask_token_shapes(text, Shapes::PrefixedAndBlobs),
                expected,
                "{text}"
            );
        }
    }

    #[test]
    fn random_tokens_are_masked_whatever_their_letters() {
        // A fixed xorshift sequence: random base64, base64url and hex keys of
        // the lengths providers issue.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let alphabets: [&[u8]; 3] = [
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
            b"0123456789abcdef",
        ];
        for alphabet in alphabets {
            for len in [32, 40, 44, 64] {
                for _ in 0..500 {
                    let token: String = (0..len)
                        .map(|_| char::from(alphabet[(next() % alphabet.len() as u64) as usize]))
                        .collect();
                    let text = format!("key: {token}\n");
                    if token.bytes().all(|b| b.is_ascii_digit())
                        || !token.bytes().any(|b| b.is_ascii_digit())
                    {
                        continue;
                    }
                    assert_eq!(
                        mask_token_shapes(&text, Shapes::PrefixedAndBlobs),
                        "key: [redacted]\n",
                        "{token}"
                    );
                }
            }
        }
    }

    #[test]
    fn ordinary_output_is_left_alone() {
        for text in [
            "[truncated 123456 bytes]\nhello",
            "process exited with code 3",
            "/home/runner/work/Project2/Build/Release64/bin/tool",
            "crates/loops-exec/src/scrub.rs:42:7",
            "test_account_env_replaces_inherited_credentials_2 ... ok",
            "sk-learn-is-a-python-library-for-machine-learning",
            "ThisIsAVeryLongCamelCaseIdentifierWithoutDigits",
            "session 123e4567-e89b-12d3-a456-426614174000",
            "00000000000000000000000000000000000000",
            "2026-01-01T00:15:00.000Z run 0123456789ab",
            "ghp_short",
            "ünïcödé ✓ 🦀",
        ] {
            assert!(
                matches!(
                    mask_token_shapes(text, Shapes::PrefixedAndBlobs),
                    Cow::Borrowed(_)
                ),
                "{text}"
            );
        }
    }

    #[test]
    fn run_output_keeps_hashes_and_digests_but_masks_prefixed_tokens() {
        let s = secrets(&[]);
        for text in [
            "commit 3f786850e387550fdab836ed7e6dc881de23001b\n",
            "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\n",
            "dGhpcyBpcyBhIHNlY3JldCB0b2tlbiB2YWx1ZSE/+xY2Zw==",
        ] {
            assert_eq!(s.scrub_output(text.into()), text);
        }
        assert_eq!(
            s.scrub_output("token ghp_16C7e42F292c6912E7710c838347Ae178B4a\n".into()),
            "token [redacted]\n"
        );
        // The stderr of a failing `accounts env` loses blobs too.
        assert_eq!(
            s.scrub(
                "key 3f786850e387550fdab836ed7e6dc881de23001b",
                Shapes::PrefixedAndBlobs
            ),
            "key [redacted]"
        );
    }

    #[test]
    fn output_keeps_the_truncation_marker_and_masks_a_cut_secret() {
        // SPEC §10 item 70.
        let s = secrets(&["truncated-secret", "abcdefgh-secret-value"]);
        assert_eq!(
            s.scrub_output("[truncated 9 bytes]\nsecret-value then abcdefgh-secret-value".into()),
            "[truncated 9 bytes]\n[redacted] then [redacted]"
        );
        assert_eq!(
            s.scrub_output("[truncated 3 bytes]\nplain".into()),
            "[truncated 3 bytes]\nplain"
        );
        // Without a marker, nothing was cut: a value's end is just text.
        assert_eq!(s.scrub_output("secret-value".into()), "secret-value");
        // A fake marker is only text.
        assert_eq!(
            s.scrub_output("[truncated x bytes]\ntruncated-secret".into()),
            "[truncated x bytes]\n[redacted]"
        );
    }
}
