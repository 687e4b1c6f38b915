//! A cron expression in words, for `loops next` and `create --dry-run`
//! (issue 28): `at 09:00 on Mon–Fri`, `every 15 minutes`, `at 00:00 on day
//! 1 of the month`. Only the common forms are put in words; anything else
//! (steps over ranges, both day fields restricted, long lists) gives
//! `None`, and the caller shows the expression itself. The expression is
//! one `CronExpr::parse` accepted, so nothing here validates it.

/// The weekday names, Sunday first; 7 is Sunday too.
const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];

/// The month names, January first.
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// The most values a list may have and still be put in words.
const MAX_LIST: usize = 4;

/// `expression` in words, or `None` when it is not a common form.
pub(crate) fn words(expression: &str) -> Option<String> {
    let text = expression.trim();
    if let Some(name) = text.strip_prefix('@') {
        let said = match name.to_ascii_lowercase().as_str() {
            "hourly" => "at minute 0 of every hour",
            "daily" | "midnight" => "at 00:00 every day",
            "weekly" => "at 00:00 on Sun",
            "monthly" => "at 00:00 on day 1 of the month",
            "yearly" | "annually" => "at 00:00 on Jan 1",
            _ => return None,
        };
        return Some(said.to_owned());
    }
    let fields: Vec<&str> = text.split_whitespace().collect();
    let [minute, hour, dom, month, dow] = fields.as_slice() else {
        return None;
    };
    let time = time_words(minute, hour)?;
    let days = day_words(dom, month, dow)?;
    // `at 09:00 every day`, but not `every minute every day`.
    let at_clock_times = time.starts_with("at ") && !time.starts_with("at minute");
    Some(match (days.is_empty(), at_clock_times) {
        (true, true) => format!("{time} every day"),
        (true, false) => time,
        (false, _) => format!("{time} {days}"),
    })
}

/// The minute and hour fields: `at 09:00`, `at 09:00 and 17:30`, `every
/// 15 minutes`, `at minute 5 of every hour`, `every 2 hours at minute 0`.
fn time_words(minute: &str, hour: &str) -> Option<String> {
    match (minute, hour) {
        ("*", "*") => Some("every minute".to_owned()),
        (m, "*") => {
            if let Some(n) = step(m, 60) {
                return Some(format!("every {n} minutes"));
            }
            Some(format!("at minute {} of every hour", number(m, 59)?))
        }
        (m, h) => {
            let m = number(m, 59)?;
            if let Some(n) = step(h, 24) {
                return Some(format!("every {n} hours at minute {m}"));
            }
            if let Some((from, to)) = range(h, 23) {
                return Some(format!(
                    "at minute {m} of every hour from {from:02}:00 to {to:02}:00"
                ));
            }
            let hours = list(h, |v| number(v, 23))?;
            let times: Vec<String> = hours.iter().map(|h| format!("{h:02}:{m:02}")).collect();
            Some(format!("at {}", join(&times)))
        }
    }
}

/// The day-of-month, month and day-of-week fields: `` (every day), `on
/// Mon–Fri`, `on day 1 of the month`, `on Jan 1`, `in Jan and Jul`.
fn day_words(dom: &str, month: &str, dow: &str) -> Option<String> {
    let months = match month {
        "*" => None,
        m => Some(list(m, |v| named_range(v, &MONTHS, 1))?),
    };
    match (dom, dow) {
        ("*", "*") => Some(
            months
                .map(|m| format!("in {}", join(&m)))
                .unwrap_or_default(),
        ),
        ("*", d) => {
            let days = join(&list(d, |v| named_range(v, &DAYS, 0))?);
            Some(match months {
                Some(m) => format!("on {days} in {}", join(&m)),
                None => format!("on {days}"),
            })
        }
        (d, "*") => {
            let days: Vec<String> = list(d, |v| number(v, 31).map(|n| n.to_string()))?;
            Some(match (months, days.as_slice()) {
                (Some(m), [day]) if m.len() == 1 && !m[0].contains('–') => {
                    format!("on {} {day}", m[0])
                }
                (Some(m), _) => format!("on day {} in {}", join(&days), join(&m)),
                (None, [day]) => format!("on day {day} of the month"),
                (None, _) => format!("on days {} of the month", join(&days)),
            })
        }
        // Both day fields restricted: cron fires on either, which words
        // would have to spell out; the expression says it better.
        _ => None,
    }
}

/// `*/n` when `n` divides `size`, so the steps are even: `n`.
fn step(field: &str, size: u32) -> Option<u32> {
    let n: u32 = field.strip_prefix("*/")?.parse().ok()?;
    (n > 1 && size.is_multiple_of(n)).then_some(n)
}

/// A plain number up to `max`.
fn number(field: &str, max: u32) -> Option<u32> {
    field.parse().ok().filter(|n| *n <= max)
}

/// `a-b` of plain numbers up to `max`.
fn range(field: &str, max: u32) -> Option<(u32, u32)> {
    let (a, b) = field.split_once('-')?;
    Some((number(a, max)?, number(b, max)?))
}

/// A comma list of at most [`MAX_LIST`] elements, each put in words by
/// `each`.
fn list<T>(field: &str, each: impl Fn(&str) -> Option<T>) -> Option<Vec<T>> {
    let parts: Vec<&str> = field.split(',').collect();
    if parts.len() > MAX_LIST {
        return None;
    }
    parts.into_iter().map(each).collect()
}

/// A day or month, or a range of them (`MON-FRI`, `1-5`, `jan-mar`), by
/// name; `first` is the number of `names[0]`.
fn named_range(field: &str, names: &[&str], first: u32) -> Option<String> {
    match field.split_once('-') {
        Some((a, b)) => Some(format!(
            "{}–{}",
            name(a, names, first)?,
            name(b, names, first)?
        )),
        None => name(field, names, first).map(str::to_owned),
    }
}

/// One day or month, by number or name. A day numbered 7 is Sunday.
fn name<'a>(field: &str, names: &[&'a str], first: u32) -> Option<&'a str> {
    if let Some(found) = names.iter().find(|n| n.eq_ignore_ascii_case(field)) {
        return Some(found);
    }
    let n: u32 = field.parse().ok()?;
    let index = usize::try_from(n.checked_sub(first)?).ok()?;
    match names.get(index) {
        Some(found) => Some(found),
        None if first == 0 && index == names.len() => names.first().copied(),
        None => None,
    }
}

/// `a`, `a and b`, `a, b and c`.
fn join(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::words;

    fn said(expression: &str) -> String {
        words(expression).unwrap_or_else(|| format!("(none for {expression})"))
    }

    #[test]
    fn common_forms_are_words() {
        assert_eq!(said("0 9 * * 1-5"), "at 09:00 on Mon–Fri");
        assert_eq!(said("0 9 * * MON-FRI"), "at 09:00 on Mon–Fri");
        assert_eq!(said("30 2 * * *"), "at 02:30 every day");
        assert_eq!(said("0 9,17 * * *"), "at 09:00 and 17:00 every day");
        assert_eq!(said("*/15 * * * *"), "every 15 minutes");
        assert_eq!(said("* * * * *"), "every minute");
        assert_eq!(said("5 * * * *"), "at minute 5 of every hour");
        assert_eq!(said("0 */6 * * *"), "every 6 hours at minute 0");
        assert_eq!(
            said("0 9-17 * * 1-5"),
            "at minute 0 of every hour from 09:00 to 17:00 on Mon–Fri"
        );
        assert_eq!(said("0 0 1 * *"), "at 00:00 on day 1 of the month");
        assert_eq!(
            said("0 0 1,15 * *"),
            "at 00:00 on days 1 and 15 of the month"
        );
        assert_eq!(said("0 0 1 1 *"), "at 00:00 on Jan 1");
        assert_eq!(said("0 0 1 1-3 *"), "at 00:00 on day 1 in Jan–Mar");
        assert_eq!(said("0 8 * * 0,6"), "at 08:00 on Sun and Sat");
        assert_eq!(said("0 8 * * 7"), "at 08:00 on Sun");
        assert_eq!(said("0 8 * * fri-sun"), "at 08:00 on Fri–Sun");
        assert_eq!(said("0 8 * 1,7 *"), "at 08:00 in Jan and Jul");
        assert_eq!(said("@daily"), "at 00:00 every day");
        assert_eq!(said("@hourly"), "at minute 0 of every hour");
    }

    #[test]
    fn uncommon_forms_are_left_to_the_expression() {
        for expression in [
            "*/7 * * * *",
            "0 */5 * * *",
            "0 0 1 * 1",
            "1,2,3,4,5 * * * *",
            "0-30/10 * * * *",
            "*/15 9 * * *",
            "0 0 */2 * *",
            "0 8 * * 1/2",
        ] {
            assert_eq!(words(expression), None, "{expression}");
        }
    }
}
