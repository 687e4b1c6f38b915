//! What every page shares: the frame (head, navigation, the live flag),
//! the error page, and the small pieces the pages are made of (a status
//! badge, an instant shown relative to now, a value of a document).

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use loops_core::Timestamp;
use maud::{DOCTYPE, Markup, html};
use serde_json::Value;

use crate::human;

/// The sections the navigation names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Section {
    Loops,
    Workflows,
    Daemons,
}

/// A page: `title`, in `section`, live when `live` (the script swaps in
/// its elements marked `data-region` when the store changes).
pub(super) fn page(title: &str, section: Section, live: bool, body: Markup) -> Response {
    let nav = [
        (Section::Loops, "/", "Loops"),
        (Section::Workflows, "/workflows", "Workflows"),
        (Section::Daemons, "/daemons", "Daemons"),
    ];
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · loops" }
                link rel="stylesheet" href="/assets/app.css";
                script src="/assets/app.js" defer {}
            }
            body data-live=[live.then_some("1")] {
                header.top {
                    a.brand href="/" { "loops" }
                    nav {
                        @for (s, href, name) in nav {
                            a href=(href) class=[(s == section).then_some("here")] { (name) }
                        }
                    }
                    span.live-dot title="live: updates as the store changes" {}
                }
                main { (body) }
            }
        }
    };
    html_response(StatusCode::OK, markup)
}

/// An error page: `title`, and the command line's `message`.
pub(super) fn failure(status: StatusCode, title: &str, message: &str) -> Response {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { (title) " · loops" }
                link rel="stylesheet" href="/assets/app.css";
            }
            body {
                header.top { a.brand href="/" { "loops" } }
                main {
                    h1 { (title) }
                    p.error { (message) }
                }
            }
        }
    };
    html_response(status, markup)
}

fn html_response(status: StatusCode, markup: Markup) -> Response {
    let mut response = Response::new(Body::from(markup.into_string()));
    *response.status_mut() = status;
    let set = response.headers_mut();
    set.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    // Pages show the store as it is now.
    set.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// `text` as one segment of a URL's path.
pub(super) fn path_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `text` as a query parameter's value.
pub(super) fn query_value(text: &str) -> String {
    path_segment(text)
}

/// A status in its colour.
pub(super) fn badge(status: &str) -> Markup {
    html! { span class={ "badge s-" (status) } { (status) } }
}

/// The string at `key` of `doc`, or "".
pub(super) fn text<'a>(doc: &'a Value, key: &str) -> &'a str {
    doc.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The instant at `key` of `doc`.
pub(super) fn instant(doc: &Value, key: &str) -> Option<Timestamp> {
    doc.get(key)
        .and_then(Value::as_str)
        .and_then(|s| Timestamp::parse(s).ok())
}

/// An instant as "3m ago" or "in 4m", with the local time on hover; "-"
/// without one.
pub(super) fn when(at: Option<Timestamp>, now: Timestamp) -> Markup {
    match at {
        Some(at) => html! {
            time datetime=(at.to_string()) title=(human::local(at)) { (human::relative(at, now)) }
        },
        None => html! { "-" },
    }
}

/// A duration in milliseconds as "1.2s", "-" without one.
pub(super) fn duration(doc: &Value, key: &str) -> String {
    doc.get(key)
        .and_then(Value::as_i64)
        .map_or_else(|| "-".to_owned(), human::duration)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_segment_keeps_only_unreserved_bytes() {
        assert_eq!(path_segment("a1-b_c.d~"), "a1-b_c.d~");
        assert_eq!(path_segment("a b/c?d"), "a%20b%2Fc%3Fd");
        assert_eq!(path_segment("é"), "%C3%A9");
    }

    #[test]
    fn values_are_escaped_in_the_markup() {
        let markup = badge("<script>");
        assert_eq!(
            markup.into_string(),
            "<span class=\"badge s-&lt;script&gt;\">&lt;script&gt;</span>"
        );
    }
}
