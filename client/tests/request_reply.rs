//! Request-reply against a real `ringmq standalone` (2 shards): requests answered by a
//! replying push consumer, many at once matched by correlation id, a replier that dies
//! (the request times out and nothing stays behind in the requester), a requester that
//! leaves before its reply (the replier is told, the broker goes on), and a broker that only
//! pushes replies (`storeReplyMessageEnable=false`).
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{body, fast_push, wait_until, Node};
use ringmq_client::wire::code::Status;
use ringmq_client::wire::properties::keys;
use ringmq_client::{
    ConsumeResult, Error, Message, MessageQueue, Producer, PushConsumer, ReceivedMessage, Reply,
    StartPosition,
};

const REPLY_TOPIC: &str = "DefaultCluster_REPLY_TOPIC";
/// Generous: the machine is shared; nothing here is timed.
const WAIT: Duration = Duration::from_secs(15);

async fn producer(node: &Node, group: &str, instance: &str) -> Producer {
    Producer::builder()
        .group(group)
        .name_server(node.namesrv())
        .instance_name(instance)
        .start()
        .await
        .unwrap()
}

/// A push consumer of `topic` that answers every request with `re: <body>` (while `mute` is
/// false), through `replier`; counts the replies it sent and keeps the errors.
struct Replier {
    consumer: PushConsumer,
    sent: Arc<AtomicU64>,
    errors: Arc<std::sync::Mutex<Vec<Error>>>,
}

async fn replier(node: &Node, topic: &str, instance: &str, mute: Arc<AtomicBool>) -> Replier {
    let sender = producer(node, "repliers", &format!("{instance}-p")).await;
    let sent = Arc::new(AtomicU64::new(0));
    let errors: Arc<std::sync::Mutex<Vec<Error>>> = Arc::default();
    let (s, e) = (sent.clone(), errors.clone());
    let consumer = fast_push(node, "repliers", instance)
        .subscribe(topic, "*")
        .start_position(StartPosition::First)
        .consume_concurrency(8)
        .start(move |msgs: Vec<ReceivedMessage>, _ctx| {
            let (sender, s, e, mute) = (sender.clone(), s.clone(), e.clone(), mute.clone());
            async move {
                for m in &msgs {
                    while mute.load(Ordering::Relaxed) {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    let reply = Reply::to(m, format!("re: {}", body(m))).unwrap();
                    match sender.send_reply(reply).await {
                        Ok(_) => {
                            s.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(err) => e.lock().unwrap().push(err),
                    }
                }
                ConsumeResult::Success
            }
        })
        .await
        .unwrap();
    Replier {
        consumer,
        sent,
        errors,
    }
}

async fn reply_topic_count(node: &Node) -> u64 {
    let reader = common::reader(node, "reply-readers").await;
    let mq = MessageQueue::new(REPLY_TOPIC, "broker-a", 0);
    let r = reader.pull(&mq, 0, 64, "*").await.unwrap();
    reader.shutdown().await;
    r.max_offset
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_gets_its_reply_and_the_reply_is_stored() {
    let node = Node::start();
    node.create_topic("Rpc", 4).await;
    let r = replier(&node, "Rpc", "rpc-replier", Arc::default()).await;
    let requester = producer(&node, "requesters", "rpc-requester").await;

    let reply = requester
        .request(
            Message::new("Rpc", "ping").with_property("k", "v"),
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    assert_eq!(body(&reply), "re: ping");
    assert_eq!(reply.topic, REPLY_TOPIC);
    assert_eq!(reply.property(keys::MESSAGE_TYPE), Some("reply"));
    assert_eq!(
        reply.property(keys::REPLY_TO_CLIENT),
        Some(requester.client_id())
    );
    assert!(reply.property(keys::CORRELATION_ID).is_some());
    assert_eq!(reply.property(keys::TTL), Some("10000"));
    assert_eq!(requester.requests_pending(), 0);
    assert!(r.errors.lock().unwrap().is_empty());

    // Stored too (storeReplyMessageEnable is on by default), right after the push.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while reply_topic_count(&node).await < 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "the reply was never stored"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(reply_topic_count(&node).await, 1);
    // A request's properties stay reserved for the client.
    let e = requester
        .request(
            Message::new("Rpc", "x").with_property(keys::CORRELATION_ID, "mine"),
            Duration::from_secs(1),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InvalidMessage(_)), "{e}");
    // Something that is not a request has no reply.
    let mut plain = reply.clone();
    plain.properties.remove(keys::CLUSTER);
    assert!(Reply::to(&plain, "x").is_err());
    r.consumer.shutdown().await;
    requester.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_of_several_requesters_get_their_own_replies() {
    let node = Node::start();
    node.create_topic("RpcMany", 4).await;
    let r = replier(&node, "RpcMany", "many-replier", Arc::default()).await;
    let requesters = [
        producer(&node, "requesters", "many-a").await,
        producer(&node, "requesters", "many-b").await,
    ];
    let mut tasks = Vec::new();
    for (who, p) in requesters.iter().enumerate() {
        for i in 0..40 {
            let p = p.clone();
            tasks.push(tokio::spawn(async move {
                let ask = format!("{who}-{i}");
                let reply = p
                    .request(
                        Message::new("RpcMany", ask.clone()),
                        Duration::from_secs(20),
                    )
                    .await
                    .unwrap();
                assert_eq!(body(&reply), format!("re: {ask}"));
                assert_eq!(reply.property(keys::REPLY_TO_CLIENT), Some(p.client_id()));
            }));
        }
    }
    for t in tasks {
        t.await.unwrap();
    }
    for p in &requesters {
        assert_eq!(p.requests_pending(), 0);
    }
    // The broker pushes a reply before it answers the replier's send, so the last replies'
    // acknowledgements may still be on their way when every request has its reply.
    let sent = &r.sent;
    assert!(
        common::wait_until(Duration::from_secs(20), || sent.load(Ordering::Relaxed)
            >= 80)
        .await,
        "the replier's sends acknowledged: {}",
        sent.load(Ordering::Relaxed)
    );
    assert_eq!(r.sent.load(Ordering::Relaxed), 80);
    assert!(r.errors.lock().unwrap().is_empty());
    r.consumer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_whose_replier_dies_times_out_and_leaves_nothing() {
    let node = Node::start();
    node.create_topic("RpcDead", 2).await;
    let r = replier(&node, "RpcDead", "dead-replier", Arc::default()).await;
    let requester = producer(&node, "requesters", "dead-requester").await;
    let ok = requester
        .request(Message::new("RpcDead", "first"), Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(body(&ok), "re: first");

    // The replier dies: its connections close, no goodbye, nothing more is answered.
    r.consumer.abort();
    let e = requester
        .request(
            Message::new("RpcDead", "unanswered"),
            Duration::from_secs(1),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&e, Error::RequestTimeout { timeout, .. } if *timeout == Duration::from_secs(1)),
        "{e}"
    );
    assert_eq!(requester.requests_pending(), 0);

    // A request whose caller stops waiting (its future dropped) leaves nothing either.
    let dropped = tokio::time::timeout(
        Duration::from_millis(300),
        requester.request(
            Message::new("RpcDead", "abandoned"),
            Duration::from_secs(60),
        ),
    )
    .await;
    assert!(dropped.is_err());
    assert_eq!(requester.requests_pending(), 0);

    // A new replier of the group takes over and answers the two late: those replies find
    // no request waiting and are dropped; a new request is answered as usual.
    let late = replier(&node, "RpcDead", "dead-replier-2", Arc::default()).await;
    assert!(
        wait_until(WAIT, || late.sent.load(Ordering::Relaxed) >= 2).await,
        "the late requests are answered"
    );
    assert_eq!(requester.requests_pending(), 0);
    let again = requester
        .request(Message::new("RpcDead", "again"), Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(body(&again), "re: again");
    assert_eq!(requester.requests_pending(), 0);
    late.consumer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_to_a_requester_that_left_is_refused_and_the_broker_goes_on() {
    let node = Node::start();
    node.create_topic("RpcLeft", 2).await;
    let mute = Arc::new(AtomicBool::new(true));
    let r = replier(&node, "RpcLeft", "left-replier", mute.clone()).await;
    let requester = producer(&node, "requesters", "left-requester").await;
    let gone = requester.clone();
    let asked = tokio::spawn(async move {
        gone.request(Message::new("RpcLeft", "anyone?"), Duration::from_secs(30))
            .await
    });
    // The request is stored and consumed (the replier holds it), then the requester goes.
    assert!(wait_until(WAIT, || requester.requests_pending() == 1).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    requester.shutdown().await;
    assert!(asked.await.unwrap().is_err());
    mute.store(false, Ordering::Relaxed);
    assert!(
        wait_until(WAIT, || !r.errors.lock().unwrap().is_empty()).await,
        "the replier hears that its reply went nowhere"
    );
    let e = r.errors.lock().unwrap().remove(0);
    assert_eq!(e.status(), Some(Status::ReplyToClientNotFound), "{e}");
    assert_eq!(r.sent.load(Ordering::Relaxed), 0);
    // Nothing of it was stored.
    assert_eq!(reply_topic_count(&node).await, 0);

    // The broker serves the next requester as before.
    let next = producer(&node, "requesters", "left-next").await;
    let reply = next
        .request(
            Message::new("RpcLeft", "still there?"),
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    assert_eq!(body(&reply), "re: still there?");
    r.consumer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_that_does_not_store_replies_still_pushes_them() {
    let node = Node::start_configured(2, &["storeReplyMessageEnable=false"]);
    node.create_topic("RpcNoStore", 2).await;
    let sender = producer(&node, "repliers", "nostore-p").await;
    let consumer = fast_push(&node, "repliers", "nostore-replier")
        .subscribe("RpcNoStore", "*")
        .start_position(StartPosition::First)
        .start(move |msgs: Vec<ReceivedMessage>, _ctx| {
            let sender = sender.clone();
            async move {
                for m in &msgs {
                    let r = sender
                        .send_reply(Reply::to(m, "pushed only").unwrap())
                        .await
                        .unwrap();
                    assert_eq!(r.record_count(), 0);
                    assert!(r.msg_id.is_empty());
                }
                ConsumeResult::Success
            }
        })
        .await
        .unwrap();
    let requester = producer(&node, "requesters", "nostore-requester").await;
    let reply = requester
        .request(Message::new("RpcNoStore", "ping"), Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(body(&reply), "pushed only");
    assert_eq!(reply_topic_count(&node).await, 0);
    consumer.shutdown().await;
}
