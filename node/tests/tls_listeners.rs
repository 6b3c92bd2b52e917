//! TLS on every listener of real `ringmq` processes (client, name server, HA), with a test CA
//! made in the test (`ringmq_testkit::certs`): an enforcing listener answers plaintext with
//! NO_PERMISSION and closes, on both protocols; a permissive one serves TLS and plaintext on
//! one port; mutual TLS refuses a client without a certificate; a client trusting another CA
//! fails the handshake; a handshake that never finishes is closed; sends and pulls over TLS
//! (the pull's log runs read and encrypted instead of spliced) return the bytes sent, also
//! after the connection moved to another shard; brokers register with an enforcing name
//! server and a slave replicates from an enforcing master, each over TLS.
//!
//! The test client is rustls itself (`StreamOwned` over a std socket) around the native and
//! remoting frame codecs of `ringmq_wire`.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use ringmq_testkit::certs::TestPki;
use ringmq_wire::code::{RequestCode, Status, PROTOCOL_VERSION};
use ringmq_wire::codec::{Decode, Empty, Encode};
use ringmq_wire::command::route::{perm, ClusterInfo, TopicConfig};
use ringmq_wire::command::{
    CreateTopicRequest, GetOffsetRequest, HaSubscribeRequest, HelloRequest, HelloResponse,
    OffsetResponse, PullResponse, SendResponse,
};
use ringmq_wire::frame;
use ringmq_wire::remoting::code::{request, response};
use ringmq_wire::remoting::ext::ExtFields;
use ringmq_wire::remoting::frame::{self as rframe, Command, SerializeType};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

/// What an enforcing listener says to plaintext (`net::admit::ENFORCING_REMARK`).
const ENFORCING_REMARK: &str = "this listener accepts TLS only (tls.server.mode=enforcing)";

/// A rustls client configuration trusting `ca`, showing `cert` when given.
fn client_config(ca: &Path, cert: Option<(&Path, &Path)>) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let builder =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
    Arc::new(match cert {
        Some((c, k)) => {
            let chain = CertificateDer::pem_file_iter(c)
                .unwrap()
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            let key = PrivateKeyDer::from_pem_file(k).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
        None => builder.with_no_client_auth(),
    })
}

/// A blocking TLS connection speaking native frames (or remoting ones).
struct TlsClient {
    s: StreamOwned<ClientConnection, TcpStream>,
    buf: Vec<u8>,
    next_id: u64,
}

impl TlsClient {
    /// Connects and completes the handshake (the server's certificate must name the IP).
    fn connect(addr: SocketAddr, cfg: &Arc<ClientConfig>) -> Result<TlsClient, String> {
        let tcp = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
            .map_err(|e| format!("connect: {e}"))?;
        tcp.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        tcp.set_write_timeout(Some(READ_TIMEOUT)).unwrap();
        tcp.set_nodelay(true).unwrap();
        let name = ServerName::IpAddress(addr.ip().into());
        let conn = ClientConnection::new(Arc::clone(cfg), name).map_err(|e| e.to_string())?;
        let mut s = StreamOwned::new(conn, tcp);
        while s.conn.is_handshaking() {
            s.conn
                .complete_io(&mut s.sock)
                .map_err(|e| format!("handshake: {e}"))?;
        }
        Ok(TlsClient {
            s,
            buf: Vec::new(),
            next_id: 1,
        })
    }

    /// Connects and opens the native protocol (HELLO with `preferred_shard`); returns the
    /// HELLO's answer.
    fn native(
        addr: SocketAddr,
        cfg: &Arc<ClientConfig>,
        preferred_shard: Option<u16>,
    ) -> Result<(TlsClient, HelloResponse), String> {
        let mut c = TlsClient::connect(addr, cfg)?;
        let h = HelloRequest {
            client_id: format!("127.0.0.1@{}", std::process::id()),
            protocol_version: PROTOCOL_VERSION,
            client_version: "tls tests".to_string(),
            preferred_shard,
        };
        let r = c.call(RequestCode::Hello, &h, &[])?;
        if r.status() != Status::Success {
            return Err(format!("HELLO: {} {}", r.status().name(), r.remark()));
        }
        let hello = r.fields::<HelloResponse>().ok_or("HELLO without fields")?;
        Ok((c, hello))
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.s.write_all(bytes).map_err(|e| format!("write: {e}"))?;
        self.s.flush().map_err(|e| format!("flush: {e}"))
    }

    fn fill(&mut self) -> Result<(), String> {
        let mut chunk = vec![0u8; 64 * 1024];
        match self.s.read(&mut chunk) {
            Ok(0) => Err("connection closed".to_string()),
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                Ok(())
            }
            Err(e) => Err(format!("read: {e}")),
        }
    }

    /// One native request and its answer.
    fn call(
        &mut self,
        code: RequestCode,
        header: &impl Encode,
        body: &[u8],
    ) -> Result<Resp, String> {
        let id = self.next_id;
        self.next_id += 1;
        let mut out = Vec::new();
        frame::encode_request(&mut out, code, false, id, header, body).unwrap();
        self.write(&out)?;
        loop {
            if let Some(n) = frame::check(&self.buf, frame::FRAME_BYTES_MAX).unwrap() {
                let f = frame::parse(&self.buf[..n]).unwrap();
                let r = Resp {
                    request_id: f.request_id,
                    code: f.code,
                    header: f.header.to_vec(),
                    body: f.body.to_vec(),
                };
                let mine = f.is_response() && f.request_id == id;
                self.buf.drain(..n);
                if mine {
                    return Ok(r);
                }
                continue;
            }
            self.fill()?;
        }
    }

    /// One remoting request (JSON header) and its answer.
    fn remoting(&mut self, code: i32, ext: &[(&str, &str)]) -> Result<(Command, Vec<u8>), String> {
        let opaque = self.next_id as i32;
        self.next_id += 1;
        let fields = ext
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<std::collections::BTreeMap<_, _>>();
        let f = rframe::encode(
            &Command::request(code, opaque, fields),
            SerializeType::Json,
            &[],
        )
        .unwrap();
        self.write(&f)?;
        loop {
            if let Some(n) = rframe::check(&self.buf, rframe::FRAME_BYTES_MAX).unwrap() {
                let frame: Vec<u8> = self.buf.drain(..n).collect();
                let p = rframe::parse(&frame).unwrap();
                if p.command.is_response() && p.command.opaque == opaque {
                    return Ok((p.command, p.body.to_vec()));
                }
                continue;
            }
            self.fill()?;
        }
    }

    fn ok(&mut self, code: RequestCode, header: &impl Encode, body: &[u8]) -> Resp {
        let r = self
            .call(code, header, body)
            .unwrap_or_else(|e| panic!("{}: {e}", code.name()));
        r.ok();
        r
    }

    fn create_topic(&mut self, topic: &str, queues: u32) -> TopicConfig {
        let h = CreateTopicRequest {
            topic: topic.to_string(),
            read_queue_count: queues,
            write_queue_count: queues,
            perm: perm::READ_WRITE,
            attributes: Default::default(),
        };
        let r = self.ok(RequestCode::UpdateAndCreateTopic, &h, &[]);
        r.fields::<TopicConfig>().unwrap()
    }

    fn send(&mut self, topic: &str, queue: u32, body: &[u8]) -> SendResponse {
        let h = Client::send_request(topic, queue, false, 1);
        let msg = Msg::new(topic, queue, body.to_vec());
        let r = self.ok(RequestCode::SendMessage, &h, &msg.encode());
        r.fields::<SendResponse>().unwrap()
    }

    fn max_offset(&mut self, topic: &str, queue: u32) -> u64 {
        let h = GetOffsetRequest {
            topic: topic.to_string(),
            queue_id: queue,
        };
        let r = self.ok(RequestCode::GetMaxOffset, &h, &[]);
        r.fields::<OffsetResponse>().unwrap().offset
    }

    /// Every body of `topic`/`queue` from offset 0 to `count`, in order.
    fn pull_bodies(&mut self, topic: &str, queue: u32, count: u64) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < count {
            let h = pull_request(topic, queue, at, 32, 0);
            let r = self.ok(RequestCode::PullMessage, &h, &[]);
            let f = r.fields::<PullResponse>().unwrap();
            for rec in decode_records(&r.body) {
                assert_eq!(
                    rec.queue_offset,
                    out.len() as u64,
                    "{topic}/{queue}: a hole"
                );
                out.push(rec.body.to_vec());
            }
            assert!(f.next_begin_offset > at, "pull made no progress at {at}");
            at = f.next_begin_offset;
        }
        out
    }
}

/// Bodies of assorted sizes: small ones (pulled together with the others) and large ones
/// (more than a TLS record and a write chunk each).
fn bodies(tag: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for i in 0..24u32 {
        let len = match i % 6 {
            5 => 300 * 1024 + i as usize,
            4 => 40 * 1024,
            _ => 3 * 1024 + i as usize,
        };
        let mut b = format!("{tag} {i} ").into_bytes();
        b.extend(
            (0..len).map(|j| (j as u32).wrapping_mul(2_654_435_761).to_be_bytes()[0] ^ i as u8),
        );
        out.push(b);
    }
    out
}

/// Reads frames until the peer closes; the native responses read and whether it closed.
fn native_answers_then_close(s: &mut TcpStream) -> (Vec<Resp>, bool) {
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let closed = loop {
        match s.read(&mut chunk) {
            Ok(0) => break true,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => break e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    };
    let mut out = Vec::new();
    let mut at = 0;
    while let Ok(Some(n)) = frame::check(&buf[at..], frame::FRAME_BYTES_MAX) {
        let f = frame::parse(&buf[at..at + n]).unwrap();
        out.push(Resp {
            request_id: f.request_id,
            code: f.code,
            header: f.header.to_vec(),
            body: f.body.to_vec(),
        });
        at += n;
    }
    (out, closed)
}

/// A plaintext native client's opener and one request to an enforcing listener: the request
/// is answered NO_PERMISSION with the enforcing remark, then the connection closes.
fn assert_plaintext_native_refused(addr: SocketAddr, what: &str) {
    let mut s = Client::connect_raw(addr).unwrap();
    let mut out = ringmq_wire::command::opener_frame("plaintext");
    let h = GetOffsetRequest {
        topic: "T".to_string(),
        queue_id: 0,
    };
    frame::encode_request(&mut out, RequestCode::GetMaxOffset, false, 7, &h, &[]).unwrap();
    s.write_all(&out).unwrap();
    let (answers, closed) = native_answers_then_close(&mut s);
    let answer = answers
        .iter()
        .find(|r| r.request_id == 7)
        .unwrap_or_else(|| panic!("{what}: no answer to the plaintext request: {answers:?}"));
    answer.expect_status(Status::NoPermission);
    assert_eq!(answer.remark(), ENFORCING_REMARK, "{what}");
    assert!(closed, "{what}: the plaintext connection was not closed");
}

/// A plaintext remoting request to an enforcing listener: NO_PERMISSION, then closed.
fn assert_plaintext_remoting_refused(addr: SocketAddr, what: &str) {
    let mut s = Client::connect_raw(addr).unwrap();
    let cmd = Command::request(request::GET_ROUTEINFO_BY_TOPIC, 5, ExtFields::new());
    s.write_all(&rframe::encode(&cmd, SerializeType::Json, &[]).unwrap())
        .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let closed = loop {
        match s.read(&mut chunk) {
            Ok(0) => break true,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => break e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    };
    let n = rframe::check(&buf, rframe::FRAME_BYTES_MAX)
        .unwrap()
        .unwrap_or_else(|| panic!("{what}: no remoting answer ({} bytes)", buf.len()));
    let p = rframe::parse(&buf[..n]).unwrap();
    assert_eq!(p.command.code, response::NO_PERMISSION, "{what}");
    assert_eq!(p.command.opaque, 5, "{what}");
    assert_eq!(
        p.command.remark.as_deref(),
        Some(ENFORCING_REMARK),
        "{what}"
    );
    assert!(closed, "{what}: the plaintext connection was not closed");
}

fn set(key: &str, value: &Path) -> String {
    format!("{key}={}", value.display())
}

/// `--set` arguments for a listener with the PKI's server certificate.
fn server_sets(pki: &TestPki, mode: Option<&str>) -> Vec<String> {
    let mut out = vec![
        set("tls.server.certPath", &pki.server_cert),
        set("tls.server.keyPath", &pki.server_key),
    ];
    if let Some(m) = mode {
        out.push(format!("tls.server.mode={m}"));
    }
    out
}

fn as_set_args(sets: &[String]) -> Vec<String> {
    sets.iter()
        .flat_map(|s| ["--set".to_string(), s.clone()])
        .collect()
}

/// Sends `bodies` to `queue` and pulls them back over `c`, comparing every byte.
fn send_and_pull(c: &mut TlsClient, topic: &str, queue: u32, bodies: &[Vec<u8>]) {
    let start = c.max_offset(topic, queue);
    for (i, b) in bodies.iter().enumerate() {
        let r = c.send(topic, queue, b);
        assert_eq!(r.first_queue_offset, start + i as u64);
    }
    let got = c.pull_bodies(topic, queue, start + bodies.len() as u64);
    let got = &got[start as usize..];
    assert_eq!(got.len(), bodies.len());
    for (i, (g, want)) in got.iter().zip(bodies).enumerate() {
        assert!(
            g == want,
            "{topic}/{queue}: body {i} differs ({} vs {} bytes)",
            g.len(),
            want.len()
        );
    }
}

#[test]
fn enforcing_listeners_refuse_plaintext_and_serve_tls() {
    let pki = TestPki::new();
    let dir = tempdir("tls-enforcing");
    let mut sets = server_sets(&pki, Some("enforcing"));
    // The standalone's broker registers with its own (enforcing) name server over TLS.
    sets.push("tls.enable=true".to_string());
    sets.push(set("tls.client.trustCertPath", &pki.ca));
    let mut args = vec!["--shards".to_string(), "2".to_string()];
    args.extend(as_set_args(&sets));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let node = Node::standalone(&dir.path().join("data"), &args);
    let (broker, ns) = (node.broker_addr(), node.namesrv_addr());
    assert!(
        node.log()
            .contains("TLS enforcing (client certificates: none)"),
        "the start log names the listeners' mode:\n{}",
        node.log()
    );

    // A handshake that never finishes is closed after the 10 s handshake timeout.
    let stalled = std::thread::spawn(move || {
        let mut s = Client::connect_raw(broker).unwrap();
        s.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01]).unwrap();
        let t0 = Instant::now();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut b = [0u8; 64];
        let closed = matches!(s.read(&mut b), Ok(0) | Err(_));
        (closed, t0.elapsed())
    });

    // Plaintext: one clear answer on either protocol and port, then the close.
    assert_plaintext_native_refused(broker, "broker port, native");
    assert_plaintext_native_refused(ns, "name server, native");
    assert_plaintext_remoting_refused(broker, "broker port, remoting");
    assert_plaintext_remoting_refused(ns, "name server, remoting");

    // A client that trusts another CA fails the handshake; the listener goes on.
    let other = client_config(&pki.other_ca, None);
    let err = TlsClient::connect(broker, &other)
        .err()
        .expect("a client trusting another CA must not connect");
    assert!(err.contains("handshake"), "{err}");

    // TLS: the broker registered with the enforcing name server (over TLS), and the name
    // server answers both protocols inside TLS.
    let cfg = client_config(&pki.ca, None);
    let (mut nsc, _) = TlsClient::native(ns, &cfg, None).unwrap();
    let info = wait_for(Duration::from_secs(10), || {
        let r = nsc
            .call(RequestCode::GetBrokerClusterInfo, &Empty, &[])
            .unwrap();
        let info = ClusterInfo::decode(&r.body).unwrap();
        (!info.brokers.is_empty()).then_some(info)
    })
    .expect("the broker registered with the TLS-only name server");
    assert_eq!(
        info.brokers[0].master().unwrap().address,
        broker.to_string()
    );
    let mut rem = TlsClient::connect(ns, &cfg).unwrap();
    let (resp, body) = rem
        .remoting(request::GET_ROUTEINFO_BY_TOPIC, &[("topic", "TBW102")])
        .unwrap();
    assert_eq!(resp.code, response::SUCCESS, "{:?}", resp.remark);
    // Two shards: RocketMQ clients are routed to each shard's own port, which enforces TLS
    // as the broker port does.
    let route: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let shard_port: SocketAddr = route["brokerDatas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["brokerName"] == "broker-a@1")
        .expect("shard 1 announced")["brokerAddrs"]["0"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_ne!(shard_port, broker);
    assert_plaintext_remoting_refused(shard_port, "shard 1's port, remoting");
    let mut on_shard = TlsClient::connect(shard_port, &cfg).unwrap();
    let (resp, _) = on_shard
        .remoting(
            request::GET_MAX_OFFSET,
            &[("topic", "NoSuchTopic"), ("queueId", "0")],
        )
        .unwrap();
    // Answered inside TLS by the shard.
    assert_eq!(resp.code, response::TOPIC_NOT_EXIST, "{:?}", resp.remark);

    // Sends and pulls over TLS on the shard that accepted the connection (its pulls take
    // the log-run path: read from the file, encrypted), then on a connection handed to the
    // other shard with its TLS session.
    let (mut c, hello) = TlsClient::native(broker, &cfg, None).unwrap();
    assert_eq!(hello.shard_count, 2);
    let topic = c.create_topic("TlsTopic", 4);
    drop(c);
    // Connections asking for a shard: each one the kernel gave to the other shard moves
    // there with its TLS session (over six, some do).
    for (round, preferred) in [None, Some(0), Some(1), Some(0), Some(1), Some(0), Some(1)]
        .into_iter()
        .enumerate()
    {
        let (mut c, h) = TlsClient::native(broker, &cfg, preferred).unwrap();
        if let Some(p) = preferred {
            assert_eq!(
                h.shard_id, p,
                "HELLO moved the connection to the shard asked for"
            );
        }
        let queue = topic
            .queue_shards
            .iter()
            .position(|&s| s == h.shard_id)
            .expect("a queue on each shard") as u32;
        let all = bodies(&format!("round{round}"));
        let some = if round == 0 { &all[..] } else { &all[..12] };
        send_and_pull(&mut c, "TlsTopic", queue, some);
        // And again on the same connection: the session is intact after large pulls.
        send_and_pull(&mut c, "TlsTopic", queue, &bodies("again")[..6]);
    }

    let (closed, took) = stalled.join().unwrap();
    assert!(closed, "a stalled handshake kept its connection");
    assert!(
        took >= Duration::from_secs(7) && took < Duration::from_secs(20),
        "a stalled handshake was closed after {took:?}, not after the 10 s timeout"
    );
    let log = node.log();
    assert!(log.contains("refused a plaintext connection"), "{log}");
    assert!(log.contains("TLS handshake with"), "{log}");
}

#[test]
fn permissive_listeners_serve_tls_and_plaintext_on_one_port() {
    let pki = TestPki::new();
    let dir = tempdir("tls-permissive");
    // A certificate and no mode: permissive. The broker registers over TLS without
    // verifying the name server (tls.client.authServer=false), which the log calls insecure.
    let mut sets = server_sets(&pki, None);
    sets.push("tls.enable=true".to_string());
    sets.push("tls.client.authServer=false".to_string());
    let args = as_set_args(&sets);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let node = Node::standalone(&dir.path().join("data"), &args);
    let broker = node.broker_addr();
    let log = node.log();
    assert!(log.contains("TLS permissive"), "{log}");
    assert!(
        log.contains("tls.client.authServer=false") && log.contains("insecure"),
        "{log}"
    );
    assert!(log.contains("server certificates NOT verified"), "{log}");

    let cfg = client_config(&pki.ca, None);
    let (mut tls, _) = TlsClient::native(broker, &cfg, None).unwrap();
    tls.create_topic("Mixed", 1);
    let mut plain = Client::connect(broker);
    for i in 0..4u32 {
        let body = format!("message {i} ").repeat(2_000).into_bytes();
        if i % 2 == 0 {
            tls.send("Mixed", 0, &body);
        } else {
            plain.send_ok(&Msg::new("Mixed", 0, body));
        }
    }
    let over_tls = tls.pull_bodies("Mixed", 0, 4);
    let in_plain = plain.pull_all("Mixed", 0, 0, 4);
    let plain_bodies: Vec<Vec<u8>> = decode_records(&in_plain)
        .iter()
        .map(|r| r.body.to_vec())
        .collect();
    assert_eq!(over_tls, plain_bodies);
    assert_eq!(over_tls.len(), 4);

    // The name server too: plaintext and TLS on one port.
    let mut ns_plain = Client::connect(node.namesrv_addr());
    assert_eq!(ns_plain.cluster_info().brokers.len(), 1);
    let (mut ns_tls, _) = TlsClient::native(node.namesrv_addr(), &cfg, None).unwrap();
    let r = ns_tls
        .call(RequestCode::GetBrokerClusterInfo, &Empty, &[])
        .unwrap();
    assert_eq!(ClusterInfo::decode(&r.body).unwrap().brokers.len(), 1);
}

#[test]
fn mutual_tls_refuses_a_client_without_a_trusted_certificate() {
    let pki = TestPki::new();
    let dir = tempdir("tls-mutual");
    let mut sets = server_sets(&pki, Some("enforcing"));
    sets.push(set("tls.server.trustCertPath", &pki.ca));
    sets.push("tls.server.need.client.auth=require".to_string());
    let args = as_set_args(&sets);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let ns = Node::namesrv(dir.path(), &args);
    let addr = ns.namesrv_addr();
    assert!(
        ns.log()
            .contains("TLS enforcing (client certificates: require)"),
        "{}",
        ns.log()
    );

    // No certificate: with TLS 1.3 the client may finish its side of the handshake; the
    // server's alert arrives at the first read.
    let anonymous = client_config(&pki.ca, None);
    let refused = TlsClient::native(addr, &anonymous, None);
    assert!(
        refused.is_err(),
        "a client without a certificate was served"
    );
    // With the CA's client certificate: served.
    let mutual = client_config(&pki.ca, Some((&pki.client_cert, &pki.client_key)));
    let (mut c, _) = TlsClient::native(addr, &mutual, None).unwrap();
    c.ok(RequestCode::GetBrokerClusterInfo, &Empty, &[]);
    assert!(
        wait_for(Duration::from_secs(5), || ns
            .log()
            .contains("TLS handshake with")
            .then_some(()))
        .is_some(),
        "the refused handshake is logged: {}",
        ns.log()
    );

    // Keys that cannot take effect stop the start with a clear message.
    let bad = |extra: &[&str]| {
        let mut args: Vec<String> = ["namesrv", "--host", "127.0.0.1", "--port", "0"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        let launch = Launch {
            args,
            ..Launch::default()
        };
        let (status, stderr) = Node::start_expect_exit("namesrv-bad", dir.path(), launch);
        assert!(!status.success());
        stderr
    };
    let e = bad(&["--set", "tls.server.mode=enforcing"]);
    assert!(
        e.contains("tls.server.certPath and tls.server.keyPath"),
        "{e}"
    );
    let e = bad(&["--set", "tls.enable=true"]);
    assert!(e.contains("tls.enable") && e.contains("broker key"), "{e}");
    let missing = dir.path().join("missing.pem");
    let e = bad(&[
        "--set",
        &set("tls.server.certPath", &missing),
        "--set",
        &set("tls.server.keyPath", &pki.server_key),
    ]);
    assert!(
        e.contains("tls.server.certPath") && e.contains("missing.pem"),
        "{e}"
    );
}

#[test]
fn registration_and_replication_over_tls() {
    let pki = TestPki::new();
    let dir = tempdir("tls-ha");
    // The name server takes TLS only, from clients with the CA's certificate.
    let mut ns_sets = server_sets(&pki, Some("enforcing"));
    ns_sets.push(set("tls.server.trustCertPath", &pki.ca));
    ns_sets.push("tls.server.need.client.auth=require".to_string());
    let ns_args = as_set_args(&ns_sets);
    let ns_args: Vec<&str> = ns_args.iter().map(String::as_str).collect();
    let ns = Node::namesrv(dir.path(), &ns_args);
    let client_lines = vec![
        "tls.enable=true".to_string(),
        set("tls.client.trustCertPath", &pki.ca),
        set("tls.client.certPath", &pki.client_cert),
        set("tls.client.keyPath", &pki.client_key),
    ];
    // The master's client and HA ports take TLS only; the slave's stay plaintext (the
    // test reads it with the plain client) but it connects to both over TLS.
    let mut master_cfg = HaBroker::master(&dir.path().join("master"), "ASYNC_MASTER", 2);
    master_cfg.extra = server_sets(&pki, Some("enforcing"));
    master_cfg.extra.extend(client_lines.clone());
    let mut slave_cfg = HaBroker::slave(&dir.path().join("slave"), 2, None);
    slave_cfg.extra = client_lines;
    let master = master_cfg.start(ns.namesrv_addr());
    let slave = slave_cfg.start(ns.namesrv_addr());
    assert!(master.log().contains("TLS enforcing"), "{}", master.log());

    let cfg = client_config(&pki.ca, Some((&pki.client_cert, &pki.client_key)));
    let (mut nsc, _) = TlsClient::native(ns.namesrv_addr(), &cfg, None).unwrap();
    let ha_addr: SocketAddr = wait_for(Duration::from_secs(15), || {
        let r = nsc
            .call(RequestCode::GetBrokerClusterInfo, &Empty, &[])
            .unwrap();
        let info = ClusterInfo::decode(&r.body).unwrap();
        let b = info.brokers.iter().find(|b| b.broker_name == "broker-ha")?;
        // Both registered over TLS (the name server takes nothing else).
        b.replicas.get(&1)?;
        b.master()?.ha_address.parse().ok()
    })
    .expect("master and slave registered with the TLS-only name server");

    // Plaintext replication is refused by the master's HA port.
    let mut plain = Client::connect_raw(ha_addr).unwrap();
    let sub = HaSubscribeRequest {
        broker_name: "intruder".to_string(),
        broker_id: 9,
        shard_id: 0,
        shard_count: 2,
        max_physical_offset: 0,
        epochs: Vec::new(),
    };
    let mut out = Vec::new();
    frame::encode_request(&mut out, RequestCode::HaSubscribe, false, 3, &sub, &[]).unwrap();
    plain.write_all(&out).unwrap();
    let (answers, closed) = native_answers_then_close(&mut plain);
    assert!(closed);
    assert_eq!(answers.len(), 1, "{answers:?}");
    answers[0].expect_status(Status::NoPermission);

    // Messages to both shards of the master, over TLS, reach the slave (HA transfers of
    // large records go through the TLS session, not splice).
    let (mut c, _) = TlsClient::native(master.broker_addr(), &cfg, None).unwrap();
    let topic = c.create_topic("Replicated", 2);
    let mut sent = Vec::new();
    for q in 0..2u32 {
        let b = bodies(&format!("q{q}"));
        for body in &b {
            c.send("Replicated", q, body);
        }
        sent.push(b);
    }
    assert_ne!(topic.queue_shards[0], topic.queue_shards[1]);
    assert!(wait_topic_on(
        slave.broker_addr(),
        "Replicated",
        Duration::from_secs(20)
    ));
    let mut s = Client::connect(slave.broker_addr());
    for (q, want) in sent.iter().enumerate() {
        let q = q as u32;
        assert!(
            wait_for(Duration::from_secs(30), || (s.max_offset("Replicated", q)
                == want.len() as u64)
                .then_some(()))
            .is_some(),
            "queue {q} did not reach the slave: {} of {}",
            s.max_offset("Replicated", q),
            want.len()
        );
        let got: Vec<Vec<u8>> = decode_records(&s.pull_all("Replicated", q, 0, want.len()))
            .iter()
            .map(|r| r.body.to_vec())
            .collect();
        assert!(&got == want, "queue {q}: the slave holds other bytes");
    }
    let mlog = master.log();
    assert!(
        log_lines_containing(&mlog, "subscribed at").len() >= 2,
        "a TLS replication link per shard:\n{mlog}"
    );
    assert!(mlog.contains("refused a plaintext connection"), "{mlog}");
}
