//! The gRPC port's connections: plaintext and TLS on the same port, as on the node's other
//! listeners. Each accepted connection's first byte says which: 0x16 (a TLS handshake
//! record) is a TLS ClientHello, anything else plaintext. With [`GrpcTls::enforcing`] a
//! plaintext connection is closed; without a [`GrpcTls`] every connection is plaintext.
//!
//! The certificates are the node's own (its `tls.server.*` listener settings); the edge adds
//! ALPN `h2`, which gRPC clients ask for. The first byte and the handshake must come within
//! [`HANDSHAKE_TIMEOUT`], on a task of their own, so a silent client holds up no other;
//! at most [`HANDSHAKES_MAX`] are under way at once (more wait in the kernel's backlog).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::{Connected, TcpConnectInfo};

/// First byte of a TLS record carrying a handshake (the ClientHello).
pub const RECORD_TYPE_HANDSHAKE: u8 = 0x16;
/// How long a new connection has for its first byte and its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections between accept and the end of their handshake at once.
pub const HANDSHAKES_MAX: usize = 256;
/// Connections handed to the HTTP/2 server but not yet taken.
const READY_MAX: usize = 64;

/// TLS on the gRPC port.
#[derive(Clone)]
pub struct GrpcTls {
    /// The node's listener TLS settings (certificate, key, client certificates asked for).
    pub config: Arc<rustls::ServerConfig>,
    /// Refuse plaintext (`tls.server.mode=enforcing`); else both are served (permissive).
    pub enforcing: bool,
}

impl std::fmt::Debug for GrpcTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrpcTls")
            .field("enforcing", &self.enforcing)
            .finish_non_exhaustive()
    }
}

/// One accepted connection, plaintext or TLS.
pub(crate) enum Conn {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

/// The connections of `listener`, TLS or plaintext as `tls` says, for tonic's
/// `serve_with_incoming`. Accepting runs on a task of its own until the stream is dropped.
pub(crate) fn incoming(
    listener: TcpListener,
    tls: Option<GrpcTls>,
) -> ReceiverStream<io::Result<Conn>> {
    let (tx, rx) = mpsc::channel(READY_MAX);
    let acceptor = tls.map(|t| {
        let mut cfg = (*t.config).clone();
        cfg.alpn_protocols = vec![b"h2".to_vec()];
        (tokio_rustls::TlsAcceptor::from(Arc::new(cfg)), t.enforcing)
    });
    let permits = Arc::new(Semaphore::new(HANDSHAKES_MAX));
    tokio::spawn(async move {
        loop {
            let Ok(permit) = Arc::clone(&permits).acquire_owned().await else {
                return;
            };
            let (sock, peer) = tokio::select! {
                r = listener.accept() => match r {
                    Ok(a) => a,
                    Err(e) => {
                        log::warn!("gRPC listener: accept: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                _ = tx.closed() => return,
            };
            let _ = sock.set_nodelay(true);
            let Some((acceptor, enforcing)) = acceptor.clone() else {
                if tx.send(Ok(Conn::Plain(sock))).await.is_err() {
                    return;
                }
                continue;
            };
            let tx = tx.clone();
            tokio::spawn(async move {
                let conn =
                    tokio::time::timeout(HANDSHAKE_TIMEOUT, classify(sock, &acceptor, enforcing))
                        .await;
                drop(permit);
                match conn {
                    Ok(Ok(c)) => {
                        let _ = tx.send(Ok(c)).await;
                    }
                    Ok(Err(e)) => log::debug!("gRPC connection from {peer}: {e}"),
                    Err(_) => log::debug!(
                        "gRPC connection from {peer}: no handshake within {HANDSHAKE_TIMEOUT:?}"
                    ),
                }
            });
        }
    });
    ReceiverStream::new(rx)
}

/// Plaintext or TLS by the first byte; TLS completes its handshake here.
async fn classify(
    sock: TcpStream,
    acceptor: &tokio_rustls::TlsAcceptor,
    enforcing: bool,
) -> io::Result<Conn> {
    let mut first = [0u8; 1];
    if sock.peek(&mut first).await? == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "closed before its first byte",
        ));
    }
    if first[0] == RECORD_TYPE_HANDSHAKE {
        return Ok(Conn::Tls(Box::new(acceptor.accept(sock).await?)));
    }
    if enforcing {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "plaintext refused (tls.server.mode=enforcing)",
        ));
    }
    Ok(Conn::Plain(sock))
}

impl Conn {
    fn tcp(&self) -> &TcpStream {
        match self {
            Conn::Plain(s) => s,
            Conn::Tls(t) => t.get_ref().0,
        }
    }
}

impl Connected for Conn {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        let s = self.tcp();
        TcpConnectInfo {
            local_addr: s.local_addr().ok(),
            remote_addr: s.peer_addr().ok(),
        }
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Conn::Tls(t) => Pin::new(t.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Conn::Tls(t) => Pin::new(t.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_flush(cx),
            Conn::Tls(t) => Pin::new(t.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Conn::Tls(t) => Pin::new(t.as_mut()).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Conn::Tls(t) => Pin::new(t.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Conn::Plain(s) => s.is_write_vectored(),
            Conn::Tls(t) => t.is_write_vectored(),
        }
    }
}
