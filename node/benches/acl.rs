//! `cargo bench -p ringmq-node --bench acl`: what the ACL costs the broker per request, apart
//! from everything else a request does: authenticating a signed native SEND (trailer removed,
//! MAC checked, replay checks) and authorizing it against the permission table, for bodies of
//! 1 record and of 64 records of 1 KiB each; and the same unsigned SEND on a TLS connection
//! that signed in once (bound to the account: no MAC, the account looked up). Each frame is
//! signed just before its timed check (so it is in cache, as a frame the broker has just read
//! from its socket).
//!
//! Environment: `RINGMQ_BENCH_RUNS` (default 5; the median is printed).

use std::time::Instant;

use ringmq_node::acl::{Acl, AclSettings, Caller};
use ringmq_wire::auth::{Credentials, Signer};
use ringmq_wire::code::RequestCode;
use ringmq_wire::command::{Request, SendRequest};
use ringmq_wire::frame::{self, Flags};

const ACL: &str = "accounts:\n  - accessKey: producer\n    secretKey: producer-secret\n    topicPerms:\n      - orders=PUB\n";
const FRAMES: usize = 400;

fn send_frame(records: usize) -> Vec<u8> {
    let h = SendRequest {
        producer_group: "pg".to_owned(),
        topic: "orders".to_owned(),
        queue_id: 0,
        batch: records > 1,
        record_count: records as u32,
    };
    let body = vec![0x5au8; records * 1024];
    let mut f = Vec::new();
    frame::encode_frame(
        &mut f,
        RequestCode::SendMessage,
        Flags::REQUEST,
        1,
        &h,
        &body,
    )
    .expect("encoding");
    f
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Nanoseconds per request, authenticating and authorizing `FRAMES` frames: signed ones, or
/// (`bound`) unsigned ones on a TLS connection whose first request was signed.
fn run(acl: &Acl, records: usize, round: u8, bound: bool) -> f64 {
    let creds = Credentials::new("producer", "producer-secret").expect("credentials");
    let mut nonce = [round; 16];
    nonce[0] = records as u8;
    nonce[1] = u8::from(bound);
    let mut signer = Signer::new(creds, nonce);
    let template = send_frame(records);
    let now = now_ms();
    let mut guard = acl.guard("127.0.0.1".parse().expect("ip")).over_tls(bound);
    if bound {
        let mut first = template.clone();
        signer.sign(&mut first, now).expect("signing");
        guard.native(&mut first, now).expect("signed in");
    }
    let mut spent = std::time::Duration::ZERO;
    let mut f = Vec::with_capacity(template.len() + 128);
    for _ in 0..FRAMES {
        // Signed outside the timed region; the frame is then in cache, as one the broker has
        // just read from its socket.
        f.clear();
        f.extend_from_slice(&template);
        if !bound {
            signer.sign(&mut f, now).expect("signing");
        }
        let started = Instant::now();
        let caller = guard.native(&mut f, now).expect("authenticated");
        let parsed = frame::parse(&f).expect("frame");
        let request = Request::from_frame(&parsed).expect("request");
        acl.authorize(&caller, &request, parsed.body)
            .expect("authorized");
        spent += started.elapsed();
        assert!(matches!(caller, Caller::Account(_)));
    }
    spent.as_nanos() as f64 / FRAMES as f64
}

fn main() {
    let runs: usize = std::env::var("RINGMQ_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("plain_acl.yml");
    std::fs::write(&file, ACL).expect("writing the ACL file");
    let acl = Acl::load(AclSettings {
        file,
        replay_window_ms: 300_000,
    })
    .expect("loading the ACL");
    println!("ACL per SEND request (authenticate + authorize), median of {runs} runs:");
    for (bound, what) in [
        (false, "signed"),
        (true, "unsigned on a TLS connection signed in once"),
    ] {
        println!("  {what}:");
        for records in [1usize, 64] {
            let mut ns: Vec<f64> = (0..runs)
                .map(|r| run(&acl, records, r as u8, bound))
                .collect();
            ns.sort_by(|a, b| a.total_cmp(b));
            let median = ns[ns.len() / 2];
            println!(
                "    {records:>2} x 1 KiB records: {:>8.2} µs per request, {:>6.3} µs per record",
                median / 1000.0,
                median / 1000.0 / records as f64
            );
        }
    }
}
