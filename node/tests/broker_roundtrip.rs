//! Standalone send/pull round trips against the real `ringmq` binary: single sends, batches,
//! multi-queue batches, message by id, queue offsets, offset by time, the route published by
//! the name server; the pull paths (zero-copy splice, heap copy, copy on the epoll fallback);
//! two shards with forwarding and HELLO hand-off; long polling.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::{Decode, Empty};
use ringmq_wire::command::route::{TopicConfigTable, MASTER_ID};
use ringmq_wire::command::{PullResponse, SendResponse};
use ringmq_wire::record;

/// Pulls `queue` from 0 and checks it holds exactly `sent` (record bytes), in order.
fn assert_queue_holds(c: &mut Client, topic: &str, queue: u32, sent: &[Vec<u8>]) {
    let body = if sent.is_empty() {
        Vec::new()
    } else {
        c.pull_all(topic, queue, 0, sent.len())
    };
    let recs = decode_records(&body);
    assert_eq!(recs.len(), sent.len(), "{topic}/{queue}: record count");
    for (i, (got, want)) in recs.iter().zip(sent).enumerate() {
        assert_eq!(got.queue_id, queue);
        assert_eq!(got.queue_offset, i as u64, "{topic}/{queue}: queue offsets");
        assert_same_record(want, got);
    }
    assert_eq!(c.max_offset(topic, queue), sent.len() as u64);
    assert_eq!(c.min_offset(topic, queue), 0);
}

#[test]
fn standalone_send_pull_round_trip() {
    let dir = tempdir("roundtrip");
    let node = Node::standalone(&dir.path().join("data"), &["--shards", "2"]);
    assert_eq!(node.ready.shards, 2);
    let mut c = Client::connect(node.broker_addr());
    let topic = "RoundTrip";
    let mut sent: Vec<Vec<Vec<u8>>> = vec![Vec::new(); 8];

    // One record, auto-creating the topic (8 queues).
    let single = Msg::new(topic, 0, "hello ringmq").props(&[
        ("TAGS", "TagA"),
        ("KEYS", "order-1 order-2"),
        ("color", "blue"),
        ("emoji", "ü ✓"),
    ]);
    let single_bytes = single.encode();
    let r = c.send_bytes(topic, 0, &single_bytes);
    r.ok();
    let s0 = r.fields::<SendResponse>().unwrap();
    assert_eq!(
        (s0.queue_id, s0.first_queue_offset, s0.record_count),
        (0, 0, 1)
    );
    assert_eq!(s0.store_host, node.broker_addr());
    sent[0].push(single_bytes.clone());

    // The name server publishes the route with the broker and the queue placement.
    let mut ns = Client::connect(node.namesrv_addr());
    let route = wait_for(Duration::from_secs(10), || ns.route(topic))
        .expect("the auto-created topic appears in the name server's route");
    assert_eq!(route.topic, topic);
    assert_eq!(route.brokers.len(), 1);
    let b = &route.brokers[0];
    assert_eq!(b.broker_name, "broker-a");
    let master = b.replicas.get(&MASTER_ID).expect("a master replica");
    assert_eq!(master.address, node.broker_addr().to_string());
    assert_eq!(master.shard_count, 2);
    assert_eq!(route.queues.len(), 1);
    let q = &route.queues[0];
    assert_eq!((q.read_queue_count, q.write_queue_count), (8, 8));
    // The placement is the broker's (published, not assumed): both shards own 4 queues.
    let r = c.call(RequestCode::GetAllTopicConfig, &Empty, &[]);
    r.ok();
    let table = TopicConfigTable::decode(&r.body).unwrap();
    let placement = table
        .topics
        .iter()
        .find(|t| t.topic == topic)
        .unwrap()
        .queue_shards
        .clone();
    assert_eq!(q.queue_shards, placement);
    assert_eq!(placement.len(), 8);
    assert_eq!(placement.iter().filter(|&&s| s == 0).count(), 4);
    let shard0 = placement[0];
    // Queues on queue 0's shard (besides 0) and on the other shard.
    let same: Vec<u32> = (1..8)
        .filter(|&q| placement[q as usize] == shard0)
        .collect();
    let far = (1..8u32)
        .find(|&q| placement[q as usize] != shard0)
        .unwrap();
    assert!(ns
        .cluster_info()
        .brokers
        .iter()
        .any(|b| b.broker_name == "broker-a"));

    // A batch to a queue on the other shard, bodies of every byte value and size.
    let batch: Vec<Msg> = (0..5u8)
        .map(|i| {
            let body: Vec<u8> = (0..=255u8)
                .cycle()
                .skip(i as usize)
                .take(100 + 300 * i as usize)
                .collect();
            Msg::new(topic, far, body).props(&[
                ("TAGS", if i % 2 == 0 { "even" } else { "odd" }),
                ("KEYS", &format!("k{i}")),
            ])
        })
        .collect();
    let (batch_body_bytes, batch_lens) = batch_body(&batch);
    let h = Client::send_request(topic, far, true, batch.len());
    let r = c.call(RequestCode::SendBatchMessage, &h, &batch_body_bytes);
    r.ok();
    let s1 = r.fields::<SendResponse>().unwrap();
    assert_eq!(
        (s1.queue_id, s1.first_queue_offset, s1.record_count),
        (far, 0, 5)
    );
    let mut at = 0;
    for len in &batch_lens {
        sent[far as usize].push(batch_body_bytes[at..at + len].to_vec());
        at += len;
    }

    // A multi-queue batch on three queues of queue 0's shard, interleaved.
    let mq: Vec<Msg> = (0..6u32)
        .map(|i| {
            let q = same[i as usize % 3];
            Msg::new(topic, q, format!("multi {i} to queue {q}")).props(&[("TAGS", "multi")])
        })
        .collect();
    let (mq_body, mq_lens) = batch_body(&mq);
    let h = Client::send_request(topic, MULTI_QUEUE, true, mq.len());
    let r = c.call(RequestCode::SendBatchMessage, &h, &mq_body);
    r.ok();
    let s2 = r.fields::<SendResponse>().unwrap();
    assert_eq!(s2.record_count, 6);
    let mut at = 0;
    for (m, len) in mq.iter().zip(&mq_lens) {
        sent[m.queue_id as usize].push(mq_body[at..at + len].to_vec());
        at += len;
    }

    // A multi-queue batch spanning both shards is refused, and stores nothing.
    let span = vec![Msg::new(topic, 0, "x"), Msg::new(topic, far, "y")];
    c.send_batch(topic, MULTI_QUEUE, &span)
        .expect_status(Status::MessageIllegal);

    // Every queue holds exactly what was sent, byte for byte.
    for (q, recs) in sent.iter().enumerate() {
        assert_queue_holds(&mut c, topic, q as u32, recs);
    }

    // Bodies, tags, keys and properties come back as sent.
    let body = c.pull_all(topic, 0, 0, 1);
    let got = &decode_records(&body)[0];
    assert_eq!(got.body, b"hello ringmq");
    assert_eq!(got.tags(), Some("TagA"));
    assert_eq!(got.property("KEYS"), Some("order-1 order-2"));
    assert_eq!(got.property("color"), Some("blue"));
    assert_eq!(got.property("emoji"), Some("ü ✓"));
    assert_eq!(got.topic, topic);
    assert_eq!(got.physical_offset, s0.first_physical_offset);

    // Message by id: the physical offsets the send responses give (batches are contiguous).
    let mut by_id: Vec<(u64, Vec<u8>)> = vec![(s0.first_physical_offset, single_bytes.clone())];
    for (start, body, lens) in [
        (s1.first_physical_offset, &batch_body_bytes, &batch_lens),
        (s2.first_physical_offset, &mq_body, &mq_lens),
    ] {
        let mut phys = start;
        let mut at = 0;
        for len in lens {
            by_id.push((phys, body[at..at + len].to_vec()));
            phys += *len as u64;
            at += len;
        }
    }
    for (phys, bytes) in &by_id {
        let id = s0.message_id(*phys);
        let (host, parsed) = record::parse_message_id(&id).unwrap();
        assert_eq!((host, parsed), (node.broker_addr(), *phys));
        let r = c.view_message(*phys);
        r.ok();
        let recs = decode_records(&r.body);
        assert_eq!(recs.len(), 1, "VIEW_MESSAGE_BY_ID returns one record");
        assert_eq!(recs[0].physical_offset, *phys);
        assert_same_record(bytes, &recs[0]);
    }
    let r = c.view_message(s0.first_physical_offset + 1);
    assert_ne!(r.status(), Status::Success, "no record starts at offset+1");

    // Offset by store timestamp (first message stored at or after the time). The sleep lets
    // the clock move on, so "later" has a store time after the first message's.
    std::thread::sleep(Duration::from_millis(30));
    let later = c.send_ok(&Msg::new(topic, 0, "later"));
    assert_eq!(later.first_queue_offset, 1);
    assert_eq!(c.search_offset(topic, 0, 0), 0);
    assert_eq!(c.search_offset(topic, 0, later.store_timestamp_ms), 1);
    assert_eq!(c.search_offset(topic, 0, now_ms() + 3_600_000), 2);
    assert_eq!(c.max_offset(topic, 0), 2);

    // A pull past the end: PULL_OFFSET_MOVED or PULL_NOT_FOUND with the right max offset.
    let r = c.pull(topic, 0, 2, 32, 0);
    r.expect_status(Status::PullNotFound);
    assert_eq!(r.fields::<PullResponse>().unwrap().max_offset, 2);
    let r = c.pull(topic, 0, 50, 32, 0);
    r.expect_status(Status::PullOffsetMoved);

    // Counters: every stored record counted once.
    let stored: u64 = sent.iter().map(|q| q.len() as u64).sum::<u64>() + 1;
    let info = c.runtime_info();
    assert_eq!(info.broker_name, "broker-a");
    assert_eq!(info.shards.len(), 2);
    assert_eq!(info.shards.iter().map(|s| s.msgs_in).sum::<u64>(), stored);
}

/// `batches` batches of `per` records with `size`-byte bodies for `topic`/0, encoded once
/// (so two nodes get the same bytes).
fn make_batches(topic: &str, batches: usize, per: usize, size: usize) -> Vec<Vec<Vec<u8>>> {
    (0..batches)
        .map(|b| {
            (0..per)
                .map(|i| {
                    let seed = (b * per + i) as u8;
                    let body: Vec<u8> = (0..size).map(|j| seed.wrapping_add(j as u8)).collect();
                    Msg::new(topic, 0, body)
                        .props(&[("KEYS", &format!("b{b}-{i}"))])
                        .encode()
                })
                .collect()
        })
        .collect()
}

/// Sends the batches to `topic`/0 and returns the sent records in order.
fn fill(c: &mut Client, topic: &str, batches: &[Vec<Vec<u8>>]) -> Vec<Vec<u8>> {
    let mut sent = Vec::new();
    for records in batches {
        let body: Vec<u8> = records.concat();
        let h = Client::send_request(topic, 0, true, records.len());
        c.call(RequestCode::SendBatchMessage, &h, &body).ok();
        sent.extend(records.iter().cloned());
    }
    sent
}

/// Pulls `[from, from + count)` in one request and checks the bytes against `sent`; returns
/// the body with the store timestamps zeroed (they differ between nodes).
fn pull_and_check(
    c: &mut Client,
    topic: &str,
    sent: &[Vec<u8>],
    from: usize,
    count: usize,
) -> Vec<u8> {
    let r = c.pull(topic, 0, from as u64, count as u32, 0);
    r.ok();
    let f = r.fields::<PullResponse>().unwrap();
    assert_eq!(
        f.message_count as usize, count,
        "one pull returns all {count} records"
    );
    assert_eq!(f.next_begin_offset, (from + count) as u64);
    let total: usize = sent[from..from + count].iter().map(Vec::len).sum();
    assert_eq!(r.body.len(), total, "pull body length");
    let recs = decode_records(&r.body);
    assert_eq!(recs.len(), count);
    let mut normalized = Vec::with_capacity(r.body.len());
    for (i, got) in recs.iter().enumerate() {
        assert_eq!(got.queue_offset, (from + i) as u64);
        assert_same_record(&sent[from + i], got);
        let mut bytes = got.bytes.to_vec();
        record::patch_broker_fields(
            &mut bytes,
            &record::BrokerFields {
                queue_offset: got.queue_offset,
                physical_offset: got.physical_offset,
                store_timestamp_ms: 0, // differs between the two nodes
                store_host: "0.0.0.0:0".parse().unwrap(),
            },
        )
        .unwrap();
        normalized.extend_from_slice(&bytes);
    }
    normalized
}

#[test]
fn pull_zero_copy_heap_copy_and_epoll_return_identical_bytes() {
    let dir = tempdir("pullpaths");
    let topic = "PullPaths";
    // 40 x 1 KiB (a 40 KiB pull: sent from the log's mapping in the "splice" mode, copied in
    // the others), then 10 MiB of 16 KiB records, which crosses the first 8 MiB segment so a
    // pull spans two segment files. Pulls of 1 MiB and more are spliced in the "splice" mode
    // (`SPLICE_MIN_BYTES`).
    let small = make_batches(topic, 1, 40, 1000);
    let big = make_batches(topic, 10, 64, 16 * 1024);
    let mut results = Vec::new();
    for (mode, extra) in [
        ("splice", &["--shards", "1"][..]),
        ("heap", &["--shards", "1", "--transfer-msg-by-heap"][..]),
        (
            "heap-key",
            &["--shards", "1", "--set", "transferMsgByHeap=true"][..],
        ),
        // The epoll fallback loop cannot splice from files: it must copy, not hang.
        ("epoll", &["--shards", "1", "--no-io-uring"][..]),
    ] {
        let node = Node::standalone(&dir.path().join(mode), extra);
        let mut c = Client::connect(node.broker_addr());
        c.create_topic_ok(topic, 1);
        let mut sent = fill(&mut c, topic, &small);
        let first = sent.len();
        sent.extend(fill(&mut c, topic, &big));
        // The first 8 MiB segment ends near big record 508 (16.1 KiB each): the third pull
        // spans two segment files.
        let out = vec![
            pull_and_check(&mut c, topic, &sent, 0, 40),
            pull_and_check(&mut c, topic, &sent, 7, 33),
            pull_and_check(&mut c, topic, &sent, first + 480, 100),
            pull_and_check(&mut c, topic, &sent, first + 560, 70),
        ];
        for (i, body) in out.iter().enumerate().skip(2) {
            assert!(
                body.len() >= 1 << 20,
                "pull {i} ({} bytes) is large enough for the splice path",
                body.len()
            );
        }
        let segment = |r: &record::RecordView<'_>| r.physical_offset / (8 << 20);
        let spanning = decode_records(&out[2]);
        assert_ne!(
            segment(&spanning[0]),
            segment(spanning.last().unwrap()),
            "the third pull should span two segments"
        );
        let info = c.runtime_info();
        assert!(
            info.shards[0].bytes_out > 0,
            "{mode}: the broker counted the bytes it sent"
        );
        results.push(out);
        drop(node);
    }
    for other in &results[1..] {
        for (i, (a, b)) in results[0].iter().zip(other).enumerate() {
            let first_diff = a.iter().zip(b).position(|(x, y)| x != y);
            assert!(
                a.len() == b.len() && first_diff.is_none(),
                "pull {i}: bodies differ from the spliced ones ({} vs {} bytes, first difference at {first_diff:?})",
                a.len(),
                b.len()
            );
        }
    }
}

#[test]
fn two_shards_forwarding_and_hello_handoff() {
    let dir = tempdir("shards");
    let node = Node::standalone(&dir.path().join("data"), &["--shards", "2"]);
    let addr = node.broker_addr();
    let topic = "Sharded";
    let mut admin = Client::connect(addr);
    let cfg = admin.create_topic_ok(topic, 8);
    // Queues by owning shard, from the placement the broker published.
    let queues_of = |shard: u16| -> Vec<u32> {
        (0..8u32)
            .filter(|&q| cfg.queue_shards[q as usize] == shard)
            .collect()
    };
    assert_eq!((queues_of(0).len(), queues_of(1).len()), (4, 4));

    // A connection without HELLO: both shards' queues work; one of them through forwarding.
    let mut plain = Client::connect(addr);
    for q in [queues_of(0)[0], queues_of(1)[0]] {
        let m = Msg::new(topic, q, format!("plain to {q}")).props(&[("TAGS", "p")]);
        let bytes = m.encode();
        let s = plain.send_bytes(topic, q, &bytes);
        s.ok();
        let s = s.fields::<SendResponse>().unwrap();
        assert_eq!(s.first_queue_offset, 0);
        let body = plain.pull_all(topic, q, 0, 1);
        assert_same_record(&bytes, &decode_records(&body)[0]);
        assert_eq!(plain.max_offset(topic, q), 1);
        plain.commit_offset("g-plain", topic, q, 1);
        assert_eq!(plain.query_offset("g-plain", topic, q), Some(1));
        let v = plain.view_message(s.first_physical_offset);
        v.ok();
        assert_same_record(&bytes, &decode_records(&v.body)[0]);
    }

    // A connection that says HELLO without a preference learns its shard; the other shard's
    // queue is served by forwarding (copied pulls, > 16 KiB).
    let mut c = Client::connect(addr);
    let hello = c.hello(None);
    assert_eq!(hello.shard_count, 2);
    assert_eq!(hello.broker_name, "broker-a");
    let here = hello.shard_id;
    let other = 1 - here;
    let q_other = queues_of(other)[1]; // untouched so far
    let msgs: Vec<Msg> = (0..40)
        .map(|i| Msg::new(topic, q_other, vec![i as u8; 1000]))
        .collect();
    let (body, lens) = batch_body(&msgs);
    let h = Client::send_request(topic, q_other, true, msgs.len());
    c.call(RequestCode::SendBatchMessage, &h, &body).ok();
    let pulled = c.pull_all(topic, q_other, 0, 40);
    assert_eq!(pulled.len(), body.len());
    let mut at = 0;
    for (got, len) in decode_records(&pulled).iter().zip(&lens) {
        assert_same_record(&body[at..at + len], got);
        at += len;
    }
    // The other shard counted the records (they were stored there).
    let info = c.runtime_info();
    assert!(info.shards[usize::from(other)].msgs_in >= 41);

    // HELLO with a preferred shard hands the connection over; a request pipelined right
    // behind the HELLO is answered by the new owner.
    for target in 0..2u16 {
        let mut h = Client::connect(addr);
        let hello_req = ringmq_wire::command::HelloRequest {
            client_id: "handoff".to_string(),
            protocol_version: ringmq_wire::code::PROTOCOL_VERSION,
            client_version: "it".to_string(),
            preferred_shard: Some(target),
        };
        let q = queues_of(target)[2];
        let m = Msg::new(topic, q, format!("after hello to shard {target}"));
        let bytes = m.encode();
        let hid = h.send_frame(RequestCode::Hello, &hello_req, &[]);
        let sid = h.send_frame(
            RequestCode::SendMessage,
            &Client::send_request(topic, q, false, 1),
            &bytes,
        );
        let hr = h.recv(hid);
        hr.ok();
        let hf = hr.fields::<ringmq_wire::command::HelloResponse>().unwrap();
        assert_eq!(
            hf.shard_id, target,
            "the HELLO is answered by the shard it asked for"
        );
        let sr = h.recv(sid);
        sr.ok();
        let off = sr.fields::<SendResponse>().unwrap().first_queue_offset;
        let pr = h.pull(topic, q, off, 1, 0);
        pr.ok();
        assert_same_record(&bytes, &decode_records(&pr.body)[0]);
        // A second HELLO on the handed-off connection still reports the same shard.
        assert_eq!(h.hello(None).shard_id, target);
    }

    // An out-of-range preference is ignored, not an error.
    let mut odd = Client::connect(addr);
    let hf = odd.hello(Some(7));
    assert!(hf.shard_id < 2);
}

#[test]
fn long_polling_wakes_on_append_and_times_out() {
    let dir = tempdir("longpoll");
    let node = Node::standalone(&dir.path().join("data"), &["--shards", "2"]);
    let addr = node.broker_addr();
    let topic = "LongPoll";
    let mut admin = Client::connect(addr);
    let cfg = admin.create_topic_ok(topic, 2);
    assert_ne!(cfg.queue_shards[0], cfg.queue_shards[1]);

    // Queues 0 and 1 live on different shards: the waiting connection is on shard 0, so one
    // pull parks locally and the other is forwarded and parks on shard 1.
    for q in 0..2u32 {
        let mut waiter = Client::connect(addr);
        assert_eq!(waiter.hello(Some(0)).shard_id, 0);
        let t0 = Instant::now();
        let id = waiter.send_frame(
            RequestCode::PullMessage,
            &pull_request(topic, q, 0, 32, 5000),
            &[],
        );
        let handle = std::thread::spawn(move || {
            let r = waiter.recv(id);
            (r, Instant::now())
        });
        // Wait until the pull is parked, then append from another connection.
        let parked = wait_for(Duration::from_secs(3), || {
            let info = admin.runtime_info();
            (info.shards.iter().map(|s| s.parked_pulls).sum::<u32>() >= 1).then_some(())
        });
        assert!(parked.is_some(), "queue {q}: the pull was never parked");
        let t_append = Instant::now();
        let s = admin.send_ok(&Msg::new(topic, q, format!("wake {q}")));
        let t_acked = Instant::now();
        let (r, t_resp) = handle.join().unwrap();
        r.ok();
        let recs = decode_records(&r.body);
        assert_eq!(recs.len(), 1);
        assert_eq!(recs[0].body, format!("wake {q}").as_bytes());
        assert_eq!(recs[0].queue_offset, s.first_queue_offset);
        assert!(t_resp >= t_append, "queue {q}: answered before the append");
        assert!(
            t_resp.duration_since(t_acked) < Duration::from_millis(1500),
            "queue {q}: answered {:?} after the append was acknowledged",
            t_resp.duration_since(t_acked)
        );
        assert!(
            t_resp.duration_since(t0) < Duration::from_millis(4500),
            "queue {q}: the pull waited for its timeout instead of the append"
        );
        eprintln!(
            "queue {q}: long poll answered {:?} after the append ack, {:?} after the pull",
            t_resp.duration_since(t_acked),
            t_resp.duration_since(t0)
        );
    }

    // A short suspend on an empty offset: PULL_NOT_FOUND after (about) the timeout.
    let mut c = Client::connect(addr);
    for q in 0..2u32 {
        let t = Instant::now();
        let r = c.pull(topic, q, 1, 32, 300);
        let took = t.elapsed();
        r.expect_status(Status::PullNotFound);
        assert_eq!(r.fields::<PullResponse>().unwrap().next_begin_offset, 1);
        assert!(
            took >= Duration::from_millis(200),
            "queue {q}: did not park ({took:?})"
        );
        assert!(
            took < Duration::from_secs(3),
            "queue {q}: parked for {took:?}"
        );
    }
    // No suspend: an immediate PULL_NOT_FOUND.
    c.pull(topic, 0, 1, 32, 0)
        .expect_status(Status::PullNotFound);
    let info = c.runtime_info();
    assert_eq!(info.shards.iter().map(|s| s.parked_pulls).sum::<u32>(), 0);
}

/// One connection pipelines frames of very different sizes without waiting for answers:
/// large batches (read to their exact end and handed over whole), small sends right behind
/// them in the same reads, and large frames after small ones. Every frame is answered, and
/// the queue holds every record intact, in order.
#[test]
fn pipelined_frames_of_mixed_sizes_arrive_whole() {
    let dir = tempdir("mixed-frames");
    let node = Node::standalone(&dir.path().join("data"), &["--shards", "1"]);
    let mut c = Client::connect(node.broker_addr());
    let topic = "MixedFrames";
    c.create_topic_ok(topic, 1);
    let mut sent: Vec<Vec<u8>> = Vec::new();
    let mut ids = Vec::new();
    // (records, body bytes): batches of 64 x 1 KiB, single small records, a 600 KiB batch.
    let plan: [(usize, usize); 10] = [
        (64, 1024),
        (1, 10),
        (1, 200),
        (64, 1024),
        (64, 1000),
        (1, 5),
        (150, 4096),
        (1, 1),
        (64, 1024),
        (2, 30_000),
    ];
    for (round, &(count, size)) in plan.iter().enumerate() {
        let msgs: Vec<Msg> = (0..count)
            .map(|i| {
                let body: Vec<u8> = (0..size).map(|b| (b + i + round * 7) as u8).collect();
                Msg::new(topic, 0, body)
            })
            .collect();
        let (body, lens) = batch_body(&msgs);
        let mut at = 0;
        for len in lens {
            sent.push(body[at..at + len].to_vec());
            at += len;
        }
        let h = Client::send_request(topic, 0, count > 1, count);
        let code = if count > 1 {
            RequestCode::SendBatchMessage
        } else {
            RequestCode::SendMessage
        };
        ids.push((round, c.send_frame(code, &h, &body)));
    }
    for (round, id) in ids {
        assert_eq!(c.recv(id).status(), Status::Success, "frame {round}");
    }
    assert_queue_holds(&mut c, topic, 0, &sent);
}

/// A client that stops reading while its pipelined requests keep being answered: the
/// replies fill the socket, then the connection's queue (the broker stops reading requests
/// past its queued-bytes limit), and every reply arrives once, whole and in request order,
/// when the client reads again.
#[test]
fn replies_keep_their_order_when_the_client_reads_late() {
    use std::io::Write;

    let dir = tempdir("late-reader");
    // Pull replies carry the record bytes in the reply (heap copy), 16 KiB each: a few hundred
    // fill the broker's socket buffer while the client does not read.
    let node = Node::standalone(
        &dir.path().join("data"),
        &["--shards", "1", "--transfer-msg-by-heap"],
    );
    let mut c = Client::connect(node.broker_addr());
    c.create_topic_ok("LateReader", 1);
    c.send_ok(&Msg::new("LateReader", 0, vec![b'x'; 16 << 10]));
    socket2::SockRef::from(&*c.stream())
        .set_recv_buffer_size(32 << 10)
        .unwrap();
    const N: u64 = 2_000;
    let mut wr = c.stream().try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let h = pull_request("LateReader", 0, 0, 1, 0);
        let mut out = Vec::new();
        for id in 1_000_000..1_000_000 + N {
            ringmq_wire::frame::encode_request(
                &mut out,
                RequestCode::PullMessage,
                false,
                id,
                &h,
                &[],
            )
            .unwrap();
        }
        wr.write_all(&out).unwrap();
    });
    // Replies pile up on the broker's side (socket buffers, then its queue) meanwhile.
    std::thread::sleep(Duration::from_millis(500));
    c.set_read_timeout(Duration::from_secs(30));
    for want in 1_000_000..1_000_000 + N {
        let r = c.read_any().unwrap();
        assert_eq!(r.request_id, want, "replies out of order");
        assert_eq!(r.status(), Status::Success, "{}", r.remark());
        assert!(
            r.body.len() > 16 << 10,
            "a whole record: {} bytes",
            r.body.len()
        );
    }
    writer.join().unwrap();
    // The connection still serves.
    assert_eq!(c.max_offset("LateReader", 0), 1);
}
