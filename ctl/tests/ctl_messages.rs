//! `ringmq-ctl` against a real standalone node: send, msg id/key/dump, consume, and the
//! group commands (list, progress with a live member, reset-offset to earliest, latest and
//! a time), as tables and as JSON, and their mqadmin aliases.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use common::{record, Node};
use ringmq_client::PullConsumer;
use serde_json::Value;

#[test]
fn send_find_and_read_messages() {
    let node = Node::start();
    node.json(&["topic", "create", "Events", "--queues", "2"]);

    // send: a record table, then JSON.
    let out = node.ctl(&["send", "Events", "hello 0", "--tag", "TagA", "-k", "key-0"]);
    out.ok(&["send"]);
    let sent = record(&out.stdout);
    let fields: Vec<&str> = sent.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        fields,
        [
            "MSG_ID",
            "UNIQ_KEY",
            "TOPIC",
            "BROKER",
            "QUEUE",
            "OFFSET[msg]",
            "STORE_TIME[UTC]",
            "STATUS"
        ]
    );
    assert_eq!(sent[7].1, "SEND_OK");
    let first_id = sent[0].1.clone();
    let mut sends = Vec::new();
    for i in 1..5 {
        let j = node.json(&[
            "send",
            "Events",
            &format!("hello {i}"),
            "--key",
            &format!("key-{i}"),
        ]);
        assert_eq!(j["sent"]["status"], "SEND_OK");
        assert_eq!(j["sent"]["topic"], "Events");
        sends.push(j["sent"].clone());
    }

    // msg id (and queryMsgById -i)
    let j = node.json(&["msg", "id", &first_id]);
    let m = &j["message"];
    assert_eq!(m["msg_id"], first_id.as_str());
    assert_eq!(m["body"], "hello 0");
    assert_eq!(m["tag"], "TagA");
    assert_eq!(m["keys"], serde_json::json!(["key-0"]));
    assert_eq!(m["topic"], "Events");
    assert_eq!(m["store_host"], node.broker.as_str());
    assert_eq!(m["body_bytes"], 7);
    let out = node.ctl(&["queryMsgById", "-i", &first_id]);
    out.ok(&["queryMsgById"]);
    let rec = record(&out.stdout);
    assert!(
        rec.contains(&("BODY".to_string(), "hello 0".to_string())),
        "{rec:?}"
    );
    assert!(
        rec.contains(&("TAG".to_string(), "TagA".to_string())),
        "{rec:?}"
    );
    let args = ["-n", node.namesrv.as_str(), "msg", "id", "not-an-id"];
    common::ctl(&args).failed_one_line(&args);

    // msg key (and queryMsgByKey -t -k)
    let j = node.json(&["msg", "key", "Events", "key-2"]);
    let found = j["messages"].as_array().unwrap();
    assert_eq!(found.len(), 1, "{j}");
    assert_eq!(found[0]["msg_id"], sends[1]["msg_id"]);
    assert_eq!(found[0]["body"], "hello 2");
    let t = node.table(&["queryMsgByKey", "-t", "Events", "-k", "key-3"]);
    t.assert_header(&[
        "MSG_ID",
        "TOPIC",
        "BROKER",
        "QUEUE",
        "OFFSET[msg]",
        "STORE_TIME[UTC]",
        "TAG",
        "KEYS",
        "BODY_SIZE[B]",
        "BODY",
    ]);
    assert_eq!(t.column("BODY"), ["hello 3"]);
    assert!(
        node.json(&["msg", "key", "Events", "no-such-key"])["messages"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    // msg dump: one queue from offset 0, in order.
    let q: u64 = sent[4].1.parse().unwrap();
    let in_queue = 1 + sends.iter().filter(|s| s["queue"] == q).count();
    let j = node.json(&[
        "msg",
        "dump",
        "Events",
        "--queue",
        &q.to_string(),
        "--offset",
        "0",
        "--count",
        "50",
    ]);
    let dumped = j["messages"].as_array().unwrap();
    assert_eq!(dumped.len(), in_queue, "{j}");
    for (i, m) in dumped.iter().enumerate() {
        assert_eq!(m["queue_offset"], i as u64);
        assert_eq!(m["queue"], q);
    }
    let t = node.table(&[
        "msg",
        "dump",
        "-t",
        "Events",
        "-q",
        &q.to_string(),
        "-o",
        "0",
        "--count",
        "1",
    ]);
    assert_eq!(t.rows.len(), 1);
    assert_eq!(t.column("OFFSET[msg]"), ["0"]);

    // consume without a group reads everything and commits nothing.
    let j = node.json(&["consume", "Events", "--count", "100", "--wait", "1s"]);
    let mut bodies: Vec<String> = j["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["body"].as_str().unwrap().to_string())
        .collect();
    bodies.sort();
    assert_eq!(
        bodies,
        ["hello 0", "hello 1", "hello 2", "hello 3", "hello 4"]
    );
}

#[test]
fn groups_progress_and_reset() {
    let node = Node::start();
    node.json(&["topic", "create", "Jobs", "--queues", "2"]);
    let mut sent = Vec::new();
    for i in 0..6 {
        sent.push(node.json(&["send", "Jobs", &format!("job {i}")])["sent"].clone());
        // Lets the clock move on: the reset to a store time below needs distinct times.
        std::thread::sleep(Duration::from_millis(5));
    }

    // consume as a group: two messages, committed.
    let out = node.ctl(&[
        "consume", "Jobs", "-g", "workers", "--count", "2", "--wait", "1s",
    ]);
    out.ok(&["consume", "-g"]);
    assert!(
        out.stderr.contains("committed for group workers"),
        "{}",
        out.stderr
    );
    let t = common::Table::parse(&out.stdout);
    assert_eq!(t.rows.len(), 2);

    let j = node.json(&["group", "progress", "workers", "--topic", "Jobs"]);
    let queues = j["queues"].as_array().unwrap();
    assert_eq!(queues.len(), 2);
    let committed: u64 = queues
        .iter()
        .filter_map(|q| q["consumer_offset"].as_u64())
        .sum();
    assert_eq!(committed, 2, "{j}");
    let max_total: u64 = queues
        .iter()
        .map(|q| q["broker_offset"].as_u64().unwrap())
        .sum();
    assert_eq!(max_total, 6);
    for q in queues {
        if let Some(c) = q["consumer_offset"].as_u64() {
            let lag = q["lag"].as_u64().unwrap();
            assert_eq!(lag, q["broker_offset"].as_u64().unwrap() - c);
            // How long the oldest unconsumed message has waited: it was sent by this test.
            let age = q["lag_age_s"].as_f64().unwrap();
            if lag == 0 {
                assert_eq!(age, 0.0, "{q}");
            } else {
                assert!((0.0..300.0).contains(&age), "{q}");
            }
        } else {
            assert_eq!(q["lag"], Value::Null);
            assert_eq!(q["lag_age_s"], Value::Null);
        }
        assert_eq!(q["member"], Value::Null, "no live member yet");
    }
    let lag_sum: u64 = queues.iter().filter_map(|q| q["lag"].as_u64()).sum();
    assert_eq!(j["summary"]["total_lag"], lag_sum);
    let ages: Vec<f64> = queues
        .iter()
        .filter_map(|q| q["lag_age_s"].as_f64())
        .collect();
    assert_eq!(
        j["summary"]["max_lag_age_s"].as_f64(),
        ages.iter().copied().reduce(f64::max),
        "{j}"
    );
    assert_eq!(j["summary"]["member_count"], 0);

    // A live member owns both queues.
    let member = Member::join(&node.namesrv, "workers", "Jobs");
    let t = node.table(&["group", "progress", "workers", "-t", "Jobs"]);
    t.assert_header(&[
        "TOPIC",
        "BROKER",
        "QUEUE",
        "BROKER_OFFSET[msg]",
        "CONSUMER_OFFSET[msg]",
        "LAG[msg]",
        "LAG_AGE[s]",
        "MEMBER",
    ]);
    // The group's retry topic (the broker created it at the member's heartbeat) is shown
    // beside the topic, also owned by the member.
    assert_eq!(t.column("TOPIC"), ["Jobs", "Jobs", "%RETRY%workers"]);
    assert_eq!(
        t.column("MEMBER"),
        [member.id.clone(), member.id.clone(), member.id.clone()]
    );
    assert_eq!(t.more.len(), 2, "queues, members, summary");
    t.more[0].assert_header(&["MEMBER", "QUEUES", "ASSIGNED"]);
    assert_eq!(t.more[0].column("QUEUES"), ["3"]);
    let j = node.json(&["consumerProgress", "-g", "workers"]);
    assert_eq!(j["members"][0]["member"], member.id.as_str());
    assert_eq!(j["members"][0]["queue_count"], 3);
    assert_eq!(j["summary"]["member_count"], 1);
    let topics: Vec<&str> = j["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["topic"].as_str().unwrap())
        .collect();
    assert_eq!(
        topics,
        ["Jobs", "Jobs", "%RETRY%workers"],
        "topics found without --topic"
    );
    assert_eq!(j["summary"]["retry_lag"], 0, "{j}");
    assert_eq!(
        j["summary"]["dlq_lag"],
        Value::Null,
        "no dead-letter topic: {j}"
    );

    // group list
    let t = node.table(&["group", "list"]);
    t.assert_header(&[
        "GROUP",
        "MEMBERS",
        "SUBSCRIPTIONS",
        "OFFSET_TOPICS",
        "BROKERS",
    ]);
    assert!(t.column("GROUP").contains(&"workers".to_string()));
    let j = node.json(&["group", "list"]);
    let g = j["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["group"] == "workers")
        .unwrap_or_else(|| panic!("{j}"));
    assert_eq!(g["member_count"], 1);
    assert_eq!(g["members"][0], member.id.as_str());
    assert_eq!(g["subscriptions"]["Jobs"], "*");
    assert_eq!(g["offset_topics"], serde_json::json!(["Jobs"]));

    // reset-offset: earliest (warns about the live member), latest, then a time.
    let out = node.ctl(&[
        "group",
        "reset-offset",
        "workers",
        "--topic",
        "Jobs",
        "--to",
        "earliest",
    ]);
    out.ok(&["reset-offset"]);
    assert!(out.stderr.contains("live member"), "{}", out.stderr);
    let t = common::Table::parse(&out.stdout);
    t.assert_header(&[
        "TOPIC",
        "BROKER",
        "QUEUE",
        "OLD_OFFSET[msg]",
        "NEW_OFFSET[msg]",
    ]);
    assert_eq!(t.column("NEW_OFFSET[msg]"), ["0", "0"]);
    drop(member);
    assert_eq!(committed_offsets(&node), [Some(0), Some(0)]);

    let j = node.json(&[
        "group",
        "reset-offset",
        "-g",
        "workers",
        "-t",
        "Jobs",
        "--to",
        "latest",
    ]);
    for o in j["offsets"].as_array().unwrap() {
        assert_eq!(o["old_offset"], 0);
    }
    let maxes: Vec<Option<u64>> = j["offsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["new_offset"].as_u64())
        .collect();
    assert_eq!(committed_offsets(&node), maxes);
    assert_eq!(maxes.iter().flatten().sum::<u64>(), 6);

    // To the store time of the 4th message, as RFC 3339: its queue resumes at it.
    let pick = &sent[3];
    let ts = pick["store_time_ms"].as_i64().unwrap();
    let rfc = format!("{:.3}", jiff::Timestamp::from_millisecond(ts).unwrap());
    let j = node.json(&[
        "group",
        "reset-offset",
        "workers",
        "-t",
        "Jobs",
        "--to",
        &rfc,
    ]);
    let q = pick["queue"].as_u64().unwrap() as usize;
    assert_eq!(j["offsets"][q]["new_offset"], pick["queue_offset"], "{j}");
    assert_eq!(committed_offsets(&node)[q], pick["queue_offset"].as_u64());
    // ... and as ms since the epoch.
    let j = node.json(&[
        "group",
        "reset-offset",
        "workers",
        "-t",
        "Jobs",
        "--to",
        &ts.to_string(),
    ]);
    assert_eq!(j["offsets"][q]["new_offset"], pick["queue_offset"]);

    let out = node.ctl(&[
        "group",
        "reset-offset",
        "workers",
        "-t",
        "Jobs",
        "--to",
        "yesterday",
    ]);
    assert_eq!(out.code, 2, "{out:?}");
}

/// The group's committed offsets of Jobs' queues, in queue order.
/// The committed offsets of `workers` on Jobs (the retry topic's rows left out).
fn committed_offsets(node: &Node) -> Vec<Option<u64>> {
    let j = node.json(&["group", "progress", "workers", "--topic", "Jobs"]);
    j["queues"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|q| q["topic"] == "Jobs")
        .map(|q| q["consumer_offset"].as_u64())
        .collect()
}

/// A live member of a consumer group (a subscribed pull consumer on its own thread).
struct Member {
    id: String,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Member {
    fn join(namesrv: &str, group: &str, topic: &str) -> Member {
        let (ready_tx, ready_rx) = mpsc::channel();
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let (ns, group, topic) = (namesrv.to_string(), group.to_string(), topic.to_string());
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let c = PullConsumer::builder()
                    .name_servers(&ns)
                    .group(&group)
                    .start()
                    .await
                    .unwrap();
                c.subscribe(&topic, "*").await.unwrap();
                ready_tx.send(c.client_id().to_string()).unwrap();
                while matches!(stop_rx.try_recv(), Err(mpsc::TryRecvError::Empty)) {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                c.shutdown().await;
            });
        });
        let id = ready_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        Member {
            id,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
