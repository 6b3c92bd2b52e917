//! The Prometheus endpoint: a plain HTTP/1.x server on its own std thread (not a shard, no
//! io_uring), so a scrape never waits on or stalls the data path.
//!
//! Bounds (`crate::limits`): at most `METRICS_CONNECTIONS_MAX` connections are served at
//! once, each on a short-lived thread; more are closed as soon as they are accepted. A
//! connection has `METRICS_REQUEST_TIMEOUT_MS` in total to send its request head of at most
//! `METRICS_REQUEST_HEAD_BYTES_MAX` bytes (larger: 431). One request per connection
//! (`Connection: close`). `GET /metrics` is the exposition, `GET /` a pointer to it, any
//! other path 404, any other method 405, a head that is not HTTP 400. Peer input never
//! panics: every branch answers or closes.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{render, Snapshot, Sources};
use crate::limits::{
    METRICS_CONNECTIONS_MAX, METRICS_REQUEST_HEAD_BYTES_MAX, METRICS_REQUEST_TIMEOUT_MS,
};

/// The content type of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A running endpoint.
pub struct MetricsServer {
    /// The bound address (the port the OS chose when configured 0).
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

/// Binds `listen` and serves `sources` until [`MetricsServer::stop`].
pub fn start(listen: SocketAddr, sources: Sources) -> Result<MetricsServer, String> {
    let listener =
        TcpListener::bind(listen).map_err(|e| format!("metrics endpoint on {listen}: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let stop = Arc::new(AtomicBool::new(false));
    let stopping = stop.clone();
    let thread = std::thread::Builder::new()
        .name("ringmq-metrics".to_string())
        .spawn(move || accept_loop(&listener, &sources, &stopping))
        .map_err(|e| e.to_string())?;
    Ok(MetricsServer { addr, stop, thread })
}

impl MetricsServer {
    /// Stops accepting (connections being served finish on their own, within the timeout).
    pub fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept with a connection of our own.
        let wake = match self.addr.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => {
                SocketAddr::new(Ipv4Addr::LOCALHOST.into(), self.addr.port())
            }
            IpAddr::V6(ip) if ip.is_unspecified() => {
                SocketAddr::new(Ipv6Addr::LOCALHOST.into(), self.addr.port())
            }
            _ => self.addr,
        };
        if TcpStream::connect_timeout(&wake, Duration::from_secs(1)).is_ok() {
            let _ = self.thread.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, sources: &Sources, stop: &AtomicBool) {
    let active = Arc::new(AtomicUsize::new(0));
    for conn in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let stream = match conn {
            Ok(s) => s,
            Err(e) => {
                log::debug!("metrics endpoint: accept: {e}");
                // EMFILE and the like: do not spin.
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        if active.fetch_add(1, Ordering::SeqCst) >= METRICS_CONNECTIONS_MAX {
            active.fetch_sub(1, Ordering::SeqCst);
            drop(stream);
            continue;
        }
        let slot = Slot(active.clone());
        let sources = sources.clone();
        let spawned = std::thread::Builder::new()
            .name("ringmq-metrics-conn".to_string())
            .spawn(move || {
                let _slot = slot;
                serve(stream, &sources);
            });
        if let Err(e) = spawned {
            // The closure (and its slot) was dropped with the error.
            log::warn!("metrics endpoint: no thread for a connection: {e}");
        }
    }
}

/// One of the `METRICS_CONNECTIONS_MAX` places, given back when the connection ends.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What a request head asks for.
#[derive(Debug, PartialEq, Eq)]
enum Route {
    Metrics,
    Index,
    NotFound,
    MethodNotAllowed,
    BadRequest,
}

fn serve(mut stream: TcpStream, sources: &Sources) {
    let timeout = Duration::from_millis(METRICS_REQUEST_TIMEOUT_MS);
    let _ = stream.set_write_timeout(Some(timeout));
    let head = match read_head(&mut stream, Instant::now() + timeout) {
        Head::Complete(h) => h,
        Head::TooLarge => {
            respond(
                &mut stream,
                "431 Request Header Fields Too Large",
                "request head too large\n",
            );
            return;
        }
        Head::Closed => return,
    };
    match route(&head) {
        Route::Metrics => {
            let body = render(&Snapshot::take(sources));
            respond_typed(&mut stream, "200 OK", CONTENT_TYPE, &body);
        }
        Route::Index => respond(
            &mut stream,
            "200 OK",
            "ringmq: Prometheus metrics are at /metrics\n",
        ),
        Route::NotFound => respond(&mut stream, "404 Not Found", "not found; try /metrics\n"),
        Route::MethodNotAllowed => respond(&mut stream, "405 Method Not Allowed", "only GET\n"),
        Route::BadRequest => respond(&mut stream, "400 Bad Request", "bad request\n"),
    }
}

enum Head {
    Complete(Vec<u8>),
    TooLarge,
    /// Timed out, closed or failed before a full head: nothing to answer.
    Closed,
}

/// Reads up to the blank line ending the head, within `deadline` and the size cap.
fn read_head(stream: &mut TcpStream, deadline: Instant) -> Head {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return Head::Closed;
        }
        let n = match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return Head::Closed,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = find_head_end(&buf) {
            if end > METRICS_REQUEST_HEAD_BYTES_MAX {
                return Head::TooLarge;
            }
            buf.truncate(end);
            return Head::Complete(buf);
        }
        if buf.len() > METRICS_REQUEST_HEAD_BYTES_MAX {
            return Head::TooLarge;
        }
    }
}

/// The length of the head including its terminating blank line, if complete.
fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
}

fn route(head: &[u8]) -> Route {
    let line_end = head.iter().position(|&b| b == b'\r').unwrap_or(head.len());
    let Ok(line) = std::str::from_utf8(&head[..line_end]) else {
        return Route::BadRequest;
    };
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Route::BadRequest;
    };
    if !version.starts_with("HTTP/1.") {
        return Route::BadRequest;
    }
    if method != "GET" {
        return Route::MethodNotAllowed;
    }
    let path = target.split_once('?').map_or(target, |(p, _)| p);
    match path {
        "/metrics" => Route::Metrics,
        "/" => Route::Index,
        _ => Route::NotFound,
    }
}

fn respond(stream: &mut TcpStream, status: &str, body: &str) {
    respond_typed(stream, status, "text/plain; charset=utf-8", body);
}

fn respond_typed(stream: &mut TcpStream, status: &str, content_type: &str, body: &str) {
    let mut extra = "";
    if status.starts_with("405") {
        extra = "Allow: GET\r\n";
    }
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
        body.len()
    );
    let _ = stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(body.as_bytes()));
    let _ = stream.shutdown(std::net::Shutdown::Write);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        assert_eq!(
            route(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            Route::Metrics
        );
        assert_eq!(route(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n"), Route::Metrics);
        assert_eq!(route(b"GET / HTTP/1.1\r\n\r\n"), Route::Index);
        assert_eq!(route(b"GET /other HTTP/1.1\r\n\r\n"), Route::NotFound);
        assert_eq!(
            route(b"POST /metrics HTTP/1.1\r\n\r\n"),
            Route::MethodNotAllowed
        );
        assert_eq!(route(b"GET /metrics\r\n\r\n"), Route::BadRequest);
        assert_eq!(route(b"\xff\xfe HTTP/1.1\r\n\r\n"), Route::BadRequest);
        assert_eq!(route(b"GET / SPDY/3\r\n\r\n"), Route::BadRequest);
        assert_eq!(route(b""), Route::BadRequest);
    }

    #[test]
    fn head_end() {
        assert_eq!(find_head_end(b"GET / HTTP/1.1\r\n\r\nbody"), Some(18));
        assert_eq!(find_head_end(b"GET / HTTP/1.1\r\n"), None);
    }
}
