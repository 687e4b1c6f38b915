//! A run's two timers (issue 27, `agents-0.5.11.md` §6): the wall clock,
//! which ends a run that lasts too long, and the idle watchdog, which ends
//! an agent that printed nothing on stdout or stderr for too long.
//!
//! [`WallClock`] is an agent target's `timeoutMs` as stored: absent, a
//! number, or `null` for "unlimited". Absent and `null` differ, since only
//! a target with neither timer set gets the default watchdog, and both
//! round-trip through JSON as they were written.
//!
//! [`effective_timers`] decides what a run gets, a pure function of the
//! target and the runner's `LOOPS_AGENT_IDLE_TIMEOUT_MS`:
//!
//! | `timeoutMs` | `idleTimeoutMs` | wall clock | idle watchdog |
//! | --- | --- | --- | --- |
//! | unset | unset | none | the default |
//! | unset | N | none | N |
//! | T | unset | T | none |
//! | T | N | T | N |
//! | `null` | unset | none | none |
//! | `null` | N | none | N |
//!
//! The default is `LOOPS_AGENT_IDLE_TIMEOUT_MS` when it is a positive
//! number (`0`, `none` and `off` turn the watchdog off; anything else is
//! ignored), else 4 h for claude, codewith, opencode and aicopilot, which
//! print one document at the end or stay quiet for long stretches, and
//! 30 min for cursor and codex.
//!
//! Departure from 0.3.1, on purpose (as 0.5.11): agents have no default
//! wall clock. 0.3.1 gave every target 30 minutes; commands keep that.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{DEFAULT_TIMEOUT_MS, ProcessTarget};
use crate::duration::MAX_DURATION_MS;
use crate::status::AgentProvider;

/// The environment variable that sets the default idle watchdog of agents.
pub const AGENT_IDLE_TIMEOUT_ENV: &str = "LOOPS_AGENT_IDLE_TIMEOUT_MS";

/// The default idle watchdog of claude, codewith, opencode and aicopilot:
/// 4 hours.
pub const BUFFERED_AGENT_IDLE_TIMEOUT_MS: u64 = 14_400_000;

/// The default idle watchdog of cursor and codex: 30 minutes.
pub const STREAMING_AGENT_IDLE_TIMEOUT_MS: u64 = 1_800_000;

/// An agent target's `timeoutMs`: unset (absent in JSON), `null`
/// (explicitly unlimited) or a number of milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum WallClock {
    /// Absent: no wall clock, and the default idle watchdog applies when
    /// `idleTimeoutMs` is absent too.
    #[default]
    Unset,
    /// `null`: no wall clock, and no default idle watchdog.
    Unlimited,
    /// A number of milliseconds (validation requires it positive).
    Ms(u64),
}

impl WallClock {
    /// Whether the field is absent; serde skips it then.
    pub fn is_unset(&self) -> bool {
        *self == WallClock::Unset
    }

    /// The milliseconds, when a number is set.
    pub fn ms(self) -> Option<u64> {
        match self {
            WallClock::Ms(ms) => Some(ms),
            WallClock::Unset | WallClock::Unlimited => None,
        }
    }
}

impl From<Option<u64>> for WallClock {
    /// `None` is unset, as a field never given.
    fn from(ms: Option<u64>) -> WallClock {
        ms.map_or(WallClock::Unset, WallClock::Ms)
    }
}

impl Serialize for WallClock {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            WallClock::Ms(ms) => s.serialize_u64(*ms),
            WallClock::Unset | WallClock::Unlimited => s.serialize_none(),
        }
    }
}

impl<'de> Deserialize<'de> for WallClock {
    /// A present field: `null` is unlimited, a number is milliseconds. An
    /// absent field is [`WallClock::Unset`] through `#[serde(default)]`.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<WallClock, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map_or(WallClock::Unlimited, WallClock::Ms))
    }
}

impl JsonSchema for WallClock {
    fn schema_name() -> Cow<'static, str> {
        "WallClock".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": ["integer", "null"],
            "minimum": 1,
            "description": "Milliseconds, or null for no wall clock (and no default idle watchdog)."
        })
    }
}

/// The timers of one run, in milliseconds; `None` is no timer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Timers {
    /// The wall clock, from the spawn.
    pub wall_ms: Option<u64>,
    /// The idle watchdog, from the last byte on stdout or stderr.
    pub idle_ms: Option<u64>,
}

/// The timers `target` runs with; `idle_env` is the runner's
/// `LOOPS_AGENT_IDLE_TIMEOUT_MS`, if set (see the module docs).
///
/// ```
/// use loops_core::{AgentProvider, AgentTarget, ProcessTarget, Timers, effective_timers};
/// let agent = ProcessTarget::Agent(AgentTarget::new(AgentProvider::Codex, "fix it"));
/// let timers = effective_timers(&agent, None);
/// assert_eq!(timers, Timers { wall_ms: None, idle_ms: Some(1_800_000) });
/// assert_eq!(effective_timers(&agent, Some("off")).idle_ms, None);
/// ```
pub fn effective_timers(target: &ProcessTarget, idle_env: Option<&str>) -> Timers {
    match target {
        ProcessTarget::Command(c) => Timers {
            wall_ms: Some(c.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS)),
            idle_ms: None,
        },
        ProcessTarget::Agent(a) => {
            agent_timers(a.provider, a.timeout_ms, a.idle_timeout_ms, idle_env)
        }
    }
}

/// The timers of an agent with these fields (the module docs' table).
pub fn agent_timers(
    provider: AgentProvider,
    timeout: WallClock,
    idle_timeout_ms: Option<u64>,
    idle_env: Option<&str>,
) -> Timers {
    let idle_ms = match (timeout, idle_timeout_ms) {
        (_, Some(ms)) => Some(ms),
        (WallClock::Unset, None) => default_agent_idle_ms(provider, idle_env),
        (WallClock::Ms(_) | WallClock::Unlimited, None) => None,
    };
    Timers {
        wall_ms: timeout.ms(),
        idle_ms,
    }
}

/// The default idle watchdog of `provider`, `idle_env` being the runner's
/// `LOOPS_AGENT_IDLE_TIMEOUT_MS`: `None` when that turns it off.
pub fn default_agent_idle_ms(provider: AgentProvider, idle_env: Option<&str>) -> Option<u64> {
    if let Some(raw) = idle_env {
        let raw = raw.trim().to_ascii_lowercase();
        if matches!(raw.as_str(), "0" | "none" | "off") {
            return None;
        }
        if let Ok(ms) = raw.parse::<f64>()
            && ms.is_finite()
            && ms > 0.0
        {
            // Whole milliseconds, at least 1, at most the 100-year cap of
            // every duration.
            let ms = ms.ceil().min(MAX_DURATION_MS as f64);
            return Some(ms as u64);
        }
    }
    Some(match provider {
        AgentProvider::Claude
        | AgentProvider::Codewith
        | AgentProvider::Opencode
        | AgentProvider::Aicopilot => BUFFERED_AGENT_IDLE_TIMEOUT_MS,
        AgentProvider::Cursor | AgentProvider::Codex => STREAMING_AGENT_IDLE_TIMEOUT_MS,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AgentTarget, CommandTarget};
    use serde_json::json;

    const FOUR_H: u64 = BUFFERED_AGENT_IDLE_TIMEOUT_MS;
    const HALF_H: u64 = STREAMING_AGENT_IDLE_TIMEOUT_MS;

    fn timers(wall_ms: Option<u64>, idle_ms: Option<u64>) -> Timers {
        Timers { wall_ms, idle_ms }
    }

    #[test]
    fn the_table_of_section_6() {
        use WallClock::{Ms, Unlimited, Unset};
        let claude = AgentProvider::Claude;
        let cases = [
            (Unset, None, timers(None, Some(FOUR_H))),
            (Unset, Some(5), timers(None, Some(5))),
            (Ms(7), None, timers(Some(7), None)),
            (Ms(7), Some(5), timers(Some(7), Some(5))),
            (Unlimited, None, timers(None, None)),
            (Unlimited, Some(5), timers(None, Some(5))),
        ];
        for (timeout, idle, want) in cases {
            assert_eq!(
                agent_timers(claude, timeout, idle, None),
                want,
                "{timeout:?} {idle:?}"
            );
            // The variable only changes the default.
            let with_env = agent_timers(claude, timeout, idle, Some("60000"));
            let want = if want.idle_ms == Some(FOUR_H) {
                timers(None, Some(60_000))
            } else {
                want
            };
            assert_eq!(with_env, want, "{timeout:?} {idle:?} with the variable");
        }
    }

    #[test]
    fn the_default_idle_period_per_provider_and_variable() {
        use AgentProvider::*;
        for (provider, want) in [
            (Claude, FOUR_H),
            (Codewith, FOUR_H),
            (Opencode, FOUR_H),
            (Aicopilot, FOUR_H),
            (Cursor, HALF_H),
            (Codex, HALF_H),
        ] {
            assert_eq!(
                default_agent_idle_ms(provider, None),
                Some(want),
                "{provider}"
            );
        }
        let cases = [
            ("0", None),
            ("none", None),
            (" OFF ", None),
            ("None", None),
            ("2000", Some(2000)),
            (" 1500 ", Some(1500)),
            ("1e3", Some(1000)),
            ("0.5", Some(1)),
            // Invalid or not positive: the provider's default.
            ("-5", Some(HALF_H)),
            ("-0", Some(HALF_H)),
            ("", Some(HALF_H)),
            ("soon", Some(HALF_H)),
            ("inf", Some(HALF_H)),
            ("NaN", Some(HALF_H)),
            ("1e300", Some(MAX_DURATION_MS)),
        ];
        for (raw, want) in cases {
            assert_eq!(default_agent_idle_ms(Codex, Some(raw)), want, "{raw:?}");
        }
    }

    #[test]
    fn commands_keep_their_thirty_minutes_and_no_watchdog() {
        let mut c = CommandTarget::new("true");
        let target = ProcessTarget::Command(c.clone());
        assert_eq!(effective_timers(&target, None), timers(Some(HALF_H), None));
        assert_eq!(
            effective_timers(&target, Some("5")),
            timers(Some(HALF_H), None)
        );
        c.timeout_ms = Some(9);
        let target = ProcessTarget::Command(c);
        assert_eq!(effective_timers(&target, None), timers(Some(9), None));
    }

    #[test]
    fn unset_and_null_round_trip_apart() {
        let row = json!({"type": "agent", "provider": "codex", "prompt": "p"});
        let cases = [
            (row.clone(), WallClock::Unset),
            (json!({"timeoutMs": null}), WallClock::Unlimited),
            (json!({"timeoutMs": 60000}), WallClock::Ms(60_000)),
        ];
        for (extra, want) in cases {
            let mut value = row.clone();
            if let (Some(v), Some(extra)) = (value.as_object_mut(), extra.as_object()) {
                v.extend(extra.clone());
            }
            let target: ProcessTarget = serde_json::from_value(value.clone()).unwrap();
            let ProcessTarget::Agent(agent) = &target else {
                panic!("an agent")
            };
            assert_eq!(agent.timeout_ms, want);
            assert_eq!(serde_json::to_value(&target).unwrap(), value);
        }
        let mut agent = AgentTarget::new(AgentProvider::Claude, "p");
        agent.idle_timeout_ms = Some(2000);
        let json = serde_json::to_value(ProcessTarget::Agent(agent)).unwrap();
        assert_eq!(json["idleTimeoutMs"], json!(2000));
        assert!(json.get("timeoutMs").is_none());
    }
}
