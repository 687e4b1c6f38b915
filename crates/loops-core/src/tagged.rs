//! Reading internally tagged JSON objects (`{"type": "interval", ...}`)
//! without serde's buffering.
//!
//! `#[serde(tag = "type")]` first reads the whole object into an untyped
//! buffer, allocating every key and value, because the tag may come last.
//! loops and the original both write the tag first, so [`deserialize`]
//! reads the first key: when it is `type`, the rest of the object goes
//! straight to the variant's own deserializer. Otherwise the object is
//! buffered as a `serde_json::Value` and read the same way, so any key order
//! is still accepted. Decoding the `schedule_json` and `target_json` of
//! every row was the larger part of `loops --json list`.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserializer, MapAccess, Visitor};

/// An enum stored as an object with a `type` tag.
pub(crate) trait Tagged: Sized {
    /// What the value is, for error messages ("a schedule").
    const EXPECTING: &'static str;
    /// The tags, for unknown-variant errors.
    const VARIANTS: &'static [&'static str];

    /// Reads the variant `tag` from the object's other fields.
    fn from_rest<'de, D: Deserializer<'de>>(tag: &str, rest: D) -> Result<Self, D::Error>;
}

/// Reads a [`Tagged`] value (see the module docs).
pub(crate) fn deserialize<'de, T: Tagged, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
    d.deserialize_map(TaggedVisitor::<T>(PhantomData))
}

/// An unknown tag.
pub(crate) fn unknown<T: Tagged, E: de::Error>(tag: &str) -> E {
    E::unknown_variant(tag, T::VARIANTS)
}

struct TaggedVisitor<T>(PhantomData<T>);

impl<'de, T: Tagged> Visitor<'de> for TaggedVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(T::EXPECTING)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<T, A::Error> {
        let Some(Text(first)) = map.next_key::<Text<'de>>()? else {
            return Err(de::Error::missing_field("type"));
        };
        if first == "type" {
            let Text(tag) = map.next_value::<Text<'de>>()?;
            return T::from_rest(&tag, MapAccessDeserializer::new(map));
        }
        // The tag is elsewhere: buffer the object.
        let mut object = serde_json::Map::new();
        object.insert(first.into_owned(), map.next_value()?);
        while let Some((key, value)) = map.next_entry::<String, serde_json::Value>()? {
            object.insert(key, value);
        }
        let tag = match object.remove("type") {
            Some(serde_json::Value::String(tag)) => tag,
            Some(other) => {
                return Err(de::Error::invalid_type(unexpected(&other), &"a string tag"));
            }
            None => return Err(de::Error::missing_field("type")),
        };
        T::from_rest(&tag, serde_json::Value::Object(object)).map_err(de::Error::custom)
    }
}

fn unexpected(value: &serde_json::Value) -> de::Unexpected<'_> {
    match value {
        serde_json::Value::Null => de::Unexpected::Unit,
        serde_json::Value::Bool(b) => de::Unexpected::Bool(*b),
        serde_json::Value::Number(_) => de::Unexpected::Other("a number"),
        serde_json::Value::String(s) => de::Unexpected::Str(s),
        serde_json::Value::Array(_) => de::Unexpected::Seq,
        serde_json::Value::Object(_) => de::Unexpected::Map,
    }
}

/// A string, borrowed from the input when it has no escapes.
struct Text<'de>(Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }

            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v.to_owned())))
            }

            fn visit_string<E: de::Error>(self, v: String) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        d.deserialize_str(TextVisitor)
    }
}

#[cfg(test)]
mod tests {
    use crate::{Schedule, Target};

    fn schedule(json: &str) -> Result<Schedule, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    #[test]
    fn the_tag_may_come_anywhere_and_be_escaped() {
        let expected = Schedule::Interval {
            every_ms: 5,
            anchor: None,
        };
        for json in [
            r#"{"type":"interval","everyMs":5}"#,
            r#"{"everyMs":5,"type":"interval"}"#,
            r#"{"ty\u0070e":"int\u0065rval","everyMs":5}"#,
        ] {
            assert_eq!(schedule(json).unwrap(), expected, "{json}");
        }
        let target: Target =
            serde_json::from_str(r#"{"command":"true","shell":false,"type":"command"}"#).unwrap();
        assert_eq!(target.kind(), "command");
    }

    #[test]
    fn bad_tags_say_what_is_wrong() {
        for (json, message) in [
            (r#"{}"#, "missing field `type`"),
            (r#"{"everyMs":5}"#, "missing field `type`"),
            (
                r#"{"type":"weekly"}"#,
                "unknown variant `weekly`, expected one of `once`",
            ),
            (r#"{"at":"x","type":"weekly"}"#, "unknown variant `weekly`"),
            (r#"{"everyMs":5,"type":7}"#, "expected a string tag"),
            (r#"{"type":"interval"}"#, "missing field `everyMs`"),
            (
                r#"{"everyMs":"x","type":"interval"}"#,
                "invalid type: string",
            ),
            (r#"[]"#, "expected a schedule object with a type"),
        ] {
            let err = schedule(json).unwrap_err();
            assert!(err.contains(message), "{json}: {err}");
        }
    }
}
