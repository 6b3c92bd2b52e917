//! How `ringmq standalone` starts its RocketMQ 5 gRPC listener (`docs/grpc.md`, "Starting
//! it"): a port asked for (`--grpc-port`, `grpcServerPort`) must bind, else the node refuses
//! to start; the default port (8081) taken is logged and the node starts without gRPC; the
//! listener's address is printed (`ringmq grpc: ADDR`) before the ready line.
//!
//! Needs the `ringmq` binary (`cargo build -p ringmq-node --bin ringmq`).

use std::net::TcpListener;
use std::path::Path;
use std::time::Duration;

use ringmq_testkit::{bin, Proc, Spawn};

const START_TIMEOUT: Duration = Duration::from_secs(30);

fn standalone(dir: &Path, extra: &[&str]) -> Proc {
    Spawn::new("ringmq", bin::ringmq())
        .args(["standalone", "--data"])
        .arg(dir.join("data"))
        .args(["--namesrv-port", "0", "--broker-port", "0", "--shards", "1"])
        .args(["--set", "mappedFileSizeCommitLog=8388608"])
        .args(extra)
        .env_default("RUST_LOG", "info")
        .log(dir.join("ringmq.log"))
        .start()
}

#[test]
fn an_asked_for_grpc_port_that_is_taken_refuses_the_start() {
    let dir = ringmq_testkit::tempdir("grpc-port-taken");
    let taken = TcpListener::bind("127.0.0.1:0").expect("a port to hold");
    let port = taken.local_addr().expect("its address").port().to_string();
    let mut node = standalone(dir.path(), &["--grpc-port", &port]);
    let status = node
        .wait(START_TIMEOUT)
        .unwrap_or_else(|| panic!("{}", node.failure("kept running on a taken gRPC port")));
    assert!(!status.success(), "exit status {status}");
    let log = node.log();
    assert!(
        log.contains("gRPC listener on 127.0.0.1:") && log.contains(&port),
        "the refusal names the gRPC listener and its port:\n{log}"
    );
}

#[test]
fn the_default_grpc_port_taken_is_logged_and_the_node_starts() {
    let dir = ringmq_testkit::tempdir("grpc-default-taken");
    // Held by this test (or by someone else already): either way the node cannot have it.
    let _held = TcpListener::bind("127.0.0.1:8081");
    let mut node = standalone(dir.path(), &[]);
    let ready = node.wait_ready(START_TIMEOUT);
    assert!(ready.broker.is_some());
    let lines = node.stdout_lines().to_vec();
    assert!(
        !lines.iter().any(|l| l.starts_with("ringmq grpc: ")),
        "no gRPC line without a gRPC listener: {lines:?}"
    );
    assert!(
        node.log().contains("starting without the gRPC listener"),
        "{}",
        node.log_tail(20)
    );
    node.term(Duration::from_secs(10));
}

#[test]
fn grpc_server_port_zero_listens_on_a_free_port_printed_before_the_ready_line() {
    let dir = ringmq_testkit::tempdir("grpc-port-key");
    let mut node = standalone(dir.path(), &["--set", "grpcServerPort=0"]);
    let line = node.wait_line(START_TIMEOUT, "its gRPC line", |l| {
        l.starts_with("ringmq grpc: ") || l.starts_with("ringmq standalone ready: ")
    });
    let addr: std::net::SocketAddr = line
        .strip_prefix("ringmq grpc: ")
        .unwrap_or_else(|| panic!("the ready line came before the gRPC line: {line}"))
        .parse()
        .expect("an address");
    assert_ne!(addr.port(), 0);
    assert_ne!(addr.port(), 8081);
    node.wait_ready(START_TIMEOUT);
    std::net::TcpStream::connect(addr).expect("the gRPC port accepts connections");
    node.term(Duration::from_secs(10));
}
