//! Entity ids: 12 lowercase hex characters (6 random bytes), SPEC §0.
//!
//! Core is pure, so it never draws randomness itself: callers pass the
//! random bytes to [`LoopId::from_bytes`] and friends (the store does).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a string is not an id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid id: {input:?} (expected 12 lowercase hex characters)")]
pub struct IdError {
    /// The rejected input.
    pub input: String,
}

/// Returns true when `s` has the SPEC §0 id shape.
pub fn is_id(s: &str) -> bool {
    s.len() == 12 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn hex12(bytes: [u8; 6]) -> [u8; 12] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; 12];
    for (i, b) in bytes.iter().enumerate() {
        out[2 * i] = HEX[usize::from(b >> 4)];
        out[2 * i + 1] = HEX[usize::from(b & 0xf)];
    }
    out
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name([u8; 12]);

        impl $name {
            /// Builds an id from 6 random bytes.
            pub fn from_bytes(bytes: [u8; 6]) -> Self {
                $name(hex12(bytes))
            }

            /// Parses an id, checking its shape.
            pub fn parse(s: &str) -> Result<Self, IdError> {
                if !is_id(s) {
                    return Err(IdError { input: s.to_owned() });
                }
                let mut out = [0u8; 12];
                out.copy_from_slice(s.as_bytes());
                Ok($name(out))
            }

            /// The id as a string slice.
            pub fn as_str(&self) -> &str {
                // The constructor admits only ASCII hex digits.
                std::str::from_utf8(&self.0).unwrap_or("")
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = IdError;
            fn from_str(s: &str) -> Result<Self, IdError> {
                $name::parse(s)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                $name::parse(&s).map_err(serde::de::Error::custom)
            }
        }
    };
}

id_type!(
    /// The id of a [`Loop`](crate::Loop).
    LoopId
);
id_type!(
    /// The id of a [`LoopRun`](crate::LoopRun).
    RunId
);
id_type!(
    /// The id of a [`WorkflowSpec`](crate::WorkflowSpec).
    WorkflowId
);
id_type!(
    /// The id of a [`WorkflowRun`](crate::WorkflowRun).
    WorkflowRunId
);
id_type!(
    /// The id of a [`StepRun`](crate::StepRun).
    StepRunId
);
id_type!(
    /// The id of a [`WorkflowEvent`](crate::WorkflowEvent).
    EventId
);
id_type!(
    /// The id of a [`DaemonLease`](crate::DaemonLease).
    LeaseId
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_bytes_as_lowercase_hex() {
        let id = LoopId::from_bytes([0x00, 0x1f, 0xab, 0xcd, 0xef, 0xff]);
        assert_eq!(id.as_str(), "001fabcdefff");
        assert_eq!(LoopId::parse("001fabcdefff").unwrap(), id);
    }

    #[test]
    fn rejects_bad_shapes() {
        for bad in [
            "",
            "001FABCDEFFF",
            "001fabcdeff",
            "001fabcdefff0",
            "zzzzzzzzzzzz",
        ] {
            assert!(LoopId::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn serde_round_trip() {
        let id: RunId = serde_json::from_str("\"0123456789ab\"").unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"0123456789ab\"");
        assert!(serde_json::from_str::<RunId>("\"nope\"").is_err());
    }
}
