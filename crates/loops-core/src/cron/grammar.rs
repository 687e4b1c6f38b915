//! The SPEC §2.2 cron grammar: fields, list elements, ranges, steps, names
//! and macros, parsed into bit sets with the SPEC's error messages, plus the
//! static "can this ever fire" check (SPEC §10 item 9).
//!
//! The decisions on the original's quirks (SPEC §9 item 36) are listed in
//! the parent module's doc.

use super::CronError;

/// One of the five fields: its name, range and symbolic names.
struct FieldSpec {
    /// The field's name in messages: `hour`, `day of week`.
    name: &'static str,
    min: u64,
    max: u64,
    /// The end a hint suggests for a range (6 for day of week, not 7).
    hint_max: u64,
    /// Names for `min`, `min + 1`, ...; empty when the field has none.
    names: &'static [&'static str],
}

const MINUTE: FieldSpec = FieldSpec {
    name: "minute",
    min: 0,
    max: 59,
    hint_max: 59,
    names: &[],
};
const HOUR: FieldSpec = FieldSpec {
    name: "hour",
    min: 0,
    max: 23,
    hint_max: 23,
    names: &[],
};
const DAY_OF_MONTH: FieldSpec = FieldSpec {
    name: "day of month",
    min: 1,
    max: 31,
    hint_max: 31,
    names: &[],
};
const MONTH: FieldSpec = FieldSpec {
    name: "month",
    min: 1,
    max: 12,
    hint_max: 12,
    names: &[
        "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
    ],
};
/// Day of week runs 0–7 with 7 meaning Sunday again (SPEC §2.2).
const DAY_OF_WEEK: FieldSpec = FieldSpec {
    name: "day of week",
    min: 0,
    max: 7,
    hint_max: 6,
    names: &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"],
};

const MONTH_NAMES: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// The longest each month can be (February in a leap year).
const MAX_DAYS: [u64; 12] = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/// The five fields as bit sets (bit `v` set when value `v` is allowed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Fields {
    pub(super) minutes: u64,
    pub(super) hours: u64,
    pub(super) days: u64,
    pub(super) months: u64,
    /// Bits 0–6, Sunday = 0; a 7 in the text is folded into bit 0.
    pub(super) weekdays: u64,
    /// Day of month text is exactly `*` (unrestricted).
    pub(super) any_day: bool,
    /// Day of week text is exactly `*` (unrestricted).
    pub(super) any_weekday: bool,
}

/// Splits and parses the five fields, expanding macros first.
pub(super) fn parse_fields(expression: &str) -> Result<Fields, CronError> {
    let trimmed = expression.trim();
    let text = if trimmed.starts_with('@') {
        expand_macro(trimmed).ok_or_else(|| CronError::UnknownMacro {
            expr: expression.to_owned(),
        })?
    } else {
        trimmed
    };
    let parts: Vec<&str> = text.split_whitespace().collect();
    let [minute, hour, day, month, weekday] = parts[..] else {
        return Err(CronError::FieldCount {
            expr: expression.to_owned(),
            got: parts.len(),
        });
    };
    let mut weekdays = parse_field(weekday, &DAY_OF_WEEK)?;
    // SPEC §10 item 6: 7 is Sunday.
    if weekdays & (1 << 7) != 0 {
        weekdays = (weekdays & !(1 << 7)) | 1;
    }
    Ok(Fields {
        minutes: parse_field(minute, &MINUTE)?,
        hours: parse_field(hour, &HOUR)?,
        days: parse_field(day, &DAY_OF_MONTH)?,
        months: parse_field(month, &MONTH)?,
        weekdays,
        any_day: day == "*",
        any_weekday: weekday == "*",
    })
}

/// The five-field form of a macro, matched case-insensitively.
fn expand_macro(text: &str) -> Option<&'static str> {
    const MACROS: [(&str, &str); 7] = [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
    ];
    MACROS
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(text))
        .map(|&(_, fields)| fields)
}

/// Parses one comma-separated field into a bit set.
fn parse_field(field: &str, spec: &FieldSpec) -> Result<u64, CronError> {
    let mut bits = 0u64;
    for part in field.split(',') {
        bits |= parse_part(part, field, spec)?;
    }
    Ok(bits)
}

/// Parses one `range[/step]` list element.
fn parse_part(part: &str, field: &str, spec: &FieldSpec) -> Result<u64, CronError> {
    if part.is_empty() {
        // SPEC §9 item 36: the original reads an empty element as `*`.
        return Err(CronError::EmptyElement {
            field: field.to_owned(),
        });
    }
    if let Some(modifier) = unsupported_modifier(part) {
        return Err(CronError::Unsupported {
            part: part.to_owned(),
            modifier,
        });
    }
    let step_err = |hint: Option<String>| CronError::Step {
        part: part.to_owned(),
        hint,
    };
    let (range, step) = match part.split_once('/') {
        None => (part, 1),
        Some((range, step)) => {
            // SPEC §2.2 says text after a second `/` is ignored; we reject it.
            let valid = !step.is_empty() && step.bytes().all(|b| b.is_ascii_digit());
            // A huge step is still a positive integer: it keeps the first value.
            let step = if valid {
                parse_number(step).unwrap_or(u64::MAX)
            } else {
                0
            };
            if step == 0 {
                return Err(step_err(None));
            }
            if range.is_empty() {
                return Err(step_err(Some(format!(
                    "a step needs * or a range: write */{step}"
                ))));
            }
            if range != "*" && !range.contains('-') {
                // SPEC §9 item 36: the original reads `5/15` as just `5`.
                let max = spec.hint_max;
                return Err(step_err(Some(format!(
                    "a step needs * or a range: write {range}-{max}/{step} for every {step} from {range}, or {range} alone"
                ))));
            }
            (range, step)
        }
    };
    let (lo, hi) = if range == "*" {
        (spec.min, spec.max)
    } else if let Some((lo, hi)) = range.split_once('-') {
        if lo.is_empty() || hi.is_empty() || hi.contains('-') {
            // SPEC §9 item 36: the original reads `-5` as `0-5`.
            return Err(CronError::Range {
                part: part.to_owned(),
                hint: None,
            });
        }
        let (lo, _) = parse_value(lo, part, field, spec)?;
        let (mut hi, hi_is_name) = parse_value(hi, part, field, spec)?;
        if hi_is_name && hi == 0 && lo > 0 && spec.max == 7 {
            // `FRI-SUN` means Friday through Sunday: read the end as 7.
            hi = 7;
        }
        if lo > hi {
            // SPEC §9 item 36: the original silently produces nothing.
            return Err(CronError::Range {
                part: part.to_owned(),
                hint: Some("start is after end".to_owned()),
            });
        }
        (lo, hi)
    } else {
        let (value, _) = parse_value(range, part, field, spec)?;
        (value, value)
    };
    if let Some(value) = first_out_of_range(lo, hi, step, spec) {
        return Err(out_of_range(value.to_string(), field, spec));
    }
    let mut bits = 0u64;
    let mut value = lo;
    while value <= hi {
        bits |= 1 << value;
        match value.checked_add(step) {
            Some(next) => value = next,
            None => break,
        }
    }
    Ok(bits)
}

/// A value outside `spec`'s range, named by its field (issue 16 §6).
fn out_of_range(value: String, field: &str, spec: &FieldSpec) -> CronError {
    CronError::OutOfRange {
        value,
        field: field.to_owned(),
        name: spec.name,
        min: spec.min,
        max: spec.max,
    }
}

/// The modifier in `part` that loops does not support, if any.
fn unsupported_modifier(part: &str) -> Option<char> {
    if let Some(c) = part.chars().find(|c| matches!(c, '?' | '#' | '+')) {
        return Some(c);
    }
    // `L`, `W` and `LW` come with digits, `-` or `/` only; names such as
    // `JUL` or `WED` contain other letters and are handled as names.
    let upper = part.to_ascii_uppercase();
    let only_modifier_chars = upper
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'L' | b'W' | b'-' | b'/'));
    if only_modifier_chars {
        return upper.chars().find(|c| matches!(c, 'L' | 'W'));
    }
    None
}

/// Parses a number or a name; the flag says whether it was a name.
fn parse_value(
    text: &str,
    part: &str,
    field: &str,
    spec: &FieldSpec,
) -> Result<(u64, bool), CronError> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        let value = parse_number(text).ok_or_else(|| out_of_range(text.to_owned(), field, spec))?;
        return Ok((value, false));
    }
    let index = spec
        .names
        .iter()
        .position(|name| name.eq_ignore_ascii_case(text));
    match index {
        Some(i) => Ok((spec.min + i as u64, true)),
        None => Err(CronError::Field {
            part: part.to_owned(),
            hint: None,
        }),
    }
}

/// Parses ASCII digits, or `None` on overflow.
fn parse_number(digits: &str) -> Option<u64> {
    digits.bytes().try_fold(0u64, |acc, b| {
        acc.checked_mul(10)?.checked_add(u64::from(b - b'0'))
    })
}

/// The first value of `lo, lo + step, ... <= hi` outside the field's range,
/// found arithmetically so `0-99999999` costs nothing.
fn first_out_of_range(lo: u64, hi: u64, step: u64, spec: &FieldSpec) -> Option<u64> {
    if lo < spec.min || lo > spec.max {
        return Some(lo);
    }
    let next_beyond = ((spec.max - lo) / step + 1)
        .checked_mul(step)
        .and_then(|offset| lo.checked_add(offset))?;
    (next_beyond <= hi).then_some(next_beyond)
}

impl Fields {
    /// Rejects day-of-month sets that exist in none of the allowed months.
    pub(super) fn check_can_fire(&self, expression: &str) -> Result<(), CronError> {
        // With a restricted weekday the expression fires every week that has
        // that weekday in an allowed month, which is every year.
        if !self.any_weekday || self.any_day {
            return Ok(());
        }
        let months: Vec<usize> = (1..=12).filter(|m| self.months & (1 << m) != 0).collect();
        let longest = months.iter().map(|&m| MAX_DAYS[m - 1]).max().unwrap_or(31);
        if (1..=longest).any(|d| self.days & (1 << d) != 0) {
            return Ok(());
        }
        let days: Vec<String> = (1..=31u64)
            .filter(|d| self.days & (1 << d) != 0)
            .map(|d| d.to_string())
            .collect();
        let month_names: Vec<String> = months
            .iter()
            .map(|&m| MONTH_NAMES[m - 1].to_owned())
            .collect();
        let reason = if days.len() == 1 {
            format!(
                "day {} does not exist in {}",
                days.join(""),
                join_or(&month_names)
            )
        } else {
            format!(
                "days {} do not exist in {}",
                join_and(&days),
                join_or(&month_names)
            )
        };
        Err(CronError::NeverFires {
            expr: expression.to_owned(),
            reason,
        })
    }

    /// The expression croner receives: each field as ascending runs (`0-4,9`),
    /// with `*` kept for a day field written as `*` because croner uses that
    /// text for the DOM/DOW rule. Runs keep croner's parse short: a 60-element
    /// list costs it several microseconds.
    pub(super) fn normalized(&self) -> String {
        let runs = |bits: u64, min: u64, max: u64| {
            let mut out: Vec<String> = Vec::new();
            let mut v = min;
            while v <= max {
                if bits & (1 << v) == 0 {
                    v += 1;
                    continue;
                }
                let start = v;
                while v < max && bits & (1 << (v + 1)) != 0 {
                    v += 1;
                }
                out.push(if start == v {
                    start.to_string()
                } else {
                    format!("{start}-{v}")
                });
                v += 1;
            }
            out.join(",")
        };
        let days = if self.any_day {
            "*".to_owned()
        } else {
            runs(self.days, 1, 31)
        };
        let weekdays = if self.any_weekday {
            "*".to_owned()
        } else {
            runs(self.weekdays, 0, 6)
        };
        format!(
            "{} {} {} {} {}",
            runs(self.minutes, 0, 59),
            runs(self.hours, 0, 23),
            days,
            runs(self.months, 1, 12),
            weekdays
        )
    }
}

/// `a`, `a or b`, `a, b or c`.
fn join_or(items: &[String]) -> String {
    join_last(items, " or ")
}

/// `a`, `a and b`, `a, b and c`.
fn join_and(items: &[String]) -> String {
    join_last(items, " and ")
}

fn join_last(items: &[String], last: &str) -> String {
    match items {
        [] => String::new(),
        [only] => only.clone(),
        [init @ .., tail] => format!("{}{last}{tail}", init.join(", ")),
    }
}
