//! Property tests for the schedule grammar and math (STYLE "Tests: core"):
//! cron fire times are after their start and match the expression, due slots
//! are sorted, `<= now` and within the limit, and the SPEC §1 records survive
//! a JSON round trip.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{Datelike, Timelike};
use loops_core::{
    AgentProvider, AgentTarget, Anchor, CatchUp, CommandTarget, ConfigIsolation, CronError,
    CronExpr, Loop, LoopId, LoopStatus, Overlap, Schedule, Target, Timestamp, WorkflowId,
    WorkflowTarget, due_slots,
};
use proptest::prelude::*;

/// One cron field as text, with the values it allows.
type Field = (String, BTreeSet<u32>);

const MONTHS: &[&str] = &[
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const WEEKDAYS: &[&str] = &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

fn values(lo: u32, hi: u32, step: u32) -> BTreeSet<u32> {
    (lo..=hi).step_by(step as usize).collect()
}

/// Writes a name in upper, lower or title case.
fn spell(name: &str, case: u8) -> String {
    match case % 3 {
        0 => name.to_owned(),
        1 => name.to_ascii_lowercase(),
        _ => format!("{}{}", &name[..1], name[1..].to_ascii_lowercase()),
    }
}

/// One list element of a field over `min..=max` with optional names for
/// `min`, `min + 1`, ....
fn element(min: u32, max: u32, names: &'static [&'static str]) -> BoxedStrategy<Field> {
    let star = Just(("*".to_owned(), values(min, max, 1)));
    let star_step = (1..=max - min + 1).prop_map(move |s| (format!("*/{s}"), values(min, max, s)));
    let single = (min..=max).prop_map(|v| (v.to_string(), BTreeSet::from([v])));
    let span = (min..=max, min..=max, 1..=12u32).prop_map(|(a, b, s)| {
        let (lo, hi) = (a.min(b), a.max(b));
        let text = if s == 1 {
            format!("{lo}-{hi}")
        } else {
            format!("{lo}-{hi}/{s}")
        };
        (text, values(lo, hi, s))
    });
    if names.is_empty() {
        return prop_oneof![star, star_step, single, span].boxed();
    }
    let last = names.len() as u32 - 1;
    let name = (0..=last, any::<u8>())
        .prop_map(move |(i, case)| (spell(names[i as usize], case), BTreeSet::from([min + i])));
    let name_span = (0..=last, 0..=last, any::<u8>()).prop_map(move |(a, b, case)| {
        let (lo, hi) = (a.min(b), a.max(b));
        let text = format!(
            "{}-{}",
            spell(names[lo as usize], case),
            spell(names[hi as usize], case)
        );
        (text, values(min + lo, min + hi, 1))
    });
    prop_oneof![star, star_step, single, span, name, name_span].boxed()
}

/// A comma-separated list of one to three elements.
fn field(min: u32, max: u32, names: &'static [&'static str]) -> impl Strategy<Value = Field> {
    prop::collection::vec(element(min, max, names), 1..=3).prop_map(|parts| {
        let text = parts
            .iter()
            .map(|(t, _)| t.as_str())
            .collect::<Vec<_>>()
            .join(",");
        let set = parts.into_iter().flat_map(|(_, s)| s).collect();
        (text, set)
    })
}

/// A valid five-field expression with the value sets of its fields.
#[derive(Debug, Clone)]
struct Expr {
    text: String,
    minutes: BTreeSet<u32>,
    hours: BTreeSet<u32>,
    days: BTreeSet<u32>,
    months: BTreeSet<u32>,
    weekdays: BTreeSet<u32>,
    any_day: bool,
    any_weekday: bool,
}

impl Expr {
    /// The SPEC §2.2 matching rule, evaluated on a UTC instant.
    fn matches(&self, t: Timestamp) -> bool {
        let dt = t.to_datetime();
        let day = self.days.contains(&dt.day());
        let weekday = self.weekdays.contains(&dt.weekday().num_days_from_sunday());
        let day_ok = match (self.any_day, self.any_weekday) {
            (true, true) => true,
            (true, false) => weekday,
            (false, true) => day,
            (false, false) => day || weekday,
        };
        t.as_millis().rem_euclid(60_000) == 0
            && self.minutes.contains(&dt.minute())
            && self.hours.contains(&dt.hour())
            && self.months.contains(&dt.month())
            && day_ok
    }
}

fn expr() -> impl Strategy<Value = Expr> {
    (
        field(0, 59, &[]),
        field(0, 23, &[]),
        field(1, 31, &[]),
        field(1, 12, MONTHS),
        field(0, 7, WEEKDAYS),
    )
        .prop_map(|(minute, hour, day, month, weekday)| Expr {
            text: format!(
                "{} {} {} {} {}",
                minute.0, hour.0, day.0, month.0, weekday.0
            ),
            any_day: day.0 == "*",
            any_weekday: weekday.0 == "*",
            minutes: minute.1,
            hours: hour.1,
            days: day.1,
            months: month.1,
            // 7 is Sunday (SPEC §10 item 6).
            weekdays: weekday.1.into_iter().map(|d| d % 7).collect(),
        })
}

/// Instants between 1970 and 2100.
fn instant() -> impl Strategy<Value = Timestamp> {
    (0i64..4_102_444_800_000).prop_map(|ms| Timestamp::from_millis(ms).expect("in range"))
}

/// Any representable instant.
fn any_instant() -> impl Strategy<Value = Timestamp> {
    (-62_167_219_200_000i64..=253_402_300_799_999)
        .prop_map(|ms| Timestamp::from_millis(ms).expect("in range"))
}

/// Parses a generated expression; one that can never fire is skipped.
fn parse(e: &Expr, zone: &str) -> Option<CronExpr> {
    match CronExpr::parse(&e.text, Some(zone)) {
        Ok(cron) => Some(cron),
        Err(CronError::NeverFires { .. }) => None,
        Err(err) => panic!("generated expression {:?} rejected: {err}", e.text),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// `next_cron_run(e, t) > t`, the result matches `e`, and nothing
    /// between `t` and the result fires.
    #[test]
    fn next_fire_time_is_after_from_and_matches(e in expr(), from in instant()) {
        let Some(cron) = parse(&e, "UTC") else { return Ok(()) };
        let next = cron.next_after(from).unwrap();
        prop_assert!(next > from, "{} after {from} gave {next}", e.text);
        prop_assert!(e.matches(next), "{} after {from} gave {next}", e.text);
        let before = cron.latest_at_or_before(next.add_ms(-1));
        prop_assert!(before.is_none_or(|b| b <= from), "{}: {before:?} lies between {from} and {next}", e.text);
        prop_assert_eq!(cron.latest_at_or_before(next), Some(next));
    }

    /// In a zone with DST, fire times still move strictly forward and the
    /// forward and backward searches agree.
    #[test]
    fn zoned_fire_times_are_consistent(e in expr(), from in instant()) {
        let Some(cron) = parse(&e, "Europe/Berlin") else { return Ok(()) };
        let next = cron.next_after(from).unwrap();
        let after = cron.next_after(next).unwrap();
        prop_assert!(from < next && next < after, "{}: {from} {next} {after}", e.text);
        prop_assert_eq!(cron.latest_at_or_before(next), Some(next));
        prop_assert_eq!(cron.latest_at_or_before(after.add_ms(-1)), Some(next));
    }

    /// No input panics, however far out of the usual range.
    #[test]
    fn searches_never_panic(e in expr(), t in any_instant()) {
        if let Some(cron) = parse(&e, "America/New_York") {
            let _ = cron.next_after(t);
            let _ = cron.latest_at_or_before(t);
        }
    }

    /// Arbitrary text never panics the parser.
    #[test]
    fn parser_never_panics(text in "[ 0-9*/,@A-Za-z?#+-]{0,30}") {
        let _ = CronExpr::parse(&text, Some("UTC"));
    }

    /// Due slots are sorted, strictly increasing, `<= now`, never before
    /// `nextRunAt`, and within the limit.
    #[test]
    fn due_slots_are_sorted_and_bounded(
        schedule in due_schedule(),
        catch_up in prop_oneof![Just(CatchUp::None), Just(CatchUp::Latest), Just(CatchUp::All)],
        limit in 0u32..20,
        next in instant(),
        elapsed in -1_000_000i64..400 * 86_400_000,
    ) {
        let mut lp = a_loop(schedule, next);
        lp.catch_up = catch_up;
        lp.catch_up_limit = limit;
        let now = next.add_ms(elapsed);
        let slots = due_slots(&lp, now).unwrap();
        prop_assert_eq!(slots.is_empty(), next > now);
        prop_assert!(slots.len() <= limit.max(1) as usize);
        prop_assert!(slots.windows(2).all(|w| w[0] < w[1]), "{slots:?}");
        prop_assert!(slots.iter().all(|&s| next <= s && s <= now), "{slots:?}");
    }

    /// Schedules, targets and loops survive `to_value` then `from_value`.
    #[test]
    fn records_round_trip_through_json(lp in a_any_loop()) {
        let schedule = serde_json::to_value(&lp.schedule).unwrap();
        prop_assert_eq!(serde_json::from_value::<Schedule>(schedule).unwrap(), lp.schedule.clone());
        let target = serde_json::to_value(&lp.target).unwrap();
        prop_assert_eq!(serde_json::from_value::<Target>(target).unwrap(), lp.target.clone());
        let value = serde_json::to_value(&lp).unwrap();
        prop_assert!(!has_null(&value), "unset fields are omitted: {value}");
        prop_assert_eq!(serde_json::from_value::<Loop>(value).unwrap(), lp);
    }
}

/// Whether a JSON value holds a `null` anywhere (SPEC §0: unset optional
/// fields are omitted, never written as `null`).
fn has_null(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::Null => true,
        serde_json::Value::Array(items) => items.iter().any(has_null),
        serde_json::Value::Object(map) => map.values().any(has_null),
        _ => false,
    }
}

fn due_schedule() -> impl Strategy<Value = Schedule> {
    let interval = (1u64..10_000_000).prop_map(|every_ms| Schedule::Interval {
        every_ms,
        anchor: None,
    });
    let cron = prop::sample::select(vec![
        "* * * * *",
        "*/15 * * * *",
        "0 9 * * 1-5",
        "0 0 29 2 *",
        "0 0 13 * 5",
    ])
    .prop_map(|e| Schedule::Cron {
        expression: e.to_owned(),
        timezone: Some("UTC".to_owned()),
    });
    let other = prop_oneof![
        Just(Schedule::Dynamic {
            min_interval_ms: None
        }),
        Just(Schedule::Once {
            at: Timestamp::EPOCH
        }),
    ];
    prop_oneof![4 => interval, 4 => cron, 1 => other]
}

fn a_loop(schedule: Schedule, next: Timestamp) -> Loop {
    Loop {
        id: LoopId::from_bytes([0xab; 6]),
        name: "n".to_owned(),
        description: None,
        status: LoopStatus::Active,
        schedule,
        target: Target::Command(CommandTarget::new("true")),
        next_run_at: Some(next),
        retry_scheduled_for: None,
        catch_up: CatchUp::Latest,
        catch_up_limit: 50,
        overlap: Overlap::Skip,
        max_attempts: 1,
        retry_delay_ms: 60_000,
        lease_ms: 1_800_000,
        expires_at: None,
        created_at: Timestamp::EPOCH,
        updated_at: Timestamp::EPOCH,
        paused_reason: None,
        policy: Default::default(),
        consecutive_successes: None,
        consecutive_failures: None,
        hooks: Default::default(),
    }
}

fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 ./_\"é-]{0,12}"
}

fn schedule() -> impl Strategy<Value = Schedule> {
    let anchor = proptest::option::of(prop_oneof![
        Just(Anchor::FixedRate),
        Just(Anchor::FixedDelay)
    ]);
    prop_oneof![
        any_instant().prop_map(|at| Schedule::Once { at }),
        (any::<u64>(), anchor)
            .prop_map(|(every_ms, anchor)| Schedule::Interval { every_ms, anchor }),
        (text(), proptest::option::of(text())).prop_map(|(expression, timezone)| Schedule::Cron {
            expression,
            timezone
        }),
        proptest::option::of(any::<u64>())
            .prop_map(|min_interval_ms| Schedule::Dynamic { min_interval_ms }),
    ]
}

fn target() -> impl Strategy<Value = Target> {
    let strings = || proptest::option::of(prop::collection::vec(text(), 0..3));
    let command = (
        text(),
        strings(),
        proptest::option::of(text()),
        proptest::option::of(any::<bool>()),
        proptest::option::of(prop::collection::btree_map("[A-Z_]{1,6}", text(), 0..3)),
        proptest::option::of(any::<u64>()),
    )
        .prop_map(
            |(command, args, cwd, shell, env, timeout_ms): (
                _,
                _,
                _,
                _,
                Option<BTreeMap<_, _>>,
                _,
            )| {
                Target::Command(CommandTarget {
                    command,
                    args,
                    cwd,
                    shell,
                    env,
                    timeout_ms,
                    account: None,
                    stdin: None,
                })
            },
        );
    let provider = prop::sample::select(AgentProvider::ALL.to_vec());
    let isolation = proptest::option::of(prop::sample::select(ConfigIsolation::ALL.to_vec()));
    let agent = (
        provider,
        text(),
        proptest::option::of(text()),
        strings(),
        isolation,
    )
        .prop_map(|(provider, prompt, model, extra_args, config_isolation)| {
            Target::Agent(AgentTarget {
                model,
                extra_args,
                config_isolation,
                ..AgentTarget::new(provider, prompt)
            })
        });
    let workflow = (
        any::<[u8; 6]>(),
        proptest::option::of(any::<u64>()),
        proptest::option::of(text()),
    )
        .prop_map(|(id, timeout_ms, input)| {
            Target::Workflow(WorkflowTarget {
                workflow_id: WorkflowId::from_bytes(id),
                input: input.map(serde_json::Value::String),
                timeout_ms,
            })
        });
    prop_oneof![command, agent, workflow]
}

fn a_any_loop() -> impl Strategy<Value = Loop> {
    let timing = (
        proptest::option::of(any_instant()),
        proptest::option::of(any_instant()),
        proptest::option::of(any_instant()),
        any_instant(),
        any_instant(),
    );
    let policy = (
        prop::sample::select(LoopStatus::ALL.to_vec()),
        prop::sample::select(CatchUp::ALL.to_vec()),
        any::<u32>(),
        prop::sample::select(Overlap::ALL.to_vec()),
        any::<u32>(),
        any::<u64>(),
        any::<u64>(),
    );
    (
        any::<[u8; 6]>(),
        text(),
        proptest::option::of(text()),
        schedule(),
        target(),
        timing,
        policy,
    )
        .prop_map(
            |(id, name, description, schedule, target, timing, policy)| {
                let (next_run_at, retry_scheduled_for, expires_at, created_at, updated_at) = timing;
                let (
                    status,
                    catch_up,
                    catch_up_limit,
                    overlap,
                    max_attempts,
                    retry_delay_ms,
                    lease_ms,
                ) = policy;
                Loop {
                    id: LoopId::from_bytes(id),
                    name,
                    description,
                    status,
                    schedule,
                    target,
                    next_run_at,
                    retry_scheduled_for,
                    catch_up,
                    catch_up_limit,
                    overlap,
                    max_attempts,
                    retry_delay_ms,
                    lease_ms,
                    expires_at,
                    created_at,
                    updated_at,
                    paused_reason: None,
                    policy: Default::default(),
                    consecutive_successes: None,
                    consecutive_failures: None,
                    hooks: Default::default(),
                }
            },
        )
}
