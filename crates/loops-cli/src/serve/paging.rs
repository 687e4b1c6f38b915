//! Paging of `GET /loops` and `GET /runs` (issue 29): `limit` and `offset`
//! become the command's `--limit` and `--offset`; the loops list is cut at
//! [`DEFAULT_LOOPS_LIMIT`] when no limit is given, and never returns more
//! than [`MAX_LOOPS_LIMIT`], so 100,000 loops do not make one answer. A
//! full page carries `Link: <…>; rel="next"` to the one after it (RFC
//! 8288), as GitHub's API does; a short page is the last.

use std::collections::HashMap;
use std::fmt::Write as _;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde::de::IgnoredAny;

/// The loops a page holds when the request gives no `limit`.
pub(super) const DEFAULT_LOOPS_LIMIT: u32 = 100;

/// The most loops one page may hold.
pub(super) const MAX_LOOPS_LIMIT: u32 = 1000;

/// The page a list request asked for: its `limit` and `offset`, as the
/// command line's values, and whether a `Link` may follow it.
pub(super) struct Page {
    /// The limit, as given or the default.
    pub(super) limit: String,
    /// The offset, as given (`None`: from the first).
    pub(super) offset: Option<String>,
}

impl Page {
    /// The page of the loops list in `params` (taken out of them): the
    /// default limit when none is given, and a limit above the most
    /// refused. A limit or offset that is not a number is left to the
    /// command, whose message the error then carries.
    pub(super) fn of_loops(params: &mut HashMap<String, String>) -> Result<Page, String> {
        let limit = params
            .remove("limit")
            .unwrap_or_else(|| DEFAULT_LOOPS_LIMIT.to_string());
        if limit
            .trim()
            .parse::<u64>()
            .is_ok_and(|n| n > u64::from(MAX_LOOPS_LIMIT))
        {
            return Err(format!(
                "limit may be at most {MAX_LOOPS_LIMIT}: page through more loops with offset"
            ));
        }
        Ok(Page {
            limit,
            offset: params.remove("offset"),
        })
    }

    /// The page of the runs list in `params`: the command line's default
    /// limit when none is given.
    pub(super) fn of_runs(params: &HashMap<String, String>, default: &str) -> Page {
        Page {
            limit: params
                .get("limit")
                .cloned()
                .unwrap_or_else(|| default.to_owned()),
            offset: params.get("offset").cloned(),
        }
    }

    /// `response` with a `Link` to the next page when it is a full page
    /// of a list: `path` with `params` (the other filters) and this page's
    /// limit, from the offset after it.
    pub(super) async fn link_next(
        &self,
        response: Response,
        path: &str,
        params: &[(&str, Option<String>)],
    ) -> Response {
        let (Ok(limit), Ok(offset)) = (
            self.limit.trim().parse::<u64>(),
            self.offset
                .as_deref()
                .map_or(Ok(0), |o| o.trim().parse::<u64>()),
        ) else {
            return response;
        };
        if response.status() != StatusCode::OK {
            return response;
        }
        let (mut parts, body) = response.into_parts();
        let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
            return Response::from_parts(parts, Body::empty());
        };
        let shown = serde_json::from_slice::<Vec<IgnoredAny>>(&bytes).map_or(0, |v| v.len());
        if u64::try_from(shown).is_ok_and(|n| n == limit && n > 0) {
            let next = next_url(path, params, limit, offset.saturating_add(limit));
            if let Ok(link) = HeaderValue::from_str(&format!("<{next}>; rel=\"next\"")) {
                parts.headers.insert(header::LINK, link);
            }
        }
        Response::from_parts(parts, Body::from(bytes))
    }
}

/// `path?<params>&limit=…&offset=…`, each value percent-encoded.
fn next_url(path: &str, params: &[(&str, Option<String>)], limit: u64, offset: u64) -> String {
    let mut url = path.to_owned();
    let mut sep = '?';
    for (name, value) in params {
        if let Some(value) = value {
            let _ = write!(url, "{sep}{name}={}", encode(value));
            sep = '&';
        }
    }
    let _ = write!(url, "{sep}limit={limit}&offset={offset}");
    url
}

/// `value` percent-encoded for a query (RFC 3986: all but the unreserved
/// characters).
fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loops_page_has_a_default_and_a_most() {
        let mut params = HashMap::new();
        let page = Page::of_loops(&mut params).unwrap();
        assert_eq!((page.limit.as_str(), page.offset), ("100", None));
        params.insert("limit".to_owned(), "1001".to_owned());
        let err = Page::of_loops(&mut params).err().unwrap();
        assert!(err.contains("at most 1000"), "{err}");
        params.insert("limit".to_owned(), "1000".to_owned());
        params.insert("offset".to_owned(), "7".to_owned());
        let page = Page::of_loops(&mut params).unwrap();
        assert_eq!(
            (page.limit.as_str(), page.offset.as_deref()),
            ("1000", Some("7"))
        );
        assert!(params.is_empty());
    }

    #[test]
    fn the_next_url_keeps_the_filters_encoded() {
        let params = [
            ("status", Some("active".to_owned())),
            ("loop", None),
            ("label", Some("team:ops & co".to_owned())),
        ];
        assert_eq!(
            next_url("/api/v1/loops", &params, 100, 200),
            "/api/v1/loops?status=active&label=team%3Aops%20%26%20co&limit=100&offset=200"
        );
        assert_eq!(
            next_url("/api/v1/runs", &[], 50, 50),
            "/api/v1/runs?limit=50&offset=50"
        );
    }
}
