//! Ordered sends: every step of one order carries the order id as its sharding key, so all
//! of them land on one queue, in send order.
//!
//! ```text
//! cargo run -p ringmq-client --example ordered_producer -- [NAMESRV] [TOPIC] [ORDERS]
//! ```
//!
//! NAMESRV defaults to `$RINGMQ_NAMESRV`, else `127.0.0.1:9876`.

use std::error::Error;
use std::time::Duration;

use ringmq_client::{Admin, Message, MessageQueue, Producer};

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let namesrv = args
        .next()
        .filter(|a| !a.is_empty())
        .or_else(|| std::env::var("RINGMQ_NAMESRV").ok())
        .unwrap_or_else(|| "127.0.0.1:9876".to_string());
    let topic = args.next().unwrap_or_else(|| "OrderTopic".to_string());
    let orders: usize = args.next().map(|c| c.parse()).transpose()?.unwrap_or(5);

    // Ordered sends pick among the topic's queues, so the topic must exist first (a plain
    // send would create it on the fly with the broker's default queue count).
    Admin::connect(&namesrv)
        .await?
        .create_topic(&topic, 4, Duration::from_secs(10))
        .await?;

    let producer = Producer::builder()
        .group("example-ordered-producers")
        .name_servers(&namesrv)
        .start()
        .await?;

    for step in ["created", "paid", "shipped", "delivered"] {
        for order in 0..orders {
            let order_id = format!("order-{order}");
            let msg = Message::new(&topic, format!("{order_id} {step}"))
                .with_tag(step)
                .with_key(order_id.clone());
            // Same key, same queue: the steps of one order stay in order.
            let r = producer.send_ordered(msg, &order_id).await?;
            println!(
                "{order_id} {step:<9} -> {} offset {}",
                r.queue, r.queue_offset
            );
        }
    }

    // A queue selector does the same with your own rule.
    let by_number = |queues: &[MessageQueue], msg: &Message| -> usize {
        msg.keys
            .first()
            .and_then(|k| k.trim_start_matches("order-").parse::<usize>().ok())
            .unwrap_or(0)
            % queues.len()
    };
    let r = producer
        .send_with_selector(
            Message::new(&topic, "order-3 refunded").with_key("order-3"),
            &by_number,
        )
        .await?;
    println!("order-3 refunded   -> {} (selector)", r.queue);

    producer.shutdown().await;
    Ok(())
}
