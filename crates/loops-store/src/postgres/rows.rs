//! Value encoding for PostgreSQL: instants as `timestamptz` ([`Ts`], to
//! the millisecond) and JSON columns as `json` ([`Json`]: the text as
//! written, see migration V1). The column lists and row mappers are
//! written once for both dialects in [`crate::columns`].

use std::error::Error as StdError;

use bytes::{BufMut, BytesMut};
use loops_core::Timestamp;
use postgres::types::{FromSql, IsNull, ToSql, Type, to_sql_checked};

type BoxError = Box<dyn StdError + Sync + Send>;

/// Microseconds between the Unix epoch and PostgreSQL's (2000-01-01).
const PG_EPOCH_US: i64 = 946_684_800_000_000;

/// An instant as a `timestamptz` parameter or column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ts(pub(crate) Timestamp);

impl ToSql for Ts {
    fn to_sql(&self, _ty: &Type, out: &mut BytesMut) -> std::result::Result<IsNull, BoxError> {
        out.put_i64(self.0.as_millis() * 1000 - PG_EPOCH_US);
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        matches!(*ty, Type::TIMESTAMPTZ | Type::TIMESTAMP)
    }

    to_sql_checked!();
}

impl<'a> FromSql<'a> for Ts {
    fn from_sql(_ty: &Type, raw: &'a [u8]) -> std::result::Result<Ts, BoxError> {
        let bytes: [u8; 8] = raw.try_into().map_err(|_| "a timestamptz is 8 bytes")?;
        let us = i64::from_be_bytes(bytes);
        // ±infinity and anything past year 9999 do not fit an instant.
        let ms = us.checked_add(PG_EPOCH_US).map(|u| u.div_euclid(1000));
        ms.and_then(Timestamp::from_millis)
            .map(Ts)
            .ok_or_else(|| "an instant outside the years 0000-9999".into())
    }

    fn accepts(ty: &Type) -> bool {
        matches!(*ty, Type::TIMESTAMPTZ | Type::TIMESTAMP)
    }
}

/// An instant parameter.
pub(crate) fn ts(t: Timestamp) -> Ts {
    Ts(t)
}

/// JSON text as a `jsonb` (or `json`) parameter or column, passed through
/// unparsed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Json<'a>(pub(crate) &'a str);

impl ToSql for Json<'_> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> std::result::Result<IsNull, BoxError> {
        if *ty == Type::JSONB {
            out.put_u8(1);
        }
        out.put_slice(self.0.as_bytes());
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        matches!(*ty, Type::JSONB | Type::JSON)
    }

    to_sql_checked!();
}

impl<'a> FromSql<'a> for Json<'a> {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> std::result::Result<Json<'a>, BoxError> {
        let text = if *ty == Type::JSONB {
            match raw.split_first() {
                Some((1, rest)) => rest,
                _ => return Err("unknown jsonb version".into()),
            }
        } else {
            raw
        };
        Ok(Json(std::str::from_utf8(text)?))
    }

    fn accepts(ty: &Type) -> bool {
        matches!(*ty, Type::JSONB | Type::JSON)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_round_trip_through_the_wire_format() {
        for s in [
            "2026-01-01T00:00:00.000Z",
            "1969-12-31T23:59:59.999Z",
            "2000-01-01T00:00:00.001Z",
            "9999-12-31T23:59:59.999Z",
        ] {
            let t: Timestamp = s.parse().unwrap();
            let mut buf = BytesMut::new();
            Ts(t).to_sql(&Type::TIMESTAMPTZ, &mut buf).unwrap();
            let back = Ts::from_sql(&Type::TIMESTAMPTZ, &buf).unwrap();
            assert_eq!(back.0, t, "{s}");
        }
    }

    #[test]
    fn sub_millisecond_instants_truncate_toward_the_past() {
        // 1969-12-31T23:59:59.9995Z in PostgreSQL's microseconds.
        let us: i64 = -500 - PG_EPOCH_US;
        let t = Ts::from_sql(&Type::TIMESTAMPTZ, &us.to_be_bytes())
            .unwrap()
            .0;
        assert_eq!(t.to_string(), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn jsonb_carries_a_version_byte() {
        let mut buf = BytesMut::new();
        Json("{\"a\":1}").to_sql(&Type::JSONB, &mut buf).unwrap();
        assert_eq!(&buf[..], b"\x01{\"a\":1}");
        assert_eq!(Json::from_sql(&Type::JSONB, &buf).unwrap().0, "{\"a\":1}");
    }
}
