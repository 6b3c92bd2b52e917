//! A simple consumer (POP consumption): receive messages from any queue of a topic, each
//! invisible to the group's other members for 30 s, ack each one after handling it; one
//! that needs longer gets more time, and one left unacked comes back after its invisible
//! time with its reconsume count raised. Start several of them: they share the topic
//! whatever its queue count.
//!
//! ```text
//! cargo run -p ringmq-client --example simple_consumer -- [NAMESRV] [TOPIC] [SECONDS]
//! ```
//!
//! NAMESRV defaults to `$RINGMQ_NAMESRV`, else `127.0.0.1:9876`.

use std::error::Error;
use std::time::{Duration, Instant};

use ringmq_client::SimpleConsumer;

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

    let consumer = SimpleConsumer::builder()
        .group("example-simple-consumers")
        .name_servers(&namesrv)
        .subscribe(&topic, "*")
        .await_duration(Duration::from_secs(2))
        .start()
        .await?;
    let until = Instant::now() + Duration::from_secs(seconds);
    let mut acked = 0;
    while Instant::now() < until {
        for mut m in consumer.receive(16, Duration::from_secs(30)).await? {
            let body = String::from_utf8_lossy(&m.message.body).into_owned();
            if body.contains("slow") {
                // Needs more than 30 s: keep it invisible for 2 minutes from now.
                consumer
                    .change_invisible_duration(&mut m, Duration::from_secs(120))
                    .await?;
            }
            println!(
                "{} queue {} offset {} (delivery {}): {body}",
                m.topic(),
                m.message.queue_id,
                m.message.queue_offset,
                m.message.reconsume_times + 1
            );
            consumer.ack(&m).await?;
            acked += 1;
        }
    }
    println!("acked {acked} messages in {seconds} s");
    consumer.shutdown().await;
    Ok(())
}
