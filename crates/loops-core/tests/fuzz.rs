//! Library-level fuzzing of the parsers and validators of `loops_core` that
//! user input and stored rows reach (cron, durations, instants, zones,
//! names, workflow files, stored loops), and of the schedule math on the
//! whole representable range, through the public API only.
//!
//! Where `props.rs` and `validate.rs` check the grammar on well-formed
//! input, these properties throw malformed input at it: cron expressions
//! drawn from a grammar-ish alphabet (names, ranges, steps, lists, Quartz
//! modifiers, huge numbers, Unicode digits and whitespace, garbage),
//! durations, instants and zone names; workflow files with random DAGs
//! (cycles, self edges, missing steps, hundreds of steps declared in random
//! order), Unicode ids, every field replaced by a value of the wrong type,
//! and nesting as deep as a JSON file can hold; stored records whose fields
//! were replaced by arbitrary JSON. For each input:
//!
//! - nothing panics (proptest reports a panic as a failure, with the
//!   shrunk input);
//! - every error has a non-empty message that names the bad input: the
//!   expression, the list element or the field of a cron error, the input of
//!   a duration or instant error, and the path (`workflow.steps[3].target`)
//!   or the step id of a workflow error;
//! - accepted input obeys the invariants the runners rely on (fire times
//!   strictly after their start, execution orders that are permutations
//!   respecting every dependency, next runs strictly after a finish).
//!
//! Case counts follow `PROPTEST_CASES` (each property has its own default,
//! chosen so the whole file runs in a few seconds in a debug build).
//! Failures are not persisted to a regressions file: the failure message
//! carries the minimal input. Each property prints one `fuzz: <name>: ...`
//! line with what it covered (`--nocapture` shows them).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use loops_core::{
    Anchor, CatchUp, CronError, CronExpr, DurationError, Loop, LoopId, LoopRun, LoopStatus,
    NewWorkflow, RunId, RunStatus, Schedule, ScheduleError, Step, Target, Timestamp, Zone,
    compute_next_after, due_slots, initial_next_run, is_expired, parse_duration,
    parse_positive_duration, parse_schedule_at, plan_advance, validate_name, validate_schedule,
    workflow_execution_order, workflow_from_json,
};
use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::{Map, Value, json};

/// Earliest and latest representable instants (years 0000 and 9999).
const MIN_MS: i64 = -62_167_219_200_000;
const MAX_MS: i64 = 253_402_300_799_999;
/// Where croner's search ends, `5001-01-01T00:00:00Z`: cron fire times stop
/// there (documented on `CronExpr::next_after`).
const CRON_END_MS: i64 = 95_649_120_000_000;
/// The longest gap between two fire times of a valid expression, with
/// margin: `0 0 29 2 *` skips 2100, so eight years.
const CRON_GAP_MS: i64 = 9 * 366 * 86_400_000;

/// A proptest config with `default` cases unless `PROPTEST_CASES` says
/// otherwise, and no regressions file.
fn config(default: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

/// Counters a property bumps, printed once at the end of its test.
struct Tally {
    name: &'static str,
    counts: Vec<(&'static str, AtomicU64)>,
    started: Instant,
}

impl Tally {
    fn new(name: &'static str, kinds: &[&'static str]) -> Tally {
        Tally {
            name,
            counts: kinds.iter().map(|k| (*k, AtomicU64::new(0))).collect(),
            started: Instant::now(),
        }
    }

    fn bump(&self, kind: &str) {
        if let Some((_, n)) = self.counts.iter().find(|(k, _)| *k == kind) {
            n.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Drop for Tally {
    fn drop(&mut self) {
        let parts: Vec<String> = self
            .counts
            .iter()
            .map(|(k, n)| format!("{k}={}", n.load(Ordering::Relaxed)))
            .collect();
        // A failing property unwinds through here: say so instead.
        let verdict = if std::thread::panicking() {
            "FAILED"
        } else {
            "0 panics"
        };
        println!(
            "fuzz: {}: {} in {:.2}s, {verdict}",
            self.name,
            parts.join(" "),
            self.started.elapsed().as_secs_f64()
        );
    }
}

fn ts(ms: i64) -> Timestamp {
    Timestamp::from_millis(ms).expect("in range")
}

/// Any representable instant, with extra weight on the two ends of the
/// range and on whole minutes.
fn any_instant() -> impl Strategy<Value = Timestamp> {
    prop_oneof![
        4 => (MIN_MS..=MAX_MS).prop_map(ts),
        2 => (0i64..4_102_444_800_000).prop_map(|ms| ts(ms / 60_000 * 60_000)),
        1 => (0i64..400 * 86_400_000).prop_map(|back| ts(MAX_MS - back)),
        1 => (0i64..400 * 86_400_000).prop_map(|fwd| ts(MIN_MS + fwd)),
    ]
}

/// Strings that break naive parsers: empty, blank in many ways, control
/// characters, byte-order marks, right-to-left marks, emoji, combining marks,
/// separators loops uses in its own messages, and very long ones.
fn nasty_string() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "",
            " ",
            "\t",
            "\u{feff}",
            "\u{200b}",
            "\u{a0}",
            "\u{3000}",
            "\u{2028}",
            "a\nb",
            "a\rb",
            "\0",
            "a\u{0}b",
            "é",
            "e\u{301}",
            "💥",
            "\u{202e}gnp.exe",
            "a -> b",
            "a: b",
            "[redacted]",
            "-rf",
            "--help",
            "$(id)",
            "\"quoted\"",
            "\\",
            "ｆｕｌｌ",
            "٣",
        ])
        .prop_map(str::to_owned),
        "\\PC{1,12}",
        any::<String>(),
        (1usize..4).prop_map(|n| "x".repeat(n * 150)),
    ]
}

// ---------------------------------------------------------------------------
// Cron
// ---------------------------------------------------------------------------

/// One list element of a field over `min..=max` with optional names: mostly
/// valid, sometimes just outside the field (a value past the end, a
/// backwards range, a name of the wrong field).
fn cron_element(min: u32, max: u32, names: &'static [&'static str]) -> BoxedStrategy<String> {
    let value = prop_oneof![
        8 => (min..=max).prop_map(|v| v.to_string()),
        1 => prop_oneof![Just(max + 1), Just(min.saturating_sub(1)), 60u32..100].prop_map(|v| v.to_string()),
        1 => (min..=max).prop_map(|v| format!("00{v}")),
    ];
    let name = if names.is_empty() {
        value.clone().boxed()
    } else {
        let last = names.len() - 1;
        prop_oneof![
            3 => (0..=last, any::<bool>()).prop_map(move |(i, lower)| {
                if lower { names[i].to_ascii_lowercase() } else { names[i].to_owned() }
            }),
            1 => value.clone(),
        ]
        .boxed()
    };
    let atom = prop_oneof![4 => value.clone(), 2 => name];
    // Mostly in order; sometimes backwards, or mixing names and numbers.
    let ordered = (min..=max, min..=max).prop_map(|(a, b)| format!("{}-{}", a.min(b), a.max(b)));
    let range = prop_oneof![
        3 => ordered,
        1 => (atom.clone(), atom).prop_map(|(a, b)| format!("{a}-{b}")),
    ];
    let step = prop_oneof![
        6 => (1u32..=max + 2).prop_map(|s| s.to_string()),
        1 => Just("0".to_owned()),
        1 => "[0-9]{18,25}",
    ];
    prop_oneof![
        3 => Just("*".to_owned()),
        4 => value,
        3 => range.clone(),
        2 => step.clone().prop_map(|s| format!("*/{s}")),
        2 => (range, step).prop_map(|(r, s)| format!("{r}/{s}")),
    ]
    .boxed()
}

const MONTHS: &[&str] = &[
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const WEEKDAYS: &[&str] = &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// A comma-separated list of one to three elements.
fn cron_field(min: u32, max: u32, names: &'static [&'static str]) -> BoxedStrategy<String> {
    prop::collection::vec(cron_element(min, max, names), 1..4)
        .prop_map(|parts| parts.join(","))
        .boxed()
}

/// Text that breaks a field: Quartz modifiers, signs, doubled separators,
/// Unicode digits and letters, invisible characters, huge numbers.
fn cron_garbage() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "", "?", "L", "W", "LW", "5L", "15W", "5#2", "+1", "-5", "5-", "--", "*/", "/5", "**",
            "1--2", "*/5/2", "5/15", "1,,2", ",", ",1", "1,", "٣", "５", "é", "💥", "\u{200b}",
            "1\u{0}", "0x1F", "1e3", "½", "*\u{301}", "JANUARY", "MONDAY", "FOO", "mon-fri-sat",
            "\u{feff}*",
        ])
        .prop_map(str::to_owned),
        1 => "[0-9]{20,40}",
        1 => "[0-9*/,-]{1,8}",
        1 => "\\PC{1,4}",
    ]
}

/// Whitespace between fields, including Unicode spaces that
/// `split_whitespace` splits on and a zero-width space that it does not.
fn cron_gap() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        12 => Just(" "),
        1 => prop::sample::select(vec!["  ", "\t", "\n", "\u{a0}", "\u{3000}", "\u{2028}", "\u{200b}", "\r\n"]),
    ]
}

/// How a generated expression is damaged.
#[derive(Debug, Clone)]
enum CronDamage {
    None,
    /// One field replaced by garbage.
    Field(usize, String),
    /// Garbage appended to one field.
    Append(usize, String),
    /// A field dropped or an extra one added.
    Count(bool),
    /// Days that the months never have (`30 2`, `31 4,6`).
    NoSuchDay(&'static str, &'static str),
}

fn cron_text() -> impl Strategy<Value = String> {
    let fields = (
        cron_field(0, 59, &[]),
        cron_field(0, 23, &[]),
        cron_field(1, 31, &[]),
        cron_field(1, 12, MONTHS),
        cron_field(0, 7, WEEKDAYS),
    );
    let damage = prop_oneof![
        6 => Just(CronDamage::None),
        2 => (0usize..5, cron_garbage()).prop_map(|(i, g)| CronDamage::Field(i, g)),
        2 => (0usize..5, cron_garbage()).prop_map(|(i, g)| CronDamage::Append(i, g)),
        1 => any::<bool>().prop_map(CronDamage::Count),
        1 => prop::sample::select(vec![
            ("30", "2"),
            ("30,31", "FEB"),
            ("31", "4,6,9,11"),
            ("31", "apr-jun/2"),
            ("30-31", "2"),
        ])
        .prop_map(|(d, m)| CronDamage::NoSuchDay(d, m)),
    ];
    let gaps = (
        prop::array::uniform4(cron_gap()),
        cron_gap(),
        cron_gap(),
        any::<bool>(),
    );
    let expression =
        (fields, damage, gaps).prop_map(|((a, b, c, d, e), damage, (gaps, lead, tail, pad))| {
            let mut fields = vec![a, b, c, d, e];
            match damage {
                CronDamage::None => {}
                CronDamage::Field(i, g) => fields[i] = g,
                CronDamage::Append(i, g) => fields[i].push_str(&g),
                CronDamage::Count(true) => fields.push("*".to_owned()),
                CronDamage::Count(false) => {
                    fields.pop();
                }
                CronDamage::NoSuchDay(days, months) => {
                    fields[2] = days.to_owned();
                    fields[3] = months.to_owned();
                    fields[4] = "*".to_owned();
                }
            }
            let mut text = String::new();
            for (i, field) in fields.iter().enumerate() {
                if i > 0 {
                    text.push_str(gaps.get(i - 1).copied().unwrap_or(" "));
                }
                text.push_str(field);
            }
            if pad {
                format!("{lead}{text}{tail}")
            } else {
                text
            }
        });
    let macros = prop::sample::select(vec![
        "@yearly",
        "@ANNUALLY",
        "@Monthly",
        "@weekly",
        "@daily",
        "@midnight",
        "@hourly",
        "@reboot",
        "@every 5m",
        "@",
        "@@daily",
        " @daily ",
        "@daily * * * * *",
    ])
    .prop_map(str::to_owned);
    prop_oneof![
        20 => expression,
        1 => macros,
        1 => nasty_string(),
    ]
}

/// Zone names: real ones, ones written in other cases or with spaces, and
/// garbage.
fn zone_name() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "UTC",
            "Europe/Berlin",
            "America/New_York",
            "Australia/Lord_Howe",
            "Asia/Kathmandu",
            "Pacific/Chatham",
            "Africa/Monrovia",
            "America/St_Johns",
            "Etc/GMT+12",
            "Etc/GMT-14",
        ])
        .prop_map(|z| Some(z.to_owned())),
        1 => Just(None),
        1 => prop::sample::select(vec![
            "utc", "europe/berlin", " UTC ", "", "Mars/Olympus", "../../etc/passwd", "UTC\u{0}",
            "Europe/Berlin/", "+01:00", "GMT+1", "EST5EDT",
        ])
        .prop_map(|z| Some(z.to_owned())),
        1 => nasty_string().prop_map(Some),
    ]
}

/// Checks that a cron error names the bad input; returns the variant's name.
fn check_cron_error(text: &str, zone: Option<&str>, err: &CronError) -> &'static str {
    let message = err.to_string();
    assert!(!message.is_empty(), "empty message for {text:?}");
    assert!(
        !message.contains("internal error"),
        "the normalized form of {text:?} was refused by croner: {message}"
    );
    match err {
        CronError::FieldCount { expr, .. } => {
            assert_eq!(expr, text, "{message}");
            "field_count"
        }
        CronError::UnknownMacro { expr } => {
            assert_eq!(expr, text, "{message}");
            "unknown_macro"
        }
        CronError::NeverFires { expr, reason } => {
            assert_eq!(expr, text, "{message}");
            assert!(!reason.is_empty(), "{message}");
            "never_fires"
        }
        CronError::Exhausted { expr, .. } => {
            assert_eq!(expr, text, "{message}");
            "exhausted"
        }
        CronError::Step { part, .. } => {
            assert!(
                !part.is_empty() && text.contains(part.as_str()),
                "{text:?}: {message}"
            );
            "step"
        }
        CronError::Range { part, .. } => {
            assert!(
                !part.is_empty() && text.contains(part.as_str()),
                "{text:?}: {message}"
            );
            "range"
        }
        CronError::Field { part, .. } => {
            assert!(
                !part.is_empty() && text.contains(part.as_str()),
                "{text:?}: {message}"
            );
            "field"
        }
        CronError::Unsupported { part, modifier } => {
            assert!(
                // `1l` is reported as the `L` modifier.
                text.contains(part.as_str())
                    && part
                        .to_ascii_uppercase()
                        .contains(modifier.to_ascii_uppercase()),
                "{text:?}: {message}"
            );
            "unsupported"
        }
        CronError::OutOfRange {
            value,
            field,
            name,
            min,
            max,
        } => {
            assert!(
                !value.is_empty() && text.contains(field.as_str()),
                "{text:?}: {message}"
            );
            // The value is outside the range the message names.
            let outside = value.parse::<u64>().map_or(true, |v| v < *min || v > *max);
            assert!(outside && !name.is_empty(), "{text:?}: {message}");
            "out_of_range"
        }
        CronError::EmptyElement { field } => {
            assert!(text.contains(field.as_str()), "{text:?}: {message}");
            "empty_element"
        }
        CronError::UnknownZone { zone: name } => {
            assert_eq!(Some(name.as_str()), zone, "{message}");
            "unknown_zone"
        }
        _ => "other",
    }
}

#[test]
fn cron_expressions_never_panic_and_errors_name_the_input() {
    let tally = Tally::new(
        "cron",
        &[
            "inputs",
            "accepted",
            "field_count",
            "unknown_macro",
            "never_fires",
            "exhausted",
            "step",
            "range",
            "field",
            "unsupported",
            "out_of_range",
            "empty_element",
            "unknown_zone",
            "other",
        ],
    );
    proptest!(config(2048), |(text in cron_text(), zone in zone_name(), from in any_instant())| {
        tally.bump("inputs");
        match CronExpr::parse(&text, zone.as_deref()) {
            Ok(cron) => {
                tally.bump("accepted");
                prop_assert_eq!(cron.expression(), text.as_str());
                match cron.next_after(from) {
                    Ok(next) => {
                        prop_assert!(next > from, "{:?} after {} gave {}", text, from, next);
                        prop_assert_eq!(next.as_millis().rem_euclid(1000), 0);
                        prop_assert!(cron.matches(next), "{:?}: {} does not match", text, next);
                    }
                    Err(err) => {
                        // Only the end of the supported range stops a search.
                        prop_assert!(
                            matches!(err, CronError::Exhausted { .. }),
                            "{:?} after {}: {}", text, from, err
                        );
                        prop_assert!(from.as_millis() > CRON_END_MS - CRON_GAP_MS, "{:?} after {}: {}", text, from, err);
                        check_cron_error(&text, zone.as_deref(), &err);
                    }
                }
                if let Some(before) = cron.latest_at_or_before(from) {
                    prop_assert!(before <= from, "{:?}: {} after {}", text, before, from);
                }
            }
            Err(err) => tally.bump(check_cron_error(&text, zone.as_deref(), &err)),
        }
    });
}

#[test]
fn zone_names_never_panic_and_errors_quote_the_name() {
    let tally = Tally::new("zones", &["inputs", "accepted", "rejected"]);
    proptest!(config(512), |(name in zone_name())| {
        tally.bump("inputs");
        match Zone::parse(name.as_deref()) {
            Ok(_) => tally.bump("accepted"),
            Err(err) => {
                tally.bump("rejected");
                let message = err.to_string();
                prop_assert!(message.starts_with("unknown time zone: "), "{}", message);
                prop_assert!(message.contains(name.as_deref().unwrap_or_default()), "{}", message);
            }
        }
    });
}

// ---------------------------------------------------------------------------
// Durations and instants
// ---------------------------------------------------------------------------

/// Strings close to the duration grammar `^\d+(\.\d+)?(ms|s|m|h|d)?$`.
fn duration_text() -> impl Strategy<Value = String> {
    let unit = prop::sample::select(vec![
        "", "", "ms", "s", "m", "h", "d", "S", "M", "sec", "min", "w", "y", "us", "µs", "ns", " s",
        "s ", "ms s", "\u{a0}",
    ]);
    let digits = prop_oneof![
        6 => "[0-9]{1,6}",
        1 => "[0-9]{15,45}",
        1 => prop::sample::select(vec!["", "-1", "+1", "٣", "５", "1_000", "1,5", "0x10", "1e3", "."]).prop_map(str::to_owned),
    ];
    let fraction = prop_oneof![
        4 => Just(String::new()),
        3 => "\\.[0-9]{1,4}",
        1 => "\\.[0-9]{20,60}",
        1 => prop::sample::select(vec![".", "..5", ".5.5", ".-1"]).prop_map(str::to_owned),
    ];
    let pad = prop::sample::select(vec!["", "", "", " ", "\t", "\u{3000}", "\n"]);
    let close = (pad.clone(), digits, fraction, unit, pad)
        .prop_map(|(a, d, f, u, b)| format!("{a}{d}{f}{u}{b}"));
    prop_oneof![8 => close, 1 => nasty_string()]
}

/// A reference parser for inputs with at most 6 integer digits and 4
/// fraction digits: exact integer arithmetic, rounding half up.
fn reference_ms(input: &str) -> Option<u64> {
    let s = input.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(end);
    let multiplier: u128 = match unit {
        "" | "ms" => 1,
        "s" | "sec" | "secs" => 1_000,
        "m" | "min" | "mins" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty()
        || whole.len() > 6
        || fraction.len() > 4
        || (number.contains('.') && fraction.is_empty())
        || fraction.contains('.')
    {
        return None;
    }
    let scaled: u128 = format!("{whole}{fraction:0<4}").parse().ok()?;
    // value = scaled / 10^4 units; ms = scaled * multiplier / 10^4, half up.
    let numerator = scaled * multiplier;
    u64::try_from((numerator + 5_000) / 10_000).ok()
}

#[test]
fn durations_never_panic_and_agree_with_a_reference() {
    let tally = Tally::new(
        "durations",
        &[
            "inputs",
            "accepted",
            "invalid",
            "too_large",
            "zero",
            "checked_against_reference",
        ],
    );
    proptest!(config(4096), |(input in duration_text())| {
        tally.bump("inputs");
        match parse_duration(&input) {
            Ok(ms) => {
                tally.bump("accepted");
                prop_assert!(ms <= 100 * 365 * 86_400_000, "{:?} gave {}", input, ms);
                if let Some(expected) = reference_ms(&input) {
                    tally.bump("checked_against_reference");
                    prop_assert_eq!(ms, expected, "{:?}", input);
                }
            }
            Err(err) => {
                let message = err.to_string();
                match &err {
                    DurationError::Invalid { input: quoted } => {
                        tally.bump("invalid");
                        prop_assert_eq!(quoted, &input);
                        prop_assert_eq!(message, format!("invalid duration: {input} ({})", loops_core::DURATION_FORMS));
                        prop_assert!(reference_ms(&input).is_none(), "{:?} is valid", input);
                    }
                    DurationError::TooLarge { input: quoted } => {
                        tally.bump("too_large");
                        prop_assert_eq!(quoted, &input);
                        prop_assert!(message.contains(&input), "{}", message);
                    }
                    DurationError::Zero { .. } => prop_assert!(false, "parse_duration never says zero: {}", message),
                    other => prop_assert!(false, "a duration error this test does not know: {:?}", other),
                }
            }
        }
        match parse_positive_duration(&input, "--timeout") {
            Ok(ms) => prop_assert!(ms > 0),
            Err(DurationError::Zero { what }) => {
                tally.bump("zero");
                prop_assert_eq!(what, "--timeout");
                prop_assert_eq!(parse_duration(&input), Ok(0));
            }
            Err(err) => prop_assert_eq!(Err(err), parse_duration(&input)),
        }
    });
}

/// A loops file writes durations with `duration_text` (issue 31), and
/// applying the file parses them: every duration must come back exact.
#[test]
fn a_written_duration_parses_back_to_itself() {
    proptest!(config(4096), |(ms in prop_oneof![0..=10_000u64, 0..=loops_core::MAX_DURATION_MS])| {
        let text = loops_core::duration_text(ms);
        prop_assert_eq!(parse_duration(&text), Ok(ms), "{}", text);
        prop_assert!(!loops_core::bare_milliseconds(&text), "{}", text);
    });
}

/// Strings close to ISO-8601 instants, as `--at` and `--expires-at` take.
fn instant_text() -> impl Strategy<Value = String> {
    let year = prop_oneof![
        6 => (1900u32..2200).prop_map(|y| format!("{y:04}")),
        1 => prop::sample::select(vec!["0000", "9999", "10000", "-0001", "+2030", "99", "٢٠٣٠"]).prop_map(str::to_owned),
    ];
    let two = |hi: u32| {
        prop_oneof![
            6 => (0..=hi).prop_map(|v| format!("{v:02}")),
            1 => prop::sample::select(vec!["00", "99", "1", "", "x", "٣"]).prop_map(str::to_owned),
        ]
    };
    let time = prop_oneof![
        2 => Just(String::new()),
        4 => (two(24), two(60), two(61)).prop_map(|(h, m, s)| format!("T{h}:{m}:{s}")),
        1 => (two(24), two(60)).prop_map(|(h, m)| format!("T{h}:{m}")),
        1 => (two(23), two(59), two(59), "[0-9]{1,12}").prop_map(|(h, m, s, f)| format!("T{h}:{m}:{s}.{f}")),
    ];
    let zone = prop::sample::select(vec![
        "", "Z", "z", "+00:00", "+14:00", "-14:00", "+23:59", "+24:00", "-12:30", "+0530", "+05",
        " UTC", "Z ", "+99:99",
    ]);
    let close = (year, two(13), two(32), time, zone)
        .prop_map(|(y, mo, d, t, z)| format!("{y}-{mo}-{d}{t}{z}"));
    prop_oneof![8 => close, 1 => nasty_string()]
}

#[test]
fn instants_never_panic_and_round_trip() {
    let tally = Tally::new("instants", &["inputs", "accepted", "rejected"]);
    proptest!(config(4096), |(input in instant_text())| {
        tally.bump("inputs");
        match parse_schedule_at(&input) {
            Ok(t) => {
                tally.bump("accepted");
                // The canonical form parses back to the same instant.
                let again: Timestamp = t.to_string().parse().unwrap();
                prop_assert_eq!(again, t);
                prop_assert!(t.as_millis() >= MIN_MS && t.as_millis() <= MAX_MS);
            }
            Err(err) => {
                tally.bump("rejected");
                prop_assert_eq!(err.to_string(), format!("invalid schedule.at: {input}"));
                let direct = Timestamp::parse(&input).unwrap_err();
                prop_assert_eq!(direct.input, input);
            }
        }
    });
}

#[test]
fn names_never_panic_and_errors_name_the_label() {
    let tally = Tally::new("names", &["inputs", "accepted", "rejected"]);
    proptest!(config(2048), |(name in nasty_string(), label in prop::sample::select(vec!["name", "workflow.name"]))| {
        tally.bump("inputs");
        match validate_name(&name, label) {
            Ok(()) => {
                tally.bump("accepted");
                prop_assert!(!name.trim().is_empty());
                prop_assert!(!name.chars().any(char::is_control));
            }
            Err(err) => {
                tally.bump("rejected");
                prop_assert_eq!(err.field.as_str(), label);
                prop_assert!(err.message.starts_with(label), "{}", err.message);
            }
        }
    });
}

// ---------------------------------------------------------------------------
// Workflow files
// ---------------------------------------------------------------------------

/// Arbitrary JSON: what a wrong type looks like.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        prop::sample::select(vec![
            0.0f64,
            -0.0,
            0.5,
            1.0,
            2.0,
            -1.0,
            1e300,
            9_007_199_254_740_993.0
        ])
        .prop_map(Value::from),
        nasty_string().prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(("[a-zA-Z]{1,6}", inner), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// A field of a generated step or target: absent, valid, or any JSON.
#[derive(Debug, Clone)]
enum Slot {
    Absent,
    Valid,
    Wrong(Value),
}

fn slot() -> impl Strategy<Value = Slot> {
    prop_oneof![
        40 => Just(Slot::Absent),
        40 => Just(Slot::Valid),
        1 => any_json().prop_map(Slot::Wrong),
    ]
}

/// How a generated step's id is written.
#[derive(Debug, Clone)]
enum IdChoice {
    /// `s<index>`.
    Plain,
    /// A random Unicode id, made unique with the index.
    Unicode(String),
    /// A copy of another step's id (a duplicate).
    Copy(usize),
    /// Missing, blank, or not a string.
    Wrong(Option<Value>),
}

fn id_choice() -> impl Strategy<Value = IdChoice> {
    prop_oneof![
        30 => Just(IdChoice::Plain),
        6 => nasty_string().prop_map(IdChoice::Unicode),
        1 => any::<usize>().prop_map(IdChoice::Copy),
        1 => prop_oneof![
            Just(None),
            Just(Some(json!(""))),
            Just(Some(json!(" \u{3000}"))),
            any_json().prop_map(Some),
        ]
        .prop_map(IdChoice::Wrong),
    ]
}

/// A dependency: an earlier step, any step (maybe itself, maybe a later
/// one: a cycle), a step that does not exist, or not a string.
#[derive(Debug, Clone)]
enum Dep {
    Earlier(usize),
    Step(usize),
    Missing(String),
    Wrong(Value),
}

fn dep() -> impl Strategy<Value = Dep> {
    prop_oneof![
        40 => any::<usize>().prop_map(Dep::Earlier),
        4 => any::<usize>().prop_map(Dep::Step),
        1 => nasty_string().prop_map(Dep::Missing),
        1 => any_json().prop_map(Dep::Wrong),
    ]
}

#[derive(Debug, Clone)]
enum TargetChoice {
    Command {
        command: String,
        shell: Option<bool>,
    },
    Agent {
        provider: String,
        prompt: String,
    },
    Wrong(Value),
}

fn target_choice() -> impl Strategy<Value = TargetChoice> {
    let command = prop_oneof![
        12 => Just("true".to_owned()),
        2 => Just("echo hi".to_owned()),
        1 => nasty_string(),
    ];
    let provider = prop_oneof![
        6 => prop::sample::select(vec!["claude", "cursor", "codewith", "aicopilot", "opencode", "codex"]).prop_map(str::to_owned),
        1 => prop::sample::select(vec!["Claude", "gpt", "", " claude"]).prop_map(str::to_owned),
    ];
    prop_oneof![
        12 => (command, prop::option::of(any::<bool>()))
            .prop_map(|(command, shell)| TargetChoice::Command { command, shell }),
        6 => (provider, nasty_string()).prop_map(|(provider, prompt)| TargetChoice::Agent { provider, prompt }),
        1 => any_json().prop_map(TargetChoice::Wrong),
    ]
}

#[derive(Debug, Clone)]
struct StepChoice {
    id: IdChoice,
    target: TargetChoice,
    /// `None` leaves `dependsOn` out; `Some(Err(v))` writes a non-array.
    deps: Option<Result<Vec<Dep>, Value>>,
    /// name, description, continueOnFailure, timeoutMs, account.
    step_slots: [Slot; 5],
    /// args, cwd, env, timeoutMs, account, model, agent, extraArgs,
    /// configIsolation.
    target_slots: [Slot; 9],
    /// Unknown keys, kept in `Step::extra`.
    extra: Vec<(String, Value)>,
    /// The whole step replaced by a non-object.
    not_an_object: Option<Value>,
}

fn step_choice() -> impl Strategy<Value = StepChoice> {
    let deps = prop_oneof![
        5 => Just(None),
        20 => prop::collection::vec(dep(), 0..4).prop_map(|d| Some(Ok(d))),
        1 => any_json().prop_map(|v| Some(Err(v))),
    ];
    let not_an_object = prop_oneof![
        80 => Just(None),
        1 => prop_oneof![Just(Value::Null), Just(json!([])), Just(json!("step")), Just(json!(1))].prop_map(Some),
    ];
    (
        id_choice(),
        target_choice(),
        deps,
        prop::array::uniform5(slot()),
        prop::array::uniform9(slot()),
        prop::collection::vec(("[a-z]{1,8}|\\PC{1,4}", any_json()), 0..2),
        not_an_object,
    )
        .prop_map(
            |(id, target, deps, step_slots, target_slots, extra, not_an_object)| StepChoice {
                id,
                target,
                deps,
                step_slots,
                target_slots,
                extra,
                not_an_object,
            },
        )
}

#[derive(Debug, Clone)]
struct WorkflowChoice {
    root: Option<Value>,
    name: Slot,
    name_text: String,
    name_override: Option<String>,
    steps: Option<Result<Vec<StepChoice>, Value>>,
    version: Slot,
    max_parallel: Slot,
    description: Slot,
}

fn workflow_choice() -> impl Strategy<Value = WorkflowChoice> {
    let root = prop_oneof![
        40 => Just(None),
        1 => prop_oneof![Just(Value::Null), Just(json!([])), Just(json!("w")), Just(json!(7))].prop_map(Some),
    ];
    let steps = prop_oneof![
        1 => Just(None),
        1 => any_json().prop_map(|v| Some(Err(v))),
        1 => Just(Some(Ok(Vec::new()))),
        60 => prop::collection::vec(step_choice(), 1..10).prop_map(|s| Some(Ok(s))),
    ];
    let name_text = prop_oneof![6 => Just("w".to_owned()), 1 => nasty_string()];
    let name = prop_oneof![
        40 => Just(Slot::Valid),
        1 => Just(Slot::Absent),
        1 => any_json().prop_map(Slot::Wrong),
    ];
    (
        root,
        name,
        name_text,
        prop::option::weighted(0.1, nasty_string()),
        steps,
        (slot(), slot(), slot()),
    )
        .prop_map(
            |(
                root,
                name,
                name_text,
                name_override,
                steps,
                (version, max_parallel, description),
            )| {
                WorkflowChoice {
                    root,
                    name,
                    name_text,
                    name_override,
                    steps,
                    version,
                    max_parallel,
                    description,
                }
            },
        )
}

/// Writes `slot` under `key`: `valid` when valid, the wrong value when wrong.
fn put(map: &mut Map<String, Value>, key: &str, slot: &Slot, valid: Value) {
    match slot {
        Slot::Absent => {}
        Slot::Valid => {
            map.insert(key.to_owned(), valid);
        }
        Slot::Wrong(v) => {
            map.insert(key.to_owned(), v.clone());
        }
    }
}

/// The id step `i` is written with, when it is a string.
fn id_of(steps: &[StepChoice], i: usize, depth: usize) -> Option<String> {
    match &steps[i].id {
        IdChoice::Plain => Some(format!("s{i}")),
        IdChoice::Unicode(s) => Some(format!("{s}#{i}")),
        IdChoice::Copy(j) if depth < 4 => id_of(steps, j % steps.len(), depth + 1),
        IdChoice::Copy(_) => Some(format!("s{i}")),
        IdChoice::Wrong(Some(Value::String(s))) => Some(s.clone()),
        IdChoice::Wrong(_) => None,
    }
}

fn build_target(choice: &TargetChoice, slots: &[Slot; 9]) -> Value {
    let mut map = match choice {
        TargetChoice::Wrong(v) => return v.clone(),
        TargetChoice::Command { command, shell } => {
            let mut m = Map::new();
            m.insert("type".into(), json!("command"));
            m.insert("command".into(), json!(command));
            if let Some(shell) = shell {
                m.insert("shell".into(), json!(shell));
            }
            m
        }
        TargetChoice::Agent { provider, prompt } => {
            let mut m = Map::new();
            m.insert("type".into(), json!("agent"));
            m.insert("provider".into(), json!(provider));
            m.insert("prompt".into(), json!(prompt));
            m
        }
    };
    let valid: [(&str, Value); 9] = [
        ("args", json!(["-v", "x y"])),
        ("cwd", json!("/tmp")),
        ("env", json!({"A_1": "v", "_X": ""})),
        ("timeoutMs", json!(60_000)),
        ("account", json!({"profile": "work", "tool": "claude"})),
        ("model", json!("m")),
        ("agent", json!("a")),
        ("extraArgs", json!(["--x"])),
        ("configIsolation", json!("none")),
    ];
    for ((key, v), slot) in valid.into_iter().zip(slots) {
        put(&mut map, key, slot, v);
    }
    Value::Object(map)
}

fn build_step(steps: &[StepChoice], i: usize) -> Value {
    let choice = &steps[i];
    if let Some(v) = &choice.not_an_object {
        return v.clone();
    }
    let mut map = Map::new();
    for (key, value) in &choice.extra {
        map.insert(key.clone(), value.clone());
    }
    match &choice.id {
        IdChoice::Wrong(None) => {}
        IdChoice::Wrong(Some(v)) => {
            map.insert("id".into(), v.clone());
        }
        _ => {
            map.insert("id".into(), json!(id_of(steps, i, 0)));
        }
    }
    map.insert(
        "target".into(),
        build_target(&choice.target, &choice.target_slots),
    );
    match &choice.deps {
        None => {}
        Some(Err(v)) => {
            map.insert("dependsOn".into(), v.clone());
        }
        Some(Ok(deps)) => {
            let deps: Vec<Value> = deps
                .iter()
                .filter_map(|d| match d {
                    Dep::Earlier(_) if i == 0 => None,
                    Dep::Earlier(j) => Some(json!(id_of(steps, j % i, 0))),
                    Dep::Step(j) => Some(json!(id_of(steps, j % steps.len(), 0))),
                    Dep::Missing(s) => Some(json!(format!("missing:{s}"))),
                    Dep::Wrong(v) => Some(v.clone()),
                })
                .collect();
            map.insert("dependsOn".into(), Value::Array(deps));
        }
    }
    let valid: [(&str, Value); 5] = [
        ("name", json!("Step")),
        ("description", json!("does things")),
        ("continueOnFailure", json!(true)),
        ("timeoutMs", json!(1_000)),
        ("account", json!({"profile": "p"})),
    ];
    for ((key, v), slot) in valid.into_iter().zip(&choice.step_slots) {
        put(&mut map, key, slot, v);
    }
    Value::Object(map)
}

fn build_workflow(choice: &WorkflowChoice) -> Value {
    if let Some(root) = &choice.root {
        return root.clone();
    }
    let mut map = Map::new();
    put(&mut map, "name", &choice.name, json!(choice.name_text));
    match &choice.steps {
        None => {}
        Some(Err(v)) => {
            map.insert("steps".into(), v.clone());
        }
        Some(Ok(steps)) => {
            let built: Vec<Value> = (0..steps.len()).map(|i| build_step(steps, i)).collect();
            map.insert("steps".into(), Value::Array(built));
        }
    }
    put(&mut map, "version", &choice.version, json!(2));
    put(&mut map, "maxParallel", &choice.max_parallel, json!(4));
    put(&mut map, "description", &choice.description, json!("d"));
    Value::Object(map)
}

/// The string ids of a workflow file's steps.
fn file_ids(file: &Value) -> Vec<String> {
    file.get("steps")
        .and_then(Value::as_array)
        .map(|steps| {
            steps
                .iter()
                .filter_map(|s| s.get("id").and_then(Value::as_str).map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The ids `file` says step `id` depends on.
fn file_deps(file: &Value, id: &str) -> Vec<String> {
    file["steps"]
        .as_array()
        .and_then(|steps| steps.iter().find(|s| s["id"] == id))
        .and_then(|s| s["dependsOn"].as_array())
        .map(|deps| {
            deps.iter()
                .filter_map(|d| d.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Checks that a workflow error names the bad input: its field is a path
/// into the file, any step index it cites exists, and a message that does
/// not repeat its path quotes the step ids it is about. Returns a kind for
/// the tally.
fn check_workflow_error(file: &Value, message: &str, field: &str) -> &'static str {
    assert!(!message.is_empty(), "empty message for {file}");
    assert!(
        field == "workflow" || field.starts_with("workflow."),
        "field {field:?} is not a path into the file: {message}"
    );
    let step_count = file
        .get("steps")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    for text in [message, field] {
        for (at, _) in text.match_indices("workflow.steps[") {
            let rest = &text[at + "workflow.steps[".len()..];
            let index: usize = rest[..rest.find(']').unwrap_or(0)]
                .parse()
                .unwrap_or(usize::MAX);
            assert!(
                index < step_count,
                "{text} cites a step that does not exist"
            );
        }
    }
    let ids = file_ids(file);
    if message == "workflow file must be an object" {
        assert!(!file.is_object());
        return "not_an_object";
    }
    if let Some(id) = message.strip_prefix("duplicate workflow step id: ") {
        assert!(
            ids.iter().filter(|i| *i == id).count() >= 2,
            "{message}: {ids:?}"
        );
        return "duplicate_id";
    }
    if let Some(rest) = message.strip_prefix("workflow dependency cycle includes step ") {
        // `<id>: <id> -> ... -> <id>`; ids may themselves contain ": " or
        // " -> ", so the path is checked against the file's edges.
        let first = ids
            .iter()
            .filter(|id| rest.starts_with(&format!("{id}: ")))
            .max_by_key(|id| id.len())
            .unwrap_or_else(|| panic!("{message} names no step of {ids:?}"));
        let path = &rest[first.len() + 2..];
        assert!(
            path.starts_with(first.as_str()) && path.ends_with(first.as_str()),
            "{message}"
        );
        assert!(
            path.len() > first.len() && path.contains(" -> "),
            "{message}"
        );
        // Walk the path: each hop is a dependency of the previous step.
        let mut at = first.clone();
        let mut rest = &path[first.len()..];
        while let Some(tail) = rest.strip_prefix(" -> ") {
            let next = file_deps(file, &at)
                .into_iter()
                .filter(|d| tail.starts_with(d.as_str()))
                .max_by_key(String::len)
                .unwrap_or_else(|| panic!("{message}: no edge out of {at:?}"));
            rest = &tail[next.len()..];
            at = next;
        }
        assert!(rest.is_empty() && at == *first, "{message}");
        return "cycle";
    }
    if let Some(rest) = message.strip_prefix("step ") {
        let known = ids.iter().any(|id| rest.starts_with(&format!("{id} ")));
        assert!(known, "{message} names no step of {ids:?}");
        assert!(
            message.contains(" depends on missing step ")
                || message.ends_with(" cannot depend on itself"),
            "{message}"
        );
        return "dependency";
    }
    assert!(
        message.starts_with(field),
        "the message does not name its field {field:?}: {message}"
    );
    "field"
}

/// Checks an accepted workflow against its file.
fn check_accepted(file: &Value, w: &NewWorkflow) {
    let ids = file_ids(file);
    let got: Vec<&str> = w.steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(got, ids, "ids are kept in declaration order");
    let unique: HashSet<&str> = got.iter().copied().collect();
    assert_eq!(unique.len(), got.len(), "ids are unique");
    assert!(!w.name.trim().is_empty());
    check_order(&w.steps);
}

/// The execution order is a permutation that puts every dependency first.
fn check_order(steps: &[Step]) {
    let order = workflow_execution_order(steps);
    assert_eq!(order.len(), steps.len());
    let position: HashMap<&str, usize> = order
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.as_str(), i))
        .collect();
    assert_eq!(position.len(), steps.len(), "every step exactly once");
    for step in steps {
        for dep in &step.depends_on {
            assert!(
                position[dep.as_str()] < position[step.id.as_str()],
                "{dep} runs after {}",
                step.id
            );
        }
    }
}

#[test]
fn workflow_files_never_panic_and_errors_name_the_path() {
    let tally = Tally::new(
        "workflows",
        &[
            "inputs",
            "steps",
            "accepted",
            "not_an_object",
            "duplicate_id",
            "cycle",
            "dependency",
            "field",
        ],
    );
    proptest!(config(512), |(choice in workflow_choice())| {
        let file = build_workflow(&choice);
        tally.bump("inputs");
        for _ in 0..file.get("steps").and_then(Value::as_array).map_or(0, Vec::len) {
            tally.bump("steps");
        }
        match workflow_from_json(&file, choice.name_override.as_deref()) {
            Ok(w) => {
                tally.bump("accepted");
                check_accepted(&file, &w);
            }
            Err(err) => tally.bump(check_workflow_error(&file, &err.message, &err.field)),
        }
    });
}

/// A random DAG: `n` steps, each depending on up to 4 earlier ones, declared
/// in a shuffled order, so the walk meets dependencies before and after
/// their dependents.
fn dag() -> impl Strategy<Value = (Vec<Vec<usize>>, Vec<usize>)> {
    (1usize..400)
        .prop_flat_map(|n| {
            let edges = (0..n)
                .map(|i| {
                    if i == 0 {
                        Just(Vec::new()).boxed()
                    } else {
                        prop::collection::vec(0..i, 0..4).boxed()
                    }
                })
                .collect::<Vec<_>>();
            (edges, Just((0..n).collect::<Vec<usize>>()).prop_shuffle())
        })
        .prop_map(|(mut edges, order)| {
            for deps in &mut edges {
                deps.sort_unstable();
                deps.dedup();
            }
            (edges, order)
        })
}

fn dag_file(edges: &[Vec<usize>], order: &[usize], ids: &[String]) -> Value {
    let steps: Vec<Value> = order
        .iter()
        .map(|&i| {
            let deps: Vec<&str> = edges[i].iter().map(|&j| ids[j].as_str()).collect();
            json!({"id": ids[i], "dependsOn": deps, "target": {"type": "command", "command": "true"}})
        })
        .collect();
    json!({"name": "dag", "steps": steps})
}

#[test]
fn random_dags_are_accepted_and_one_back_edge_is_a_named_cycle() {
    let tally = Tally::new("dags", &["graphs", "steps", "cycles"]);
    proptest!(config(128), |((edges, order) in dag(), unicode in any::<bool>(), pick in any::<(usize, usize)>())| {
        let n = edges.len();
        tally.bump("graphs");
        for _ in 0..n {
            tally.bump("steps");
        }
        // Unicode ids that contain the separators of the cycle message.
        let ids: Vec<String> = (0..n)
            .map(|i| if unicode { format!("é -> {i}: 💥") } else { format!("s{i}") })
            .collect();
        let file = dag_file(&edges, &order, &ids);
        let w = workflow_from_json(&file, None).unwrap();
        prop_assert_eq!(w.steps.len(), n);
        check_order(&w.steps);

        // A back edge from an ancestor to a descendant closes a cycle.
        let descendant = pick.0 % n;
        let mut ancestors: Vec<usize> = Vec::new();
        let mut stack = edges[descendant].clone();
        let mut seen = HashSet::new();
        while let Some(a) = stack.pop() {
            if seen.insert(a) {
                ancestors.push(a);
                stack.extend(&edges[a]);
            }
        }
        if ancestors.is_empty() {
            return Ok(());
        }
        ancestors.sort_unstable();
        let ancestor = ancestors[pick.1 % ancestors.len()];
        let mut cyclic = edges.clone();
        cyclic[ancestor].push(descendant);
        let file = dag_file(&cyclic, &order, &ids);
        let err = workflow_from_json(&file, None).unwrap_err();
        prop_assert_eq!(check_workflow_error(&file, &err.message, &err.field), "cycle", "{}", err.message);
        tally.bump("cycles");
    });
}

#[test]
fn huge_workflows_are_fast() {
    let n = 20_000;
    let started = Instant::now();
    // A wide fan-in: the last step depends on every other one.
    let mut steps: Vec<Value> = (0..n - 1)
        .map(|i| json!({"id": format!("s{i}"), "target": {"type": "command", "command": "true"}}))
        .collect();
    let all: Vec<String> = (0..n - 1).map(|i| format!("s{i}")).collect();
    steps.push(
        json!({"id": "last", "dependsOn": all, "target": {"type": "command", "command": "true"}}),
    );
    let w = workflow_from_json(&json!({"name": "wide", "steps": steps}), None).unwrap();
    check_order(&w.steps);
    // A chain declared backwards: each step depends on the one declared
    // after it, so the walk is n deep.
    let steps: Vec<Value> = (0..n)
        .map(|i| {
            let deps: Vec<String> = (i + 1 < n).then(|| format!("s{}", i + 1)).into_iter().collect();
            json!({"id": format!("s{i}"), "dependsOn": deps, "target": {"type": "command", "command": "true"}})
        })
        .collect();
    let w = workflow_from_json(&json!({"name": "deep", "steps": steps}), None).unwrap();
    check_order(&w.steps);
    // The same chain with a duplicate id at the very end is rejected by id.
    let mut steps = steps;
    steps.push(json!({"id": "s0", "target": {"type": "command", "command": "true"}}));
    let err = workflow_from_json(&json!({"name": "dup", "steps": steps}), None).unwrap_err();
    assert_eq!(err.message, "duplicate workflow step id: s0");
    assert_eq!(err.field, format!("workflow.steps[{n}].id"));
    let elapsed = started.elapsed();
    println!(
        "fuzz: huge_workflows: 3 files of {n} steps in {:.2}s, 0 panics",
        elapsed.as_secs_f64()
    );
    // Honest slack, not a benchmark: this took 17 s in a debug build on a
    // busy 2-core machine (the old bound of 30 s was within 2x of that).
    // The bound only catches a walk gone quadratic, 20 000 times the
    // work, not a slowdown.
    assert!(elapsed.as_secs() < 120, "{elapsed:?}");
}

#[test]
fn nesting_as_deep_as_a_file_can_hold_is_handled() {
    // serde_json stops parsing at 128 levels; a workflow file reaches at
    // most that, wherever the deep value sits.
    let mut cases = 0;
    for depth in [1usize, 16, 100, 124, 125, 126, 127, 128, 100_000] {
        for (open, close) in [("[", "]"), ("{\"k\":", "}")] {
            let deep = format!("{}1{}", open.repeat(depth), close.repeat(depth));
            for place in ["extra", "dependsOn", "target", "id", "name", "root"] {
                let text = match place {
                    "extra" => format!(
                        r#"{{"name":"w","steps":[{{"id":"a","target":{{"type":"command","command":"true"}},"deep":{deep}}}]}}"#
                    ),
                    "dependsOn" | "target" | "id" => format!(
                        r#"{{"name":"w","steps":[{{"id":"a","target":{{"type":"command","command":"true"}},"{place}":{deep}}}]}}"#
                    ),
                    "name" => format!(
                        r#"{{"name":{deep},"steps":[{{"id":"a","target":{{"type":"command","command":"true"}}}}]}}"#
                    ),
                    _ => deep.clone(),
                };
                cases += 1;
                let Ok(file) = serde_json::from_str::<Value>(&text) else {
                    assert!(depth >= 125, "depth {depth} at {place} does not parse");
                    continue;
                };
                match workflow_from_json(&file, None) {
                    Ok(w) => {
                        assert_eq!(place, "extra", "depth {depth} at {place} accepted");
                        assert_eq!(w.steps[0].extra.get("deep"), file["steps"][0].get("deep"));
                        // What the store writes and reads back.
                        let stored = serde_json::to_string(&w.steps).unwrap();
                        let back: Vec<Step> = serde_json::from_str(&stored).unwrap();
                        assert_eq!(back, w.steps, "depth {depth}");
                    }
                    Err(err) => {
                        assert_ne!(place, "extra", "{err}");
                        check_workflow_error(&file, &err.message, &err.field);
                    }
                }
            }
        }
    }
    println!("fuzz: nesting: {cases} deeply nested files, 0 panics");
}

// ---------------------------------------------------------------------------
// Schedule math on valid input
// ---------------------------------------------------------------------------

/// A valid cron expression with a zone, from a fixed set that covers the
/// shapes the math treats differently.
fn valid_cron() -> impl Strategy<Value = Schedule> {
    let expression = prop::sample::select(vec![
        "* * * * *",
        "*/7 * * * *",
        "0 9 * * MON-FRI",
        "30 2 * * *",
        "0 0 29 2 *",
        "0 0 31 * *",
        "0 0 13 * 5",
        "59 23 31 12 *",
        "0 0 1 1 *",
        "@hourly",
        "0,30 1-3 * * 0,7",
    ]);
    let zone = prop::sample::select(vec![
        Some("UTC"),
        Some("Europe/Berlin"),
        Some("Australia/Lord_Howe"),
        Some("Asia/Kathmandu"),
        Some("America/St_Johns"),
        None,
    ]);
    (expression, zone).prop_map(|(e, z)| Schedule::Cron {
        expression: e.to_owned(),
        timezone: z.map(str::to_owned),
    })
}

fn valid_schedule() -> impl Strategy<Value = Schedule> {
    let every = prop_oneof![
        4 => 1u64..10_000_000,
        1 => prop::sample::select(vec![1u64, 60_000, 86_400_000, 3_153_600_000_000, i64::MAX as u64]),
    ];
    let anchor = prop::option::of(prop_oneof![
        Just(Anchor::FixedRate),
        Just(Anchor::FixedDelay)
    ]);
    prop_oneof![
        1 => any_instant().prop_map(|at| Schedule::Once { at }),
        4 => (every.clone(), anchor).prop_map(|(every_ms, anchor)| Schedule::Interval { every_ms, anchor }),
        4 => valid_cron(),
        1 => prop::option::of(every).prop_map(|min_interval_ms| Schedule::Dynamic { min_interval_ms }),
    ]
}

fn base_loop(schedule: Schedule) -> Loop {
    serde_json::from_value(json!({
        "id": "0123456789ab", "name": "n", "status": "active",
        "schedule": schedule,
        "target": {"type": "command", "command": "true"},
        "catchUp": "latest", "catchUpLimit": 50, "overlap": "skip", "maxAttempts": 1,
        "retryDelayMs": 60000, "leaseMs": 1800000,
        "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z"
    }))
    .expect("a valid loop")
}

/// Only the end of the representable range may stop the math.
fn is_range_end(err: &ScheduleError) -> bool {
    matches!(
        err,
        ScheduleError::OutOfRange | ScheduleError::Cron(CronError::Exhausted { .. })
    )
}

/// Whether `t` is close enough to the end of the range for `schedule` to
/// give up: within one period of year 9999, or within the longest cron gap
/// of the end of croner's search.
fn near_end(t: Timestamp, schedule: &Schedule) -> bool {
    let period = match schedule {
        Schedule::Interval { every_ms, .. } => *every_ms,
        Schedule::Dynamic { min_interval_ms } => min_interval_ms.unwrap_or(60_000),
        Schedule::Cron { .. } => return t.as_millis() > CRON_END_MS - CRON_GAP_MS,
        Schedule::Once { .. } => 0,
    };
    t.as_millis() > MAX_MS.saturating_sub(i64::try_from(period).unwrap_or(i64::MAX))
}

#[test]
fn schedule_math_never_panics_on_valid_input() {
    let tally = Tally::new(
        "schedule_math",
        &[
            "inputs",
            "initial",
            "next_after",
            "due_slots",
            "plan_advance",
            "retries",
            "range_end",
        ],
    );
    let policy = (
        prop::sample::select(LoopStatus::ALL.to_vec()),
        prop::sample::select(CatchUp::ALL.to_vec()),
        // Large limits are legal (`--catch-up-limit` has no maximum), but
        // `due_slots` returns every slot, so the cost grows with the limit.
        prop_oneof![4 => 0u32..60, 1 => Just(1_000)],
        prop_oneof![4 => 1u32..4, 1 => Just(u32::MAX)],
        prop_oneof![4 => 1u64..86_400_000, 1 => Just(u64::MAX)],
    );
    let times = (
        any_instant(),
        any_instant(),
        prop::option::of(any_instant()),
        prop::option::of(any_instant()),
        prop::option::of(any_instant()),
        -10_000_000i64..400 * 86_400_000,
    );
    let run = (
        1u32..5,
        prop::sample::select(RunStatus::ALL.to_vec()),
        any::<bool>(),
    );
    proptest!(config(2048), |(schedule in valid_schedule(), policy in policy, times in times, run in run)| {
        tally.bump("inputs");
        prop_assert!(validate_schedule(&schedule).is_ok(), "{:?}", schedule);
        let (status, catch_up, limit, max_attempts, retry_delay_ms) = policy;
        let (now, slot, next, retry, expires, elapsed) = times;

        // The first run of a new loop.
        match initial_next_run(&schedule, now) {
            Ok(Some(first)) => {
                tally.bump("initial");
                match &schedule {
                    Schedule::Once { at } => prop_assert_eq!(first, *at),
                    _ => prop_assert!(first > now, "{:?} at {} gave {}", schedule, now, first),
                }
            }
            Ok(None) => prop_assert!(false, "no first run for {:?}", schedule),
            Err(err) => {
                tally.bump("range_end");
                prop_assert!(is_range_end(&err) && near_end(now, &schedule), "{:?} at {}: {}", schedule, now, err);
            }
        }

        // The next run after a finish.
        let finished = slot.add_ms(elapsed);
        match compute_next_after(&schedule, slot, finished) {
            Ok(None) => prop_assert!(matches!(schedule, Schedule::Once { .. }), "{:?}", schedule),
            Ok(Some(after)) => {
                tally.bump("next_after");
                prop_assert!(after > finished, "{:?}: {} after finish {}", schedule, after, finished);
                match &schedule {
                    Schedule::Interval { every_ms, anchor } => {
                        let every = i64::try_from(*every_ms).unwrap();
                        if *anchor == Some(Anchor::FixedDelay) {
                            prop_assert_eq!(after.as_millis(), finished.as_millis() + every);
                        } else {
                            prop_assert!(after > slot);
                            prop_assert_eq!((after.as_millis() - slot.as_millis()) % every, 0, "off the grid");
                            prop_assert!(after.as_millis() - every <= finished.max(slot).as_millis(), "skipped a grid point");
                        }
                    }
                    Schedule::Cron { .. } => prop_assert!(after > slot),
                    _ => {}
                }
            }
            Err(err) => {
                tally.bump("range_end");
                prop_assert!(
                    is_range_end(&err) && (near_end(finished, &schedule) || near_end(slot, &schedule)),
                    "{:?} slot {} finished {}: {}", schedule, slot, finished, err
                );
            }
        }

        // The slots a tick runs, and the advance after a run.
        let mut lp = base_loop(schedule.clone());
        lp.status = status;
        lp.catch_up = catch_up;
        lp.catch_up_limit = limit;
        lp.max_attempts = max_attempts;
        lp.retry_delay_ms = retry_delay_ms;
        lp.next_run_at = next;
        lp.retry_scheduled_for = retry;
        lp.expires_at = expires;
        match due_slots(&lp, now) {
            Ok(slots) => {
                tally.bump("due_slots");
                let due = status == LoopStatus::Active && next.is_some_and(|n| n <= now) && !is_expired(&lp, now);
                prop_assert_eq!(!slots.is_empty(), due, "{:?}", slots);
                prop_assert!(slots.len() <= limit.clamp(1, 1_000_000) as usize);
                prop_assert!(slots.windows(2).all(|w| w[0] < w[1]), "{:?}", slots);
                match retry {
                    None => prop_assert!(slots.iter().all(|s| *s <= now && Some(*s) >= next), "{:?}", slots),
                    Some(retry) if due => prop_assert_eq!(slots, vec![retry]),
                    Some(_) => {}
                }
            }
            Err(err) => prop_assert!(false, "due_slots of {:?} at {}: {}", lp.schedule, now, err),
        }
        let (attempt, run_status, succeeded) = run;
        let loop_run = LoopRun {
            id: RunId::from_bytes([1; 6]),
            loop_id: LoopId::from_bytes([2; 6]),
            loop_name: "n".into(),
            scheduled_for: slot,
            attempt,
            status: run_status,
            started_at: Some(slot),
            finished_at: Some(finished),
            claimed_by: None,
            claimed_host: None,
            lease_expires_at: None,
            pid: None,
            exit_code: None,
            duration_ms: None,
            stdout: None,
            stderr: None,
            error: None,
            created_at: slot,
            updated_at: finished,
            claim_token: None, facts: Default::default(), last_output_at: Default::default(),
            cancel_requested_at: Default::default(), cancelled_by: Default::default(), };
        match plan_advance(&lp, &loop_run, finished, succeeded) {
            Ok(None) => prop_assert!(run_status == RunStatus::Running || status != LoopStatus::Active),
            Ok(Some(advance)) => {
                tally.bump("plan_advance");
                if let Some(retry_slot) = advance.retry_scheduled_for {
                    tally.bump("retries");
                    prop_assert!(!succeeded && attempt < max_attempts);
                    prop_assert_eq!(retry_slot, slot);
                    prop_assert_eq!(advance.status, LoopStatus::Active);
                    prop_assert_eq!(advance.next_run_at.map(Timestamp::as_millis), Some(finished.as_millis() + i64::try_from(retry_delay_ms).unwrap()));
                } else {
                    prop_assert_eq!(advance.status == LoopStatus::Stopped, advance.next_run_at.is_none());
                    if let Some(n) = advance.next_run_at {
                        prop_assert!(n > finished, "{:?}: next {} after finish {}", lp.schedule, n, finished);
                    }
                }
            }
            Err(err) => {
                tally.bump("range_end");
                let delay_overflows = !succeeded && attempt < max_attempts
                    && finished.checked_add_ms(i64::try_from(retry_delay_ms).unwrap_or(i64::MAX)).is_none();
                prop_assert!(
                    is_range_end(&err) && (delay_overflows || near_end(finished, &lp.schedule) || near_end(slot, &lp.schedule)),
                    "{:?} slot {} finished {}: {}", lp.schedule, slot, finished, err
                );
            }
        }
    });
}

// ---------------------------------------------------------------------------
// Stored JSON
// ---------------------------------------------------------------------------

/// A loop as the store keeps it, with some fields replaced by arbitrary
/// JSON, as a damaged or hand-edited row would hold.
fn stored_loop() -> impl Strategy<Value = Value> {
    let keys = prop::sample::select(vec![
        "id",
        "name",
        "status",
        "schedule",
        "target",
        "nextRunAt",
        "retryScheduledFor",
        "catchUp",
        "catchUpLimit",
        "overlap",
        "maxAttempts",
        "retryDelayMs",
        "leaseMs",
        "expiresAt",
        "createdAt",
        "schedule.type",
        "schedule.everyMs",
        "schedule.expression",
        "schedule.timezone",
        "schedule.at",
        "schedule.minIntervalMs",
        "schedule.anchor",
        "target.type",
        "target.command",
        "target.env",
        "target.provider",
        "target.workflowId",
    ]);
    let replacement = prop_oneof![
        3 => any_json(),
        1 => cron_text().prop_map(Value::from),
        1 => instant_text().prop_map(Value::from),
        1 => prop::sample::select(vec!["interval", "cron", "once", "dynamic", "agent", "workflow", "command"]).prop_map(Value::from),
    ];
    (
        valid_schedule(),
        prop::collection::vec((keys, replacement), 0..4),
    )
        .prop_map(|(schedule, edits)| {
            let mut value = serde_json::to_value(base_loop(schedule)).expect("serializable");
            value["nextRunAt"] = json!("2026-01-01T00:00:00.000Z");
            for (key, replacement) in edits {
                match key.split_once('.') {
                    Some((outer, inner)) => {
                        if let Some(obj) = value[outer].as_object_mut() {
                            obj.insert(inner.to_owned(), replacement);
                        }
                    }
                    None => value[key] = replacement,
                }
            }
            value
        })
}

#[test]
fn stored_records_never_panic_the_math() {
    let tally = Tally::new("stored_json", &["inputs", "decoded", "schedule_errors"]);
    proptest!(config(2048), |(value in stored_loop(), now in any_instant())| {
        tally.bump("inputs");
        let _ = serde_json::from_value::<Schedule>(value["schedule"].clone());
        let _ = serde_json::from_value::<Target>(value["target"].clone());
        let Ok(lp) = serde_json::from_value::<Loop>(value) else { return Ok(()) };
        tally.bump("decoded");
        if let Err(err) = validate_schedule(&lp.schedule) {
            tally.bump("schedule_errors");
            prop_assert!(!err.to_string().is_empty());
        }
        // A schedule stored without validation may fail, never panic.
        let _ = due_slots(&lp, now);
        let _ = initial_next_run(&lp.schedule, now);
        let _ = compute_next_after(&lp.schedule, now, now);
    });
}
