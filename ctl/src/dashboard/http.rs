//! HTTP/1.1 for the dashboard, the bytes only (no I/O): a request head is checked against
//! its limits before anything is parsed or allocated from it ([`head_end`]), parsed into a
//! [`Request`], and answers are written as one [`Response`] per connection
//! (`Connection: close`; no keep-alive, no chunked bodies either way).
//!
//! Limits: a head (request line and headers) of at most [`HEAD_BYTES_MAX`] (larger: 431), at
//! most [`HEADERS_MAX`] header lines, a body of at most [`BODY_BYTES_MAX`] given by
//! `Content-Length` (larger: 413; `Transfer-Encoding`: 400).

use std::fmt::Write as _;

/// Largest request head (request line + headers + blank line).
pub const HEAD_BYTES_MAX: usize = 8 * 1024;
/// Most header lines in a head.
pub const HEADERS_MAX: usize = 64;
/// Largest request body (a login or a resend request is a few hundred bytes).
pub const BODY_BYTES_MAX: usize = 16 * 1024;

const _: () = assert!(HEADERS_MAX * 4 <= HEAD_BYTES_MAX);

/// A parsed request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// The path, percent-decoded.
    pub path: String,
    /// Query parameters, percent-decoded, in order.
    pub query: Vec<(String, String)>,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    /// Bytes of body announced by `Content-Length` (0 without one).
    pub content_length: usize,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The value of cookie `name`.
    pub fn cookie(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .filter(|(k, _)| k == "cookie")
            .flat_map(|(_, v)| v.split(';'))
            .filter_map(|c| c.trim().split_once('='))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v)
    }
}

/// Why a request is answered with an error status instead of being served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub reason: String,
}

fn refuse(status: u16, reason: impl Into<String>) -> Refusal {
    Refusal {
        status,
        reason: reason.into(),
    }
}

/// Where the head ends in `buf` (the index after `\r\n\r\n`), `Ok(None)` when more bytes
/// are needed, 431 when the head is longer than [`HEAD_BYTES_MAX`].
pub fn head_end(buf: &[u8]) -> Result<Option<usize>, Refusal> {
    let window = &buf[..buf.len().min(HEAD_BYTES_MAX)];
    match window.windows(4).position(|w| w == b"\r\n\r\n") {
        Some(i) => Ok(Some(i + 4)),
        None if buf.len() >= HEAD_BYTES_MAX => Err(refuse(
            431,
            format!("request head longer than {HEAD_BYTES_MAX} bytes"),
        )),
        None => Ok(None),
    }
}

/// Parses a complete head (as [`head_end`] found it).
pub fn parse_head(head: &[u8]) -> Result<Request, Refusal> {
    let text = std::str::from_utf8(head).map_err(|_| refuse(400, "request head is not UTF-8"))?;
    let mut lines = text.split("\r\n");
    let line = lines.next().unwrap_or_default();
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(refuse(400, "malformed request line"));
    };
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(refuse(400, "malformed method"));
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(refuse(400, "only HTTP/1.0 and HTTP/1.1"));
    }
    if !target.starts_with('/') {
        return Err(refuse(400, "the request target must be a path"));
    }
    let (raw_path, raw_query) = target.split_once('?').unwrap_or((target, ""));
    let path = percent_decode(raw_path).ok_or_else(|| refuse(400, "bad escape in the path"))?;
    let query = parse_query(raw_query).ok_or_else(|| refuse(400, "bad escape in the query"))?;
    let mut headers = Vec::new();
    for l in lines.filter(|l| !l.is_empty()) {
        if headers.len() == HEADERS_MAX {
            return Err(refuse(431, format!("more than {HEADERS_MAX} headers")));
        }
        let Some((k, v)) = l.split_once(':') else {
            return Err(refuse(400, "malformed header line"));
        };
        if k.is_empty()
            || k.bytes()
                .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
        {
            return Err(refuse(400, "malformed header name"));
        }
        headers.push((k.to_ascii_lowercase(), v.trim().to_string()));
    }
    let mut req = Request {
        method: method.to_string(),
        path,
        query,
        headers,
        content_length: 0,
    };
    if req.header("transfer-encoding").is_some() {
        return Err(refuse(
            400,
            "Transfer-Encoding is not accepted; send Content-Length",
        ));
    }
    if let Some(v) = req.header("content-length") {
        let n: usize = v
            .parse()
            .map_err(|_| refuse(400, "Content-Length is not a number"))?;
        if n > BODY_BYTES_MAX {
            return Err(refuse(
                413,
                format!("request body longer than {BODY_BYTES_MAX} bytes"),
            ));
        }
        req.content_length = n;
    }
    Ok(req)
}

/// `a=1&b=x%20y` as pairs; `None` on a bad escape.
pub fn parse_query(q: &str) -> Option<Vec<(String, String)>> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            Some((
                percent_decode(&k.replace('+', " "))?,
                percent_decode(&v.replace('+', " "))?,
            ))
        })
        .collect()
}

/// `%XX` escapes decoded (UTF-8); `None` on a bad escape or invalid UTF-8.
pub fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// One answer.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn new(status: u16, content_type: &'static str, body: impl Into<Vec<u8>>) -> Self {
        Response {
            status,
            content_type,
            headers: Vec::new(),
            body: body.into(),
        }
    }

    pub fn json(status: u16, v: &serde_json::Value) -> Self {
        Self::new(status, "application/json", v.to_string())
    }

    /// `{"error": reason}`.
    pub fn error(status: u16, reason: &str) -> Self {
        Self::json(status, &serde_json::json!({ "error": reason }))
    }

    pub fn with_header(mut self, name: &'static str, value: String) -> Self {
        self.headers.push((name, value));
        self
    }

    /// Status line, headers and body.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut head = String::new();
        let _ = write!(
            head,
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\
             Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n\
             Content-Security-Policy: default-src 'self'; img-src 'self' data:; frame-ancestors 'none'\r\n",
            self.status,
            reason_phrase(self.status),
            self.content_type,
            self.body.len()
        );
        for (k, v) in &self.headers {
            let _ = write!(head, "{k}: {v}\r\n");
        }
        head.push_str("\r\n");
        let mut out = head.into_bytes();
        out.extend_from_slice(&self.body);
        out
    }
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_parses_with_decoded_path_query_and_cookie() {
        let head = b"GET /api/topic?name=%25DLQ%25billing&x=a+b HTTP/1.1\r\nHost: h\r\n\
                     Cookie: a=1; ringmq_session=abc\r\n\r\n";
        let end = head_end(head).unwrap().unwrap();
        assert_eq!(end, head.len());
        let r = parse_head(head).unwrap();
        assert_eq!(r.method, "GET");
        assert_eq!(r.path, "/api/topic");
        assert_eq!(r.param("name"), Some("%DLQ%billing"));
        assert_eq!(r.param("x"), Some("a b"));
        assert_eq!(r.header("host"), Some("h"));
        assert_eq!(r.cookie("ringmq_session"), Some("abc"));
        assert_eq!(r.content_length, 0);
    }

    #[test]
    fn malformed_and_oversized_heads_are_refused() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n").unwrap(), None);
        let big = vec![b'a'; HEAD_BYTES_MAX];
        assert_eq!(head_end(&big).unwrap_err().status, 431);
        for bad in [
            &b"GET /\r\n\r\n"[..],
            b"get / HTTP/1.1\r\n\r\n",
            b"GET / HTTP/2\r\n\r\n",
            b"GET x HTTP/1.1\r\n\r\n",
            b"GET /%zz HTTP/1.1\r\n\r\n",
            b"GET / HTTP/1.1\r\nno-colon\r\n\r\n",
            b"POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n",
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"\xff\xfe / HTTP/1.1\r\n\r\n",
        ] {
            assert_eq!(parse_head(bad).unwrap_err().status, 400, "{bad:?}");
        }
        let long = format!(
            "POST / HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
            BODY_BYTES_MAX + 1
        );
        assert_eq!(parse_head(long.as_bytes()).unwrap_err().status, 413);
        let mut many = String::from("GET / HTTP/1.1\r\n");
        for i in 0..=HEADERS_MAX {
            many.push_str(&format!("h{i}: v\r\n"));
        }
        many.push_str("\r\n");
        assert_eq!(parse_head(many.as_bytes()).unwrap_err().status, 431);
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        const ALPHABET: &[u8] = b"GET /?%=&: \r\n\xc3";
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for n in 0..2000 {
            let len = n % 300;
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    ALPHABET[(x % ALPHABET.len() as u64) as usize]
                })
                .collect();
            let _ = head_end(&bytes);
            let _ = parse_head(&bytes);
        }
    }

    #[test]
    fn responses_carry_length_and_close() {
        let r = Response::error(404, "no such page").to_bytes();
        let t = String::from_utf8(r).unwrap();
        assert!(t.starts_with("HTTP/1.1 404 Not Found\r\n"), "{t}");
        assert!(t.contains("Connection: close\r\n"));
        assert!(t.ends_with("\r\n\r\n{\"error\":\"no such page\"}"), "{t}");
        assert!(t.contains("Content-Length: 24\r\n"), "{t}");
    }
}
