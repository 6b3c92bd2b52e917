//! The Prometheus endpoint: hyper's HTTP/1 server on a thread of its own with its own
//! current-thread tokio runtime (not a shard, no io_uring), so a scrape never waits on or
//! stalls the data path.
//!
//! Bounds (`crate::limits`): at most `METRICS_CONNECTIONS_MAX` connections are served at
//! once; more are closed as soon as they are accepted. A connection has
//! `METRICS_REQUEST_TIMEOUT_MS` to send its request head (hyper's header read timeout; then
//! it is closed without an answer), of at most `METRICS_REQUEST_HEAD_BYTES_MAX` bytes
//! (hyper's read buffer limit; larger: 431), and is closed `2 × METRICS_REQUEST_TIMEOUT_MS`
//! after it was accepted whatever it is doing, so a peer that reads the answer slowly holds
//! its place for a bounded time. One request per connection (`Connection: close`).
//! `GET /metrics` is the exposition, `GET /` a pointer to it, any other path 404, any other
//! method 405; a head hyper cannot parse is 400 (hyper answers those itself). Peer input
//! never panics: hyper parses it, and every branch here answers.
//!
//! Scrapes are rendered one at a time on this thread (rendering only reads atomics and
//! clones `Arc`s: [`super::Snapshot::take`]).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, ALLOW, CONNECTION, CONTENT_TYPE as CONTENT_TYPE_HEADER};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, Semaphore};

use super::{render, Snapshot, Sources};
use crate::limits::{
    METRICS_CONNECTIONS_MAX, METRICS_REQUEST_HEAD_BYTES_MAX, METRICS_REQUEST_TIMEOUT_MS,
};

/// The content type of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// hyper's smallest read buffer: a smaller head limit cannot be enforced by it.
const HYPER_BUF_BYTES_MIN: usize = 8192;
const _: () = assert!(METRICS_REQUEST_HEAD_BYTES_MAX >= HYPER_BUF_BYTES_MIN);

/// A running endpoint.
pub struct MetricsServer {
    /// The bound address (the port the OS chose when configured 0).
    pub addr: SocketAddr,
    stop: oneshot::Sender<()>,
    thread: JoinHandle<()>,
}

/// Binds `listen` and serves `sources` until [`MetricsServer::stop`].
pub fn start(listen: SocketAddr, sources: Sources) -> Result<MetricsServer, String> {
    let listener = std::net::TcpListener::bind(listen)
        .map_err(|e| format!("metrics endpoint on {listen}: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("metrics endpoint on {listen}: {e}"))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| format!("metrics endpoint runtime: {e}"))?;
    let (stop, stopped) = oneshot::channel();
    let thread = std::thread::Builder::new()
        .name("ringmq-metrics".to_string())
        .spawn(move || {
            rt.block_on(async move {
                match TcpListener::from_std(listener) {
                    Ok(l) => accept_loop(l, sources, stopped).await,
                    Err(e) => log::warn!("metrics endpoint: {e}"),
                }
            });
        })
        .map_err(|e| e.to_string())?;
    Ok(MetricsServer { addr, stop, thread })
}

impl MetricsServer {
    /// Stops accepting and closes the connections still open; returns once the thread ended.
    pub fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}

async fn accept_loop(listener: TcpListener, sources: Sources, mut stopped: oneshot::Receiver<()>) {
    let places = Arc::new(Semaphore::new(METRICS_CONNECTIONS_MAX));
    loop {
        let stream = tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => match accepted {
                Ok((s, _)) => s,
                Err(e) => {
                    log::debug!("metrics endpoint: accept: {e}");
                    // EMFILE and the like: do not spin.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        // Over the cap: dropped here, closed at once.
        let Ok(place) = Arc::clone(&places).try_acquire_owned() else {
            continue;
        };
        let sources = sources.clone();
        tokio::spawn(async move {
            serve(stream, sources).await;
            drop(place);
        });
    }
}

/// One connection: hyper reads the head within the timeout and the size cap, [`answer`]
/// answers, hyper closes.
async fn serve(stream: TcpStream, sources: Sources) {
    let timeout = Duration::from_millis(METRICS_REQUEST_TIMEOUT_MS);
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(timeout)
        .max_buf_size(METRICS_REQUEST_HEAD_BYTES_MAX)
        .keep_alive(false)
        .title_case_headers(true)
        .serve_connection(
            TokioIo::new(stream),
            service_fn(move |req| {
                let sources = sources.clone();
                async move { Ok::<_, Infallible>(answer(&req, &sources)) }
            }),
        );
    match tokio::time::timeout(timeout * 2, conn).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => log::debug!("metrics endpoint: connection: {e}"),
        Err(_) => log::debug!(
            "metrics endpoint: connection closed after {:?}",
            timeout * 2
        ),
    }
}

/// The answer to one request (its body, if any, is not read).
fn answer<B>(req: &Request<B>, sources: &Sources) -> Response<Full<Bytes>> {
    if req.method() != Method::GET {
        let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n");
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET"));
        return r;
    }
    match req.uri().path() {
        "/metrics" => {
            let body = render(&Snapshot::take(sources));
            let mut r = text(StatusCode::OK, body);
            r.headers_mut()
                .insert(CONTENT_TYPE_HEADER, HeaderValue::from_static(CONTENT_TYPE));
            r
        }
        "/" => text(
            StatusCode::OK,
            "ringmq: Prometheus metrics are at /metrics\n",
        ),
        _ => text(StatusCode::NOT_FOUND, "not found; try /metrics\n"),
    }
}

/// A plain-text answer that closes the connection.
fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(
        CONTENT_TYPE_HEADER,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert(CONNECTION, HeaderValue::from_static("close"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(method: Method, target: &str) -> Response<Full<Bytes>> {
        let req = Request::builder()
            .method(method)
            .uri(target)
            .body(())
            .expect("a valid request");
        answer(&req, &Sources::default())
    }

    #[test]
    fn routes() {
        let metrics = ask(Method::GET, "/metrics?x=1");
        assert_eq!(metrics.status(), StatusCode::OK);
        assert_eq!(metrics.headers()[CONTENT_TYPE_HEADER], CONTENT_TYPE);
        assert_eq!(metrics.headers()[CONNECTION], "close");
        assert_eq!(ask(Method::GET, "/").status(), StatusCode::OK);
        assert_eq!(ask(Method::GET, "/other").status(), StatusCode::NOT_FOUND);
        let post = ask(Method::POST, "/metrics");
        assert_eq!(post.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(post.headers()[ALLOW], "GET");
        assert_eq!(
            ask(Method::HEAD, "/metrics").status(),
            StatusCode::METHOD_NOT_ALLOWED
        );
    }
}
