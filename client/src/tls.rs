//! The client side of TLS: a [`TlsConnector`] made once from [`TlsOptions`] (rustls with
//! the `ring` provider, TLS 1.2 and 1.3, the CAs of one PEM bundle, optionally a client
//! certificate), then a handshake on each TCP stream the client opens.
//!
//! The server name checked against a certificate is [`TlsOptions::server_name`] when set,
//! else the host connected to: an IP address for brokers (the name servers route by
//! address), so a server certificate needs IP subject alternative names unless every client
//! sets a name. A failed handshake says why, with a hint for the usual causes (a certificate
//! from another CA, one that does not name the server, a peer that does not speak TLS).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{CertificateError, RootCertStore};
use tokio::net::TcpStream;

use crate::error::{Error, Result};

/// TLS settings of a client.
///
/// ```
/// use ringmq_client::TlsOptions;
/// let tls = TlsOptions::with_ca("/etc/ringmq/ca.pem");
/// assert!(tls.enabled);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// Speak TLS on every connection (default: plaintext).
    pub enabled: bool,
    /// The CAs that may sign the servers' certificates: a PEM file of one or more
    /// certificates. Required when `enabled`.
    pub ca_path: Option<PathBuf>,
    /// This client's certificate chain (PEM), for servers that ask for one (mutual TLS).
    /// Needs `key_path`.
    pub cert_path: Option<PathBuf>,
    /// The private key of `cert_path` (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key_path: Option<PathBuf>,
    /// The name the servers' certificates must carry. Default: the IP address connected to
    /// (a certificate then needs that address as an IP subject alternative name).
    pub server_name: Option<String>,
}

impl TlsOptions {
    /// TLS on, trusting the CAs in the PEM file at `ca_path`.
    pub fn with_ca(ca_path: impl Into<PathBuf>) -> Self {
        TlsOptions {
            enabled: true,
            ca_path: Some(ca_path.into()),
            ..TlsOptions::default()
        }
    }

    /// Adds a client certificate chain and its key (mutual TLS).
    pub fn client_cert(
        mut self,
        cert_path: impl Into<PathBuf>,
        key_path: impl Into<PathBuf>,
    ) -> Self {
        self.cert_path = Some(cert_path.into());
        self.key_path = Some(key_path.into());
        self
    }

    /// Sets the name the servers' certificates must carry.
    pub fn server_name(mut self, name: impl Into<String>) -> Self {
        self.server_name = Some(name.into());
        self
    }

    /// Checks that the settings fit together (the files are read by
    /// [`Security::load`](crate::security::Security::load)).
    pub fn validate(&self) -> Result<()> {
        if !self.enabled {
            let set: Vec<&str> = [
                ("a CA bundle", self.ca_path.is_some()),
                ("a client certificate", self.cert_path.is_some()),
                ("a client key", self.key_path.is_some()),
                ("a server name", self.server_name.is_some()),
            ]
            .iter()
            .filter(|(_, set)| *set)
            .map(|(what, _)| *what)
            .collect();
            if !set.is_empty() {
                return Err(Error::Config(format!(
                    "TLS is off but {} is set: turn TLS on (TlsOptions::enabled) or leave them out",
                    set.join(", ")
                )));
            }
            return Ok(());
        }
        if self.ca_path.is_none() {
            return Err(Error::Config(
                "TLS needs a CA bundle (a PEM file of the CAs that sign the servers' \
                 certificates): this client does not use the system's trust store"
                    .into(),
            ));
        }
        match (&self.cert_path, &self.key_path) {
            (Some(_), None) => Err(Error::Config(
                "a TLS client certificate needs its private key as well".into(),
            )),
            (None, Some(_)) => Err(Error::Config(
                "a TLS client key needs its certificate as well".into(),
            )),
            _ => Ok(()),
        }
    }
}

/// A TLS stream over TCP, client side.
pub type TlsStream = tokio_rustls::client::TlsStream<TcpStream>;

/// What a handshake needs: the rustls configuration and the server name override. Cheap to
/// clone (shared).
#[derive(Clone)]
pub struct TlsConnector {
    inner: tokio_rustls::TlsConnector,
    server_name: Option<ServerName<'static>>,
    /// For messages: the CA bundle's path.
    ca_path: Arc<str>,
}

impl std::fmt::Debug for TlsConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConnector")
            .field("ca_path", &self.ca_path)
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl TlsConnector {
    /// Reads the CA bundle (and the client certificate and key) of `opts`; each failure
    /// names the file.
    pub fn load(opts: &TlsOptions) -> Result<TlsConnector> {
        opts.validate()?;
        let ca_path = opts
            .ca_path
            .as_deref()
            .ok_or_else(|| Error::Config("TLS needs a CA bundle".into()))?;
        let mut roots = RootCertStore::empty();
        for cert in read_certs(ca_path, "TLS CA bundle")? {
            roots
                .add(cert)
                .map_err(|e| Error::Config(format!("TLS CA bundle {}: {e}", ca_path.display())))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Config(format!("TLS: {e}")))?
            .with_root_certificates(roots);
        let config = match (&opts.cert_path, &opts.key_path) {
            (Some(cert), Some(key)) => {
                let chain = read_certs(cert, "TLS client certificate")?;
                let key = read_key(key)?;
                builder.with_client_auth_cert(chain, key).map_err(|e| {
                    Error::Config(format!(
                        "TLS client certificate {} with key: {e}",
                        cert.display()
                    ))
                })?
            }
            _ => builder.with_no_client_auth(),
        };
        let server_name = match &opts.server_name {
            Some(n) => Some(ServerName::try_from(n.clone()).map_err(|_| {
                Error::Config(format!(
                    "TLS server name {n:?} is neither a DNS name nor an IP address"
                ))
            })?),
            None => None,
        };
        Ok(TlsConnector {
            inner: tokio_rustls::TlsConnector::from(Arc::new(config)),
            server_name,
            ca_path: ca_path.display().to_string().into(),
        })
    }

    /// The TLS handshake on `tcp`, connected to `host` (an IP address or a DNS name: the
    /// server name unless one is set). No timeout of its own: the caller bounds it.
    pub async fn handshake(&self, host: &str, tcp: TcpStream) -> io::Result<TlsStream> {
        let name = match &self.server_name {
            Some(n) => n.clone(),
            None => ServerName::try_from(host.to_string()).map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{host:?} is not a valid TLS server name; set one"),
                )
            })?,
        };
        let shown = name.to_str().into_owned();
        self.inner
            .connect(name, tcp)
            .await
            .map_err(|e| self.explain(e, &shown))
    }

    /// `e` with a hint at its usual cause.
    fn explain(&self, e: io::Error, server_name: &str) -> io::Error {
        let rustls_error = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>());
        let hint = match rustls_error {
            Some(rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer)) => format!(
                "the server's certificate is not signed by a CA in {}",
                self.ca_path
            ),
            Some(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => format!(
                "the server's certificate does not name {server_name:?}: give it that name as a \
                 subject alternative name, or set the server name the certificate carries"
            ),
            Some(rustls::Error::InvalidCertificate(
                CertificateError::Expired | CertificateError::ExpiredContext { .. },
            )) => "the server's certificate has expired".to_string(),
            Some(rustls::Error::AlertReceived(a)) => {
                format!("the server refused the handshake ({a:?}; a client certificate it does not accept?)")
            }
            Some(_) => String::new(),
            None if matches!(
                e.kind(),
                io::ErrorKind::UnexpectedEof
                    | io::ErrorKind::ConnectionReset
                    | io::ErrorKind::BrokenPipe
            ) =>
            {
                "the peer closed the connection during the handshake: does it speak TLS?"
                    .to_string()
            }
            None if e.kind() == io::ErrorKind::InvalidData => {
                "the peer's answer is not TLS: does it speak TLS?".to_string()
            }
            None => String::new(),
        };
        if hint.is_empty() {
            e
        } else {
            io::Error::new(e.kind(), format!("{e} ({hint})"))
        }
    }
}

/// Every certificate of the PEM file at `path` (at least one).
fn read_certs(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>> {
    let pem = read_file(path, what)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::Config(format!("{what} {}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(Error::Config(format!(
            "{what} {}: no PEM certificate (-----BEGIN CERTIFICATE-----) in it",
            path.display()
        )));
    }
    Ok(certs)
}

/// The private key in the PEM file at `path` (never shown in a message).
fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>> {
    let pem = read_file(path, "TLS client key")?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        let why = match e {
            rustls::pki_types::pem::Error::NoItemsFound => {
                "no PEM private key (PKCS#8, PKCS#1 or SEC1) in it".to_string()
            }
            // Other messages may quote the file's lines: say less.
            _ => "not a readable PEM file".to_string(),
        };
        Error::Config(format!("TLS client key {}: {why}", path.display()))
    })
}

fn read_file(path: &Path, what: &str) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| Error::Io {
        what: format!("{what} {}", path.display()),
        source,
    })
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::time::Duration;

    use bytes::BytesMut;
    use ringmq_testkit::certs::TestPki;
    use ringmq_wire::code::{RequestCode, Status};
    use ringmq_wire::codec::Empty;
    use ringmq_wire::command::Response as WireResponse;
    use ringmq_wire::frame;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;
    use crate::net::connection::Connection;
    use crate::net::inbox::Inbox;
    use crate::security::Security;

    /// A TLS server that answers every request frame with SUCCESS and the request's body.
    /// `client_auth`: it asks for a client certificate signed by the PKI's CA.
    async fn tls_server(
        pki: &TestPki,
        client_auth: bool,
    ) -> (SocketAddr, tokio::task::JoinHandle<()>) {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain = read_certs(&pki.server_cert, "cert").expect("server cert");
        let key = read_key(&pki.server_key).expect("server key");
        let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .expect("versions");
        let builder = if client_auth {
            let mut roots = RootCertStore::empty();
            for c in read_certs(&pki.ca, "ca").expect("ca") {
                roots.add(c).expect("root");
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .expect("verifier");
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        let config = builder.with_single_cert(chain, key).expect("server config");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let addr = listener.local_addr().expect("bound");
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut s) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let mut buf = BytesMut::new();
                    loop {
                        match s.read_buf(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(_) => {}
                        }
                        while let Ok(Some(n)) = frame::check(&buf, frame::FRAME_BYTES_MAX) {
                            let bytes = buf.split_to(n);
                            let f = frame::parse(&bytes).expect("a frame");
                            let mut out = Vec::new();
                            let header = WireResponse::<Empty>::remark("tls ok");
                            frame::encode_response(
                                &mut out,
                                Status::Success,
                                f.request_id,
                                &header,
                                f.body,
                            )
                            .expect("encodes");
                            if s.write_all(&out).await.is_err() || s.flush().await.is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
        (addr, task)
    }

    async fn open(addr: SocketAddr, tls: TlsOptions) -> crate::Result<Connection> {
        let security = Security::load(&tls, None)?;
        Connection::open(
            addr,
            Duration::from_secs(5),
            16,
            Arc::new(Inbox::new()),
            security,
        )
        .await
    }

    async fn echo(conn: &Connection, body: &[u8]) -> crate::Result<Vec<u8>> {
        let a = conn
            .call(
                RequestCode::GetMaxOffset,
                &Empty,
                body,
                Duration::from_secs(5),
            )
            .await?
            .expect(&[Status::Success])?;
        assert_eq!(a.remark(), "tls ok");
        Ok(a.body.to_vec())
    }

    #[tokio::test]
    async fn calls_go_through_tls_with_the_right_ca() {
        let pki = TestPki::new();
        let (addr, server) = tls_server(&pki, false).await;
        let conn = open(addr, TlsOptions::with_ca(&pki.ca))
            .await
            .expect("handshake");
        assert!(format!("{conn:?}").contains("tls: true"), "{conn:?}");
        // Large and many frames: partial TLS writes resume and every byte is flushed.
        let big = vec![7u8; 300 * 1024];
        assert_eq!(echo(&conn, &big).await.expect("big call"), big);
        for i in 0..50u32 {
            let body = i.to_be_bytes();
            assert_eq!(echo(&conn, &body).await.expect("call"), body);
        }
        server.abort();
    }

    #[tokio::test]
    async fn a_server_of_another_ca_is_refused_naming_the_address() {
        let pki = TestPki::new();
        let (addr, server) = tls_server(&pki, false).await;
        let e = open(addr, TlsOptions::with_ca(&pki.other_ca))
            .await
            .expect_err("an untrusted server");
        assert!(matches!(e, Error::Tls { .. }), "{e}");
        let text = e.to_string();
        assert!(text.contains(&addr.to_string()), "{text}");
        assert!(text.contains("not signed by a CA in"), "{text}");
        assert!(text.contains(&pki.other_ca.display().to_string()), "{text}");
        assert_eq!(e.outcome(), crate::Outcome::NotStored);
        server.abort();
    }

    #[tokio::test]
    async fn the_server_name_is_the_address_unless_set() {
        let pki = TestPki::for_names(&["broker.test"]);
        let (addr, server) = tls_server(&pki, false).await;
        let e = open(addr, TlsOptions::with_ca(&pki.ca))
            .await
            .expect_err("the certificate does not name 127.0.0.1");
        assert!(e.to_string().contains("does not name \"127.0.0.1\""), "{e}");
        let conn = open(
            addr,
            TlsOptions::with_ca(&pki.ca).server_name("broker.test"),
        )
        .await
        .expect("named");
        assert_eq!(echo(&conn, b"x").await.expect("call"), b"x");
        server.abort();
    }

    #[tokio::test]
    async fn mutual_tls_needs_the_client_certificate() {
        let pki = TestPki::new();
        let (addr, server) = tls_server(&pki, true).await;
        let with_cert = TlsOptions::with_ca(&pki.ca).client_cert(&pki.client_cert, &pki.client_key);
        let conn = open(addr, with_cert)
            .await
            .expect("handshake with a certificate");
        assert_eq!(echo(&conn, b"m").await.expect("call"), b"m");
        // Without one: TLS 1.3 finishes the client's side of the handshake before the server
        // checks, so the refusal may come with the first call instead.
        let refused = match open(addr, TlsOptions::with_ca(&pki.ca)).await {
            Err(e) => e,
            Ok(conn) => echo(&conn, b"m").await.expect_err("no client certificate"),
        };
        assert!(!matches!(refused, Error::Broker { .. }), "{refused}");
        server.abort();
    }

    #[tokio::test]
    async fn a_plaintext_peer_fails_the_handshake_clearly() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let addr = listener.local_addr().expect("bound");
        let server = tokio::spawn(async move {
            // A plaintext listener reads the ClientHello as a bad frame and hangs up.
            let (mut s, _) = listener.accept().await.expect("accepts");
            let mut buf = [0u8; 512];
            let _ = s.read(&mut buf).await;
        });
        let pki = TestPki::new();
        let e = open(addr, TlsOptions::with_ca(&pki.ca))
            .await
            .expect_err("no TLS there");
        let text = e.to_string();
        assert!(text.contains(&addr.to_string()), "{text}");
        assert!(text.contains("does it speak TLS?"), "{text}");
        server.abort();
    }

    #[test]
    fn bad_files_are_named() {
        let pki = TestPki::new();
        let not_pem = pki.dir.path().join("not.pem");
        std::fs::write(&not_pem, "hello").expect("writes");
        let e = TlsConnector::load(&TlsOptions::with_ca(&not_pem)).expect_err("no certificate");
        assert!(e.to_string().contains("not.pem"), "{e}");
        assert!(e.to_string().contains("no PEM certificate"), "{e}");
        let e = TlsConnector::load(
            &TlsOptions::with_ca(&pki.ca).client_cert(&pki.client_cert, &not_pem),
        )
        .expect_err("no key");
        assert!(e.to_string().contains("TLS client key"), "{e}");
        assert!(e.to_string().contains("not.pem"), "{e}");
        let e = TlsConnector::load(&TlsOptions::with_ca(&pki.ca).server_name("not a name!"))
            .expect_err("bad name");
        assert!(e.to_string().contains("server name"), "{e}");
    }
}
