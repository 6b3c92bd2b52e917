//! Request-reply (RocketMQ's RPC over topics): a price service answers quote requests sent
//! to a topic; the caller waits for each answer, or gives up after a timeout.
//!
//! ```text
//! ringmq standalone &                      # name server on 127.0.0.1:9876
//! cargo run -p ringmq-client --example request_reply -- [NAMESRV] [TOPIC] [COUNT]
//! ```
//!
//! NAMESRV defaults to `$RINGMQ_NAMESRV`, else `127.0.0.1:9876`. The replier is a push
//! consumer whose listener answers every request with [`Reply::to`] and
//! [`Producer::send_reply`]; the broker pushes each reply to the requester's connection.
//! The last request goes to a topic nobody answers and ends with `Error::RequestTimeout`.

use std::error::Error;
use std::time::{Duration, Instant};

use ringmq_client::{
    ConsumeResult, Message, Producer, PushConsumer, ReceivedMessage, Reply, StartPosition,
};

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let namesrv = args
        .next()
        .filter(|a| !a.is_empty())
        .or_else(|| std::env::var("RINGMQ_NAMESRV").ok())
        .unwrap_or_else(|| "127.0.0.1:9876".to_string());
    let topic = args.next().unwrap_or_else(|| "ExampleQuotes".to_string());
    let count: u64 = args.next().map(|c| c.parse()).transpose()?.unwrap_or(5);

    let admin = ringmq_client::Admin::connect(&namesrv).await?;
    admin
        .create_topic(&topic, 4, Duration::from_secs(10))
        .await?;

    // The service: consumes requests, answers each one.
    let replies = Producer::builder()
        .group("example-price-service")
        .name_servers(&namesrv)
        .start()
        .await?;
    let service = PushConsumer::builder()
        .group("example-price-service")
        .name_servers(&namesrv)
        .subscribe(&topic, "*")
        .start_position(StartPosition::Last)
        .start(move |requests: Vec<ReceivedMessage>, _ctx| {
            let replies = replies.clone();
            async move {
                for request in &requests {
                    let item = String::from_utf8_lossy(&request.body).into_owned();
                    let price = item.len() as u64 * 100;
                    // Only requests carry what a reply needs; anything else is skipped.
                    let Ok(reply) = Reply::to(request, format!("{item}: {price} cents")) else {
                        continue;
                    };
                    if let Err(e) = replies.send_reply(reply).await {
                        // E.g. REPLY_TO_CLIENT_NOT_FOUND: the requester has gone.
                        eprintln!("reply to {item} not delivered: {e}");
                    }
                }
                ConsumeResult::Success
            }
        })
        .await?;
    // Wait for the service to own its queues (a request sent before would wait for it).
    while service.assignment().iter().all(|q| q.topic != topic) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The caller.
    let caller = Producer::builder()
        .group("example-shop")
        .name_servers(&namesrv)
        .start()
        .await?;
    for i in 0..count {
        let item = format!("item-{i}");
        let t = Instant::now();
        let reply = caller
            .request(Message::new(&topic, item), Duration::from_secs(3))
            .await?;
        println!(
            "{} (round trip {} µs)",
            String::from_utf8_lossy(&reply.body),
            t.elapsed().as_micros()
        );
    }
    // Nobody answers this topic: the request times out, and nothing stays pending.
    let unanswered = format!("{topic}-Nobody");
    admin
        .create_topic(&unanswered, 1, Duration::from_secs(10))
        .await?;
    match caller
        .request(Message::new(&unanswered, "hello?"), Duration::from_secs(1))
        .await
    {
        Err(e @ ringmq_client::Error::RequestTimeout { .. }) => println!("{e}"),
        other => println!("unexpected: {other:?}"),
    }
    println!("requests still pending: {}", caller.requests_pending());
    caller.shutdown().await;
    service.shutdown().await;
    Ok(())
}
