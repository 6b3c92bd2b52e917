//! Periodic work of a shard, on its loop: the ASYNC_FLUSH checkpoint (log fdatasync, then
//! ConsumeQueue files and their directories, then the checkpoint file: each step durable
//! before the next claims it), key index headers, consumer offsets, retention, counters.

use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::broker::offsets::OFFSET_PERSIST_INTERVAL_MS;
use crate::broker::shard::{flusher, Shard};
use crate::broker::Broker;
use crate::config::FlushDiskType;
use crate::io::clock;
use crate::io::node_disk::FileHandle;
use crate::io::rt;

/// How often a shard publishes its metrics view (`crate::metrics::shard`), ms.
pub const METRICS_PUBLISH_MS: u64 = 1_000;

/// Periodic work of a shard: ASYNC_FLUSH checkpoints, offset persistence, retention,
/// counters.
pub async fn run(shard: Rc<Shard>) {
    let mut flush_ms = shard.broker.live.flush_interval_commit_log_ms().max(1);
    let mut tick_ms = flush_ms.min(1000);
    let mut since_offsets = 0u64;
    let mut since_retention = 0u64;
    let mut since_checkpoint = 0u64;
    let mut since_metrics = 0u64;
    let mut offsets_due: Option<OffsetsDue> = None;
    loop {
        rt::sleep(Duration::from_millis(tick_ms)).await;
        if shard.broker.is_shutting_down() {
            return;
        }
        flush_ms = shard.broker.live.flush_interval_commit_log_ms().max(1);
        tick_ms = flush_ms.min(1000);
        since_checkpoint += tick_ms;
        let checkpoint_due = match shard.broker.rt.flush {
            FlushDiskType::AsyncFlush => since_checkpoint >= flush_ms,
            FlushDiskType::SyncFlush => since_checkpoint >= 1000,
        };
        if checkpoint_due {
            since_checkpoint = 0;
            // ASYNC_FLUSH's sync is waited for by no request: on the helper thread. Under
            // SYNC_FLUSH this one is a backstop behind the group commits, on the loop's ring.
            let background = shard.broker.rt.flush == FlushDiskType::AsyncFlush;
            let end = flusher::sync_log(&shard, background).await;
            shard.flusher.note_synced(end);
            if shard.broker.is_shutting_down() {
                // The stop sequence may have closed the store while the sync ran; it
                // checkpoints itself.
                return;
            }
            flush_index(&shard).await;
            if !checkpoint(&shard, end).await {
                return;
            }
        }
        since_offsets += tick_ms;
        if since_offsets >= OFFSET_PERSIST_INTERVAL_MS && offsets_due.is_none() {
            since_offsets = 0;
            offsets_due = take_offsets(&shard);
        }
        if offsets_due
            .as_ref()
            .is_some_and(|d| shard.flusher.synced() >= d.log_end)
        {
            if let Some(due) = offsets_due.take() {
                save_offsets(&shard, due).await;
            }
        }
        since_retention += tick_ms;
        if since_retention >= 10_000 {
            since_retention = 0;
            retention(&shard);
        }
        shard.index_in_steps().await;
        if shard.broker.is_shutting_down() {
            return;
        }
        update_counters(&shard);
        since_metrics += tick_ms;
        if since_metrics >= METRICS_PUBLISH_MS {
            since_metrics = 0;
            crate::broker::shard::metrics::publish(&shard);
        }
    }
}

/// The ASYNC_FLUSH checkpoint after the log is durable through `end`, its fdatasyncs on the
/// loop (they can take hundreds of ms while the disk writes back the log; the shard keeps
/// serving). False when the broker began stopping meanwhile (the stop sequence checkpoints
/// itself).
async fn checkpoint(shard: &Shard, end: u64) -> bool {
    let disk = shard.disk();
    // Files first, then the directories they were created in: both before the checkpoint.
    let (files, dirs): (Vec<std::io::Result<FileHandle>>, Vec<PathBuf>) = {
        let mut store = shard.store.borrow_mut();
        let (files, dirs) = match store.take_dirty_queue_files() {
            Ok(dirty) => dirty,
            Err(e) => crate::fail_stop(&format!(
                "shard {}: writing ConsumeQueue units before a checkpoint: {e}",
                shard.id
            )),
        };
        (
            files.into_iter().map(|f| disk.handle(f)).collect(),
            dirs.into_iter().map(|d| d.to_path_buf()).collect(),
        )
    };
    for f in files {
        let synced = match f {
            Ok(f) => disk.sync_file(&f).await,
            Err(e) => Err(e),
        };
        if let Err(e) = synced {
            crate::fail_stop(&format!(
                "shard {}: fdatasync of a ConsumeQueue: {e}",
                shard.id
            ));
        }
    }
    for d in dirs {
        if let Err(e) = disk.sync_dir_async(&d).await {
            crate::fail_stop(&format!(
                "shard {}: fsync of ConsumeQueue directory {}: {e}",
                shard.id,
                d.display()
            ));
        }
    }
    if shard.broker.is_shutting_down() {
        return false;
    }
    let written = {
        let mut store = shard.store.borrow_mut();
        store.write_checkpoint(end).and_then(|next| match next {
            Some(next) => disk
                .handle(store.checkpoint_file())
                .map(|f| Some((next, f)))
                .map_err(|e| crate::store::StoreError::io(std::path::Path::new("checkpoint"), e)),
            None => Ok(None),
        })
    };
    let (next, file) = match written {
        Ok(Some(w)) => w,
        Ok(None) => return true,
        Err(e) => crate::fail_stop(&format!("shard {}: checkpoint: {e}", shard.id)),
    };
    if let Err(e) = disk.sync_file(&file).await {
        crate::fail_stop(&format!(
            "shard {}: fdatasync of the checkpoint: {e}",
            shard.id
        ));
    }
    shard.store.borrow_mut().checkpoint_written(next);
    !shard.broker.is_shutting_down()
}

/// Key index headers, written now, fdatasynced on the loop (the index is rebuilt from the
/// log after a crash, so a failure is only logged).
async fn flush_index(shard: &Shard) {
    let Some(index) = &shard.index else { return };
    let disk = shard.disk();
    let files: Vec<FileHandle> = {
        let mut index = index.borrow_mut();
        match index.write_headers() {
            Ok(files) => files
                .into_iter()
                .filter_map(|f| disk.handle(f).ok())
                .collect(),
            Err(e) => {
                log::warn!("shard {}: key index flush: {e}", shard.id);
                return;
            }
        }
    };
    for f in files {
        if let Err(e) = disk.sync_file(&f).await {
            log::warn!("shard {}: key index fdatasync: {e}", shard.id);
        }
    }
}

/// Consumer offsets to disk on a helper thread (write, fsync, rename, directory fsync).
/// Consumer offsets taken to be written once the log is durable through `log_end`.
struct OffsetsDue {
    /// What rooms do once the offsets are saved, taken before them
    /// ([`Room::offsets_saving`](super::hooks::Room::offsets_saving): the POP watermark).
    after: Vec<super::hooks::Later>,
    /// The changed offsets' file and bytes (`None`: unchanged, only the watermark moves).
    file: Option<(PathBuf, Vec<u8>)>,
    log_end: u64,
}

/// Takes the consumer offsets that changed (and, before them, what rooms save after them). A POP
/// consumer's offset moves with a record in the log (a checkpoint, a position): they are
/// written only once the log is durable through every record appended before this snapshot
/// (the periodic checkpoint's sync under ASYNC_FLUSH, a group commit under SYNC_FLUSH), so
/// the file never claims a position whose record a crash (a power loss under either flush
/// mode) could take back. Nothing here makes a sync of its own.
fn take_offsets(shard: &Rc<Shard>) -> Option<OffsetsDue> {
    let after = shard.offsets_saving();
    let snapshot = shard.offsets.borrow_mut().snapshot();
    let log_end = shard.store.borrow().write_offset();
    let file = match snapshot {
        Ok(file) => file,
        Err(e) => {
            log::warn!("shard {}: saving consumer offsets: {e}", shard.id);
            return None;
        }
    };
    Some(OffsetsDue {
        after,
        file,
        log_end,
    })
}

/// Writes what [`take_offsets`] took, the offsets before the watermark.
async fn save_offsets(shard: &Shard, due: OffsetsDue) {
    if let Some((path, bytes)) = due.file {
        let res =
            rt::blocking(move || crate::broker::topics::write_atomically(&path, &bytes)).await;
        let failed = match res {
            Some(Ok(())) => None,
            Some(Err(e)) => Some(e.to_string()),
            None => Some("the writer thread panicked".to_string()),
        };
        if let Some(e) = failed {
            log::warn!("shard {}: saving consumer offsets: {e}", shard.id);
            shard.offsets.borrow_mut().mark_dirty();
            return;
        }
    }
    for later in due.after {
        later.await;
    }
}

fn retention(shard: &Shard) {
    let live = &shard.broker.live;
    let now = Broker::now_ms();
    let used = shard.store.borrow().disk_used_ratio().unwrap_or(0.0) * 100.0;
    let pressure = used > f64::from(live.disk_max_used_space_ratio());
    let forced =
        live.clean_file_forcibly() && used > f64::from(live.disk_space_clean_forcibly_ratio());
    let hour_due = live.delete_when_hours().contains(&clock::local_hour(now));
    if !(hour_due || pressure) {
        return;
    }
    let reserved_ms = i64::from(live.file_reserved_time_hours()) * 3_600_000;
    let res = shard
        .store
        .borrow_mut()
        .remove_expired(now, reserved_ms, forced, 10);
    match res {
        Ok(out) if out.removed_segments > 0 => {
            shard.forget_files();
            log::info!(
                "shard {}: retention removed {} segment(s), {} bytes (disk {used:.1}% used{})",
                shard.id,
                out.removed_segments,
                out.removed_bytes,
                if forced { ", forced" } else { "" }
            );
        }
        Ok(_) => {}
        Err(e) if e.is_fatal() => crate::fail_stop(&format!("shard {}: retention: {e}", shard.id)),
        Err(e) => log::warn!("shard {}: retention: {e}", shard.id),
    }
}

fn update_counters(shard: &Shard) {
    let store = shard.store.borrow();
    let c = shard.counters();
    let now = clock::Instant::now();
    let (msgs_in, msgs_out) = (
        c.msgs_in.load(Ordering::Relaxed),
        c.msgs_out.load(Ordering::Relaxed),
    );
    match shard.rate_sample.get() {
        Some((i, o, at)) if now.duration_since(at).as_millis() >= 1000 => {
            let secs = now.duration_since(at).as_secs_f64();
            c.msgs_in_per_s
                .store(((msgs_in - i) as f64 / secs) as u64, Ordering::Relaxed);
            c.msgs_out_per_s
                .store(((msgs_out - o) as f64 / secs) as u64, Ordering::Relaxed);
            shard.rate_sample.set(Some((msgs_in, msgs_out, now)));
        }
        Some(_) => {}
        None => shard.rate_sample.set(Some((msgs_in, msgs_out, now))),
    }
    c.store_bytes
        .store(store.log_disk_bytes(), Ordering::Relaxed);
    c.min_offset.store(store.min_offset(), Ordering::Relaxed);
    c.max_offset.store(store.write_offset(), Ordering::Relaxed);
    c.queues
        .store(store.queues().len() as u32, Ordering::Relaxed);
    let end = store.write_offset();
    if shard.broker.is_master() {
        let replicas = shard.replicas.borrow();
        c.ha_slaves.store(replicas.len() as u32, Ordering::Relaxed);
        let (bytes, ms) = replicas.lag(end, Broker::now_ms()).unwrap_or((0, 0));
        c.ha_lag_bytes.store(bytes, Ordering::Relaxed);
        c.ha_lag_ms.store(ms as u64, Ordering::Relaxed);
    } else {
        c.ha_lag_bytes.store(
            shard.master_end.get().saturating_sub(end),
            Ordering::Relaxed,
        );
    }
}
