//! A pull consumer: pull one queue directly, then poll every queue of the topic and commit
//! the positions reached.
//!
//! ```text
//! cargo run -p ringmq-client --example pull_consumer -- [NAMESRV] [TOPIC] [SECONDS]
//! ```
//!
//! NAMESRV defaults to `$RINGMQ_NAMESRV`, else `127.0.0.1:9876`.

use std::error::Error;
use std::time::{Duration, Instant};

use ringmq_client::{PullConsumer, StartPosition};

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let namesrv = args
        .next()
        .filter(|a| !a.is_empty())
        .or_else(|| std::env::var("RINGMQ_NAMESRV").ok())
        .unwrap_or_else(|| "127.0.0.1:9876".to_string());
    let topic = args.next().unwrap_or_else(|| "ExampleTopic".to_string());
    let seconds: u64 = args.next().map(|c| c.parse()).transpose()?.unwrap_or(5);

    let consumer = PullConsumer::builder()
        .group("example-pull-consumers")
        .name_servers(&namesrv)
        .start_position(StartPosition::First)
        .start()
        .await?;
    let queues = consumer.fetch_queues(&topic).await?;

    // Direct: the first few messages of the first queue.
    if let Some(mq) = queues.first() {
        let r = consumer.pull(mq, 0, 5, "*").await?;
        println!(
            "{mq}: {:?}, {} messages, next offset {}, queue holds {}..{}",
            r.status,
            r.messages.len(),
            r.next_offset,
            r.min_offset,
            r.max_offset
        );
    }

    // Managed: poll all queues from the group's committed offsets, then commit.
    consumer.assign(queues);
    let until = Instant::now() + Duration::from_secs(seconds);
    let mut total = 0;
    while Instant::now() < until {
        let batch = consumer.poll(Duration::from_millis(500)).await?;
        for m in &batch {
            println!(
                "{}#{} offset {:>5} {}",
                m.broker_name,
                m.queue_id,
                m.queue_offset,
                String::from_utf8_lossy(&m.body)
            );
        }
        total += batch.len();
        consumer.commit_positions().await?;
    }
    println!("{total} messages");
    consumer.shutdown().await;
    Ok(())
}
