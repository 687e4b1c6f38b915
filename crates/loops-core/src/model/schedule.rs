//! The schedule of a loop (SPEC §1.2): when it runs, and its hand-written
//! deserializer.

use serde::{Deserialize, Deserializer, Serialize};

use crate::status::Anchor;
use crate::tagged::{self, Tagged};
use crate::time::Timestamp;

/// When a loop runs (SPEC §1.2).
///
/// Deserialized by hand (`tagged.rs`): when `type` comes first, the rest of
/// the object goes straight to the variant, without serde's buffering.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(
    tag = "type",
    rename_all = "lowercase",
    rename_all_fields = "camelCase"
)]
pub enum Schedule {
    /// Once, at an instant.
    Once {
        /// The instant.
        at: Timestamp,
    },
    /// Every `everyMs` milliseconds.
    Interval {
        /// The period, > 0.
        every_ms: u64,
        /// What the period counts from; fixed_rate when unset.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        anchor: Option<Anchor>,
    },
    /// On a 5-field cron expression.
    Cron {
        /// The expression, as the user wrote it.
        expression: String,
        /// An IANA time zone to evaluate it in; host local time when unset.
        /// New in loops (the original has only host local time, SPEC §9.5).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timezone: Option<String>,
    },
    /// At least `minIntervalMs` after each finish.
    Dynamic {
        /// The gap after a finish; 60 s when unset.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min_interval_ms: Option<u64>,
    },
}

impl Schedule {
    /// The SPEC name of the schedule kind.
    pub fn kind(&self) -> &'static str {
        match self {
            Schedule::Once { .. } => "once",
            Schedule::Interval { .. } => "interval",
            Schedule::Cron { .. } => "cron",
            Schedule::Dynamic { .. } => "dynamic",
        }
    }
}

impl<'de> Deserialize<'de> for Schedule {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        tagged::deserialize(d)
    }
}

impl Tagged for Schedule {
    const EXPECTING: &'static str = "a schedule object with a type";
    const VARIANTS: &'static [&'static str] = &["once", "interval", "cron", "dynamic"];

    fn from_rest<'de, D: Deserializer<'de>>(tag: &str, rest: D) -> Result<Self, D::Error> {
        // The fields of each variant, as the derived `Serialize` writes them.
        #[derive(Deserialize)]
        struct Once {
            at: Timestamp,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Interval {
            every_ms: u64,
            #[serde(default)]
            anchor: Option<Anchor>,
        }
        #[derive(Deserialize)]
        struct Cron {
            expression: String,
            #[serde(default)]
            timezone: Option<String>,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Dynamic {
            #[serde(default)]
            min_interval_ms: Option<u64>,
        }
        Ok(match tag {
            "once" => Schedule::Once {
                at: Once::deserialize(rest)?.at,
            },
            "interval" => {
                let Interval { every_ms, anchor } = Interval::deserialize(rest)?;
                Schedule::Interval { every_ms, anchor }
            }
            "cron" => {
                let Cron {
                    expression,
                    timezone,
                } = Cron::deserialize(rest)?;
                Schedule::Cron {
                    expression,
                    timezone,
                }
            }
            "dynamic" => Schedule::Dynamic {
                min_interval_ms: Dynamic::deserialize(rest)?.min_interval_ms,
            },
            other => return Err(tagged::unknown::<Self, _>(other)),
        })
    }
}
