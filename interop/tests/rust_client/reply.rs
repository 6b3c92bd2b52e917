//! Request-reply across protocols: a `rocketmq-client-rust` requester (`request`) answered
//! by ringmq's native replier, and a native requester answered by a `rocketmq-client-rust`
//! replier (`MessageUtil::create_reply_message`, then `send`, which the client turns into
//! SEND_REPLY_MESSAGE(_V2)). The broker adds `CLUSTER` to the remoting request, pushes the
//! native reply as RocketMQ's PUSH_REPLY_MESSAGE_TO_CLIENT, and reads RocketMQ's reply send.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cheetah_string::CheetahString;
use rocketmq_client_rust::{
    ClientResult, ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, MQPushConsumer,
    MessageListenerConcurrently, MessageUtil,
};
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_single::Message;

use ringmq_client::{ConsumeResult, PushConsumer, ReceivedMessage, Reply, StartPosition};

use super::groups::create_topic;
use super::rmq::Rmq;
use super::sends::{message, Sent};

/// RocketMQ's reply codes, as the client sends them.
const SEND_REPLY_MESSAGE: i32 = 324;
const SEND_REPLY_MESSAGE_V2: i32 = 325;

/// How long the native replier waits before it answers (see its handler).
const REPLY_DELAY: Duration = Duration::from_millis(200);

/// A `rocketmq-client-rust` request, a native replier.
pub async fn rocketmq_requester(namesrv: &str) {
    let rmq = Rmq::new(namesrv);
    let topic = "InteropRequests";
    create_topic(&rmq, topic).await;
    let sender = ringmq_client::Producer::builder()
        .group("interop-native-repliers")
        .name_servers(namesrv)
        .start()
        .await
        .expect("starting the native reply producer");
    let replier = PushConsumer::builder()
        .group("interop-native-repliers")
        .name_servers(namesrv)
        .subscribe(topic, "*")
        .start_position(StartPosition::First)
        .start(move |msgs: Vec<ReceivedMessage>, _ctx| {
            let sender = sender.clone();
            async move {
                for m in &msgs {
                    let body = format!("re: {}", String::from_utf8_lossy(&m.body));
                    // create_topic's first message is no request: it has no reply.
                    let Ok(reply) = Reply::to(m, body) else {
                        assert!(m.property("CORRELATION_ID").is_none(), "{m:?}");
                        continue;
                    };
                    // rocketmq-client-rust 1.0.0 loses a reply that arrives before its
                    // `request` starts waiting: `RequestResponseFuture::put_response_message`
                    // wakes with `Notify::notify_waiters`, which keeps no permit for a waiter
                    // that comes later, so the request times out with the reply in hand.
                    // ringmq answers within a few ms, inside that window; the replier waits a
                    // moment so the test checks the protocol, not that race.
                    tokio::time::sleep(REPLY_DELAY).await;
                    sender.send_reply(reply).await.expect("the reply is pushed");
                }
                ConsumeResult::Success
            }
        })
        .await
        .expect("starting the native replier");
    // The replier must hold every queue a request may go to. Started right after the send
    // that auto-created the topic, its first rebalance may have seen the route before the
    // broker registered all the topic's queues; the next periodic one would come after the
    // requests' 10 s timeout.
    let deadline = Instant::now() + Duration::from_secs(30);
    while replier
        .assignment()
        .iter()
        .filter(|q| q.topic == topic)
        .count()
        < 8
    {
        assert!(
            Instant::now() < deadline,
            "the replier holds {:?}, not the topic's 8 queues",
            replier.assignment()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        replier.rebalance().await;
    }
    let producer = rmq.producer("interop-rmq-requesters").await;
    for i in 0..3 {
        let ask = format!("question-{i}");
        let msg = message(&mut Sent::new(), topic, &ask, "Ask", &[], &[("i", "x")]);
        let reply = producer
            .request(msg, 10_000)
            .await
            .unwrap_or_else(|e| panic!("{ask}: {e}"));
        let body = reply.get_body().map(|b| b.to_vec()).unwrap_or_default();
        assert_eq!(String::from_utf8_lossy(&body), format!("re: {ask}"));
        assert_eq!(
            reply
                .property(&CheetahString::from_static_str("MSG_TYPE"))
                .map(|v| v.to_string()),
            Some("reply".to_string())
        );
    }
    replier.shutdown().await;
    rmq.finish().await;
}

/// Replies made by the listener (it is synchronous); the test sends them.
struct MakeReplies {
    out: Arc<Mutex<Vec<Message>>>,
}

impl MessageListenerConcurrently for MakeReplies {
    fn consume_message(
        &self,
        msgs: &[&MessageExt],
        _context: &ConsumeConcurrentlyContext,
    ) -> ClientResult<ConsumeConcurrentlyStatus> {
        let mut out = self.out.lock().expect("the replies' lock");
        for m in msgs {
            let body = m.body().map(|b| b.to_vec()).unwrap_or_default();
            let answer = format!("re: {}", String::from_utf8_lossy(&body));
            match MessageUtil::create_reply_message(&m.message, answer.as_bytes()) {
                Ok(reply) => out.push(reply),
                // create_topic's first message is no request: it has no reply.
                Err(_) if body == b"warmup" => {}
                Err(e) => return Err(e),
            }
        }
        Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
    }
}

/// A native request, a `rocketmq-client-rust` replier.
pub async fn rocketmq_replier(namesrv: &str) {
    let rmq = Rmq::new(namesrv);
    let topic = "InteropNativeRequests";
    create_topic(&rmq, topic).await;
    let made = Arc::new(Mutex::new(Vec::new()));
    let mut c = rmq.push("interop-rmq-repliers", topic, "*").await;
    c.register_message_listener_concurrently(MakeReplies { out: made.clone() });
    c.start().await.expect("starting the replier");
    let reply_producer = rmq.producer("interop-rmq-repliers").await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sending = {
        let (made, stop) = (made.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let batch: Vec<Message> = std::mem::take(&mut *made.lock().expect("lock"));
                for m in batch {
                    reply_producer.send(m).await.expect("sending the reply");
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            reply_producer
        })
    };
    let requester = ringmq_client::Producer::builder()
        .group("interop-native-requesters")
        .name_servers(namesrv)
        .start()
        .await
        .expect("starting the native requester");
    let started = Instant::now();
    for i in 0..3 {
        let ask = format!("native-question-{i}");
        let reply = requester
            .request(
                ringmq_client::Message::new(topic, ask.clone()),
                Duration::from_secs(20),
            )
            .await
            .unwrap_or_else(|e| panic!("{ask} ({:?} in): {e}", started.elapsed()));
        assert_eq!(String::from_utf8_lossy(&reply.body), format!("re: {ask}"));
        assert_eq!(reply.property("MSG_TYPE"), Some("reply"));
    }
    assert_eq!(requester.requests_pending(), 0);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _reply_producer = sending.await.expect("the sending task");
    let codes = rmq.wire.codes();
    assert!(
        codes.contains(&SEND_REPLY_MESSAGE) || codes.contains(&SEND_REPLY_MESSAGE_V2),
        "the replies went as SEND_REPLY_MESSAGE: {codes:?}"
    );
    requester.shutdown().await;
    c.shutdown().await;
    rmq.finish().await;
}
