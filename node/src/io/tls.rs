//! TLS (rustls, ring provider) over the loop's TCP sockets: the server and client contexts
//! ([`NodeTls`]), built from plain paths and choices ([`ServerTlsFiles`], [`ClientTlsFiles`]:
//! the caller reads them from the node's `tls.*` keys, `net::tls_load`; this module names no
//! config type), and [`TlsStream`], one session driven with owned buffers on the shard's loop.
//!
//! A connection's reader and writer tasks share one [`TlsStream`] (clones share the
//! session). Invariants:
//! - no `RefCell` borrow of the session is held across an `.await`;
//! - every byte rustls queues for the peer (the writer's records, and the alerts, key updates
//!   and session tickets that reading can produce) leaves through [`TlsStream::flush_locked`]
//!   under one write lock, in the order rustls queued it: records of the two tasks never
//!   interleave on the socket;
//! - a read hands every ciphertext byte it took from the socket to rustls and every
//!   plaintext byte rustls decrypted to its caller before it returns, so between calls the
//!   session holds no plaintext and this stream holds no ciphertext: the session alone is the
//!   whole state when a connection changes threads ([`TlsStream::take_server`]).
//! - the handshake completes (under [`HANDSHAKE_TIMEOUT`]) before anything is served.
//!
//! Key material never reaches a log: errors name the file and the key, never its content.

use std::cell::{Cell, RefCell};
use std::io::{self, BufRead};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use compio::buf::BufResult;
use compio::io::{AsyncReadExt, AsyncWriteExt};
use compio::net::TcpStream;
use event_listener::Event;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, ClientConnection, Connection, RootCertStore, ServerConfig};
use rustls::{DigitallySignedStruct, ServerConnection, SignatureScheme};

use super::rt;

/// Longest a TLS handshake may take, from the first byte read to the last written: a peer
/// that never finishes cannot hold a connection (or its task) longer.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// First byte of a TLS record carrying a handshake (the ClientHello). A native or remoting
/// frame starts with a big-endian length under 16 MiB, whose first byte is 0x00.
pub const RECORD_TYPE_HANDSHAKE: u8 = 0x16;
/// Ciphertext read from the socket at most per read.
const RAW_READ_BYTES_MAX: usize = 256 * 1024;
/// ... and at least (one whole record with its header and tag fits).
const RAW_READ_BYTES_MIN: usize = 17 * 1024;
/// Longest a shutdown waits to write its close_notify.
const CLOSE_NOTIFY_TIMEOUT: Duration = Duration::from_secs(1);
/// Plaintext encrypted and written per socket write.
pub const WRITE_CHUNK_BYTES: usize = 256 * 1024;

/// Whether a connection's first bytes are a TLS record; `None` until a byte has arrived.
pub fn starts_tls(first: &[u8]) -> Option<bool> {
    first.first().map(|&b| b == RECORD_TYPE_HANDSHAKE)
}

/// The TLS contexts of a node: its listeners' (`tls.server.*`) and its outgoing
/// connections' (`tls.enable`, `tls.client.*`).
#[derive(Clone, Default)]
pub struct NodeTls {
    /// `None` when `tls.server.mode` is disabled.
    pub server: Option<Arc<TlsServer>>,
    /// `None` when `tls.enable` is false (or the node makes no outgoing connections).
    pub client: Option<Arc<TlsClient>>,
}

impl std::fmt::Debug for NodeTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeTls")
            .field("server", &self.server.as_ref().map(|s| s.describe()))
            .field("client", &self.client.as_ref().map(|c| c.describe()))
            .finish()
    }
}

impl NodeTls {
    /// What the node's listeners do, for the start log.
    pub fn listener_mode(&self) -> String {
        match &self.server {
            None => "TLS disabled (plaintext only)".to_owned(),
            Some(s) => s.describe(),
        }
    }
}

/// What a listener's TLS context is made of (`tls.server.*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerTlsFiles {
    /// TLS only (a plaintext connection is refused); else TLS and plaintext on one port.
    pub enforcing: bool,
    /// The certificate chain (PEM).
    pub cert_path: PathBuf,
    /// Its private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key_path: PathBuf,
    pub client_certs: ClientCerts,
}

/// Whether a listener asks its clients for certificates, and the CAs (PEM) they must chain to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientCerts {
    NotAsked,
    /// Asked for; a client without one is served, one with an untrusted one is refused.
    Optional {
        trust_cert_path: PathBuf,
    },
    /// Mutual TLS: a client without a trusted certificate is refused.
    Required {
        trust_cert_path: PathBuf,
    },
}

/// What the context of outgoing connections is made of (`tls.client.*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientTlsFiles {
    /// The CAs (PEM) a server's certificate must chain to; `None`: any server certificate is
    /// accepted (insecure).
    pub trust_cert_path: Option<PathBuf>,
    /// A certificate chain and its key, for servers that ask for one.
    pub cert_and_key: Option<(PathBuf, PathBuf)>,
}

/// A listener's TLS context and mode (permissive or enforcing).
pub struct TlsServer {
    config: Arc<ServerConfig>,
    /// TLS only: a plaintext connection gets one refusal and is closed.
    pub enforcing: bool,
    /// `none`, `optional` or `require`, for the start log.
    client_auth: &'static str,
}

impl TlsServer {
    /// Reads the files `files` names and builds the listener's context.
    pub fn load(files: &ServerTlsFiles) -> Result<TlsServer, String> {
        let (cert_path, key_path) = (&files.cert_path, &files.key_path);
        let chain = read_certs(cert_path, "tls.server.certPath")?;
        let key = read_key(key_path, "tls.server.keyPath")?;
        let provider = provider();
        let (verifier, client_auth) = match &files.client_certs {
            ClientCerts::NotAsked => (WebPkiClientVerifier::no_client_auth(), "none"),
            ClientCerts::Optional {
                trust_cert_path: path,
            }
            | ClientCerts::Required {
                trust_cert_path: path,
            } => {
                let optional = matches!(files.client_certs, ClientCerts::Optional { .. });
                let roots = Arc::new(read_roots(path, "tls.server.trustCertPath")?);
                let b = WebPkiClientVerifier::builder_with_provider(roots, Arc::clone(&provider));
                let b = if optional {
                    b.allow_unauthenticated()
                } else {
                    b
                };
                let verifier = b
                    .build()
                    .map_err(|e| format!("tls.server.trustCertPath {}: {e}", path.display()))?;
                (verifier, if optional { "optional" } else { "require" })
            }
        };
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS server: {e}"))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .map_err(|e| {
                format!(
                    "tls.server.certPath {} with tls.server.keyPath {}: {e}",
                    cert_path.display(),
                    key_path.display()
                )
            })?;
        Ok(TlsServer {
            config: Arc::new(config),
            enforcing: files.enforcing,
            client_auth,
        })
    }

    /// The rustls context, for a listener that runs its own TLS (the gRPC edge's).
    pub fn rustls_config(&self) -> Arc<ServerConfig> {
        Arc::clone(&self.config)
    }

    /// The mode for the start log, e.g. `TLS enforcing (client certificates: require)`.
    pub fn describe(&self) -> String {
        format!(
            "TLS {} (client certificates: {})",
            if self.enforcing {
                "enforcing"
            } else {
                "permissive"
            },
            self.client_auth
        )
    }

    /// Runs the server side of a handshake on `sock`, whose first bytes (`first`, read to
    /// detect TLS) are ciphertext already taken from the socket. The stream is ready to
    /// serve once this returns.
    pub async fn accept(&self, sock: TcpStream, first: Vec<u8>) -> io::Result<TlsStream> {
        let session = ServerConnection::new(Arc::clone(&self.config))
            .map_err(|e| io::Error::other(format!("TLS session: {e}")))?;
        let stream = TlsStream::new(sock, Connection::Server(session));
        stream.handshake(first).await?;
        Ok(stream)
    }
}

/// The context of the node's outgoing TLS connections.
pub struct TlsClient {
    config: Arc<ClientConfig>,
    /// Server certificates are verified (`tls.client.authServer`).
    pub verifies: bool,
}

impl TlsClient {
    /// Reads the files `files` names and builds the context of outgoing connections.
    pub fn load(files: &ClientTlsFiles) -> Result<TlsClient, String> {
        let provider = provider();
        let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS client: {e}"))?;
        let builder = match &files.trust_cert_path {
            Some(path) => {
                builder.with_root_certificates(read_roots(path, "tls.client.trustCertPath")?)
            }
            None => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyServer(provider))),
        };
        let config = match &files.cert_and_key {
            Some((cert_path, key_path)) => {
                let chain = read_certs(cert_path, "tls.client.certPath")?;
                let key = read_key(key_path, "tls.client.keyPath")?;
                builder.with_client_auth_cert(chain, key).map_err(|e| {
                    format!(
                        "tls.client.certPath {} with tls.client.keyPath {}: {e}",
                        cert_path.display(),
                        key_path.display()
                    )
                })?
            }
            None => builder.with_no_client_auth(),
        };
        Ok(TlsClient {
            config: Arc::new(config),
            verifies: files.trust_cert_path.is_some(),
        })
    }

    /// For the start log.
    pub fn describe(&self) -> String {
        if self.verifies {
            "TLS, server certificates verified".to_owned()
        } else {
            "TLS, server certificates NOT verified (tls.client.authServer=false)".to_owned()
        }
    }

    /// Runs the client side of a handshake with `addr` over `sock`. The server's certificate
    /// must name `addr`'s IP address (an IP SAN).
    pub async fn connect(&self, sock: TcpStream, addr: SocketAddr) -> io::Result<TlsStream> {
        let name = ServerName::IpAddress(addr.ip().into());
        let session = ClientConnection::new(Arc::clone(&self.config), name)
            .map_err(|e| io::Error::other(format!("TLS session: {e}")))?;
        let stream = TlsStream::new(sock, Connection::Client(session));
        stream
            .handshake(Vec::new())
            .await
            .map_err(|e| io::Error::new(e.kind(), format!("TLS handshake with {addr}: {e}")))?;
        Ok(stream)
    }
}

/// One TLS session over a socket. Clones share it (one reader task, one writer task).
#[derive(Clone)]
pub struct TlsStream {
    sock: TcpStream,
    shared: Rc<Shared>,
}

struct Shared {
    /// The session; `None` once handed to another thread.
    session: RefCell<Option<Connection>>,
    /// Plaintext decrypted during the handshake, returned by the first read.
    early: RefCell<Vec<u8>>,
    /// Reused buffers: ciphertext in (reader only), ciphertext out (under the write lock).
    rx: RefCell<Vec<u8>>,
    tx: RefCell<Vec<u8>>,
    /// The write lock (see the module invariants).
    writing: Cell<bool>,
    written: Event,
}

/// Holds the write lock until dropped.
struct WriteGuard<'a>(&'a Shared);

impl Drop for WriteGuard<'_> {
    fn drop(&mut self) {
        self.0.writing.set(false);
        self.0.written.notify(usize::MAX);
    }
}

/// What feeding ciphertext to the session gave.
enum Fed {
    /// The session goes on.
    Open,
    /// The peer closed the session (close_notify).
    Closed,
    /// The peer broke the protocol; rustls may have queued an alert to send before closing.
    Failed(String),
}

impl TlsStream {
    fn new(sock: TcpStream, mut session: Connection) -> TlsStream {
        // The writer encrypts a chunk and writes it before taking the next: the queue of
        // outgoing records is bounded by WRITE_CHUNK_BYTES plus what reading queues (alerts).
        session.set_buffer_limit(None);
        TlsStream {
            sock,
            shared: Rc::new(Shared {
                session: RefCell::new(Some(session)),
                early: RefCell::new(Vec::new()),
                rx: RefCell::new(Vec::new()),
                tx: RefCell::new(Vec::new()),
                writing: Cell::new(false),
                written: Event::new(),
            }),
        }
    }

    /// Adopts a server session handed over from another thread with its socket.
    pub fn adopt(sock: TcpStream, session: Box<ServerConnection>) -> TlsStream {
        TlsStream::new(sock, Connection::Server(*session))
    }

    /// Takes the server session out to hand it (with a duplicate of the socket) to another
    /// thread; this stream and its clones are dead afterwards. Refused while decrypted bytes
    /// wait here (they would be lost), which the read path never leaves between calls.
    pub fn take_server(&self) -> io::Result<Box<ServerConnection>> {
        if !self.shared.early.borrow().is_empty() {
            return Err(io::Error::other(
                "TLS plaintext is waiting to be read; the connection cannot change threads",
            ));
        }
        match self.shared.session.borrow_mut().take() {
            Some(Connection::Server(s)) if !s.wants_write() => Ok(Box::new(s)),
            Some(other) => {
                *self.shared.session.borrow_mut() = Some(other);
                Err(io::Error::other(
                    "only a server TLS session with nothing left to write can change threads",
                ))
            }
            None => Err(moved()),
        }
    }

    pub fn socket(&self) -> &TcpStream {
        &self.sock
    }

    /// Reads plaintext into the spare capacity of `buf` (appending; it may grow by up to one
    /// socket read). 0 = the peer closed.
    pub async fn read_append(&self, mut buf: Vec<u8>) -> (io::Result<usize>, Vec<u8>) {
        let start = buf.len();
        {
            let mut early = self.shared.early.borrow_mut();
            if !early.is_empty() {
                buf.extend_from_slice(&early);
                early.clear();
                return (Ok(buf.len() - start), buf);
            }
        }
        loop {
            let want = (buf.capacity() - buf.len()).clamp(RAW_READ_BYTES_MIN, RAW_READ_BYTES_MAX);
            let raw = match self.read_raw(want).await {
                Ok(raw) => raw,
                Err(e) => return (Err(e), buf),
            };
            if raw.is_empty() {
                // TCP EOF, with or without close_notify: closed either way.
                self.put_rx(raw);
                return (Ok(buf.len() - start), buf);
            }
            let fed = self.feed(&raw, &mut buf);
            self.put_rx(raw);
            match fed {
                Ok(Fed::Open) => {}
                Ok(Fed::Closed) => return (Ok(buf.len() - start), buf),
                Ok(Fed::Failed(why)) => {
                    let _ = self.flush().await;
                    return (Err(io::Error::new(io::ErrorKind::InvalidData, why)), buf);
                }
                Err(e) => return (Err(e), buf),
            }
            if let Err(e) = self.flush().await {
                return (Err(e), buf);
            }
            if buf.len() > start {
                return (Ok(buf.len() - start), buf);
            }
        }
    }

    /// Encrypts and writes all of `buf`.
    pub async fn write_all(&self, buf: Vec<u8>) -> (io::Result<()>, Vec<u8>) {
        let res = self.write_slice(&buf).await;
        (res, buf)
    }

    /// Encrypts and writes all of `plain`, a chunk at a time.
    pub async fn write_slice(&self, plain: &[u8]) -> io::Result<()> {
        let _guard = self.lock().await;
        for chunk in plain.chunks(WRITE_CHUNK_BYTES) {
            {
                let mut session = self.shared.session.borrow_mut();
                let s = session.as_mut().ok_or_else(moved)?;
                io::Write::write_all(&mut s.writer(), chunk)?;
            }
            self.flush_locked().await?;
        }
        Ok(())
    }

    /// Sends close_notify (unless a write is under way: it may be blocked on a full socket,
    /// which this shutdown is meant to fail), then shuts the socket's write side.
    pub async fn shutdown(&self) {
        if let Some(_guard) = self.try_lock() {
            if let Some(s) = self.shared.session.borrow_mut().as_mut() {
                s.send_close_notify();
            }
            // Bounded: a peer that reads nothing must not hold the shutdown.
            let _ = rt::timeout(CLOSE_NOTIFY_TIMEOUT, self.flush_locked()).await;
        }
        let mut s = &self.sock;
        let _ = compio::io::AsyncWrite::shutdown(&mut s).await;
    }

    /// The handshake, bounded by [`HANDSHAKE_TIMEOUT`]; `first` is ciphertext already read.
    async fn handshake(&self, first: Vec<u8>) -> io::Result<()> {
        let run = async {
            let mut pending = first;
            loop {
                if !pending.is_empty() {
                    let mut early = std::mem::take(&mut *self.shared.early.borrow_mut());
                    let fed = self.feed(&pending, &mut early);
                    *self.shared.early.borrow_mut() = early;
                    match fed? {
                        Fed::Open => {}
                        Fed::Closed => {
                            return Err(io::Error::new(
                                io::ErrorKind::UnexpectedEof,
                                "the peer closed the session during the TLS handshake",
                            ))
                        }
                        Fed::Failed(why) => {
                            let _ = self.flush().await;
                            return Err(io::Error::new(io::ErrorKind::InvalidData, why));
                        }
                    }
                }
                self.flush().await?;
                let handshaking = {
                    let session = self.shared.session.borrow();
                    session.as_ref().ok_or_else(moved)?.is_handshaking()
                };
                if !handshaking {
                    return Ok(());
                }
                self.put_rx(pending);
                pending = self.read_raw(RAW_READ_BYTES_MIN).await?;
                if pending.is_empty() {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the peer closed the connection during the TLS handshake",
                    ));
                }
            }
        };
        match rt::timeout(HANDSHAKE_TIMEOUT, run).await {
            Some(res) => res,
            None => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "TLS handshake not finished within {} s",
                    HANDSHAKE_TIMEOUT.as_secs()
                ),
            )),
        }
    }

    /// Reads up to `want` ciphertext bytes from the socket into the reused buffer (empty =
    /// EOF).
    async fn read_raw(&self, want: usize) -> io::Result<Vec<u8>> {
        let mut raw = std::mem::take(&mut *self.shared.rx.borrow_mut());
        raw.clear();
        raw.reserve(want);
        let mut s = &self.sock;
        let BufResult(res, raw) = s.append(raw).await;
        res?;
        Ok(raw)
    }

    fn put_rx(&self, raw: Vec<u8>) {
        *self.shared.rx.borrow_mut() = raw;
    }

    /// Hands all of `raw` to the session and appends what it decrypts to `out`.
    fn feed(&self, mut raw: &[u8], out: &mut Vec<u8>) -> io::Result<Fed> {
        let mut session = self.shared.session.borrow_mut();
        let s = session.as_mut().ok_or_else(moved)?;
        while !raw.is_empty() {
            if s.read_tls(&mut raw)? == 0 {
                // After close_notify nothing more is read.
                return Ok(Fed::Closed);
            }
            if let Err(e) = s.process_new_packets() {
                return Ok(Fed::Failed(format!("TLS: {e}")));
            }
            let mut reader = s.reader();
            loop {
                match reader.fill_buf() {
                    Ok([]) => return Ok(Fed::Closed),
                    Ok(chunk) => {
                        let n = chunk.len();
                        out.extend_from_slice(chunk);
                        reader.consume(n);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(Fed::Open)
    }

    /// Writes what the session queued for the peer, taking the write lock.
    async fn flush(&self) -> io::Result<()> {
        let wants = {
            let session = self.shared.session.borrow();
            session.as_ref().is_some_and(|s| s.wants_write())
        };
        if !wants {
            return Ok(());
        }
        let _guard = self.lock().await;
        self.flush_locked().await
    }

    /// Writes what the session queued for the peer; the caller holds the write lock.
    async fn flush_locked(&self) -> io::Result<()> {
        loop {
            let mut out = std::mem::take(&mut *self.shared.tx.borrow_mut());
            out.clear();
            {
                let mut session = self.shared.session.borrow_mut();
                let s = session.as_mut().ok_or_else(moved)?;
                while s.wants_write() {
                    s.write_tls(&mut out)?;
                }
            }
            if out.is_empty() {
                *self.shared.tx.borrow_mut() = out;
                return Ok(());
            }
            let mut sock = &self.sock;
            let BufResult(res, out) = sock.write_all(out).await;
            *self.shared.tx.borrow_mut() = out;
            res?;
        }
    }

    fn try_lock(&self) -> Option<WriteGuard<'_>> {
        if self.shared.writing.get() {
            return None;
        }
        self.shared.writing.set(true);
        Some(WriteGuard(&self.shared))
    }

    async fn lock(&self) -> WriteGuard<'_> {
        loop {
            if !self.shared.writing.get() {
                self.shared.writing.set(true);
                return WriteGuard(&self.shared);
            }
            let l = self.shared.written.listen();
            if !self.shared.writing.get() {
                continue;
            }
            l.await;
        }
    }
}

fn moved() -> io::Error {
    io::Error::other("the TLS session was handed to another shard")
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read_certs(path: &Path, key: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("{key} {}: {e}", path.display()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{key} {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "{key} {}: no PEM CERTIFICATE in the file",
            path.display()
        ));
    }
    Ok(certs)
}

fn read_key(path: &Path, key: &str) -> Result<PrivateKeyDer<'static>, String> {
    // The error names the file; the key's bytes never leave this function.
    PrivateKeyDer::from_pem_file(path).map_err(|e| {
        format!(
            "{key} {}: no readable PEM private key (PKCS#8, PKCS#1 or SEC1): {e}",
            path.display()
        )
    })
}

fn read_roots(path: &Path, key: &str) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    for cert in read_certs(path, key)? {
        roots
            .add(cert)
            .map_err(|e| format!("{key} {}: {e}", path.display()))?;
    }
    Ok(roots)
}

/// `tls.client.authServer=false`: any certificate is accepted, but the handshake's
/// signatures are still checked against it (the session is encrypted, not authenticated).
#[derive(Debug)]
struct AnyServer(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_never_looks_like_tls() {
        // The largest frame length a listener accepts starts with 0x00 or 0x01.
        let max = crate::limits::FRAME_BYTES_MAX as u32;
        assert!(max.to_be_bytes()[0] < RECORD_TYPE_HANDSHAKE);
        assert_eq!(starts_tls(&[]), None);
        assert_eq!(starts_tls(&[0x16, 0x03, 0x01]), Some(true));
        assert_eq!(starts_tls(&[0, 0, 0, 40]), Some(false));
    }
}
