//! Sends two delayed messages, recalls one before it is due (RocketMQ 5.3's recall), and
//! reads the topic once both were due: only the other one arrives. A second recall, after
//! the due time, is refused with RECALL_TOO_LATE for the delivered message.
//!
//! ```text
//! ringmq standalone &                      # name server on 127.0.0.1:9876
//! cargo run -p ringmq-client --example recall -- [NAMESRV] [TOPIC]
//! ```
//!
//! NAMESRV defaults to `$RINGMQ_NAMESRV`, else `127.0.0.1:9876`.

use std::error::Error;
use std::time::Duration;

use ringmq_client::consumer::PullStatus;
use ringmq_client::wire::code::Status;
use ringmq_client::{Message, Producer, PullConsumer};

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let namesrv = args
        .next()
        .filter(|a| !a.is_empty())
        .or_else(|| std::env::var("RINGMQ_NAMESRV").ok())
        .unwrap_or_else(|| "127.0.0.1:9876".to_string());
    let topic = args.next().unwrap_or_else(|| "RecallExample".to_string());

    let producer = Producer::builder()
        .group("example-producers")
        .name_servers(&namesrv)
        .start()
        .await?;

    let delay = Duration::from_secs(2);
    let keep = producer
        .send(Message::new(&topic, "kept").with_delay(delay))
        .await?;
    let cancel = producer
        .send(Message::new(&topic, "recalled").with_delay(delay))
        .await?;
    let handle = cancel
        .recall_handle
        .clone()
        .expect("a scheduled send returns a recall handle");
    println!(
        "sent {} and {}, due at {:?} ms; recall handle {handle}",
        keep.msg_id, cancel.msg_id, cancel.deliver_at_ms
    );

    // Withdraw it: Ok means it will never be delivered.
    let id = producer.recall(&handle).await?;
    println!("recalled {id}");

    // Once both were due: the kept one is delivered, a recall of it is too late.
    tokio::time::sleep(delay + Duration::from_millis(500)).await;
    match producer
        .recall(keep.recall_handle.as_deref().unwrap_or_default())
        .await
    {
        Err(e) if e.status() == Some(Status::RecallTooLate) => {
            println!("too late for {}: {e}", keep.msg_id)
        }
        other => println!("recall of the delivered one: {other:?}"),
    }

    let reader = PullConsumer::builder()
        .group("example-recall-reader")
        .name_servers(&namesrv)
        .start()
        .await?;
    for mq in reader.fetch_queues(&topic).await? {
        let r = reader.pull(&mq, 0, 32, "*").await?;
        if r.status == PullStatus::Found {
            for m in r.messages {
                println!("{mq}: {}", String::from_utf8_lossy(&m.body));
            }
        }
    }
    reader.shutdown().await;
    producer.shutdown().await;
    Ok(())
}
