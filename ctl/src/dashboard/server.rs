//! The listener: one task per connection, at most [`CONNECTIONS_MAX`] at once (more are
//! answered 503 without reading and closed), one request per connection. A connection has
//! [`REQUEST_READ_TIMEOUT`] to send its head and body (then 408), the answer
//! [`HANDLER_TIMEOUT`] to be computed (then 504) and [`WRITE_TIMEOUT`] to be written. After
//! an error answer the rest of what the client sends is read and dropped for a moment, so
//! it sees the answer rather than a reset.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use super::api::{self, State};
use super::http::{self, Response, BODY_BYTES_MAX, HEAD_BYTES_MAX};

/// Connections served at once.
pub const CONNECTIONS_MAX: usize = 32;
/// Time to receive a request (head and body).
pub const REQUEST_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Time to compute an answer (the admin requests behind it have their own timeouts).
pub const HANDLER_TIMEOUT: Duration = Duration::from_secs(60);
/// Time to write an answer.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the rest of a refused request is drained before closing.
const DRAIN_TIME: Duration = Duration::from_millis(500);
/// Bytes drained at most after a refused request.
const DRAIN_BYTES_MAX: usize = 1 << 20;

/// Accepts connections until the process ends.
pub async fn run(listener: TcpListener, state: Rc<State>) {
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
                let state = Rc::clone(&state);
                tokio::task::spawn_local(async move {
                    serve(stream, &state).await;
                    drop(permit);
                });
            }
            Err(_) => {
                let busy = Response::error(503, "too many connections; try again").to_bytes();
                // Best effort, never waits: the socket buffer takes a short answer.
                let _ = stream.try_write(&busy);
            }
        }
    }
}

/// One connection: read a request, answer it, close.
async fn serve(mut stream: TcpStream, state: &State) {
    let (req, body) =
        match tokio::time::timeout(REQUEST_READ_TIMEOUT, read_request(&mut stream)).await {
            Ok(Ok(r)) => r,
            Ok(Err(Some(refusal))) => {
                refuse(
                    &mut stream,
                    Response::error(refusal.status, &refusal.reason),
                )
                .await;
                return;
            }
            Ok(Err(None)) => return,
            Err(_) => {
                refuse(
                    &mut stream,
                    Response::error(408, "request not received in time"),
                )
                .await;
                return;
            }
        };
    let resp = match tokio::time::timeout(HANDLER_TIMEOUT, api::handle(state, &req, &body)).await {
        Ok(r) => r,
        Err(_) => Response::error(504, "the cluster did not answer in time"),
    };
    let _ = tokio::time::timeout(WRITE_TIMEOUT, stream.write_all(&resp.to_bytes())).await;
    let _ = stream.shutdown().await;
}

/// Reads one request: its head and its `Content-Length` body. `Err(Some)`: answer this
/// refusal; `Err(None)`: the peer left.
async fn read_request(
    stream: &mut TcpStream,
) -> Result<(http::Request, Vec<u8>), Option<http::Refusal>> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    let end = loop {
        let n = stream.read(&mut chunk).await.map_err(|_| None)?;
        if n == 0 {
            return Err(None);
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = http::head_end(&buf).map_err(Some)? {
            break end;
        }
    };
    let req = http::parse_head(&buf[..end]).map_err(Some)?;
    let mut body = buf.split_off(end);
    debug_assert!(req.content_length <= BODY_BYTES_MAX);
    if body.len() > req.content_length {
        return Err(Some(http::Refusal {
            status: 400,
            reason: "more bytes than Content-Length (one request per connection)".into(),
        }));
    }
    while body.len() < req.content_length {
        let n = stream.read(&mut chunk).await.map_err(|_| None)?;
        if n == 0 {
            return Err(None);
        }
        body.extend_from_slice(&chunk[..n]);
        if body.len() > req.content_length {
            return Err(Some(http::Refusal {
                status: 400,
                reason: "more bytes than Content-Length".into(),
            }));
        }
    }
    const _: () = assert!(HEAD_BYTES_MAX + BODY_BYTES_MAX < DRAIN_BYTES_MAX);
    Ok((req, body))
}

/// Writes an error answer, then reads and drops what the client still sends for a moment.
async fn refuse(stream: &mut TcpStream, resp: Response) {
    if tokio::time::timeout(WRITE_TIMEOUT, stream.write_all(&resp.to_bytes()))
        .await
        .is_err()
    {
        return;
    }
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
