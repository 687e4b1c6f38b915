//! The checks every request passes before a route sees it, and the
//! headers every response carries (see the parent module).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use super::Shared;
use super::routes::error;
use super::token::matches;

/// The cookie the login URL sets.
pub(super) const COOKIE: &str = "loops_token";

/// Adds the security headers to every response.
pub(super) async fn headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let set = response.headers_mut();
    set.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'self'; script-src 'self'"),
    );
    set.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // Not `no-referrer`: under it a browser sends `Origin: null` with the
    // pages' own form posts, which the Origin check must then refuse.
    // `same-origin` still tells other sites nothing.
    set.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    response
}

/// Refuses a request whose `Host` does not name this server: a page of
/// another site that rebinds its name to 127.0.0.1 sends its own name.
pub(super) async fn host(
    State(shared): State<Arc<Shared>>,
    request: Request,
    next: Next,
) -> Response {
    let named = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_ascii_lowercase);
    match named {
        Some(host) if shared.hosts.contains(&host) => next.run(request).await,
        _ => error(
            StatusCode::MISDIRECTED_REQUEST,
            "misdirected",
            &format!(
                "this server answers only to Host {}",
                shared.hosts.join(" or ")
            ),
        ),
    }
}

/// Refuses an API call without the token, and a write whose `Origin` is
/// not this server's.
pub(super) async fn api(
    State(shared): State<Arc<Shared>>,
    request: Request,
    next: Next,
) -> Response {
    if !authorized(&shared.token, request.headers()) {
        return error(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "this API needs the access token: open the login URL loops serve printed, or send \
             Authorization: Bearer <the token in $LOOPS_DATA_DIR/serve.token>",
        );
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let origin = request.headers().get(header::ORIGIN);
        if let Some(origin) = origin
            && !own_origin(&shared, origin)
        {
            return error(
                StatusCode::FORBIDDEN,
                "forbidden",
                "a write must come from this server's own pages: its Origin is another site's",
            );
        }
    }
    next.run(request).await
}

/// Whether `origin` is this server's own.
pub(super) fn own_origin(shared: &Shared, origin: &HeaderValue) -> bool {
    origin
        .to_str()
        .ok()
        .and_then(|o| o.strip_prefix(shared.scheme))
        .and_then(|o| o.strip_prefix("://"))
        .is_some_and(|o| shared.hosts.iter().any(|h| h.eq_ignore_ascii_case(o)))
}

/// Whether `headers` carry `token`, as the cookie or as a bearer token.
pub(super) fn authorized(token: &str, headers: &HeaderMap) -> bool {
    let bearer = headers
        .get_all(header::AUTHORIZATION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        // The scheme's name is case-insensitive (RFC 9110 §11.1).
        .filter_map(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, given)| given)
        .any(|given| matches(token, given.trim()));
    bearer
        || headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .any(|(name, given)| name == COOKIE && matches(token, given))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_comes_as_a_bearer_or_as_the_cookie() {
        let with = |name, value: &str| {
            let mut h = HeaderMap::new();
            h.insert(name, HeaderValue::from_str(value).unwrap());
            h
        };
        assert!(authorized("t0", &with(header::AUTHORIZATION, "Bearer t0")));
        assert!(!authorized("t0", &with(header::AUTHORIZATION, "Bearer t1")));
        assert!(authorized("t0", &with(header::AUTHORIZATION, "bearer t0")));
        assert!(!authorized("t0", &with(header::AUTHORIZATION, "Basic t0")));
        assert!(authorized(
            "t0",
            &with(header::COOKIE, "a=b; loops_token=t0")
        ));
        assert!(!authorized("t0", &with(header::COOKIE, "other=t0")));
        assert!(!authorized("t0", &HeaderMap::new()));
    }
}
