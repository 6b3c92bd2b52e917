//! Consumer offsets: where each queue's consumption resumes. Clustering groups keep them on
//! the broker that owns the queue (QUERY/UPDATE_CONSUMER_OFFSET), on the replica the
//! consumer reads from (the master, or a slave while the master is down: see `replica`);
//! broadcasting members keep their own in a local file, one line per queue:
//!
//! ```text
//! <topic> TAB <broker name> TAB <queue id> TAB <offset> LF
//! ```
//!
//! written to a temporary file and renamed over the old one, so a crash leaves the old or
//! the new file, never half of one. Topic and broker names cannot hold tabs or line feeds
//! (the broker's name rules).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::command::{
    QueryConsumerOffsetRequest, QueryConsumerOffsetResponse, UpdateConsumerOffsetRequest,
};

use super::replica::ReadPath;
use crate::error::{Error, Result};
use crate::instance::Instance;
use crate::net::Answer;
use crate::route::MessageQueue;

/// The committed offset an answer to QUERY_CONSUMER_OFFSET gives, `None` if the group never
/// committed one.
pub(crate) fn committed_offset_in(answer: Answer) -> Result<Option<u64>> {
    let answer = answer.expect(&[Status::Success, Status::QueryNotFound])?;
    if answer.status()? == Status::QueryNotFound {
        return Ok(None);
    }
    Ok(Some(
        answer
            .required_fields::<QueryConsumerOffsetResponse>()?
            .offset,
    ))
}

/// Where a group's offsets live.
#[derive(Debug)]
pub enum OffsetStore {
    Remote {
        inst: Arc<Instance>,
        reads: Arc<ReadPath>,
        group: String,
    },
    Local {
        path: PathBuf,
        map: Mutex<BTreeMap<MessageQueue, u64>>,
    },
}

impl OffsetStore {
    pub fn remote(inst: Arc<Instance>, reads: Arc<ReadPath>, group: &str) -> Self {
        OffsetStore::Remote {
            inst,
            reads,
            group: group.to_string(),
        }
    }

    /// Opens (or starts) the local file `path`.
    pub async fn local(path: PathBuf) -> Result<Self> {
        let map = match tokio::fs::read_to_string(&path).await {
            Ok(text) => parse(&text).map_err(|detail| Error::Io {
                what: format!("offset file {}", path.display()),
                source: std::io::Error::new(std::io::ErrorKind::InvalidData, detail),
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(source) => {
                return Err(Error::Io {
                    what: format!("reading {}", path.display()),
                    source,
                })
            }
        };
        Ok(OffsetStore::Local {
            path,
            map: Mutex::new(map),
        })
    }

    /// The committed offset of a queue, `None` if the group never committed one.
    pub async fn read(&self, mq: &MessageQueue) -> Result<Option<u64>> {
        match self {
            OffsetStore::Remote { inst, reads, group } => {
                let header = QueryConsumerOffsetRequest {
                    consumer_group: group.clone(),
                    topic: mq.topic.clone(),
                    queue_id: mq.queue_id,
                };
                let (answer, _) = reads
                    .call(
                        inst,
                        mq,
                        RequestCode::QueryConsumerOffset,
                        &header,
                        inst.cfg.request_timeout,
                    )
                    .await?;
                committed_offset_in(answer)
            }
            OffsetStore::Local { map, .. } => Ok(lock(map).get(mq).copied()),
        }
    }

    /// Commits a queue's offset: at once to the broker (the replica reads go to), or into
    /// the local map (written by [`OffsetStore::flush`]).
    pub async fn write(&self, mq: &MessageQueue, offset: u64) -> Result<()> {
        match self {
            OffsetStore::Remote { inst, reads, group } => {
                let header = UpdateConsumerOffsetRequest {
                    consumer_group: group.clone(),
                    topic: mq.topic.clone(),
                    queue_id: mq.queue_id,
                    offset,
                };
                let (answer, _) = reads
                    .call(
                        inst,
                        mq,
                        RequestCode::UpdateConsumerOffset,
                        &header,
                        inst.cfg.request_timeout,
                    )
                    .await?;
                answer.expect(&[Status::Success])?;
                Ok(())
            }
            OffsetStore::Local { map, .. } => {
                lock(map).insert(mq.clone(), offset);
                Ok(())
            }
        }
    }

    /// Writes the local file (no-op for broker-kept offsets).
    pub async fn flush(&self) -> Result<()> {
        let OffsetStore::Local { path, map } = self else {
            return Ok(());
        };
        let text = render(&lock(map));
        let tmp = path.with_extension("offsets.tmp");
        let io = |what: &str, source| Error::Io {
            what: format!("{what} {}", path.display()),
            source,
        };
        if let Some(dir) = path.parent() {
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(|e| io("creating the folder of", e))?;
        }
        let file = tokio::fs::File::create(&tmp)
            .await
            .map_err(|e| io("creating a temporary file for", e))?;
        let mut file = file;
        tokio::io::AsyncWriteExt::write_all(&mut file, text.as_bytes())
            .await
            .map_err(|e| io("writing", e))?;
        file.sync_all().await.map_err(|e| io("syncing", e))?;
        drop(file);
        tokio::fs::rename(&tmp, path)
            .await
            .map_err(|e| io("renaming over", e))?;
        Ok(())
    }
}

fn lock(
    map: &Mutex<BTreeMap<MessageQueue, u64>>,
) -> std::sync::MutexGuard<'_, BTreeMap<MessageQueue, u64>> {
    map.lock().unwrap_or_else(|p| p.into_inner())
}

fn render(map: &BTreeMap<MessageQueue, u64>) -> String {
    let mut out = String::new();
    for (mq, off) in map {
        out.push_str(&format!(
            "{}\t{}\t{}\t{off}\n",
            mq.topic, mq.broker_name, mq.queue_id
        ));
    }
    out
}

fn parse(text: &str) -> std::result::Result<BTreeMap<MessageQueue, u64>, String> {
    let mut map = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let parts: Vec<&str> = line.split('\t').collect();
        let [topic, broker, queue, offset] = parts[..] else {
            return Err(format!("line {}: expected 4 tab-separated fields", n + 1));
        };
        let queue: u32 = queue
            .parse()
            .map_err(|_| format!("line {}: bad queue id {queue:?}", n + 1))?;
        let offset: u64 = offset
            .parse()
            .map_err(|_| format!("line {}: bad offset {offset:?}", n + 1))?;
        map.insert(MessageQueue::new(topic, broker, queue), offset);
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_format_round_trip() {
        let mut m = BTreeMap::new();
        m.insert(MessageQueue::new("t", "broker-a", 3), 42);
        m.insert(MessageQueue::new("u", "broker-b", 0), 7);
        let text = render(&m);
        assert_eq!(text, "t\tbroker-a\t3\t42\nu\tbroker-b\t0\t7\n");
        assert_eq!(parse(&text).unwrap(), m);
        assert!(parse("t\tb\tx\t1\n").is_err());
        assert!(parse("t\tb\n").is_err());
    }

    #[tokio::test]
    async fn local_store_persists() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g").join("g.offsets");
        let s = OffsetStore::local(path.clone()).await.unwrap();
        let mq = MessageQueue::new("t", "b", 1);
        assert_eq!(s.read(&mq).await.unwrap(), None);
        s.write(&mq, 9).await.unwrap();
        s.flush().await.unwrap();
        let s2 = OffsetStore::local(path).await.unwrap();
        assert_eq!(s2.read(&mq).await.unwrap(), Some(9));
    }
}
