//! Message trace: a traced producer sends one message, a traced push consumer fails it
//! twice and succeeds the third time, then the message's trace is read back (as
//! `ringmq-ctl msg trace ID` does): the send, each listener call with its reconsume times.
//!
//! ```text
//! ringmq standalone &                      # name server on 127.0.0.1:9876
//! cargo run -p ringmq-client --example trace -- [NAMESRV] [TOPIC]
//! ringmq-ctl msg trace ID                  # the same timeline, ID as printed below
//! ```
//!
//! NAMESRV defaults to `$RINGMQ_NAMESRV`, else `127.0.0.1:9876`. The retries come after the
//! broker's retry delays (10 s, then 30 s, by default).

use std::error::Error;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ringmq_client::trace::TRACE_TOPIC_DEFAULT;
use ringmq_client::{
    Admin, ConsumeContext, ConsumeResult, Message, Producer, PushConsumer, ReceivedMessage,
    StartPosition,
};

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let namesrv = args
        .next()
        .filter(|a| !a.is_empty())
        .or_else(|| std::env::var("RINGMQ_NAMESRV").ok())
        .unwrap_or_else(|| "127.0.0.1:9876".to_string());
    let topic = args.next().unwrap_or_else(|| "TraceExample".to_string());

    let producer = Producer::builder()
        .group("example-producers")
        .name_servers(&namesrv)
        .trace(true) // a Pub record per stored message, to RMQ_SYS_TRACE_TOPIC
        .start()
        .await?;
    let calls = Arc::new(AtomicU32::new(0));
    let seen = Arc::clone(&calls);
    let consumer = PushConsumer::builder()
        .group("example-traced")
        .name_servers(&namesrv)
        .subscribe(&topic, "*")
        .start_position(StartPosition::Last)
        .trace(true) // SubBefore / SubAfter records around each listener call
        .start(move |msgs: Vec<ReceivedMessage>, _ctx: ConsumeContext| {
            let seen = Arc::clone(&seen);
            async move {
                let m = &msgs[0];
                let n = seen.fetch_add(1, Ordering::SeqCst);
                println!("delivery {} (reconsume times {})", n + 1, m.reconsume_times);
                if n < 2 {
                    ConsumeResult::Retry // handed back: comes again from %RETRY%<group>
                } else {
                    ConsumeResult::Success
                }
            }
        })
        .await?;

    let sent = producer
        .send(Message::new(&topic, "traced order").with_key("order-42"))
        .await?;
    println!("sent {} (offset id {})", sent.unique_key, sent.msg_id);
    while calls.load(Ordering::SeqCst) < 3 {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Shutdown sends the trace records still queued.
    consumer.shutdown().await;
    producer.shutdown().await;

    let admin = Admin::connect(&namesrv).await?;
    // The broker indexes keys in the background: read until every call is there.
    let mut trace = admin
        .message_trace(&sent.unique_key, TRACE_TOPIC_DEFAULT)
        .await?;
    for _ in 0..50 {
        if trace.consumes.len() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        trace = admin
            .message_trace(&sent.unique_key, TRACE_TOPIC_DEFAULT)
            .await?;
    }
    for s in &trace.sends {
        println!(
            "{} sent by {} ({}) in {} ms, stored at {:?}",
            s.timestamp_ms, s.group, s.client_host, s.cost_ms, s.stored
        );
    }
    for c in &trace.consumes {
        println!(
            "{} consumed by {} ({}), reconsume times {}, success {:?}, {:?} ms",
            c.timestamp_ms, c.group, c.client_host, c.retry_times, c.success, c.cost_ms
        );
    }
    println!("dead letters: {:?}", trace.dead_letters);
    Ok(())
}
