//! The duration grammar of SPEC §2.1: `500ms`, `2s`, `3m`, `1h`, `1d`, `1.5s`,
//! `10` (bare numbers are milliseconds), parsed into whole milliseconds,
//! plus the forms issue 16 §6 adds: sums of parts from the largest unit
//! down (`1h30m`, `2d12h`, `1m30s`, `1s500ms`) and the spellings `sec`,
//! `secs`, `min` and `mins`.
//!
//! The trimmed input is either a bare `\d+(\.\d+)?` (milliseconds) or one or
//! more `\d+(\.\d+)?<unit>` parts with no space between them, each unit
//! smaller than the one before; only the last part may have a fraction. The
//! value is rounded half up to the millisecond. What the original rejects
//! stays rejected (`1 h` with a space, `5x`, `-1s`, `1S`); zero is refused by
//! [`parse_positive_duration`]. Departures from 0.3.1, on purpose:
//!
//! - Sums and the long spellings are accepted (the original rejects
//!   `1h30m`, SPEC §10 item 1).
//! - Rounding is exact decimal arithmetic. The original multiplies a binary
//!   float, so `1.0005s` becomes 1000 there and 1001 here; every input with at
//!   most three significant fractional digits of milliseconds agrees.
//! - Values above 100 years are rejected instead of overflowing into
//!   nonsense instants.
//! - The message of a rejected input lists the accepted forms after the
//!   SPEC's `invalid duration: <input>`.
//!
//! [`parse_positive_duration`] also rejects zero (SPEC §9 item 28: the
//! original accepts `--timeout 0`, which then times out immediately).

/// The largest duration accepted: 100 years of 365 days, in milliseconds.
///
/// Anything longer is certainly a typo, and refusing it keeps every
/// `instant + duration` inside the representable range of a `Timestamp`.
pub const MAX_DURATION_MS: u64 = 100 * 365 * 86_400_000;

/// The accepted forms, as the messages list them.
pub const DURATION_FORMS: &str = "use a number and a unit: 500ms, 30s, 5m, 1h, 1d, or a sum such as 1h30m; a bare number of 1000 or more is milliseconds";

/// A duration string that does not parse, is too large, or is zero where zero
/// is not allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurationError {
    /// The input does not match the grammar: `invalid duration: <input>`,
    /// then the accepted forms.
    #[error("invalid duration: {input} ({DURATION_FORMS})")]
    Invalid {
        /// The rejected input, as given.
        input: String,
    },
    /// The input parses but exceeds 100 years.
    #[error("duration too large: {input} (the maximum is 100 years)")]
    TooLarge {
        /// The rejected input, as given.
        input: String,
    },
    /// The input is zero where a positive duration is required.
    #[error("{what} must be greater than zero")]
    Zero {
        /// What the duration is for, for example `--timeout`.
        what: String,
    },
}

/// The units, longest spelling first so `ms` is not read as `m` then `s`,
/// with their size in milliseconds.
const UNITS: [(&str, u64); 9] = [
    ("mins", 60_000),
    ("secs", 1_000),
    ("min", 60_000),
    ("sec", 1_000),
    ("ms", 1),
    ("s", 1_000),
    ("m", 60_000),
    ("h", 3_600_000),
    ("d", 86_400_000),
];

/// Parses a duration into milliseconds: SPEC §2.1, plus sums such as
/// `1h30m` (issue 16 §6).
///
/// ```
/// use loops_core::parse_duration;
/// assert_eq!(parse_duration("1.5s").unwrap(), 1500);
/// assert_eq!(parse_duration(" 10 ").unwrap(), 10);
/// assert_eq!(parse_duration("1h30m").unwrap(), 5_400_000);
/// assert!(
///     parse_duration("1 h")
///         .unwrap_err()
///         .to_string()
///         .starts_with("invalid duration: 1 h (use a number and a unit")
/// );
/// ```
pub fn parse_duration(input: &str) -> Result<u64, DurationError> {
    let invalid = || DurationError::Invalid {
        input: input.to_owned(),
    };
    let too_large = || DurationError::TooLarge {
        input: input.to_owned(),
    };
    let mut rest = input.trim();
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: u128 = 0;
    let mut previous_unit = u64::MAX;
    let mut parts = 0;
    while !rest.is_empty() {
        let (number, after) = split_number(rest).ok_or_else(invalid)?;
        let (multiplier, after) = match UNITS.iter().find(|(unit, _)| after.starts_with(unit)) {
            Some(&(unit, ms)) => (ms, &after[unit.len()..]),
            // A bare number is milliseconds, and only on its own.
            None if after.is_empty() && parts == 0 => (1, after),
            None => return Err(invalid()),
        };
        let (whole, fraction) = match number.split_once('.') {
            Some((whole, fraction)) => (whole, fraction),
            None => (number, ""),
        };
        // Units go from the largest down, each once; a fraction only ends.
        if multiplier >= previous_unit || (!fraction.is_empty() && !after.is_empty()) {
            return Err(invalid());
        }
        let whole_ms = parse_digits(whole)
            .and_then(|w| w.checked_mul(u128::from(multiplier)))
            .ok_or_else(too_large)?;
        total = total
            .checked_add(whole_ms + fraction_ms(fraction, multiplier))
            .ok_or_else(too_large)?;
        previous_unit = multiplier;
        parts += 1;
        rest = after;
    }
    u64::try_from(total)
        .ok()
        .filter(|&ms| ms <= MAX_DURATION_MS)
        .ok_or_else(too_large)
}

/// Like [`parse_duration`], but zero is rejected with
/// `<what> must be greater than zero` (SPEC §9 item 28).
///
/// ```
/// use loops_core::parse_positive_duration;
/// assert_eq!(parse_positive_duration("2s", "--timeout").unwrap(), 2000);
/// assert_eq!(
///     parse_positive_duration("0", "--timeout").unwrap_err().to_string(),
///     "--timeout must be greater than zero"
/// );
/// ```
pub fn parse_positive_duration(input: &str, what: &str) -> Result<u64, DurationError> {
    match parse_duration(input)? {
        0 => Err(DurationError::Zero {
            what: what.to_owned(),
        }),
        ms => Ok(ms),
    }
}

/// Whether `input` is a bare number under one second, which the grammar
/// reads as milliseconds: `--every 10` is ten milliseconds, which is rarely
/// what was meant, so the command line refuses it (issue 28).
///
/// ```
/// use loops_core::bare_milliseconds;
/// assert!(bare_milliseconds("10"));
/// assert!(!bare_milliseconds("10s"));
/// assert!(!bare_milliseconds("1500"));
/// assert!(!bare_milliseconds("0"));
/// ```
pub fn bare_milliseconds(input: &str) -> bool {
    let s = input.trim();
    !s.is_empty()
        && s.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && parse_duration(s).is_ok_and(|ms| ms > 0 && ms < 1_000)
}

/// `ms` in the duration grammar, exactly: a sum of whole parts from the
/// largest unit down (`1h30m`, `1s500ms`, `0s` for zero), so that
/// [`parse_duration`] gives `ms` back. Loops files (issue 31) write
/// durations this way.
///
/// ```
/// use loops_core::{duration_text, parse_duration};
/// assert_eq!(duration_text(5_400_000), "1h30m");
/// assert_eq!(duration_text(1_500), "1s500ms");
/// assert_eq!(duration_text(0), "0s");
/// assert_eq!(parse_duration(&duration_text(90_061_001)).unwrap(), 90_061_001);
/// ```
pub fn duration_text(ms: u64) -> String {
    if ms == 0 {
        return "0s".to_owned();
    }
    let mut rest = ms;
    let mut out = String::new();
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
        ("ms", 1),
    ] {
        let n = rest / size;
        if n > 0 {
            out.push_str(&format!("{n}{unit}"));
            rest -= n * size;
        }
    }
    out
}

/// Splits `s` into the `\d+(\.\d+)?` number and the rest, or `None` when the
/// number part is malformed.
fn split_number(s: &str) -> Option<(&str, &str)> {
    let bytes = s.as_bytes();
    let whole_end = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
    if whole_end == 0 {
        return None;
    }
    let mut end = whole_end;
    if bytes.get(end) == Some(&b'.') {
        let fraction_len = bytes[end + 1..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if fraction_len == 0 {
            return None;
        }
        end += 1 + fraction_len;
    }
    // Every byte before `end` is ASCII, so `end` is a char boundary.
    Some(s.split_at(end))
}

/// Parses ASCII digits, or `None` if the value does not fit in a `u128`.
fn parse_digits(digits: &str) -> Option<u128> {
    digits.bytes().try_fold(0u128, |acc, b| {
        acc.checked_mul(10)?.checked_add(u128::from(b - b'0'))
    })
}

/// `0.<fraction> * multiplier`, rounded half up, computed exactly.
///
/// Multiplying the digit string by `multiplier` from the right leaves the
/// integer part in the final carry and the first fractional digit of the
/// product in the last digit produced; that digit alone decides rounding.
/// This works for fractions of any length without overflow, because the
/// carry never exceeds `multiplier`.
fn fraction_ms(fraction: &str, multiplier: u64) -> u128 {
    let mut carry: u64 = 0;
    let mut first_digit: u64 = 0;
    for b in fraction.bytes().rev() {
        let product = u64::from(b - b'0') * multiplier + carry;
        first_digit = product % 10;
        carry = product / 10;
    }
    u128::from(carry + u64::from(first_digit >= 5))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, expected: Result<u64, &str>) {
        let got = parse_duration(input).map_err(|e| e.to_string());
        assert_eq!(got, expected.map_err(str::to_owned), "input {input:?}");
    }

    // SPEC §10 item 1
    #[test]
    fn spec_checklist_item_1() {
        check("500ms", Ok(500));
        check("2s", Ok(2_000));
        check("3m", Ok(180_000));
        check("1h", Ok(3_600_000));
        check("1d", Ok(86_400_000));
        check("1.5s", Ok(1_500));
        check("10", Ok(10));
    }

    #[test]
    fn sums_and_long_spellings() {
        check("1h30m", Ok(5_400_000));
        check("2d12h", Ok(216_000_000));
        check("1m30s", Ok(90_000));
        check("1s500ms", Ok(1_500));
        check("1h0m5s", Ok(3_605_000));
        check("1h1.5m", Ok(3_690_000));
        check("90sec", Ok(90_000));
        check("2secs", Ok(2_000));
        check("5min", Ok(300_000));
        check("5mins", Ok(300_000));
        check("1h30min", Ok(5_400_000));
    }

    #[test]
    fn trims_and_rounds_half_up() {
        check("  2s\t", Ok(2_000));
        check("0.5", Ok(1));
        check("0.4", Ok(0));
        check("1.0005s", Ok(1_001));
        check("1.0004999s", Ok(1_000));
        check("0.0000001d", Ok(9));
        check("1.25ms", Ok(1));
        check("2.5ms", Ok(3));
        check("0", Ok(0));
        check("007s", Ok(7_000));
        check("1.000000000000000000000000000000000000000001s", Ok(1_000));
        check(
            "0.99999999999999999999999999999999999999999999m",
            Ok(60_000),
        );
    }

    #[test]
    fn rejects_malformed_input_verbatim() {
        for bad in [
            "", " ", "s", "1.s", ".5s", "1.", "-1s", "+1s", "1 s", "1S", "1w", "1e3", "1,5s",
            "0x10", "１s", "1 h", "5x", "1h 30m", "30m1h", "1m1m", "1.5h30m", "1h30", "10ms5",
            "1mss", "1hm",
        ] {
            check(
                bad,
                Err(&format!("invalid duration: {bad} ({DURATION_FORMS})")),
            );
        }
        // The message quotes the input as given, not trimmed.
        check(
            " 5x ",
            Err(&format!("invalid duration:  5x  ({DURATION_FORMS})")),
        );
    }

    #[test]
    fn rejects_absurd_values() {
        check("36500d", Ok(MAX_DURATION_MS));
        check(
            "36501d",
            Err("duration too large: 36501d (the maximum is 100 years)"),
        );
        check(
            "99999999999999999999999999999999999999999999d",
            Err(
                "duration too large: 99999999999999999999999999999999999999999999d (the maximum is 100 years)",
            ),
        );
        check(
            "18446744073709551616",
            Err("duration too large: 18446744073709551616 (the maximum is 100 years)"),
        );
    }

    #[test]
    fn positive_rejects_zero() {
        assert_eq!(parse_positive_duration("1.5s", "--timeout"), Ok(1_500));
        for zero in ["0", "0ms", "0.0s", "0.4"] {
            assert_eq!(
                parse_positive_duration(zero, "--timeout")
                    .unwrap_err()
                    .to_string(),
                "--timeout must be greater than zero"
            );
        }
        assert_eq!(
            parse_positive_duration("soon", "--timeout")
                .unwrap_err()
                .to_string(),
            format!("invalid duration: soon ({DURATION_FORMS})")
        );
    }
}
