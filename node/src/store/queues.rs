//! Opening the ConsumeQueues of a shard's store: those under `consumequeue/` whose records
//! live in this shard's log, one on first use, and re-dispatching a recovered record into
//! its queue.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use ringmq_wire::record::RecordView;

use super::commitlog::shard_of_offset;
use super::consume_queue::{ConsumeQueue, CqUnit};
use super::disk::Disk;
use super::error::{Result, StoreError};
use super::StoreConfig;

fn queue_dir(root: &Path, topic: &str, queue_id: u32) -> PathBuf {
    root.join("consumequeue")
        .join(topic)
        .join(queue_id.to_string())
}

/// Opens the ConsumeQueues under `consumequeue/` whose records live in this shard's log.
pub(super) fn open_owned_queues<D: Disk + Clone>(
    disk: &D,
    cfg: &StoreConfig,
) -> Result<HashMap<String, BTreeMap<u32, ConsumeQueue<D>>>> {
    let mut queues: HashMap<String, BTreeMap<u32, ConsumeQueue<D>>> = HashMap::new();
    let cq_root = cfg.root.join("consumequeue");
    if !disk.exists(&cq_root) {
        return Ok(queues);
    }
    for topic in disk
        .list_dir(&cq_root)
        .map_err(|e| StoreError::io(&cq_root, e))?
    {
        let tdir = cq_root.join(&topic);
        for q in disk.list_dir(&tdir).map_err(|e| StoreError::io(&tdir, e))? {
            let Ok(queue_id) = q.parse::<u32>() else {
                continue;
            };
            let dir = tdir.join(&q);
            let cq = ConsumeQueue::open(disk, &dir, cfg.cq_units_per_file)?;
            let owned =
                matches!(cq.first_physical_offset()?, Some(p) if shard_of_offset(p) == cfg.shard);
            if owned {
                queues
                    .entry(topic.clone())
                    .or_default()
                    .insert(queue_id, cq);
            }
        }
    }
    Ok(queues)
}

pub(super) fn open_queue<'a, D: Disk + Clone>(
    disk: &D,
    root: &Path,
    units_per_file: u64,
    queues: &'a mut HashMap<String, BTreeMap<u32, ConsumeQueue<D>>>,
    topic: &str,
    queue_id: u32,
) -> Result<&'a mut ConsumeQueue<D>> {
    if !queues.contains_key(topic) {
        queues.insert(topic.to_string(), BTreeMap::new());
    }
    let qs = queues
        .get_mut(topic)
        .expect("inserted just above when missing");
    if let std::collections::btree_map::Entry::Vacant(slot) = qs.entry(queue_id) {
        let cq = ConsumeQueue::open(disk, &queue_dir(root, topic, queue_id), units_per_file)?;
        slot.insert(cq);
    }
    Ok(qs.get_mut(&queue_id).expect("present after insert"))
}

pub(super) fn redispatch<D: Disk + Clone>(
    disk: &D,
    root: &Path,
    units_per_file: u64,
    queues: &mut HashMap<String, BTreeMap<u32, ConsumeQueue<D>>>,
    rec: &RecordView<'_>,
) -> Result<()> {
    let cq = open_queue(disk, root, units_per_file, queues, rec.topic, rec.queue_id)?;
    cq.put_at(
        rec.queue_offset,
        CqUnit {
            physical_offset: rec.physical_offset,
            size: rec.len() as u32,
            tag_hash: ringmq_wire::schedule::cq_tag(rec),
        },
    )
}
