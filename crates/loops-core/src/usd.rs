//! Money in US dollars, as a whole number of billionths (issue 27): what an
//! agent run cost and a loop's daily cap. Whole numbers add up exactly, so a
//! day's total never drifts from its runs, and the type has `Eq` and `Ord`
//! where a float has neither. JSON shows it as a number of dollars.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Billionths of a dollar in one dollar.
const NANOS_PER_USD: f64 = 1e9;

/// An amount of US dollars, never negative.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Usd(i64);

impl Usd {
    /// No money.
    pub const ZERO: Usd = Usd(0);

    /// `nanos` billionths of a dollar; a negative count is zero.
    pub fn from_nanos(nanos: i64) -> Usd {
        Usd(nanos.max(0))
    }

    /// The amount in billionths of a dollar, as stored.
    pub fn nanos(self) -> i64 {
        self.0
    }

    /// `dollars`, rounded to the billionth; `None` unless it is a finite
    /// number of at least zero. Amounts beyond `i64::MAX` billionths (some
    /// nine billion dollars) are capped there.
    pub fn from_dollars(dollars: f64) -> Option<Usd> {
        if !dollars.is_finite() || dollars < 0.0 {
            return None;
        }
        // `as` saturates at i64::MAX, which is the cap wanted.
        Some(Usd((dollars * NANOS_PER_USD).round() as i64))
    }

    /// The amount in dollars.
    pub fn dollars(self) -> f64 {
        self.0 as f64 / NANOS_PER_USD
    }

    /// The sum, capped at the largest amount.
    pub fn saturating_add(self, other: Usd) -> Usd {
        Usd(self.0.saturating_add(other.0))
    }
}

impl std::iter::Sum for Usd {
    fn sum<I: Iterator<Item = Usd>>(iter: I) -> Usd {
        iter.fold(Usd::ZERO, Usd::saturating_add)
    }
}

/// `$1.25` from a cent up; below it, four decimals (`$0.0042`), so a cheap
/// run does not read as free.
impl fmt::Display for Usd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dollars = self.dollars();
        if self.0 == 0 || dollars >= 0.01 {
            write!(f, "${dollars:.2}")
        } else {
            write!(f, "${dollars:.4}")
        }
    }
}

/// Why a text is not an amount of dollars.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsdError(String);

impl fmt::Display for UsdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid amount {:?}: expected US dollars of at least 0, such as 5 or 0.50",
            self.0
        )
    }
}

impl std::error::Error for UsdError {}

/// `5`, `0.50` or `$2`.
impl FromStr for Usd {
    type Err = UsdError;

    fn from_str(s: &str) -> Result<Usd, UsdError> {
        let digits = s.trim().strip_prefix('$').unwrap_or(s.trim());
        // Only plain decimals: f64's parser also takes `inf` and `1e3`.
        let plain = !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit() || b == b'.')
            && digits.bytes().filter(|&b| b == b'.').count() <= 1;
        plain
            .then(|| digits.parse::<f64>().ok())
            .flatten()
            .and_then(Usd::from_dollars)
            .ok_or_else(|| UsdError(s.to_owned()))
    }
}

impl Serialize for Usd {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(self.dollars())
    }
}

impl<'de> Deserialize<'de> for Usd {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Usd, D::Error> {
        let dollars = f64::deserialize(deserializer)?;
        Usd::from_dollars(dollars).ok_or_else(|| {
            serde::de::Error::custom(format!("{dollars} is not an amount of US dollars"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dollars_round_to_the_billionth_and_add_exactly() {
        let a = Usd::from_dollars(0.1).unwrap();
        let b = Usd::from_dollars(0.2).unwrap();
        assert_eq!(a.nanos(), 100_000_000);
        assert_eq!(
            [a, b].into_iter().sum::<Usd>(),
            Usd::from_dollars(0.3).unwrap()
        );
        assert_eq!(Usd::from_dollars(0.000_000_000_4), Some(Usd::ZERO));
        assert_eq!(Usd::from_dollars(1.5).unwrap().dollars(), 1.5);
    }

    #[test]
    fn only_finite_amounts_of_at_least_zero_are_dollars() {
        for bad in [f64::NAN, f64::INFINITY, -0.01] {
            assert_eq!(Usd::from_dollars(bad), None, "{bad}");
        }
        assert_eq!(Usd::from_dollars(1e300).unwrap().nanos(), i64::MAX);
        assert_eq!(Usd::from_nanos(-5), Usd::ZERO);
        assert_eq!(Usd::from_nanos(5).nanos(), 5);
        let max = Usd::from_nanos(i64::MAX);
        assert_eq!(max.saturating_add(Usd::from_nanos(1)), max);
    }

    #[test]
    fn amounts_parse_from_plain_decimals() {
        assert_eq!("5".parse::<Usd>().unwrap().nanos(), 5_000_000_000);
        assert_eq!("0.50".parse::<Usd>().unwrap().nanos(), 500_000_000);
        assert_eq!(" $2 ".parse::<Usd>().unwrap().nanos(), 2_000_000_000);
        for bad in ["", "-1", "inf", "NaN", "1e3", "1.2.3", "$", "five"] {
            let err = bad.parse::<Usd>().unwrap_err().to_string();
            assert!(err.contains("such as 5 or 0.50"), "{bad}: {err}");
        }
    }

    #[test]
    fn amounts_show_cents_or_four_decimals_below_a_cent() {
        let show = |d: f64| Usd::from_dollars(d).unwrap().to_string();
        assert_eq!(show(0.0), "$0.00");
        assert_eq!(show(1.256), "$1.26");
        assert_eq!(show(0.01), "$0.01");
        assert_eq!(show(0.0042), "$0.0042");
    }

    #[test]
    fn json_is_a_number_of_dollars() {
        let cost = Usd::from_dollars(0.25).unwrap();
        assert_eq!(serde_json::to_string(&cost).unwrap(), "0.25");
        assert_eq!(serde_json::from_str::<Usd>("0.25").unwrap(), cost);
        assert!(serde_json::from_str::<Usd>("-1").is_err());
    }
}
