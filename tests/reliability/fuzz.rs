//! Bad input at the command line: random and malformed arguments to
//! `loops create command|agent` and to every read and management verb, and
//! malformed workflow files for `loops workflows validate|create` (broken
//! JSON, nesting 100,000 levels deep, files of several megabytes, tens of
//! thousands of steps, cycles, Unicode, wrong types).
//!
//! Every invocation must end in one of three ways:
//!
//! - success (exit 0);
//! - a rejection: exit 1, nothing on stdout, and a first stderr line
//!   `error: <what to fix>`. When a case changes one thing about a valid
//!   command line, the message must name what it changed: the option, the
//!   field or the rejected value;
//! - a usage error from clap: exit 2 and an `error:` line.
//!
//! Never a panic (exit 101, or `panicked` on stderr) or a death by signal.
//! After each `create`, the `loops` or `workflow_specs` table has exactly
//! one more row if it was accepted and the same rows if it was rejected.
//!
//! The inputs come from a xorshift generator seeded from
//! `LOOPS_RELIABILITY_SEED` or the clock; the seed is printed, so a failure
//! replays. The short variant runs a few hundred invocations per test, the
//! long one thousands.

use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use loops_tests::TestEnv;
use serde_json::{Value, json};

use crate::support::{Rng, figure, pick};

/// How an invocation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Accepted,
    Rejected,
    Usage,
}

/// What the cases of one test found.
#[derive(Default)]
struct Findings {
    /// Invocations per kind of case.
    kinds: std::collections::BTreeMap<&'static str, usize>,
    accepted: usize,
    rejected: usize,
    usage: usize,
    panics: usize,
    rows_checked: usize,
    failures: Vec<String>,
}

impl Findings {
    fn fail(&mut self, args: &[OsString], what: String) {
        let shown: Vec<String> = args
            .iter()
            .map(|a| {
                let s = a.to_string_lossy();
                if s.chars().count() > 80 {
                    format!(
                        "{}…({} chars)",
                        s.chars().take(40).collect::<String>(),
                        s.chars().count()
                    )
                } else {
                    format!("{s:?}")
                }
            })
            .collect();
        self.failures
            .push(format!("loops {}: {what}", shown.join(" ")));
    }

    /// Prints the figures and fails the test if anything went wrong.
    fn finish(self, test: &str, started: Instant) {
        let kinds: Vec<String> = self.kinds.iter().map(|(k, n)| format!("{k}={n}")).collect();
        let total: usize = self.kinds.values().sum();
        figure(
            test,
            &format!(
                "{total} invocations ({}) in {:.1}s: accepted {}, rejected {}, usage errors {}; \
                 rows checked {}; panics {}; failures {}",
                kinds.join(" "),
                started.elapsed().as_secs_f64(),
                self.accepted,
                self.rejected,
                self.usage,
                self.rows_checked,
                self.panics,
                self.failures.len()
            ),
        );
        if !self.failures.is_empty() {
            let mut report = String::new();
            for failure in self.failures.iter().take(25) {
                let _ = writeln!(report, "- {}", cut(failure, 600));
            }
            panic!(
                "{} of {total} invocations misbehaved:\n{report}",
                self.failures.len()
            );
        }
    }
}

fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        format!("{}…", text.chars().take(max).collect::<String>())
    }
}

/// Runs `loops <args>` and classifies the outcome, recording any
/// misbehaviour. `needles`, when not empty, are the words one of which a
/// rejection's first line must contain (case-insensitively).
fn invoke(env: &TestEnv, f: &mut Findings, args: &[OsString], needles: &[String]) -> Option<Ran> {
    let out = match env.cmd().args(args).output() {
        Ok(out) => out,
        Err(e) => {
            f.fail(args, format!("could not spawn loops: {e}"));
            return None;
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if let Some(signal) = out.status.signal() {
        f.panics += 1;
        f.fail(
            args,
            format!("killed by signal {signal}; stderr: {}", cut(&stderr, 400)),
        );
        return None;
    }
    let code = out.status.code().unwrap_or(-1);
    if code == 101 || stderr.contains("panicked") || stderr.contains("RUST_BACKTRACE") {
        f.panics += 1;
        f.fail(
            args,
            format!("panicked (exit {code}): {}", cut(&stderr, 600)),
        );
        return None;
    }
    let first = stderr.lines().next().unwrap_or_default().to_owned();
    let verdict = match code {
        0 => Verdict::Accepted,
        1 => Verdict::Rejected,
        2 => Verdict::Usage,
        _ => {
            f.fail(args, format!("exit {code}: {}", cut(&stderr, 400)));
            return None;
        }
    };
    match verdict {
        Verdict::Accepted => f.accepted += 1,
        Verdict::Rejected => {
            f.rejected += 1;
            let message = first.strip_prefix("error: ").unwrap_or_default();
            if message.trim().len() < 5 {
                f.fail(
                    args,
                    format!(
                        "exit 1 without an `error: <message>` first line: {}",
                        cut(&stderr, 400)
                    ),
                );
            } else if !needles.is_empty() {
                // The whole of stderr: a value with a newline in it spills
                // the message onto the next line.
                let lower = stderr.to_lowercase();
                // A value is named as given, or as human output escapes
                // it (a bidi or zero-width character as `\u{feff}`).
                let named = |n: &str| {
                    let escaped = loops_core::escape_for_terminal(n, &['\n', '\t']);
                    [Some(n), escaped.as_deref()]
                        .into_iter()
                        .flatten()
                        .any(|n| lower.contains(&n.to_lowercase()))
                };
                if !needles.iter().any(|n| !n.is_empty() && named(n)) {
                    f.fail(
                        args,
                        format!("the error does not say what to fix (expected it to name one of {needles:?}): {first}"),
                    );
                }
            }
            if !stdout.is_empty() {
                f.fail(
                    args,
                    format!("a rejection printed to stdout: {}", cut(&stdout, 200)),
                );
            }
        }
        Verdict::Usage => {
            f.usage += 1;
            if !first.starts_with("error:") {
                f.fail(
                    args,
                    format!("exit 2 without an `error:` line: {}", cut(&stderr, 400)),
                );
            }
        }
    }
    Some(Ran {
        verdict,
        stdout,
        first,
    })
}

/// What [`invoke`] saw.
struct Ran {
    verdict: Verdict,
    stdout: String,
    /// The first line of stderr.
    first: String,
}

/// Rows in `table`, or 0 before the database exists.
fn rows(env: &TestEnv, table: &str) -> i64 {
    if env.on_postgres() {
        let raw = env.raw();
        return if raw.has_table(table) {
            raw.int(&format!("SELECT COUNT(*) FROM {table}"))
                .unwrap_or(0)
        } else {
            0
        };
    }
    let path = env.db_path();
    if !path.exists() {
        return 0;
    }
    let conn =
        rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("the database opens read-only");
    conn.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
        .unwrap_or(0)
}

/// Runs a create, then checks that `table` gained exactly one row if it was
/// accepted and none if it was not.
fn create_case(
    env: &TestEnv,
    f: &mut Findings,
    args: &[OsString],
    needles: &[String],
    table: &str,
) -> Option<Ran> {
    let before = rows(env, table);
    let ran = invoke(env, f, args, needles)?;
    let after = rows(env, table);
    f.rows_checked += 1;
    let expected = before + i64::from(ran.verdict == Verdict::Accepted);
    if after != expected {
        f.fail(
            args,
            format!(
                "{:?}, but {table} went from {before} to {after} rows",
                ran.verdict
            ),
        );
    }
    if ran.verdict == Verdict::Accepted && !ran.stdout.starts_with("created ") {
        f.fail(
            args,
            format!("accepted without saying so: {}", cut(&ran.stdout, 200)),
        );
    }
    Some(ran)
}

fn os(s: impl AsRef<OsStr>) -> OsString {
    s.as_ref().to_owned()
}

// ---------------------------------------------------------------------------
// Value pools
// ---------------------------------------------------------------------------

/// Strings that break naive parsers. No NUL: an argument cannot hold one.
fn nasty(rng: &mut Rng) -> String {
    let fixed = [
        "",
        " ",
        "\t",
        "\u{feff}",
        "\u{200b}",
        "\u{a0}",
        "\u{3000}",
        "a\nb",
        "a\rb",
        "é",
        "e\u{301}",
        "💥",
        "\u{202e}gnp.exe",
        "[redacted]",
        "-",
        "=",
        "%s%n",
        "$(id)",
        "\"'`",
        "\\",
        "ｆｕｌｌ",
        "٣",
        "null",
        "{}",
    ];
    match rng.below(8) {
        0 => "é".repeat(1 + rng.below(30_000)),
        1 => "x".repeat(50_000 + rng.below(70_000)),
        2 => (0..1 + rng.below(12))
            .map(|_| char::from_u32(1 + rng.next_u64() as u32 % 0x2_FFFF).unwrap_or('?'))
            .filter(|c| *c != '\0')
            .collect(),
        _ => (*rng.pick(&fixed)).to_owned(),
    }
}

fn duration(rng: &mut Rng) -> String {
    let fixed = [
        "0",
        "0ms",
        "0.4",
        "1",
        "1.5s",
        "1h30m",
        "-1s",
        "+1s",
        "1e3",
        "36500d",
        "36501d",
        "99999999999999999999999d",
        "18446744073709551616",
        "0.0001ms",
        "1 s",
        "１s",
        "٣s",
        "",
        " ",
        "  5m  ",
        "5M",
        "1w",
        "1.",
        ".5s",
        "1..5s",
        "5m5",
        "Infinity",
        "NaN",
    ];
    match rng.below(5) {
        0 => format!(
            "{}{}",
            rng.next_u64() % 100_000,
            rng.pick(&["", "ms", "s", "m", "h", "d", "x"])
        ),
        1 => nasty(rng),
        _ => (*rng.pick(&fixed)).to_owned(),
    }
}

fn instant(rng: &mut Rng) -> String {
    let fixed = [
        "2030-01-01",
        "2030-02-30",
        "2030-13-01",
        "0000-01-01",
        "0000-01-01T00:00:00Z",
        "9999-12-31T23:59:59.999Z",
        "9999-12-31T23:59:59.999-14:00",
        "10000-01-01",
        "1970-01-01T00:00:00Z",
        "2030-01-01T24:00:00Z",
        "2030-01-01T23:59:60Z",
        "2030-01-01T00:00:00+14:00",
        "2030-01-01T00:00:00+99:00",
        "2030-01-01T00:00:00.123456789Z",
        "2030-01-01 00:00:00",
        "2030-01-01T00:00:00",
        "2030-1-1",
        "now",
        "tomorrow",
        "1700000000",
        "٢٠٣٠-٠١-٠١",
        "",
        " 2030-01-01 ",
    ];
    match rng.below(5) {
        0 => format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}{}",
            rng.below(10_001),
            rng.below(14),
            rng.below(33),
            rng.below(26),
            rng.below(61),
            rng.below(62),
            rng.pick(&["Z", "", "+01:00", "-23:59", "+24:00", "z"])
        ),
        1 => nasty(rng),
        _ => (*rng.pick(&fixed)).to_owned(),
    }
}

/// A cron expression: mostly five fields of elements over a grammar-ish
/// alphabet, sometimes a macro or garbage.
fn cron(rng: &mut Rng) -> String {
    let elements = [
        "*",
        "0",
        "5",
        "59",
        "60",
        "23",
        "24",
        "31",
        "32",
        "12",
        "13",
        "7",
        "8",
        "1-5",
        "5-1",
        "MON-FRI",
        "fri-sun",
        "JAN-DEC",
        "jan",
        "SUN",
        "*/5",
        "*/0",
        "*/99999999999999999999",
        "1-10/3",
        "5/15",
        "1,,2",
        ",",
        "-5",
        "5-",
        "?",
        "L",
        "W",
        "5#2",
        "+1",
        "*/5/2",
        "0x1F",
        "٣",
        "５",
        "💥",
        "\u{200b}",
        "99999999999999999999",
        "",
        "ÉTÉ",
        "JANUARY",
    ];
    match rng.below(12) {
        0 => (*rng.pick(&[
            "@yearly",
            "@DAILY",
            "@hourly",
            "@reboot",
            "@",
            "@every 5m",
            " @weekly ",
        ]))
        .to_owned(),
        1 => nasty(rng),
        _ => {
            let fields = *rng.pick(&[5, 5, 5, 5, 5, 5, 0, 1, 4, 6, 7]);
            (0..fields)
                .map(|_| {
                    (0..1 + rng.below(3))
                        .map(|_| *rng.pick(&elements))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .collect::<Vec<_>>()
                .join(*rng.pick(&[" ", " ", " ", "  ", "\t", "\u{a0}", "\u{3000}"]))
        }
    }
}

fn integer(rng: &mut Rng) -> String {
    let fixed = [
        "0",
        "1",
        "-1",
        "4294967295",
        "4294967296",
        "99999999999999999999",
        "1.5",
        "1e3",
        "０",
        " 5",
        "5 ",
        "+5",
        "0x10",
        "",
        "NaN",
    ];
    (*rng.pick(&fixed)).to_owned()
}

fn word(rng: &mut Rng) -> String {
    let fixed = [
        "none",
        "latest",
        "all",
        "ALL",
        " all",
        "skip",
        "allow",
        "queue",
        "safe",
        "strict",
        "",
        "claude",
        "Claude",
        "gpt",
        "codex",
        "cursor",
        "opencode",
        "codewith",
        "aicopilot",
        "active",
        "paused",
        "done",
    ];
    if rng.one_in(4) {
        nasty(rng)
    } else {
        (*rng.pick(&fixed)).to_owned()
    }
}

fn env_pair(rng: &mut Rng) -> String {
    let fixed = [
        "A=1",
        "A",
        "=x",
        "A==",
        "É=1",
        "1A=x",
        "A B=1",
        "A-B=1",
        "PATH=/nope",
        "LOOPS_RUN_ID=forged",
        "A=\u{202e}",
        "A=",
        "_=_",
        "",
    ];
    match rng.below(4) {
        0 => format!("K{}={}", rng.below(100), nasty(rng)),
        1 => format!("{}=1", nasty(rng)),
        _ => (*rng.pick(&fixed)).to_owned(),
    }
}

fn time_zone(rng: &mut Rng) -> String {
    let fixed = [
        "UTC",
        "Europe/Berlin",
        "utc",
        "Mars/Olympus",
        "",
        "../../etc/passwd",
        "+01:00",
        "Etc/GMT+12",
        "Pacific/Kiritimati",
        " UTC ",
        "Europe/Berlin/",
    ];
    if rng.one_in(4) {
        nasty(rng)
    } else {
        (*rng.pick(&fixed)).to_owned()
    }
}

/// Bytes that are not UTF-8.
fn not_utf8(rng: &mut Rng) -> OsString {
    let mut bytes = b"bad".to_vec();
    bytes.push(*rng.pick(&[0xff_u8, 0xfe, 0xc0, 0x80]));
    OsString::from_vec(bytes)
}

// ---------------------------------------------------------------------------
// `loops create`
// ---------------------------------------------------------------------------

/// A create command line being built: the positional name and the options
/// in order.
struct CreateLine {
    kind: &'static str,
    name: OsString,
    opts: Vec<(String, Option<OsString>)>,
    /// Arguments appended verbatim (unknown flags, extra positionals).
    tail: Vec<OsString>,
}

impl CreateLine {
    fn valid(rng: &mut Rng, n: usize) -> CreateLine {
        let name = os(format!("fuzz-{n}"));
        let (kind, opts) = if rng.one_in(3) {
            (
                "agent",
                vec![
                    ("--provider".to_owned(), Some(os("claude"))),
                    ("--prompt".to_owned(), Some(os("summarize"))),
                    ("--every".to_owned(), Some(os("1m"))),
                ],
            )
        } else {
            (
                "command",
                vec![
                    ("--cmd".to_owned(), Some(os("true"))),
                    ("--every".to_owned(), Some(os("1m"))),
                ],
            )
        };
        CreateLine {
            kind,
            name,
            opts,
            tail: Vec::new(),
        }
    }

    /// Sets `flag` to `value`, replacing an earlier value.
    fn set(&mut self, flag: &str, value: Option<OsString>) {
        self.opts.retain(|(f, _)| f != flag);
        self.opts.push((flag.to_owned(), value));
    }

    fn remove(&mut self, flag: &str) {
        self.opts.retain(|(f, _)| f != flag);
    }

    fn clear_schedule(&mut self) {
        for flag in ["--every", "--at", "--cron", "--dynamic", "--tz"] {
            self.remove(flag);
        }
    }

    fn args(&self) -> Vec<OsString> {
        let mut args = vec![os("create"), os(self.kind), self.name.clone()];
        for (flag, value) in &self.opts {
            args.push(os(flag));
            if let Some(v) = value {
                args.push(v.clone());
            }
        }
        args.extend(self.tail.iter().cloned());
        args
    }
}

/// Applies one random mutation; returns its kind and the words a rejection
/// caused by it must name one of (empty: any `error:` line will do).
fn mutate(rng: &mut Rng, line: &mut CreateLine) -> (&'static str, Vec<String>) {
    let flag_or_value = |flag: &str, value: &str| -> Vec<String> {
        let mut needles = vec![flag.to_owned()];
        if !value.trim().is_empty() {
            needles.push(value.to_owned());
        }
        needles
    };
    match rng.below(20) {
        0 | 1 => {
            let flag = *rng.pick(&["--every", "--timeout", "--retry-delay", "--lease"]);
            let value = duration(rng);
            if flag == "--every" {
                line.clear_schedule();
            }
            line.set(flag, Some(os(&value)));
            // `--every 0` says "--every must be greater than zero".
            ("duration", flag_or_value(flag, &value))
        }
        2 => {
            let value = instant(rng);
            line.clear_schedule();
            line.set("--at", Some(os(&value)));
            ("at", flag_or_value("--at", &value))
        }
        3 => {
            let value = instant(rng);
            line.set("--expires-at", Some(os(&value)));
            ("expires_at", flag_or_value("--expires-at", &value))
        }
        4 | 5 => {
            line.clear_schedule();
            line.set("--cron", Some(os(cron(rng))));
            if rng.one_in(3) {
                line.set("--tz", Some(os(time_zone(rng))));
            }
            ("cron", vec!["cron".to_owned(), "time zone".to_owned()])
        }
        6 => {
            let value = time_zone(rng);
            if rng.one_in(2) {
                line.clear_schedule();
                line.set("--cron", Some(os("0 9 * * MON-FRI")));
            }
            line.set("--tz", Some(os(&value)));
            ("tz", vec!["--tz".to_owned(), "time zone".to_owned()])
        }
        7 => {
            // Zero, two or three schedules.
            line.clear_schedule();
            let schedules: [(&str, Option<&str>); 4] = [
                ("--every", Some("1m")),
                ("--at", Some("2030-01-01")),
                ("--cron", Some("* * * * *")),
                ("--dynamic", None),
            ];
            let count = *rng.pick(&[0, 2, 3]);
            for _ in 0..count {
                let (flag, value) = *rng.pick(&schedules);
                line.set(flag, value.map(os));
            }
            if line
                .opts
                .iter()
                .filter(|(f, _)| {
                    f.starts_with("--every") || f == "--at" || f == "--cron" || f == "--dynamic"
                })
                .count()
                == 1
            {
                return ("schedules", Vec::new());
            }
            ("schedules", vec!["schedule".to_owned()])
        }
        8 => {
            for _ in 0..1 + rng.below(3) {
                line.opts
                    .push(("--env".to_owned(), Some(os(env_pair(rng)))));
            }
            ("env", vec!["env".to_owned()])
        }
        9 => {
            let flag = *rng.pick(&["--attempts", "--catch-up-limit"]);
            line.set(flag, Some(os(integer(rng))));
            ("integer", vec![flag.to_owned()])
        }
        10 => {
            let flag = *rng.pick(&["--catch-up", "--overlap"]);
            line.set(flag, Some(os(word(rng))));
            ("policy", vec![flag.to_owned()])
        }
        11 => {
            let flag = *rng.pick(&["--account", "--account-tool"]);
            line.set(flag, Some(os(word(rng))));
            ("account", vec!["account".to_owned()])
        }
        12 => {
            line.set("--cwd", Some(os(nasty(rng))));
            ("cwd", vec!["cwd".to_owned()])
        }
        13 => {
            line.name = os(nasty(rng));
            ("name", vec!["name".to_owned()])
        }
        14 => {
            line.set("-d", Some(os(nasty(rng))));
            ("description", vec!["description".to_owned()])
        }
        15 => {
            if line.kind == "command" {
                match rng.below(3) {
                    0 => line.set("--cmd", Some(os(nasty(rng)))),
                    1 => {
                        line.set(
                            "--cmd",
                            Some(os(*rng.pick(&["true", "echo hi", " true ", ""]))),
                        );
                        line.set("--no-shell", None);
                    }
                    _ => line.opts.push(("--arg".to_owned(), Some(os(nasty(rng))))),
                }
                ("target", vec!["command".to_owned(), "--cmd".to_owned()])
            } else {
                let flag = *rng.pick(&[
                    "--provider",
                    "--prompt",
                    "--model",
                    "--agent",
                    "--config-isolation",
                ]);
                let value = if flag == "--provider" || flag == "--config-isolation" {
                    word(rng)
                } else {
                    nasty(rng)
                };
                line.set(flag, Some(os(value)));
                if flag == "--agent" && rng.one_in(2) {
                    line.set("--provider", Some(os("codex")));
                }
                ("target", vec![flag.trim_start_matches("--").to_owned()])
            }
        }
        16 => {
            // Unknown flags, missing values, stray positionals: clap's.
            let junk = *rng.pick(&[
                "--bogus",
                "-x",
                "--every=",
                "--",
                "extra",
                "--json=yes",
                "--cmd",
                "-",
                "---",
            ]);
            line.tail.push(os(junk));
            ("usage", Vec::new())
        }
        17 => {
            // A value that is not UTF-8.
            let flag = line.opts[rng.below(line.opts.len())].0.clone();
            line.set(&flag, Some(not_utf8(rng)));
            ("not_utf8", Vec::new())
        }
        18 => {
            // The longest argument Linux passes is 128 KiB.
            let flag = line.opts[rng.below(line.opts.len())].0.clone();
            let value = "9".repeat(100_000 + rng.below(30_000));
            line.set(&flag, Some(os(&value)));
            ("huge", Vec::new())
        }
        _ => {
            // A flag given twice.
            let (flag, value) = line.opts[rng.below(line.opts.len())].clone();
            line.opts.push((flag, value));
            ("repeated", Vec::new())
        }
    }
}

#[test]
fn create_rejects_bad_arguments_with_a_message_and_writes_nothing() {
    let test = "fuzz_create";
    let started = Instant::now();
    let mut rng = Rng::seeded(test);
    let env = TestEnv::new();
    let mut f = Findings::default();
    // One change to a valid line: the message must name it. Then several
    // at once: only the outcome's shape is checked.
    let single = pick(240, 3_000);
    let multi = pick(100, 2_000);
    for n in 0..single + multi {
        let mut line = CreateLine::valid(&mut rng, n);
        let (kind, needles) = if n < single {
            mutate(&mut rng, &mut line)
        } else {
            for _ in 0..2 + rng.below(3) {
                mutate(&mut rng, &mut line);
            }
            ("multi", Vec::new())
        };
        *f.kinds.entry(kind).or_default() += 1;
        create_case(&env, &mut f, &line.args(), &needles, "loops");
    }
    // Every accepted loop can be read back by every read surface.
    for args in [
        vec!["list"],
        vec!["--json", "list"],
        vec!["list", "--status", "active"],
        vec!["runs"],
        vec!["--json", "runs"],
    ] {
        let args: Vec<OsString> = args.into_iter().map(os).collect();
        *f.kinds.entry("read_back").or_default() += 1;
        if let Some(ran) = invoke(&env, &mut f, &args, &[])
            && ran.verdict != Verdict::Accepted
        {
            f.fail(
                &args,
                format!("{:?} after the fuzzed creates: {}", ran.verdict, ran.first),
            );
        }
    }
    f.finish(test, started);
}

// ---------------------------------------------------------------------------
// Other verbs
// ---------------------------------------------------------------------------

#[test]
fn every_other_verb_survives_random_arguments() {
    let test = "fuzz_verbs";
    let started = Instant::now();
    let mut rng = Rng::seeded(test);
    let env = TestEnv::new();
    let mut f = Findings::default();
    // Something to find: two loops, a workflow and a finished run of each.
    let loop_id = env.create_command("known", "true", &["--every", "1h"]);
    env.loops(["run-now", "known"]).run();
    let file = env.home().join("w.json");
    std::fs::write(
        &file,
        json!({"name": "wf", "steps": [{"id": "a", "target": {"type": "command", "command": "true"}}]}).to_string(),
    )
    .expect("a workflow file");
    env.loops(["workflows", "create", &file.display().to_string()])
        .run();
    let ran = env.loops(["--json", "workflows", "run", "wf"]).run().json();
    let run_id = ran["workflowRun"]["id"]
        .as_str()
        .expect("a run id")
        .to_owned();

    let known = [
        loop_id.as_str(),
        "known",
        "wf",
        run_id.as_str(),
        "0123456789ab",
        "ffffffffffff",
    ];
    // Each verb with whether it takes a target and the flags it knows.
    let verbs: &[(&[&str], bool, &[&str])] = &[
        (&["list"], false, &["--status", "--limit"]),
        (&["ls"], false, &["--status", "--limit"]),
        (&["show"], true, &[]),
        (&["runs"], true, &["--status", "--limit", "--show-output"]),
        (&["pause"], true, &[]),
        (&["resume"], true, &[]),
        (&["stop"], true, &[]),
        (&["remove"], true, &["--purge"]),
        (&["rm"], true, &["--purge"]),
        (&["run-now"], true, &["--show-output"]),
        (&["tick"], false, &["--max-parallel", "--show-output"]),
        (&["doctor"], false, &[]),
        (&["workflows", "list"], false, &["--status", "--limit"]),
        (&["workflows", "show"], true, &[]),
        (&["workflows", "runs"], true, &["--limit"]),
        (&["workflows", "inspect"], true, &["--show-output"]),
        (&["workflows", "events"], true, &["--limit"]),
        (&["workflows", "cancel"], true, &[]),
        (&["workflows", "recover"], true, &[]),
        (&["workflows", "archive"], true, &[]),
        (&["workflows", "run"], true, &["--show-output", "--resume"]),
        (&["workflows", "schema"], false, &[]),
        (&["workflows", "validate"], true, &["--name", "--preflight"]),
        (&["daemon", "status"], false, &[]),
        (&["daemon", "logs"], false, &["-n", "--lines"]),
        (&["daemon", "stop"], false, &["--grace"]),
        (&["help"], true, &[]),
    ];
    let switches = ["--show-output", "--purge", "--preflight", "--json", "-j"];
    let junk = ["--bogus", "--help", "-V", "-", "--", "--limit"];
    let cases = pick(260, 3_000);
    for _ in 0..cases {
        let (verb, takes_target, verb_flags) = *rng.pick(verbs);
        let mut args: Vec<OsString> = verb.iter().map(os).collect();
        // A target: something that exists, or not.
        if takes_target && !rng.one_in(8) {
            args.push(match rng.below(5) {
                0..=2 => os(*rng.pick(&known)),
                3 => os(nasty(&mut rng)),
                _ => not_utf8(&mut rng),
            });
        }
        for _ in 0..rng.below(3) {
            let flag = if verb_flags.is_empty() || rng.one_in(6) {
                *rng.pick(&junk)
            } else {
                *rng.pick(verb_flags)
            };
            args.push(os(flag));
            if !switches.contains(&flag) && !matches!(flag, "--help" | "-V" | "-" | "--") {
                args.push(match rng.below(4) {
                    0 | 1 => os(integer(&mut rng)),
                    2 => os(word(&mut rng)),
                    _ => os(nasty(&mut rng)),
                });
            }
        }
        if rng.one_in(5) {
            args.insert(0, os("--json"));
        }
        *f.kinds
            .entry(verb.first().copied().unwrap_or("none"))
            .or_default() += 1;
        // `run-now`, `workflows run` and `doctor` exit 1 when a run or a
        // check fails, after printing their report instead of an error.
        let reports_failures = matches!(
            verb,
            ["run-now"] | ["workflows", "run"] | ["doctor"] | ["tick"]
        );
        let before = (rows(&env, "loops"), rows(&env, "workflow_specs"));
        let Some(ran) = invoke_lenient(&env, &mut f, &args, reports_failures) else {
            continue;
        };
        // Nothing here creates a loop or a workflow, and a rejection
        // removes none.
        let after = (rows(&env, "loops"), rows(&env, "workflow_specs"));
        f.rows_checked += 1;
        if after.0 > before.0
            || after.1 > before.1
            || (ran.verdict != Verdict::Accepted && after != before)
        {
            f.fail(
                &args,
                format!(
                    "{:?}, but the row counts went from {before:?} to {after:?}",
                    ran.verdict
                ),
            );
        }
    }
    f.finish(test, started);
}

/// [`invoke`], but an exit 1 that printed a report on stdout instead of an
/// `error:` line is accepted when `reports_failures`.
fn invoke_lenient(
    env: &TestEnv,
    f: &mut Findings,
    args: &[OsString],
    reports_failures: bool,
) -> Option<Ran> {
    if !reports_failures {
        return invoke(env, f, args, &[]);
    }
    let mut scratch = Findings::default();
    let result = invoke(env, &mut scratch, args, &[]);
    f.accepted += scratch.accepted;
    f.rejected += scratch.rejected;
    f.usage += scratch.usage;
    f.panics += scratch.panics;
    for failure in scratch.failures {
        let report_instead_of_error = failure.contains("without an `error: <message>` first line")
            || failure.contains("a rejection printed to stdout");
        let reported = result
            .as_ref()
            .is_some_and(|r| r.verdict == Verdict::Rejected && !r.stdout.is_empty());
        if !(report_instead_of_error && reported) {
            f.failures.push(failure);
        }
    }
    result
}

// ---------------------------------------------------------------------------
// Workflow files
// ---------------------------------------------------------------------------

/// A valid workflow of one to six steps with `name`.
fn valid_workflow(rng: &mut Rng, name: &str) -> Value {
    let n = 1 + rng.below(6);
    let steps: Vec<Value> = (0..n)
        .map(|i| {
            let deps: Vec<String> = (0..i)
                .filter(|_| rng.one_in(3))
                .map(|j| format!("s{j}"))
                .collect();
            let target = if rng.one_in(3) {
                json!({"type": "agent", "provider": "claude", "prompt": "p"})
            } else {
                json!({"type": "command", "command": "true"})
            };
            json!({"id": format!("s{i}"), "dependsOn": deps, "target": target})
        })
        .collect();
    json!({"name": name, "steps": steps})
}

/// Any JSON value, up to a small depth.
fn any_json(rng: &mut Rng, depth: usize) -> Value {
    match rng.below(if depth == 0 { 6 } else { 8 }) {
        0 => Value::Null,
        1 => json!(rng.one_in(2)),
        2 => json!(rng.next_u64() as i64),
        3 => json!(*rng.pick(&[0.5, -1.0, 1e300, 2.0, -0.0])),
        4 | 5 => json!(nasty(rng)),
        6 => Value::Array(
            (0..rng.below(3))
                .map(|_| any_json(rng, depth - 1))
                .collect(),
        ),
        _ => Value::Object(
            (0..rng.below(3))
                .map(|i| (format!("k{i}"), any_json(rng, depth - 1)))
                .collect(),
        ),
    }
}

/// The text of a workflow file, and how it was damaged.
fn workflow_text(rng: &mut Rng, name: &str) -> (&'static str, Vec<u8>) {
    let mut w = valid_workflow(rng, name);
    let steps = w["steps"].as_array().map_or(0, Vec::len);
    let step = rng.below(steps);
    let text = |w: &Value| serde_json::to_vec_pretty(w).expect("serializable");
    match rng.below(16) {
        0 => ("valid", text(&w)),
        1 => {
            // A cycle through the first step, or a self edge.
            let last = steps - 1;
            w["steps"][0]["dependsOn"] = json!([format!("s{last}")]);
            if last > 0 {
                w["steps"][last]["dependsOn"] = json!(["s0"]);
            }
            ("cycle", text(&w))
        }
        2 => {
            w["steps"][step]["dependsOn"] = json!([*rng.pick(&["nope", "", "S0", "s0 "])]);
            ("missing_dependency", text(&w))
        }
        3 => {
            let id = nasty(rng);
            w["steps"][step]["id"] = json!(id);
            if rng.one_in(2) {
                w["steps"][0]["id"] = json!(id);
            }
            ("unicode_id", text(&w))
        }
        4 | 5 => {
            // A known field of the file, a step or a target with a wrong
            // type or value.
            let value = any_json(rng, 2);
            match rng.below(3) {
                0 => {
                    let key =
                        *rng.pick(&["name", "steps", "version", "maxParallel", "description"]);
                    w[key] = value;
                }
                1 => {
                    let key = *rng.pick(&[
                        "id",
                        "target",
                        "dependsOn",
                        "continueOnFailure",
                        "timeoutMs",
                        "account",
                        "name",
                    ]);
                    w["steps"][step][key] = value;
                }
                _ => {
                    let key = *rng.pick(&[
                        "type",
                        "command",
                        "args",
                        "shell",
                        "env",
                        "cwd",
                        "timeoutMs",
                        "account",
                        "provider",
                        "prompt",
                        "model",
                        "agent",
                        "extraArgs",
                        "configIsolation",
                    ]);
                    w["steps"][step]["target"][key] = value;
                }
            }
            ("wrong_type", text(&w))
        }
        6 => {
            // Nested just below, at and beyond what the parser takes.
            let depth = *rng.pick(&[100, 124, 125, 126, 127, 128, 129, 1_000, 100_000]);
            let (open, close) = *rng.pick(&[("[", "]"), ("{\"k\":", "}")]);
            let deep = format!("{}1{}", open.repeat(depth), close.repeat(depth));
            let key = *rng.pick(&["deep", "dependsOn", "target", "id"]);
            w["steps"][step][key] = json!("@DEEP@");
            let body = serde_json::to_string(&w)
                .expect("serializable")
                .replace("\"@DEEP@\"", &deep);
            ("deep", body.into_bytes())
        }
        7 => {
            // Several megabytes in one string.
            w["description"] = json!("d".repeat(3_000_000 + rng.below(3_000_000)));
            ("huge_string", text(&w))
        }
        8 => {
            // A byte-level break of valid JSON: truncated, a byte flipped,
            // inserted or deleted.
            let mut body = text(&w);
            let at = rng.below(body.len());
            match rng.below(4) {
                0 => body.truncate(at),
                1 => body[at] ^= 1 << rng.below(8),
                2 => body.insert(at, *rng.pick(b"{}[],:\"\\\x00\xff")),
                _ => {
                    body.remove(at);
                }
            }
            ("broken_json", body)
        }
        9 => {
            let mut body = text(&w);
            let end = body.len();
            // A byte-order mark, a comment, trailing data, UTF-16's mark, a
            // trailing comma, JavaScript's numbers.
            let (range, insert): (std::ops::Range<usize>, &[u8]) = match rng.below(6) {
                0 => (0..0, b"\xef\xbb\xbf"),
                1 => (0..0, b"// a comment\n"),
                2 => (end..end, b"\n{}"),
                3 => (0..0, b"\xff\xfe"),
                4 => (end - 1..end - 1, b", "),
                _ => (0..end, b"{\"name\": NaN, \"steps\": [1e999]}"),
            };
            body.splice(range, insert.iter().copied());
            ("syntax", body)
        }
        10 => (
            "empty",
            rng.pick(&[
                &b""[..],
                b" ",
                b"\n\n",
                b"null",
                b"[]",
                b"{}",
                b"\"w\"",
                b"0",
            ])
            .to_vec(),
        ),
        11 => {
            // Duplicate keys: the last one wins.
            let body = format!(
                r#"{{"name":"{name}","steps":[{{"id":"a","id":"b","target":{{"type":"command","command":"true"}}}}],"steps":[]}}"#
            );
            ("duplicate_keys", body.into_bytes())
        }
        12 => {
            // Unicode everywhere a string goes.
            w["steps"][step]["target"] = json!({"type": "command", "command": "printf", "args": [nasty(rng)], "env": {"K": nasty(rng)}, "cwd": nasty(rng)});
            w["description"] = json!(nasty(rng));
            ("unicode", text(&w))
        }
        13 => {
            // Megabytes of whitespace around a valid file.
            let mut body = vec![b' '; 2_000_000 + rng.below(2_000_000)];
            body.extend(text(&w));
            ("whitespace", body)
        }
        14 => {
            w["maxParallel"] = json!(*rng.pick(&[0, 1, 64, 65, -1, 4_294_967_296_i64]));
            w["version"] = json!(*rng.pick(&[0, 1, 4_294_967_295_i64, 4_294_967_296]));
            ("numbers", text(&w))
        }
        _ => {
            w["steps"][step]["extraKey"] = any_json(rng, 3);
            ("extra_keys", text(&w))
        }
    }
}

#[test]
fn workflow_files_are_rejected_cleanly_and_stored_only_when_valid() {
    let test = "fuzz_workflow_files";
    let started = Instant::now();
    let mut rng = Rng::seeded(test);
    let env = TestEnv::new();
    let mut f = Findings::default();
    let path = env.home().join("fuzz.json");
    let path_arg = os(&path);
    let cases = pick(90, 1_500);
    for n in 0..cases {
        let name = format!("wf-{n}");
        let (kind, body) = workflow_text(&mut rng, &name);
        std::fs::write(&path, &body).expect("a workflow file");
        *f.kinds.entry(kind).or_default() += 2;
        let mut extra: Vec<OsString> = Vec::new();
        if rng.one_in(8) {
            extra = vec![os("--name"), os(nasty(&mut rng))];
        }
        let validate: Vec<OsString> = [os("workflows"), os("validate"), path_arg.clone()]
            .into_iter()
            .chain(extra.clone())
            .collect();
        let create: Vec<OsString> = [os("workflows"), os("create"), path_arg.clone()]
            .into_iter()
            .chain(extra)
            .collect();
        let validated = invoke(&env, &mut f, &validate, &[]);
        let created = create_case(&env, &mut f, &create, &[], "workflow_specs");
        // `validate` and `create` agree: same verdict, same first line,
        // unless the name is taken (`validate` does not open the store).
        if let (Some(v), Some(c)) = (validated, created)
            && (v.verdict != c.verdict || v.first != c.first)
            && !(v.verdict == Verdict::Accepted && c.first.contains("already exists"))
        {
            f.fail(
                &create,
                format!(
                    "validate said {:?} ({}) but create said {:?} ({})",
                    v.verdict,
                    cut(&v.first, 200),
                    c.verdict,
                    cut(&c.first, 200)
                ),
            );
        }
    }
    // Paths that are not workflow files.
    let dir = env.home();
    let missing = env.home().join("missing.json");
    let link = env.home().join("loop.json");
    let _ = std::os::unix::fs::symlink(&link, &link);
    for target in [
        os(&dir),
        os(&missing),
        os(""),
        os("/dev/null"),
        os(&link),
        not_utf8(&mut rng),
    ] {
        let args = vec![os("workflows"), os("create"), target];
        *f.kinds.entry("paths").or_default() += 1;
        create_case(
            &env,
            &mut f,
            &args,
            &["workflow file".to_owned(), "usage".to_owned()],
            "workflow_specs",
        );
    }
    // Tens of thousands of steps, a chain walked 30,000 deep.
    let big = env.home().join("big.json");
    let n = pick(30_000, 100_000);
    let steps: Vec<Value> = (0..n)
        .map(|i| {
            let deps: Vec<String> = (i + 1 < n).then(|| format!("s{}", i + 1)).into_iter().collect();
            json!({"id": format!("s{i}"), "dependsOn": deps, "target": {"type": "command", "command": "true"}})
        })
        .collect();
    std::fs::write(&big, json!({"name": "big", "steps": steps}).to_string()).expect("a big file");
    let size = std::fs::metadata(&big).map(|m| m.len()).unwrap_or(0);
    *f.kinds.entry("many_steps").or_default() += 1;
    let big_started = Instant::now();
    let verdict = create_case(
        &env,
        &mut f,
        &[os("workflows"), os("create"), os(&big)],
        &[],
        "workflow_specs",
    )
    .map(|r| r.verdict);
    figure(
        test,
        &format!(
            "a {n}-step chain ({:.1} MB) was {verdict:?} in {:.1}s",
            size as f64 / 1e6,
            big_started.elapsed().as_secs_f64()
        ),
    );
    if verdict == Some(Verdict::Accepted) {
        for args in [
            vec!["--json", "workflows", "show", "big"],
            vec!["workflows", "list"],
        ] {
            let args: Vec<OsString> = args.into_iter().map(os).collect();
            *f.kinds.entry("read_back").or_default() += 1;
            invoke(&env, &mut f, &args, &[]);
        }
    }
    f.finish(test, started);
}

/// A blank duration is rejected with a message that names its option: with
/// four duration options on one command line, `invalid duration: ` alone
/// does not say which one to fix.
#[test]
fn blank_durations_name_their_option() {
    let env = TestEnv::new();
    let mut f = Findings::default();
    let started = Instant::now();
    for flag in ["--every", "--timeout", "--retry-delay", "--lease"] {
        for value in ["", " ", "\u{3000}"] {
            let mut args: Vec<OsString> = ["create", "command", "x", "--cmd", "true"]
                .into_iter()
                .map(os)
                .collect();
            if flag != "--every" {
                args.extend([os("--every"), os("1m")]);
            }
            args.extend([os(flag), os(value)]);
            *f.kinds.entry("blank_duration").or_default() += 1;
            create_case(&env, &mut f, &args, &[flag.to_owned()], "loops");
        }
    }
    f.finish("fuzz_blank_durations", started);
}

/// Loops with extreme but valid values run, list and show without trouble.
#[test]
fn loops_with_extreme_valid_values_run() {
    let test = "fuzz_extremes";
    let started = Instant::now();
    let env = TestEnv::new();
    let mut f = Findings::default();
    let lines: &[&[&str]] = &[
        &[
            "command",
            "x1",
            "--cmd",
            "true",
            "--at",
            "0000-01-01T00:00:00Z",
        ],
        &[
            "command",
            "x2",
            "--cmd",
            "true",
            "--at",
            "9999-12-31T23:59:59.999Z",
        ],
        &["command", "x3", "--cmd", "true", "--every", "36500d"],
        &[
            "command",
            "x4",
            "--cmd",
            "true",
            "--every",
            "100ms",
            "--catch-up",
            "all",
            // The largest limit loops accepts.
            "--catch-up-limit",
            "10000",
        ],
        &[
            "command",
            "x5",
            "--cmd",
            "false",
            "--every",
            "1ms",
            "--attempts",
            "4294967295",
            "--retry-delay",
            "36500d",
        ],
        &[
            "command",
            "x6",
            "--cmd",
            "true",
            "--every",
            "1ms",
            "--lease",
            "36500d",
            "--timeout",
            "36500d",
        ],
        &[
            "command",
            "x7",
            "--cmd",
            "true",
            "--dynamic",
            "--expires-at",
            "0000-01-01",
        ],
        &[
            "command",
            "x8",
            "--cmd",
            "true",
            "--cron",
            "0 0 29 2 *",
            "--tz",
            "Pacific/Kiritimati",
        ],
        &[
            "command",
            "x9",
            "--cmd",
            "true",
            "--cron",
            "*/99999999999999999999 * * * *",
            "--catch-up",
            "all",
        ],
        &[
            "command",
            "x10",
            "--cmd",
            "true",
            "--every",
            "1ms",
            "--expires-at",
            "9999-12-31T23:59:59.999Z",
        ],
        &[
            "command",
            "x11",
            "--cmd",
            "printf",
            "--no-shell",
            "--arg",
            "%s",
            "--arg",
            "\u{202e}é💥",
            "--at",
            "2000-01-01",
        ],
    ];
    for line in lines {
        let args: Vec<OsString> = std::iter::once("create")
            .chain(line.iter().copied())
            .map(os)
            .collect();
        *f.kinds.entry("create").or_default() += 1;
        if create_case(&env, &mut f, &args, &[], "loops").map(|r| r.verdict)
            != Some(Verdict::Accepted)
        {
            f.fail(&args, "a valid extreme value was not accepted".to_owned());
        }
    }
    // Ticks until the loops every few milliseconds are due and have run,
    // polling with a deadline rather than sleeping a fixed time first.
    loops_tests::wait_for("the frequent loops to run", Duration::from_secs(30), || {
        env.loops(["tick"]).run();
        let runs = runs_by_loop(&env);
        ["x4", "x5", "x6", "x10"]
            .iter()
            .all(|name| runs.contains_key(*name))
            .then_some(())
    });
    let surfaces: &[&[&str]] = &[
        &["tick"],
        &["--json", "tick"],
        &["list"],
        &["--json", "list"],
        &["runs", "--limit", "1000"],
        &["--json", "runs"],
        &["show", "x4"],
        &["run-now", "x2"],
        &["run-now", "x1"],
        &["doctor"],
        &["daemon", "status"],
    ];
    for args in surfaces {
        let args: Vec<OsString> = args.iter().map(os).collect();
        *f.kinds.entry("surface").or_default() += 1;
        invoke_lenient(&env, &mut f, &args, true);
    }
    // What the runs were: each loop due now ran, and succeeded or failed as
    // its command does; those due far away or expired did not run.
    let by_loop = runs_by_loop(&env);
    for name in ["x1", "x2", "x4", "x6", "x10", "x11"] {
        let statuses = by_loop.get(name).map(Vec::as_slice).unwrap_or_default();
        assert!(
            !statuses.is_empty() && statuses.iter().all(|s| s == "succeeded"),
            "{name} ran and succeeded: {statuses:?}\n{by_loop:?}"
        );
    }
    let x5 = by_loop.get("x5").map(Vec::as_slice).unwrap_or_default();
    assert!(
        !x5.is_empty() && x5.iter().all(|s| s == "failed"),
        "x5 (`false`) failed: {x5:?}"
    );
    for name in ["x3", "x7"] {
        assert!(
            !by_loop.contains_key(name),
            "{name} is not due: {by_loop:?}"
        );
    }
    let runs = rows(&env, "loop_runs");
    figure(
        test,
        &format!("{} extreme loops made {runs} runs", lines.len()),
    );
    f.finish(test, started);
}

/// The statuses of each loop's runs, by loop name.
fn runs_by_loop(env: &TestEnv) -> std::collections::BTreeMap<String, Vec<String>> {
    let runs = env
        .loops(["--json", "runs", "--limit", "1000"])
        .run()
        .json();
    let mut by_loop = std::collections::BTreeMap::<String, Vec<String>>::new();
    for run in runs.as_array().expect("runs --json is an array") {
        by_loop
            .entry(run["loopName"].as_str().unwrap_or_default().to_owned())
            .or_default()
            .push(run["status"].as_str().unwrap_or_default().to_owned());
    }
    by_loop
}
