//! The client over TLS against a real `ringmq standalone` with `tls.server.mode=enforcing`
//! (certificates made in the test): sends and a push consumer's deliveries go through TLS,
//! with a client certificate as well when the node requires one; a plaintext client, one
//! trusting another CA and one without a client certificate are refused, each with an
//! error naming the address.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{fast_push, start_collecting, wait_until, Node};
use ringmq_client::{Admin, ClientConfig, Error, Message, Producer, StartPosition, TlsOptions};
use ringmq_testkit::certs::TestPki;

const WAIT: Duration = Duration::from_secs(20);

/// A node whose listeners accept TLS only, with the PKI's server certificate; its broker
/// registers with its own name server over TLS, trusting the PKI's CA.
fn tls_node(pki: &TestPki, extra: &[String]) -> Node {
    let mut sets = vec![
        "tls.server.mode=enforcing".to_string(),
        format!("tls.server.certPath={}", pki.server_cert.display()),
        format!("tls.server.keyPath={}", pki.server_key.display()),
        "tls.enable=true".to_string(),
        format!("tls.client.trustCertPath={}", pki.ca.display()),
    ];
    sets.extend_from_slice(extra);
    let refs: Vec<&str> = sets.iter().map(String::as_str).collect();
    Node::start_configured(2, &refs)
}

async fn admin(node: &Node, tls: TlsOptions) -> ringmq_client::Result<Admin> {
    let admin = Admin::with_config(ClientConfig {
        name_servers: vec![node.namesrv()],
        connect_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(5),
        tls,
        ..ClientConfig::default()
    })
    .await?;
    admin.cluster_info().await?;
    Ok(admin)
}

/// Sends `n` messages to `topic` and consumes them with a push consumer, both over `tls`.
async fn round_trip(node: &Node, tls: &TlsOptions, topic: &str, n: usize) {
    let producer = Producer::builder()
        .group("tls-producers")
        .name_server(node.namesrv())
        .tls(tls.clone())
        .start()
        .await
        .unwrap();
    let mut sent = Vec::new();
    for i in 0..n {
        let b = format!("{topic}-{i}");
        producer.send(Message::new(topic, b.clone())).await.unwrap();
        sent.push(b);
    }
    // A batch too: one write of several frames through TLS.
    let batch: Vec<Message> = (0..16)
        .map(|i| Message::new(topic, format!("{topic}-batch-{i}")))
        .collect();
    sent.extend((0..16).map(|i| format!("{topic}-batch-{i}")));
    producer.send_batch(&batch).await.unwrap();
    let (consumer, seen) = start_collecting(
        fast_push(node, &format!("{topic}-group"), "tls-consumer")
            .tls(tls.clone())
            .subscribe(topic, "*")
            .start_position(StartPosition::First),
    )
    .await;
    let all = wait_until(WAIT, || seen.lock().unwrap().len() >= sent.len()).await;
    let mut got = seen.lock().unwrap().clone();
    got.sort();
    got.dedup();
    sent.sort();
    assert!(all, "delivered {} of {}", got.len(), sent.len());
    assert_eq!(got, sent);
    consumer.shutdown().await;
    producer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_and_deliveries_over_tls() {
    let pki = TestPki::new();
    let node = tls_node(&pki, &[]);
    let tls = TlsOptions::with_ca(&pki.ca);
    round_trip(&node, &tls, "TlsOrders", 50).await;

    // Plaintext to an enforcing listener: refused, naming the name server.
    let e = admin(&node, TlsOptions::default()).await.unwrap_err();
    eprintln!("plaintext: {e}");
    assert!(e.to_string().contains(&node.namesrv()), "{e}");
    // Another CA: the handshake fails, naming the address and the CA file.
    let e = admin(&node, TlsOptions::with_ca(&pki.other_ca))
        .await
        .unwrap_err();
    eprintln!("another CA: {e}");
    assert!(matches!(e, Error::Tls { .. }), "{e}");
    assert!(e.to_string().contains(&node.namesrv()), "{e}");
    assert!(e.to_string().contains("not signed by a CA"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_with_a_client_certificate() {
    let pki = TestPki::new();
    let node = tls_node(
        &pki,
        &[
            "tls.server.need.client.auth=require".to_string(),
            format!("tls.server.trustCertPath={}", pki.ca.display()),
            // The broker's own registration needs a certificate too.
            format!("tls.client.certPath={}", pki.client_cert.display()),
            format!("tls.client.keyPath={}", pki.client_key.display()),
        ],
    );
    let tls = TlsOptions::with_ca(&pki.ca).client_cert(&pki.client_cert, &pki.client_key);
    round_trip(&node, &tls, "TlsMutual", 20).await;
    // Without a client certificate: refused (at the handshake, or as the connection closing
    // right after it under TLS 1.3).
    let e = admin(&node, TlsOptions::with_ca(&pki.ca))
        .await
        .unwrap_err();
    eprintln!("no client certificate: {e}");
    assert!(e.to_string().contains(&node.namesrv()), "{e}");
    assert!(
        e.to_string().contains("alert"),
        "the server's TLS alert is named: {e}"
    );
}
