//! Messages by id and by key: VIEW_MESSAGE_BY_ID on the broker that stored the message, and
//! QUERY_MESSAGE on every master of a topic.

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::command::{QueryMessageRequest, ViewMessageRequest};
use ringmq_wire::record;

use super::Admin;
use crate::error::{Error, Result};
use crate::message::{decode_records, ReceivedMessage};

impl Admin {
    /// The message with this offset message id (store host and physical offset, 32 or 56
    /// hex characters), from the broker that stored it.
    pub async fn view_message(&self, msg_id: &str) -> Result<ReceivedMessage> {
        let (addr, physical_offset) = record::parse_message_id(msg_id)
            .map_err(|e| Error::Config(format!("message id {msg_id:?}: {e}")))?;
        let broker_name = match self.brokers().await {
            Ok(bs) => bs
                .into_iter()
                .find(|b| b.addr == addr)
                .map(|b| b.name)
                .unwrap_or_default(),
            Err(e) => {
                log::debug!("looking up the broker at {addr}: {e}");
                String::new()
            }
        };
        let answer = self
            .call(
                addr,
                RequestCode::ViewMessageById,
                &ViewMessageRequest { physical_offset },
                &[],
            )
            .await?
            .expect(&[Status::Success])?;
        decode_records(&answer.body, &broker_name)?
            .into_iter()
            .next()
            .ok_or_else(|| answer.error(Status::QueryNotFound))
    }

    /// Messages of `topic` whose key (`KEYS` or unique key) is `key`, at most `max` per
    /// broker group, from every master of the topic (each broker searches its shards).
    pub async fn query_by_key(
        &self,
        topic: &str,
        key: &str,
        max: u32,
    ) -> Result<Vec<ReceivedMessage>> {
        let route = self.inst.fetch_route(topic).await?;
        let req = QueryMessageRequest {
            topic: topic.to_string(),
            key: key.to_string(),
            max_messages: max.max(1),
            begin_timestamp_ms: 0,
            end_timestamp_ms: i64::MAX,
        };
        let mut out = Vec::new();
        for (name, entry) in &route.brokers {
            let Some(addr) = entry.master else { continue };
            let answer = self
                .call(addr, RequestCode::QueryMessage, &req, &[])
                .await?
                .expect(&[Status::Success, Status::QueryNotFound])?;
            if answer.status()? == Status::Success {
                out.extend(decode_records(&answer.body, name)?);
            }
        }
        out.sort_by_key(|m| {
            (
                m.store_timestamp_ms,
                m.broker_name.clone(),
                m.physical_offset,
            )
        });
        Ok(out)
    }
}
