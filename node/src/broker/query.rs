//! QUERY_MESSAGE: records of a topic by key. Every shard keeps a key index of its own log,
//! so the shard that receives the query asks the others through their mailboxes (each
//! answers from its own index, never forwarding again) and merges the answers.

use std::rc::Rc;

use ringmq_wire::code::Status;
use ringmq_wire::command::{QueryMessageRequest, QueryMessageResponse};
use ringmq_wire::record;

use crate::broker::shard::route::Origin;
use crate::broker::shard::Shard;
use crate::broker::Broker;
use crate::limits;
use crate::net::reply::{Body, Outcome, Reply};
use crate::shard::mailbox::Mail;

/// Answers a query by key (fanning out to the other shards unless this is a forwarded part).
pub fn query(shard: &Rc<Shard>, h: QueryMessageRequest, frame: Vec<u8>, origin: Origin) -> Outcome {
    let max = (h.max_messages as usize).clamp(1, limits::PULL_MESSAGES_MAX);
    let local = match local_records(shard, &h, max) {
        Ok(r) => r,
        Err(reply) => return reply.into(),
    };
    let count = shard.broker.shard_count;
    if origin.forwarded || count == 1 {
        return answer(shard, local, max).into();
    }
    let mut waits = Vec::new();
    for s in (0..count).filter(|&s| s != shard.id) {
        let (tx, rx) = flume::bounded(1);
        let mail = Mail::Request {
            frame: frame.clone(),
            reply: tx,
        };
        if shard.broker.mailboxes[usize::from(s)]
            .try_send(mail)
            .is_ok()
        {
            waits.push(rx);
        }
    }
    let shard = Rc::clone(shard);
    Outcome::later(async move {
        let mut all = local;
        for rx in waits {
            if let Ok(r) = rx.recv_async().await {
                if r.status == Status::Success {
                    all.extend(
                        record::iter(&r.body)
                            .filter_map(|rec| rec.ok())
                            .map(|rec| rec.bytes.to_vec()),
                    );
                }
            }
        }
        answer(&shard, all, max)
    })
}

fn local_records(
    shard: &Shard,
    h: &QueryMessageRequest,
    max: usize,
) -> Result<Vec<Vec<u8>>, Reply> {
    let Some(index) = &shard.index else {
        return Err(Reply::error(
            Status::QueryNotFound,
            "the key index is off on this broker (messageIndexEnable=false)",
        ));
    };
    shard.index_pending();
    let store = shard.store.borrow();
    let index = index.borrow();
    let end = if h.end_timestamp_ms <= 0 {
        i64::MAX
    } else {
        h.end_timestamp_ms
    };
    crate::store::index::query_by_key(
        &store,
        &index,
        &h.topic,
        &h.key,
        max,
        h.begin_timestamp_ms,
        end,
        shard.visible_end(),
    )
    .map_err(|e| Reply::error(Status::SystemError, e.to_string()))
}

fn answer(shard: &Shard, mut records: Vec<Vec<u8>>, max: usize) -> Reply {
    if records.is_empty() {
        return Reply::error(Status::QueryNotFound, "no message with this key");
    }
    // Newest first across shards.
    records.sort_by_key(|r| {
        std::cmp::Reverse(
            record::decode_one(r)
                .map(|v| v.store_timestamp_ms)
                .unwrap_or(0),
        )
    });
    records.truncate(max);
    let body: Vec<u8> = records.concat();
    let fields = QueryMessageResponse {
        index_last_update_timestamp_ms: Broker::now_ms(),
        index_last_update_physical_offset: shard
            .index
            .as_ref()
            .map_or(0, |i| i.borrow().end_offset()),
    };
    Reply::ok_body(fields, Body::Bytes(body))
}
