//! The listener and what holds every request to its limits. Requests are parsed by hyper's
//! HTTP/1 server and routed by axum (`api.rs`); this module owns the connections and the
//! limits around them:
//!
//! - At most [`CONNECTIONS_MAX`] connections at once; more are answered 503 without reading
//!   and closed (written here: hyper never sees them).
//! - One request per connection (`Connection: close`); a head of at most
//!   [`HEAD_BYTES_MAX`](super::http::HEAD_BYTES_MAX) bytes and
//!   [`HEADERS_MAX`](super::http::HEADERS_MAX) lines (larger: hyper's 431; a head it
//!   cannot parse: hyper's 400; those two answers have no body).
//! - [`REQUEST_READ_TIMEOUT`] from accept to the whole request: a head not in by then is
//!   answered 408 here (hyper is dropped, the socket kept); a body not in by then, 408 from
//!   [`guard`]. The answer has [`HANDLER_TIMEOUT`] to be computed (then 504) and the
//!   connection is closed at the latest [`REQUEST_READ_TIMEOUT`] + [`HANDLER_TIMEOUT`] +
//!   [`WRITE_TIMEOUT`] after accept.
//! - [`guard`] (an axum middleware around every route): `Transfer-Encoding` is 400, a
//!   `Content-Length` over [`BODY_BYTES_MAX`] 413 (both before the body is read or the route
//!   looked up), and every answer gets the headers of [`http::secure`].
//! - After an error answer the rest of what the client sends is read and dropped for a
//!   moment, so it sees the answer rather than a reset.
//!
//! Why hyper under axum rather than `axum::serve`: `serve` has none of these limits (no
//! connection cap, no head timeout, no head size or header count), so the accept loop and
//! the connection are here, and axum is the router and the middleware.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::header::{CONTENT_LENGTH, TRANSFER_ENCODING};
use axum::middleware::Next;
use axum::response::Response;
use axum::Router;
use http_body_util::{BodyExt, Limited};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tower::ServiceExt as _;

use super::http::{self, BODY_BYTES_MAX, HEADERS_MAX, HEAD_BYTES_MAX};

/// Connections served at once.
pub const CONNECTIONS_MAX: usize = 32;
/// Time from accept to a whole request (head and body).
pub const REQUEST_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Time to compute an answer (the admin requests behind it have their own timeouts).
pub const HANDLER_TIMEOUT: Duration = Duration::from_secs(60);
/// Time to write an answer.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the rest of a refused request is drained before closing.
const DRAIN_TIME: Duration = Duration::from_millis(500);
/// Bytes drained at most after a refused request.
const DRAIN_BYTES_MAX: usize = 1 << 20;

const _: () = assert!(HEAD_BYTES_MAX + BODY_BYTES_MAX < DRAIN_BYTES_MAX);

/// When the connection of a request was accepted (a request extension set by [`serve`]).
#[derive(Debug, Clone, Copy)]
struct Accepted(Instant);

/// Accepts connections until the process ends; `app` answers each request.
pub async fn run(listener: TcpListener, app: Router) {
    let permits = Arc::new(Semaphore::new(CONNECTIONS_MAX));
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(_) => {
                // Out of file descriptors and the like: let some connections end.
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        match Arc::clone(&permits).try_acquire_owned() {
            Ok(permit) => {
                let app = app.clone();
                tokio::spawn(async move {
                    serve(stream, app).await;
                    drop(permit);
                });
            }
            Err(_) => {
                let busy = http::raw(503, "too many connections; try again");
                // Best effort, never waits: the socket buffer takes a short answer.
                let _ = stream.try_write(&busy);
            }
        }
    }
}

/// One connection: hyper reads the request and writes `app`'s answer; the head deadline,
/// the overall bound and the drain after an error are kept here.
async fn serve(mut stream: TcpStream, app: Router) {
    let accepted = Instant::now();
    let head_in = Arc::new(AtomicBool::new(false));
    let status = Arc::new(AtomicU16::new(0));
    let svc = {
        let (head_in, status) = (Arc::clone(&head_in), Arc::clone(&status));
        service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
            head_in.store(true, Ordering::Relaxed);
            req.extensions_mut().insert(Accepted(accepted));
            let (app, status) = (app.clone(), Arc::clone(&status));
            async move {
                let resp = app.oneshot(req.map(Body::new)).await?;
                status.store(resp.status().as_u16(), Ordering::Relaxed);
                Ok::<_, Infallible>(resp)
            }
        })
    };
    let mut builder = http1::Builder::new();
    builder
        .max_buf_size(HEAD_BYTES_MAX)
        .max_headers(HEADERS_MAX)
        .keep_alive(false)
        .title_case_headers(true);
    let served = {
        let conn = builder.serve_connection(TokioIo::new(&mut stream), svc);
        tokio::pin!(conn);
        let head_deadline = accepted + REQUEST_READ_TIMEOUT;
        let first = tokio::select! {
            r = &mut conn => Some(r),
            _ = tokio::time::sleep_until(head_deadline) => None,
        };
        match first {
            Some(r) => Some(r.is_ok()),
            None if !head_in.load(Ordering::Relaxed) => None,
            None => {
                let end = accepted + REQUEST_READ_TIMEOUT + HANDLER_TIMEOUT + WRITE_TIMEOUT;
                Some(matches!(
                    tokio::time::timeout_at(end, conn).await,
                    Ok(Ok(()))
                ))
            }
        }
    };
    match served {
        // No head in time: hyper is gone, the socket is still ours.
        None => refuse(&mut stream, &http::raw(408, "request not received in time")).await,
        Some(true) if status.load(Ordering::Relaxed) < 400 => {}
        // An error answer (ours, or hyper's 400/431 for a head it refused).
        Some(_) => drain(&mut stream).await,
    }
}

/// Every request's limits and every answer's headers, around the routes.
pub async fn guard(req: Request, next: Next) -> Response {
    let mut resp = limited(req, next).await;
    http::secure(resp.headers_mut());
    resp
}

async fn limited(req: Request, next: Next) -> Response {
    if req.headers().contains_key(TRANSFER_ENCODING) {
        return http::error(
            400,
            "Transfer-Encoding is not accepted; send Content-Length",
        );
    }
    let length = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if length.is_some_and(|n| n > BODY_BYTES_MAX as u64) {
        return http::error(
            413,
            &format!("request body longer than {BODY_BYTES_MAX} bytes"),
        );
    }
    let accepted = req
        .extensions()
        .get::<Accepted>()
        .map_or_else(Instant::now, |a| a.0);
    let (parts, body) = req.into_parts();
    let read = Limited::new(body, BODY_BYTES_MAX).collect();
    let body: Bytes = match tokio::time::timeout_at(accepted + REQUEST_READ_TIMEOUT, read).await {
        Ok(Ok(b)) => b.to_bytes(),
        Ok(Err(_)) => return http::error(400, "the request body could not be read"),
        Err(_) => return http::error(408, "request not received in time"),
    };
    let req = Request::from_parts(parts, Body::from(body));
    match tokio::time::timeout(HANDLER_TIMEOUT, next.run(req)).await {
        Ok(r) => r,
        Err(_) => http::error(504, "the cluster did not answer in time"),
    }
}

/// Writes an error answer, then drains.
async fn refuse(stream: &mut TcpStream, answer: &[u8]) {
    if tokio::time::timeout(WRITE_TIMEOUT, stream.write_all(answer))
        .await
        .is_err()
    {
        return;
    }
    drain(stream).await;
}

/// Closes the writing side and reads and drops what the client still sends for a moment.
async fn drain(stream: &mut TcpStream) {
    let _ = stream.shutdown().await;
    let mut chunk = [0u8; 4096];
    let mut drained = 0usize;
    let _ = tokio::time::timeout(DRAIN_TIME, async {
        while drained < DRAIN_BYTES_MAX {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => drained += n,
            }
        }
    })
    .await;
}
