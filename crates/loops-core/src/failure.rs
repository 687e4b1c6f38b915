//! Failure classes (issue 27; agents note §7): which of 15 classes a failed
//! run belongs to, the fingerprint that groups its repeats, the retry
//! policy that follows from the class, and [`retry_at`], the instant a
//! provider says its limit resets.
//!
//! Everything here is pure: it reads a finished run's status, exit code,
//! error and output, and returns data. The store records the class and the
//! fingerprint; the scheduler applies the policy.
//!
//! The classifier is upstream's (0.5.11 `classifyRunFailure`) rule for rule,
//! in its order, quirks included, so that a database shared with the
//! original groups failures the same way. Its patterns are translated from
//! JavaScript with care for the places where Rust's `regex` differs: `\b`
//! is ASCII (`(?-u:\b)`), `.` stops at `\r`, U+2028 and U+2029 as well as
//! `\n`, `\s` is JavaScript's set (U+FEFF is a space, U+0085 is not), and
//! case-insensitive matching folds ASCII letters only, as JavaScript's
//! does for ASCII patterns (the Kelvin sign is not a `k`).
//!
//! The binary links regex without its Unicode tables (their relocations
//! cost every process page faults at start), so no pattern may name a
//! Unicode class or fold case in Unicode mode: [`pattern`] checks it where
//! the tests run, since they link the tables through other crates.

use std::fmt;
use std::sync::LazyLock;

use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::id::LoopId;
use crate::model::LoopRun;
use crate::status::{EnumError, RunStatus, string_enum};

pub use self::reset::retry_at;

mod host;
mod reset;

string_enum!(
    /// The class of a run that did not succeed (agents note §7.1), in the
    /// order [`classify`] tries its rules: the first rule that matches wins.
    ///
    /// Serialized as the snake_case names upstream stores, such as
    /// `rate_limit`. Upstream's sixteenth class, `route_functional`, belongs
    /// to route-drain loops, which loops does not have.
    #[non_exhaustive]
    FailureClass, "failure class",
    "timeout, restart_interrupted, circuit_breaker, skipped_previous_active, preflight, \
     rate_limit, auth, provider_capacity, provider_unavailable, model_not_found, \
     context_length, schema_response_format, node_init, sigsegv, unknown" {
        /// Rule 1: the run timed out, at its wall clock or its idle watchdog.
        Timeout => "timeout",
        /// Rule 2: a skipped run whose error starts with
        /// `daemon restart interrupted active run`.
        RestartInterrupted => "restart_interrupted",
        /// Rule 3: a skipped run whose text says `circuit breaker open`.
        CircuitBreaker => "circuit_breaker",
        /// Rule 4: a skipped run whose text says `previous run still active`.
        SkippedPreviousActive => "skipped_previous_active",
        /// Rule 5: a preflight check failed, or an executable or auth
        /// profile was not found.
        Preflight => "preflight",
        /// Rule 6: a rate limit, `too many requests`, `429` or an exceeded
        /// quota.
        RateLimit => "rate_limit",
        /// Rule 7: the agent or its provider could not authenticate.
        Auth => "auth",
        /// Rule 8: a Cursor host answered `resource_exhausted`.
        ProviderCapacity => "provider_capacity",
        /// Rule 9: a Cursor host's name did not resolve.
        ProviderUnavailable => "provider_unavailable",
        /// Rule 10: the model does not exist.
        ModelNotFound => "model_not_found",
        /// Rule 11: the prompt did not fit the model's context.
        ContextLength => "context_length",
        /// Rule 12: a response format or JSON schema was rejected.
        SchemaResponseFormat => "schema_response_format",
        /// Rule 13: the agent's Node or Bun runtime failed to start.
        NodeInit => "node_init",
        /// Rule 14: the process crashed on a segmentation fault.
        Sigsegv => "sigsegv",
        /// Rule 15: none of the above.
        Unknown => "unknown",
    }
);

impl FailureClass {
    /// Whether the provider is throttling or refusing the account:
    /// `rate_limit`, `auth`, `provider_capacity` and `provider_unavailable`.
    /// Their retries wait [`THROTTLED_RETRY_MULTIPLIER`] times longer
    /// (agents note §7.3).
    pub fn is_throttled(self) -> bool {
        matches!(
            self,
            FailureClass::RateLimit
                | FailureClass::Auth
                | FailureClass::ProviderCapacity
                | FailureClass::ProviderUnavailable
        )
    }

    /// The multiplier of this class's retry delay, as
    /// [`retry_delay_ms`](crate::retry_delay_ms) takes it:
    /// [`THROTTLED_RETRY_MULTIPLIER`] for a throttled class, else 1.
    pub fn retry_multiplier(self) -> u32 {
        if self.is_throttled() {
            THROTTLED_RETRY_MULTIPLIER
        } else {
            1
        }
    }
}

/// What the classifier reads of a finished run: the fields of a
/// [`LoopRun`] it looks at, borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailureInput<'a> {
    /// The run's status.
    pub status: RunStatus,
    /// The run's error text.
    pub error: Option<&'a str>,
    /// Captured stdout.
    pub stdout: Option<&'a str>,
    /// Captured stderr.
    pub stderr: Option<&'a str>,
    /// The exit code, when the process exited.
    pub exit_code: Option<i32>,
}

impl<'a> FailureInput<'a> {
    /// The text a fingerprint is taken over (agents note §7.2): the
    /// classifier's summary when it gave one, else the error, else stderr,
    /// else stdout, else nothing. As upstream's `??`, an empty error still
    /// counts as an error.
    pub fn evidence(&self, summary: Option<&'a str>) -> &'a str {
        summary
            .or(self.error)
            .or(self.stderr)
            .or(self.stdout)
            .unwrap_or("")
    }

    /// The error, stderr and stdout that are not empty, one per line, in
    /// that order: the text every rule searches.
    fn searchable_text(&self) -> String {
        [self.error, self.stderr, self.stdout]
            .into_iter()
            .flatten()
            .filter(|part| !part.is_empty())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl<'a> From<&'a LoopRun> for FailureInput<'a> {
    fn from(run: &'a LoopRun) -> FailureInput<'a> {
        FailureInput {
            status: run.status,
            error: run.error.as_deref(),
            stdout: run.stdout.as_deref(),
            stderr: run.stderr.as_deref(),
            exit_code: run.exit_code,
        }
    }
}

/// A run's class, with the summary rules 8 and 9 write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classified {
    /// The class.
    pub class: FailureClass,
    /// For `provider_capacity`, `provider capacity exhausted:
    /// resource_exhausted <host>`; for `provider_unavailable`, `provider DNS
    /// lookup failed: <code> <host>`; otherwise `None`.
    pub summary: Option<String>,
}

impl Classified {
    /// The run's [`fingerprint`], over its [`FailureInput::evidence`].
    pub fn fingerprint(&self, loop_id: &LoopId, input: &FailureInput<'_>) -> String {
        fingerprint(
            loop_id,
            self.class,
            input.status,
            input.exit_code,
            input.evidence(self.summary.as_deref()),
        )
    }
}

/// The prefix of the error upstream's daemon writes on the runs a restart
/// interrupted (rule 2).
const RESTART_INTERRUPTED_PREFIX: &str = "daemon restart interrupted active run";

/// JavaScript's `.`: anything but a line terminator.
const JS_DOT: &str = r"[^\n\r\x{2028}\x{2029}]";

/// JavaScript's `\s`: Unicode's white space without U+0085, plus U+FEFF,
/// spelt out, so that it needs no Unicode tables and holds inside a
/// case-insensitive ASCII pattern.
const JS_SPACE: &str = r"(?u-i:[\t\n\x0B\x0C\r \x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}])";

/// Anything but JavaScript's `\s` ([`JS_SPACE`]).
const JS_NOT_SPACE: &str = r"(?u-i:[^\t\n\x0B\x0C\r \x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}])";

/// Compiles one of this module's patterns.
fn pattern(source: &str) -> Regex {
    debug_assert_eq!(unicode_tables_needed(source), None, "{source}");
    Regex::new(source).expect("the failure module's patterns are valid")
}

/// Where `source` would need regex's Unicode tables, which the binary does
/// not link: a Perl or Unicode class (`\s`, `\p{..}`), a word boundary
/// outside `(?-u:\b)`, or a flag group that folds case in Unicode mode.
/// Conservative: it reads the flags of each group, not their scope.
fn unicode_tables_needed(source: &str) -> Option<String> {
    let bytes = source.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => {
                let next = bytes.get(i + 1).copied().unwrap_or(b' ');
                if b"sSdDwWpP".contains(&next)
                    || (b"bB".contains(&next) && !source[..i].ends_with("(?-u:"))
                {
                    return Some(format!("\\{} at {i}", char::from(next)));
                }
                i += 2;
            }
            b'(' if bytes.get(i + 1) == Some(&b'?') => {
                let flags: String = source[i + 2..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphabetic() || *c == '-')
                    .collect();
                let (on, off) = flags.split_once('-').unwrap_or((&flags, ""));
                if (on.contains('i') && !off.contains('u'))
                    || (on.contains('u') && !off.contains('i'))
                {
                    return Some(format!("(?{flags} at {i}"));
                }
                i += 2;
            }
            _ => i += 1,
        }
    }
    None
}

// Rules 5 to 7 and 10 to 14 search the lowercased text; rules 8 and 9, and
// the signal-exit part of rule 13, the raw text case-insensitively.

static PREFLIGHT: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        "runtime preflight failed|preflight failed|executable not found in path|\
         none of required executables found|auth profile preflight failed|profile not found",
    )
});

/// Rule 6. Parity quirk (agents note §14 item 6): `429\b` has no leading
/// boundary, so `14429` counts, as upstream has it.
static RATE_LIMIT: LazyLock<Regex> =
    LazyLock::new(|| pattern(r"rate limit|too many requests|429(?-u:\b)|quota exceeded"));

/// Rule 7. Parity quirks (agents note §7.1): `auth\b` also matches `oauth`,
/// and a filesystem's `permission denied` counts as auth, as upstream has
/// them.
static AUTH: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        "unauthorized|authentication|auth(?-u:\\b)|api key|invalid token|permission denied|\
         401(?-u:\\b)|403(?-u:\\b)|not logged in|please run /login|login required|\
         not authenticated|failed to authenticate",
    )
});

static MODEL_NOT_FOUND: LazyLock<Regex> = LazyLock::new(|| {
    pattern(&format!(
        "model {JS_DOT}*not found|model_not_found|unknown model|invalid model|404{JS_DOT}*model"
    ))
});

static CONTEXT_LENGTH: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        "context length|context_length|context window|maximum context|token limit|\
         too many tokens",
    )
});

static SCHEMA: LazyLock<Regex> = LazyLock::new(|| {
    pattern("response_format|json schema|schema validation|invalid schema|structured output")
});

static NODE_INIT: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        "cannot find module|module not found|node:internal|bun: command not found|\
         node: command not found|npm err!|err_module_not_found",
    )
});

/// Rule 13's other half: Bun briefly resolving a global `signal-exit` whose
/// ESM shape does not match (upstream's `isTransientSignalExitInteropFailure`).
static SIGNAL_EXIT: LazyLock<Regex> = LazyLock::new(|| {
    pattern(&format!(
        "(?i-u:missing){s}+['\"](?i-u:default)['\"]{s}+(?i-u:export){s}+(?i-u:in){s}+\
         (?i-u:module){s}+{JS_DOT}*(?i-u:signal-exit)[\\\\/](?i-u:dist)[\\\\/](?i-u:mjs)\
         [\\\\/](?i-u:index\\.js)",
        s = JS_SPACE
    ))
});

static SIGSEGV: LazyLock<Regex> = LazyLock::new(|| pattern("sigsegv|segmentation fault|signal 11"));

/// Classifies a finished run by agents note §7.1's 15 ordered rules; the
/// first that matches wins. Succeeded and running runs, and skipped runs
/// that exited 75, are not failures: `None`.
///
/// The text searched is the error, stderr and stdout that are not empty,
/// joined by newlines. Matching is over all of it, the agent's own prose
/// included, so an agent that merely writes "rate limit" in a failed run is
/// `rate_limit`; the exit code is never read, but for the skip case.
///
/// ```
/// use loops_core::{classify, FailureClass, FailureInput, RunStatus};
/// let input = FailureInput {
///     status: RunStatus::Failed,
///     error: Some("process exited with code 1"),
///     stdout: None,
///     stderr: Some("Error: 429 Too Many Requests"),
///     exit_code: Some(1),
/// };
/// assert_eq!(classify(&input).unwrap().class, FailureClass::RateLimit);
/// ```
pub fn classify(input: &FailureInput<'_>) -> Option<Classified> {
    match input.status {
        RunStatus::Succeeded | RunStatus::Running | RunStatus::Cancelled => return None,
        RunStatus::Skipped if input.exit_code == Some(75) => return None,
        _ => {}
    }
    let raw = input.searchable_text();
    let text = raw.to_lowercase();
    let skipped = input.status == RunStatus::Skipped;
    let plain = |class| {
        Some(Classified {
            class,
            summary: None,
        })
    };
    if input.status == RunStatus::TimedOut {
        return plain(FailureClass::Timeout);
    }
    if skipped
        && input
            .error
            .is_some_and(|e| e.starts_with(RESTART_INTERRUPTED_PREFIX))
    {
        return plain(FailureClass::RestartInterrupted);
    }
    if skipped && text.contains("circuit breaker open") {
        return plain(FailureClass::CircuitBreaker);
    }
    if skipped && text.contains("previous run still active") {
        return plain(FailureClass::SkippedPreviousActive);
    }
    if PREFLIGHT.is_match(&text) {
        return plain(FailureClass::Preflight);
    }
    if RATE_LIMIT.is_match(&text) {
        return plain(FailureClass::RateLimit);
    }
    if AUTH.is_match(&text) {
        return plain(FailureClass::Auth);
    }
    if let Some(summary) = host::capacity_summary(&raw) {
        return Some(Classified {
            class: FailureClass::ProviderCapacity,
            summary: Some(summary),
        });
    }
    if let Some(summary) = host::unavailable_summary(&raw) {
        return Some(Classified {
            class: FailureClass::ProviderUnavailable,
            summary: Some(summary),
        });
    }
    let class = if MODEL_NOT_FOUND.is_match(&text) {
        FailureClass::ModelNotFound
    } else if CONTEXT_LENGTH.is_match(&text) {
        FailureClass::ContextLength
    } else if SCHEMA.is_match(&text) {
        FailureClass::SchemaResponseFormat
    } else if SIGNAL_EXIT.is_match(&raw) || NODE_INIT.is_match(&text) {
        FailureClass::NodeInit
    } else if SIGSEGV.is_match(&text) {
        FailureClass::Sigsegv
    } else {
        FailureClass::Unknown
    };
    plain(class)
}

/// How many characters of the evidence a fingerprint covers.
const FINGERPRINT_EVIDENCE_CHARS: usize = 120;

/// An ISO-8601 instant and whatever sticks to it, as JavaScript's
/// `\d{4}-\d{2}-\d{2}T\S+`.
static TIMESTAMP: LazyLock<Regex> =
    LazyLock::new(|| pattern(&format!("[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}T{JS_NOT_SPACE}+")));

/// The failure's fingerprint (agents note §7.2): the first 16 lowercase hex
/// characters of the SHA-256 of the loop id, the class, the status, the
/// exit code (empty when there is none) and the evidence, one per line.
///
/// The evidence is [`FailureInput::evidence`] with every instant
/// (`\d{4}-\d{2}-\d{2}T\S+`) replaced by `<timestamp>`, cut to its first
/// 120 characters, so the repeats of one failure share a fingerprint. The
/// cut counts characters and never splits one; upstream counts UTF-16
/// units, which differs only past a character outside the BMP.
///
/// ```
/// use loops_core::{fingerprint, FailureClass, LoopId, RunStatus};
/// let id = LoopId::parse("0123456789ab").unwrap();
/// let at = |stamp: &str| {
///     let evidence = format!("{stamp} rate limit reached");
///     fingerprint(&id, FailureClass::RateLimit, RunStatus::Failed, Some(1), &evidence)
/// };
/// assert_eq!(at("2026-01-01T00:00:00Z"), at("2026-03-04T05:06:07.890Z"));
/// assert_eq!(at("x").len(), 16);
/// ```
pub fn fingerprint(
    loop_id: &LoopId,
    class: FailureClass,
    status: RunStatus,
    exit_code: Option<i32>,
    evidence: &str,
) -> String {
    let normalized = TIMESTAMP.replace_all(evidence, "<timestamp>");
    let cut: String = normalized
        .chars()
        .take(FINGERPRINT_EVIDENCE_CHARS)
        .collect();
    let exit = exit_code.map(|code| code.to_string()).unwrap_or_default();
    let joined = [
        loop_id.as_str(),
        class.as_str(),
        status.as_str(),
        &exit,
        &cut,
    ]
    .join("\n");
    let digest = Sha256::digest(joined.as_bytes());
    digest
        .iter()
        .take(8)
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// How many times longer a throttled class's retry waits (agents note §7.3).
pub const THROTTLED_RETRY_MULTIPLIER: u32 = 4;

#[cfg(test)]
mod tests;
