//! Queue offset requests: consumer offset query and commit, min/max offset, offset by
//! store timestamp. All run on the shard that owns the queue.

use ringmq_wire::code::Status;
use ringmq_wire::codec::{Empty, Encode};
use ringmq_wire::command::{
    ConsumerOffsetEntry, ConsumerOffsetTable, GetOffsetRequest, OffsetResponse,
    QueryConsumerOffsetRequest, QueryConsumerOffsetResponse, SearchOffsetRequest,
    UpdateConsumerOffsetRequest,
};

use crate::broker::shard::route::store_error;
use crate::broker::shard::Shard;
use crate::net::reply::Reply;

pub fn query_offset(shard: &Shard, h: &QueryConsumerOffsetRequest) -> Reply {
    match shard
        .offsets
        .borrow()
        .get(&h.consumer_group, &h.topic, h.queue_id)
    {
        Some(offset) => Reply::ok(QueryConsumerOffsetResponse { offset }),
        None => Reply::error(
            Status::QueryNotFound,
            format!(
                "group {} has no committed offset for {}/{}",
                h.consumer_group, h.topic, h.queue_id
            ),
        ),
    }
}

/// Every offset this shard keeps (a slave's shard copies them).
pub fn all_offsets(shard: &Shard) -> crate::net::reply::Outcome {
    let entries = shard
        .offsets
        .borrow()
        .all()
        .into_iter()
        .map(|(g, t, q, o)| ConsumerOffsetEntry {
            consumer_group: g,
            topic: t,
            queue_id: q,
            offset: o,
        })
        .collect();
    match (ConsumerOffsetTable { entries }).to_vec() {
        Ok(body) => Reply::ok_body(Empty, crate::net::reply::Body::Bytes(body)).into(),
        Err(e) => Reply::error(Status::SystemError, format!("encoding offsets: {e}")).into(),
    }
}

pub fn update_offset(shard: &Shard, h: &UpdateConsumerOffsetRequest) -> Reply {
    if h.consumer_group.is_empty() {
        return Reply::error(Status::MessageIllegal, "empty consumer group");
    }
    shard
        .offsets
        .borrow_mut()
        .set(&h.consumer_group, &h.topic, h.queue_id, h.offset);
    Reply::ok(Empty)
}

pub fn queue_offset(shard: &Shard, h: &GetOffsetRequest, max: bool) -> Reply {
    let (min_o, max_o) = shard
        .store
        .borrow()
        .queue_range(&h.topic, h.queue_id)
        .unwrap_or((0, 0));
    Reply::ok(OffsetResponse {
        offset: if max { max_o } else { min_o },
    })
}

pub fn search_offset(shard: &Shard, h: &SearchOffsetRequest) -> Reply {
    match shard
        .store
        .borrow()
        .offset_for_timestamp(&h.topic, h.queue_id, h.timestamp_ms)
    {
        Ok(offset) => Reply::ok(OffsetResponse { offset }),
        Err(e) => store_error(shard, e),
    }
}
