//! Sends messages every way the producer can: sync, async (future and callback), one-way
//! and batch.
//!
//! ```text
//! ringmq standalone &                      # name server on 127.0.0.1:9876
//! cargo run -p ringmq-client --example producer -- [NAMESRV] [TOPIC] [COUNT]
//! ```
//!
//! NAMESRV defaults to `$RINGMQ_NAMESRV`, else `127.0.0.1:9876`.

use std::error::Error;

use ringmq_client::{Message, Producer};

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let namesrv = args
        .next()
        .filter(|a| !a.is_empty())
        .or_else(|| std::env::var("RINGMQ_NAMESRV").ok())
        .unwrap_or_else(|| "127.0.0.1:9876".to_string());
    let topic = args.next().unwrap_or_else(|| "ExampleTopic".to_string());
    let count: usize = args.next().map(|c| c.parse()).transpose()?.unwrap_or(10);

    let producer = Producer::builder()
        .group("example-producers")
        .name_servers(&namesrv)
        .start()
        .await?;

    // Synchronous: wait for the broker's answer.
    for i in 0..count {
        let msg = Message::new(&topic, format!("hello {i}"))
            .with_tag("TagA")
            .with_key(format!("order-{i}"))
            .with_property("source", "example");
        let r = producer.send(msg).await?;
        println!(
            "sent #{i}: {:?} id {} queue {} offset {}",
            r.status, r.msg_id, r.queue, r.queue_offset
        );
    }

    // Asynchronous: many sends in flight, results collected afterwards.
    let mut pending = Vec::new();
    for i in 0..count {
        pending.push(
            producer
                .send_async(Message::new(&topic, format!("async {i}")).with_tag("TagB"))
                .await,
        );
    }
    for handle in pending {
        let r = handle.await?;
        println!("async: {} at {}", r.msg_id, r.queue_offset);
    }

    // With a callback.
    let (tx, rx) = tokio::sync::oneshot::channel();
    producer
        .send_with_callback(Message::new(&topic, "with a callback"), move |r| {
            let _ = tx.send(r.map(|r| r.msg_id));
        })
        .await;
    println!("callback: {}", rx.await??);

    // One-way: no answer, no confirmation.
    producer
        .send_oneway(Message::new(&topic, "fire and forget"))
        .await?;

    // Batch: one request, one queue, contiguous offsets.
    let batch: Vec<Message> = (0..count)
        .map(|i| Message::new(&topic, format!("batch {i}")))
        .collect();
    let r = producer.send_batch(&batch).await?;
    println!(
        "batch of {} into {} from offset {}",
        r.record_count(),
        r.queue,
        r.queue_offset
    );

    producer.shutdown().await;
    Ok(())
}
