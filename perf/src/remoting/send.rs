//! Sends as a RocketMQ producer makes them: one message is SEND_MESSAGE with
//! `SendMessageRequestHeader`'s long field names and the properties in the header; more are
//! one SEND_BATCH_MESSAGE with `SendMessageRequestHeaderV2`'s short names (`a` group, `b`
//! topic, `e` queue, `m` batch, ...) and RocketMQ's batch body. Every message carries the
//! properties RocketMQ's clients set on it: `UNIQ_KEY` (32 upper-case hex digits, here the
//! producer id and sequence) and `WAIT=true`. Each send goes to the producer's next write
//! queue in turn (the masters' queues from the remoting route), on one connection per
//! broker, pipelined with the producer's other sends.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ringmq_client::wire::properties::{self, keys};
use ringmq_client::wire::remoting::batch;
use ringmq_client::wire::remoting::code::{request as rc, response};
use ringmq_client::wire::remoting::frame::{Command, SerializeType};

use super::conn::Conn;
use super::route;
use crate::security;

/// The topic RocketMQ clients name as the template of auto-created topics.
const DEFAULT_TOPIC: &str = "TBW102";
/// The property RocketMQ's `Message` sets to ask for the store's acknowledgement.
const WAIT: &str = "WAIT";

/// What a stored send came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// SUCCESS (else FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE: stored,
    /// not durable in time).
    pub durable: bool,
    pub broker_name: String,
    pub queue_id: u32,
    /// Queue offset of the first message.
    pub queue_offset: u64,
}

/// Why a send failed: a short kind (the response code's name) and the detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    pub kind: String,
    pub detail: String,
}

/// Where a send goes.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub group: &'a str,
    pub topic: &'a str,
    pub broker_name: &'a str,
    pub queue_id: u32,
}

/// A remoting producer of one topic.
#[derive(Debug)]
pub struct Producer {
    group: String,
    topic: String,
    st: SerializeType,
    timeout: Duration,
    /// (connection, broker name, queue id) of every write queue.
    queues: Vec<(Arc<Conn>, String, u32)>,
    next: AtomicUsize,
}

impl Producer {
    /// Looks the topic up on the name servers and connects to each master.
    pub async fn start(
        target: &security::Target,
        topic: &str,
        group: &str,
        st: SerializeType,
        timeout: Duration,
    ) -> Result<Producer, String> {
        let brokers = route::lookup(target, topic, st).await?;
        let mut queues = Vec::new();
        for b in brokers.iter().filter(|b| b.write_queues > 0) {
            let conn = Arc::new(Conn::connect(&b.addr, &target.security).await?);
            for q in 0..b.write_queues {
                queues.push((Arc::clone(&conn), b.broker_name.clone(), q));
            }
        }
        if queues.is_empty() {
            return Err(format!("topic {topic} has no write queue"));
        }
        Ok(Producer {
            group: group.to_string(),
            topic: topic.to_string(),
            st,
            timeout,
            queues,
            next: AtomicUsize::new(0),
        })
    }

    /// Sends the messages whose bodies are `bodies` (`size` bytes each, one buffer), their
    /// unique keys made from `producer` and sequences from `seq0`.
    pub async fn send(
        &self,
        bodies: &[u8],
        size: usize,
        (producer, seq0): (u64, u64),
    ) -> Result<Stored, Failed> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.queues.len();
        let (conn, broker_name, queue_id) = &self.queues[i];
        let target = Target {
            group: &self.group,
            topic: &self.topic,
            broker_name,
            queue_id: *queue_id,
        };
        let born_ms = (crate::payload::now_us() / 1000) as i64;
        let (cmd, body) =
            request(&target, bodies, size, (producer, seq0), born_ms).map_err(|detail| Failed {
                kind: "Encode".into(),
                detail,
            })?;
        let r = conn
            .request(cmd, self.st, &body, self.timeout)
            .await
            .map_err(|detail| Failed {
                kind: "Connection".into(),
                detail,
            })?;
        read_answer(&r.cmd, broker_name)
    }
}

/// A producer's unique key for a message (RocketMQ's `UNIQ_KEY` is 32 hex digits).
pub fn unique_key(producer: u64, seq: u64) -> String {
    format!("{producer:016X}{seq:016X}")
}

/// The properties RocketMQ's clients give a message: `WAIT` and `UNIQ_KEY`.
fn message_properties(producer: u64, seq: u64) -> Result<String, String> {
    let key = unique_key(producer, seq);
    let mut out = Vec::with_capacity(64);
    properties::encode([(WAIT, "true"), (keys::UNIQ_KEY, key.as_str())], &mut out)
        .map_err(|e| e.to_string())?;
    String::from_utf8(out).map_err(|e| e.to_string())
}

/// The request (opaque 0: the connection sets it) and body of one send of
/// `bodies.len() / size` messages.
pub fn request(
    t: &Target<'_>,
    bodies: &[u8],
    size: usize,
    (producer, seq0): (u64, u64),
    born_ms: i64,
) -> Result<(Command, Vec<u8>), String> {
    let n = bodies.len().checked_div(size).unwrap_or(0);
    if n == 0 || n * size != bodies.len() {
        return Err(format!(
            "{} bytes are not whole {size}-byte bodies",
            bodies.len()
        ));
    }
    let mut ext = ringmq_client::wire::remoting::ext::ExtFields::new();
    let mut put = |k: &str, v: String| {
        ext.insert(k, v);
    };
    if n == 1 {
        put("producerGroup", t.group.into());
        put("topic", t.topic.into());
        put("defaultTopic", DEFAULT_TOPIC.into());
        put("defaultTopicQueueNums", "4".into());
        put("queueId", t.queue_id.to_string());
        put("sysFlag", "0".into());
        put("bornTimestamp", born_ms.to_string());
        put("flag", "0".into());
        put("properties", message_properties(producer, seq0)?);
        put("reconsumeTimes", "0".into());
        put("unitMode", "false".into());
        put("batch", "false".into());
        put("bname", t.broker_name.into());
        return Ok((Command::request(rc::SEND_MESSAGE, 0, ext), bodies.to_vec()));
    }
    // The batch as a message of its own carries WAIT and a unique key too (RocketMQ's
    // `MessageBatch`); its stored messages carry their own.
    put("a", t.group.into());
    put("b", t.topic.into());
    put("c", DEFAULT_TOPIC.into());
    put("d", "4".into());
    put("e", t.queue_id.to_string());
    put("f", "0".into());
    put("g", born_ms.to_string());
    put("h", "0".into());
    put("i", message_properties(producer, u64::MAX - seq0)?);
    put("j", "0".into());
    put("k", "false".into());
    put("m", "true".into());
    put("n", t.broker_name.into());
    let mut body = Vec::with_capacity(bodies.len() + n * (batch::ENTRY_FIXED_BYTES + 64));
    for (i, b) in bodies.chunks(size).enumerate() {
        let props = message_properties(producer, seq0 + i as u64)?;
        batch::encode(&mut body, 0, b, &props).map_err(|e| e.to_string())?;
    }
    Ok((Command::request(rc::SEND_BATCH_MESSAGE, 0, ext), body))
}

/// A send's answer: stored (durable or not), or why not.
pub fn read_answer(cmd: &Command, broker_name: &str) -> Result<Stored, Failed> {
    let durable = match cmd.code {
        response::SUCCESS => true,
        response::FLUSH_DISK_TIMEOUT
        | response::FLUSH_SLAVE_TIMEOUT
        | response::SLAVE_NOT_AVAILABLE => false,
        code => {
            return Err(Failed {
                kind: code_name(code),
                detail: cmd.remark.clone().unwrap_or_default(),
            })
        }
    };
    let num = |k: &str| -> Result<u64, Failed> {
        cmd.ext(k)
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| Failed {
                kind: "BadAnswer".into(),
                detail: format!("the send's answer has no {k}"),
            })
    };
    Ok(Stored {
        durable,
        broker_name: broker_name.to_string(),
        queue_id: u32::try_from(num("queueId")?).unwrap_or(u32::MAX),
        queue_offset: num("queueOffset")?,
    })
}

/// The name of a RocketMQ response code, for error counts.
pub fn code_name(code: i32) -> String {
    let name = match code {
        response::SYSTEM_ERROR => "SYSTEM_ERROR",
        response::SYSTEM_BUSY => "SYSTEM_BUSY",
        response::REQUEST_CODE_NOT_SUPPORTED => "REQUEST_CODE_NOT_SUPPORTED",
        response::MESSAGE_ILLEGAL => "MESSAGE_ILLEGAL",
        response::SERVICE_NOT_AVAILABLE => "SERVICE_NOT_AVAILABLE",
        response::NO_PERMISSION => "NO_PERMISSION",
        response::TOPIC_NOT_EXIST => "TOPIC_NOT_EXIST",
        response::SUBSCRIPTION_NOT_EXIST => "SUBSCRIPTION_NOT_EXIST",
        other => return format!("CODE_{other}"),
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringmq_client::wire::remoting::frame as rframe;

    const T: Target<'static> = Target {
        group: "g",
        topic: "T",
        broker_name: "b1",
        queue_id: 3,
    };

    #[test]
    fn one_message_is_send_message_with_long_names() {
        let (cmd, body) = request(&T, b"0123456789", 10, (0xAB, 5), 1_700_000).expect("builds");
        assert_eq!(cmd.code, rc::SEND_MESSAGE);
        assert_eq!(body, b"0123456789");
        assert_eq!(cmd.ext("producerGroup"), Some("g"));
        assert_eq!(cmd.ext("topic"), Some("T"));
        assert_eq!(cmd.ext("queueId"), Some("3"));
        assert_eq!(cmd.ext("bornTimestamp"), Some("1700000"));
        let props = cmd.ext("properties").expect("properties").as_bytes();
        assert_eq!(properties::get(props, WAIT), Some("true"));
        assert_eq!(
            properties::get(props, keys::UNIQ_KEY),
            Some("00000000000000AB0000000000000005")
        );
        // Both serializations carry it unchanged.
        for st in [SerializeType::Json, SerializeType::RocketMq] {
            let f = rframe::encode(&cmd, st, &body).expect("encodes");
            let p = rframe::parse(&f).expect("parses");
            assert_eq!(p.command, cmd);
            assert_eq!(p.body, &body[..]);
        }
    }

    #[test]
    fn a_batch_is_send_batch_message_with_short_names_and_batch_body() {
        let bodies: Vec<u8> = (0..3u8).flat_map(|i| [i; 8]).collect();
        let (cmd, body) = request(&T, &bodies, 8, (1, 100), 0).expect("builds");
        assert_eq!(cmd.code, rc::SEND_BATCH_MESSAGE);
        assert_eq!(
            (cmd.ext("a"), cmd.ext("b"), cmd.ext("e"), cmd.ext("m")),
            (Some("g"), Some("T"), Some("3"), Some("true"))
        );
        let msgs: Vec<_> = batch::iter(&body).map(|m| m.expect("valid")).collect();
        assert_eq!(msgs.len(), 3);
        for (i, m) in msgs.iter().enumerate() {
            assert_eq!(m.body, &[i as u8; 8]);
            let p = m.properties;
            assert_eq!(properties::get(p, WAIT), Some("true"));
            assert_eq!(
                properties::get(p, keys::UNIQ_KEY),
                Some(unique_key(1, 100 + i as u64).as_str())
            );
        }
        assert!(request(&T, &bodies, 7, (1, 0), 0).is_err());
        assert!(request(&T, &[], 8, (1, 0), 0).is_err());
    }

    #[test]
    fn answers_are_read() {
        let mut ok = Command::response(response::SUCCESS, 1, None);
        ok.ext_fields.insert("queueId", "3");
        ok.ext_fields.insert("queueOffset", "640");
        ok.ext_fields.insert("msgId", "7F0000010000");
        assert_eq!(
            read_answer(&ok, "b1"),
            Ok(Stored {
                durable: true,
                broker_name: "b1".into(),
                queue_id: 3,
                queue_offset: 640
            })
        );
        let mut late = ok.clone();
        late.code = response::FLUSH_DISK_TIMEOUT;
        assert!(!read_answer(&late, "b1").expect("stored").durable);
        let busy = Command::response(response::SYSTEM_BUSY, 1, Some("full".into()));
        let e = read_answer(&busy, "b1").expect_err("refused");
        assert_eq!(
            (e.kind.as_str(), e.detail.as_str()),
            ("SYSTEM_BUSY", "full")
        );
        let bare = Command::response(response::SUCCESS, 1, None);
        assert_eq!(
            read_answer(&bare, "b1").expect_err("no fields").kind,
            "BadAnswer"
        );
    }
}
