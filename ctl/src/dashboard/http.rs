//! What every dashboard answer is made of, and the request limits. hyper parses requests
//! (`server.rs`); this module holds the limits it is given, the JSON answers
//! ([`json`], [`error`]) with the headers every answer carries ([`secure`]), the two answers
//! written to a socket without hyper ([`raw`]: 503 at accept, 408 for a head that did not
//! arrive), the error a handler passes up ([`Refusal`]), and what a handler reads from a
//! request ([`Params`], [`cookie`]).
//!
//! Limits: a head (request line and headers) of at most [`HEAD_BYTES_MAX`] and at most
//! [`HEADERS_MAX`] header lines (larger: 431, hyper's answer), a body of at most
//! [`BODY_BYTES_MAX`] given by `Content-Length` (larger: 413; `Transfer-Encoding`: 400).

use axum::body::Body;
use axum::http::header::{
    HeaderMap, HeaderName, HeaderValue, CACHE_CONTROL, CONNECTION, CONTENT_SECURITY_POLICY,
    CONTENT_TYPE, COOKIE, X_CONTENT_TYPE_OPTIONS,
};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// Largest request head (request line + headers + blank line): hyper's read buffer, which
/// it does not let be smaller than 8 KiB.
pub const HEAD_BYTES_MAX: usize = 8 * 1024;
/// Most header lines in a head.
pub const HEADERS_MAX: usize = 64;
/// Largest request body (a login or a resend request is a few hundred bytes).
pub const BODY_BYTES_MAX: usize = 16 * 1024;

const _: () = assert!(HEADERS_MAX * 4 <= HEAD_BYTES_MAX);

/// The page's content security policy: nothing from elsewhere, no framing.
const CSP: &str = "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'";

/// An answer of `content_type`.
pub fn answer(status: u16, content_type: &'static str, body: impl Into<Body>) -> Response {
    let mut r = Response::new(body.into());
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

pub fn json(status: u16, v: &serde_json::Value) -> Response {
    answer(status, "application/json", v.to_string())
}

/// `{"error": reason}`.
pub fn error(status: u16, reason: &str) -> Response {
    json(status, &serde_json::json!({ "error": reason }))
}

/// An error answer not yet made a [`Response`]: what handlers pass up in a `Result` (a
/// `Response` is too large for one).
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub status: u16,
    /// `{"error": ...}` and what else the page needs (`"login"`, `"not_allowed"`).
    pub body: serde_json::Value,
}

impl Refusal {
    /// `{"error": reason}`.
    pub fn new(status: u16, reason: &str) -> Self {
        Refusal {
            status,
            body: serde_json::json!({ "error": reason }),
        }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        json(self.status, &self.body)
    }
}

/// `r` with one more header (a value that is not a valid header is left out).
pub fn with_header(mut r: Response, name: HeaderName, value: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(value) {
        r.headers_mut().append(name, v);
    }
    r
}

/// The headers every answer carries: one request per connection, nothing cached, no type
/// sniffing, the page's content security policy.
pub fn secure(h: &mut HeaderMap) {
    for (name, value) in [
        (CONNECTION, "close"),
        (CACHE_CONTROL, "no-store"),
        (X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (CONTENT_SECURITY_POLICY, CSP),
    ] {
        h.insert(name, HeaderValue::from_static(value));
    }
}

/// A whole `{"error": reason}` answer as bytes, for the two answers written to a socket
/// without hyper (503 at accept, 408 for a head that did not arrive).
pub fn raw(status: u16, reason: &str) -> Vec<u8> {
    let s = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = serde_json::json!({ "error": reason }).to_string();
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        s.as_u16(),
        s.canonical_reason().unwrap_or("Status"),
        body.len()
    );
    let mut h = HeaderMap::new();
    secure(&mut h);
    for (name, value) in &h {
        head.push_str(&format!(
            "{}: {}\r\n",
            title_case(name.as_str()),
            value.to_str().unwrap_or_default()
        ));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

/// `content-type` as `Content-Type` (what hyper writes with title-case headers on).
fn title_case(name: &str) -> String {
    name.split('-')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join("-")
}

/// The query parameters, decoded (`axum::extract::Query`), in order.
pub type Params = Vec<(String, String)>;

/// The first value of parameter `name`.
pub fn param<'a>(params: &'a Params, name: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// The value of cookie `name` in the `Cookie` headers.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_and_params() {
        let mut h = HeaderMap::new();
        h.append(COOKIE, HeaderValue::from_static("a=1; ringmq_session=abc"));
        h.append(COOKIE, HeaderValue::from_static("b=2"));
        assert_eq!(cookie(&h, "ringmq_session"), Some("abc"));
        assert_eq!(cookie(&h, "b"), Some("2"));
        assert_eq!(cookie(&h, "c"), None);
        let p: Params = vec![("x".into(), "1".into()), ("x".into(), "2".into())];
        assert_eq!(param(&p, "x"), Some("1"));
        assert_eq!(param(&p, "y"), None);
    }

    #[test]
    fn raw_answers_carry_length_close_and_the_policy() {
        let t = String::from_utf8(raw(503, "too many connections; try again")).unwrap();
        assert!(t.starts_with("HTTP/1.1 503 Service Unavailable\r\n"), "{t}");
        assert!(t.contains("\r\nConnection: close\r\n"), "{t}");
        assert!(
            t.contains("\r\nContent-Security-Policy: default-src 'self'"),
            "{t}"
        );
        let body = "{\"error\":\"too many connections; try again\"}";
        assert!(t.ends_with(&format!("\r\n\r\n{body}")), "{t}");
        assert!(
            t.contains(&format!("\r\nContent-Length: {}\r\n", body.len())),
            "{t}"
        );
    }
}
