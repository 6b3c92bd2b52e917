//! A push consumer: the client long-polls the broker and calls the listener with batches;
//! offsets are committed as batches succeed.
//!
//! ```text
//! cargo run -p ringmq-client --example push_consumer -- [NAMESRV] [TOPIC] [SECONDS]
//! ```
//!
//! NAMESRV defaults to `$RINGMQ_NAMESRV`, else `127.0.0.1:9876`. Runs SECONDS (default 10),
//! then shuts down cleanly (offsets committed, group left).

use std::error::Error;
use std::time::Duration;

use ringmq_client::{ConsumeContext, ConsumeResult, PushConsumer, ReceivedMessage, StartPosition};

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let namesrv = args
        .next()
        .filter(|a| !a.is_empty())
        .or_else(|| std::env::var("RINGMQ_NAMESRV").ok())
        .unwrap_or_else(|| "127.0.0.1:9876".to_string());
    let topic = args.next().unwrap_or_else(|| "ExampleTopic".to_string());
    let seconds: u64 = args.next().map(|c| c.parse()).transpose()?.unwrap_or(10);

    let consumer = PushConsumer::builder()
        .group("example-push-consumers")
        .name_servers(&namesrv)
        .subscribe(&topic, "*")
        .start_position(StartPosition::First)
        .consume_concurrency(4)
        .start(
            |msgs: Vec<ReceivedMessage>, ctx: ConsumeContext| async move {
                for m in &msgs {
                    println!(
                        "{} offset {:>5} tag {:<6} {}",
                        ctx.queue,
                        m.queue_offset,
                        m.tag().unwrap_or("-"),
                        String::from_utf8_lossy(&m.body)
                    );
                }
                ConsumeResult::Success
            },
        )
        .await?;
    println!(
        "consuming {topic} as {} ({} queues)",
        consumer.client_id(),
        consumer.assignment().len()
    );
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    consumer.shutdown().await;
    Ok(())
}
