//! Orderly consumption with retries: a producer sends the steps of a few orders (created,
//! paid, shipped), each order's steps to one queue (`send_ordered` with the order id as the
//! sharding key); an orderly push consumer takes each queue's messages one call at a time in
//! queue order, under the queue's broker lock. The listener fails every "paid" step the
//! first time it sees it: the queue is suspended for a moment and the same message comes
//! again, so no order's "shipped" is ever seen before its "paid". A step that kept failing
//! past `max_reconsume_times` retries would go to the group's dead-letter topic
//! (`%DLQ%example-orderly-consumers`) and the queue would go on.
//!
//! ```text
//! cargo run -p ringmq-client --example orderly -- [NAMESRV] [TOPIC] [ORDERS]
//! ```
//!
//! NAMESRV defaults to `$RINGMQ_NAMESRV`, else `127.0.0.1:9876`; the topic (default
//! `ExampleOrders`) is created with 4 queues on every master (or updated to 4 queues).

use std::collections::{BTreeMap, HashSet};
use std::error::Error;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringmq_client::{
    Admin, ConsumeContext, ConsumeResult, Message, Producer, PushConsumer, ReceivedMessage,
    StartPosition,
};

const STEPS: [&str; 3] = ["created", "paid", "shipped"];

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let namesrv = args
        .next()
        .filter(|a| !a.is_empty())
        .or_else(|| std::env::var("RINGMQ_NAMESRV").ok())
        .unwrap_or_else(|| "127.0.0.1:9876".to_string());
    let topic = args.next().unwrap_or_else(|| "ExampleOrders".to_string());
    let orders: usize = args.next().map(|c| c.parse()).transpose()?.unwrap_or(5);

    let admin = Admin::connect(&namesrv).await?;
    admin
        .create_topic(&topic, 4, Duration::from_secs(10))
        .await?;

    // order id -> steps seen, in the order the listener succeeded on them.
    let done: Arc<Mutex<BTreeMap<String, Vec<String>>>> = Default::default();
    // "order/step" failed once already.
    let failed_once: Arc<Mutex<HashSet<String>>> = Default::default();
    let (sink, failed) = (done.clone(), failed_once.clone());
    let consumer = PushConsumer::builder()
        .group("example-orderly-consumers")
        .name_servers(&namesrv)
        .subscribe(&topic, "*")
        .start_position(StartPosition::Last)
        .orderly(true)
        .suspend_current_queue(Duration::from_millis(500))
        .max_reconsume_times(3)
        .consume_batch_max(1)
        .start(move |msgs: Vec<ReceivedMessage>, ctx: ConsumeContext| {
            let (sink, failed) = (sink.clone(), failed.clone());
            async move {
                let m = &msgs[0];
                let text = String::from_utf8_lossy(&m.body).to_string();
                let (order, step) = text.split_once('/').unwrap_or((&text, ""));
                if step == "paid" && failed.lock().expect("not poisoned").insert(text.clone()) {
                    println!(
                        "{} {text}: failing once (attempt {})",
                        ctx.queue, ctx.attempt
                    );
                    return ConsumeResult::Retry;
                }
                println!(
                    "{} offset {:>4} {text} (attempt {})",
                    ctx.queue, m.queue_offset, ctx.attempt
                );
                sink.lock()
                    .expect("not poisoned")
                    .entry(order.to_string())
                    .or_default()
                    .push(step.to_string());
                ConsumeResult::Success
            }
        })
        .await?;
    println!(
        "consuming {topic} as {} ({} queues locked)",
        consumer.client_id(),
        consumer.assignment().len()
    );

    let producer = Producer::builder()
        .group("example-orderly-producers")
        .name_servers(&namesrv)
        .start()
        .await?;
    for step in STEPS {
        for i in 0..orders {
            let order = format!("order-{i}");
            let body = format!("{order}/{step}");
            producer
                .send_ordered(Message::new(&topic, body).with_key(&order), &order)
                .await?;
        }
    }
    producer.shutdown().await;

    let deadline = Instant::now() + Duration::from_secs(30);
    while done
        .lock()
        .expect("not poisoned")
        .values()
        .map(Vec::len)
        .sum::<usize>()
        < orders * STEPS.len()
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    consumer.shutdown().await;
    for (order, steps) in done.lock().expect("not poisoned").iter() {
        let in_order = steps.iter().map(String::as_str).eq(STEPS);
        println!(
            "{order}: {} {}",
            steps.join(" -> "),
            if in_order {
                "(in order)"
            } else {
                "(OUT OF ORDER)"
            }
        );
    }
    Ok(())
}
