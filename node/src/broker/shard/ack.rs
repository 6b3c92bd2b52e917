//! Acknowledging what a shard stored, by the durability promise: the flush policy
//! (SYNC_FLUSH waits for the group-commit fdatasync that covers the record) and the
//! replication policy (SYNC_MASTER waits for a slave, or in controller mode for the
//! SyncStateSet). Part of the shard core: every feature that stores something (a send, a POP
//! checkpoint or ack, a recall, a transaction's end) answers through [`acknowledge`], so no
//! answer says "stored" before the promise holds.

use std::rc::Rc;
use std::time::Duration;

use ringmq_wire::code::Status;

use crate::broker::shard::Shard;
use crate::config::{BrokerRole, FlushDiskType};
use crate::ha::master::SyncDecision;
use crate::io::rt;
use crate::net::reply::{Outcome, Reply};

/// Acknowledges what was appended up to `end` by the flush and replication policy, with
/// `fields` in every answer that says it is stored: at once for ASYNC_FLUSH on a master
/// without SYNC_MASTER; after the fdatasync (FLUSH_DISK_TIMEOUT past `syncFlushTimeout`);
/// after a slave has it under SYNC_MASTER (SLAVE_NOT_AVAILABLE, FLUSH_SLAVE_TIMEOUT).
pub fn acknowledge<T: ringmq_wire::codec::Encode + 'static>(
    shard: &Rc<Shard>,
    end: u64,
    fields: T,
) -> Outcome {
    let broker = &shard.broker;
    let sync_disk = broker.rt.flush == FlushDiskType::SyncFlush;
    let sync_slave = broker.effective_role() == BrokerRole::SyncMaster;
    if !sync_disk && !sync_slave {
        return Reply::ok(fields).into();
    }
    let shard = Rc::clone(shard);
    let timeout = Duration::from_millis(broker.live.sync_flush_timeout_ms());
    let epoch = shard.serving_epoch.get();
    Outcome::later(async move {
        let planted_early = crate::planted::is(crate::planted::Bug::AckBeforeFsync);
        if sync_disk && !planted_early && !shard.flusher.wait_synced(end, timeout).await {
            return Reply::status_fields(
                Status::FlushDiskTimeout,
                format!(
                    "stored, but fdatasync did not complete within {} ms",
                    timeout.as_millis()
                ),
                fields,
            );
        }
        if sync_slave {
            return wait_slave(&shard, end, timeout, epoch, fields).await;
        }
        ok_if_master(&shard, epoch, fields)
    })
}

/// After a wait (fdatasync, slaves), controller mode: the answer is OK only while this
/// broker still serves `epoch` (the one it stored in) within its lease; a lease that ran out
/// during the wait means the controllers may already have replaced it, so the record stays
/// stored but unacknowledged (the client retries at the new master). Found by the failover
/// simulation: a master cut off from the controllers acknowledged after a slow fdatasync,
/// once a new master was elected.
fn ok_if_master<T: ringmq_wire::codec::Encode>(shard: &Shard, epoch: u32, fields: T) -> Reply {
    if shard.broker.config.controller.enable {
        if let Some((status, why)) = shard.broker.write_refusal(epoch) {
            return Reply::status_fields(
                status,
                format!("stored, not acknowledged: {why}"),
                fields,
            );
        }
    }
    Reply::ok(fields)
}

/// SYNC_MASTER: OK only once a slave has the record; SLAVE_NOT_AVAILABLE when none is
/// connected (or close enough), FLUSH_SLAVE_TIMEOUT when none acknowledged in time. The record
/// stays stored on the master either way: never a false OK.
async fn wait_slave<T: ringmq_wire::codec::Encode>(
    shard: &Rc<Shard>,
    end: u64,
    timeout: Duration,
    epoch: u32,
    resp: T,
) -> Reply {
    if crate::planted::is(crate::planted::Bug::AckBeforeSlave) {
        return Reply::ok(resp);
    }
    let max_gap = shard.broker.config.ha_max_gap_not_in_sync_bytes;
    let controller_mode = shard.broker.config.controller.enable;
    let wait = async {
        loop {
            let listener = shard.ha_acked.listen();
            let log_end = shard.store.borrow().write_offset();
            let decision = if controller_mode {
                controller_sync_decision(shard, end)
            } else {
                shard.replicas.borrow().sync_decision(end, log_end, max_gap)
            };
            match decision {
                SyncDecision::Acked => return Ok(()),
                SyncDecision::NotAvailable => return Err(()),
                SyncDecision::Wait => {}
            }
            listener.await;
        }
    };
    match rt::timeout(timeout, wait).await {
        Some(Ok(())) => ok_if_master(shard, epoch, resp),
        Some(Err(())) => Reply::status_fields(
            Status::SlaveNotAvailable,
            "stored on the master; no slave is connected or in sync",
            resp,
        ),
        None => Reply::status_fields(
            Status::FlushSlaveTimeout,
            format!(
                "stored on the master; no slave acknowledged within {} ms",
                timeout.as_millis()
            ),
            resp,
        ),
    }
}

/// Controller mode, SYNC_MASTER: may a send ending at `end` be acknowledged. With
/// `allAckInSyncStateSet`, once every other member of the SyncStateSet and every slave
/// joining it has it; otherwise once `minInSyncReplicas - 1` members do. A member without a
/// link counts with what it acknowledged last.
fn controller_sync_decision(shard: &Shard, end: u64) -> crate::ha::master::SyncDecision {
    use crate::ha::master::SyncDecision;
    let b = &shard.broker;
    let cfg = &b.config.controller;
    let me = b.config.broker_id;
    let Some((members, _)) = b.role.sync_state_set() else {
        return SyncDecision::NotAvailable;
    };
    let replicas = shard.replicas.borrow();
    if cfg.all_ack_in_sync_state_set {
        let waited = if crate::planted::is(crate::planted::Bug::JoinUnfenced) {
            members.into_iter().filter(|m| *m != me).collect()
        } else {
            b.role.waited_on(me).unwrap_or_default()
        };
        if replicas.all_acked(&waited, end) {
            SyncDecision::Acked
        } else {
            SyncDecision::Wait
        }
    } else {
        let others: Vec<u64> = members.into_iter().filter(|m| *m != me).collect();
        let need = (cfg.min_in_sync_replicas as usize).saturating_sub(1);
        let have = others
            .iter()
            .filter(|id| {
                replicas
                    .iter()
                    .any(|r| r.broker_id == **id && r.acked >= end)
            })
            .count();
        if have >= need {
            SyncDecision::Acked
        } else if others.len() < need {
            SyncDecision::NotAvailable
        } else {
            SyncDecision::Wait
        }
    }
}

/// A duration in whole µs (saturating).
pub fn micros(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// A SYNC_MASTER send in controller mode is refused before it is stored while the
/// SyncStateSet is smaller than `minInSyncReplicas`; why, if so.
pub fn too_few_in_sync(b: &crate::broker::Broker) -> Option<String> {
    let cfg = &b.config.controller;
    if !cfg.enable || b.effective_role() != crate::config::BrokerRole::SyncMaster {
        return None;
    }
    let (members, _) = b.role.sync_state_set()?;
    (members.len() < cfg.min_in_sync_replicas as usize).then(|| {
        format!(
            "the SyncStateSet {members:?} has fewer than minInSyncReplicas={} members; nothing stored",
            cfg.min_in_sync_replicas
        )
    })
}

/// A master's confirmOffset on this shard (controller mode): what every other member of the
/// SyncStateSet, and every slave waiting to join it, has acknowledged; no cap while the
/// SyncStateSet is this master alone and no slave is joining (no clean election could pick a
/// broker without those records). When a cap begins it starts at the log end (consumers may
/// have read that far), and it never moves back.
pub fn update_confirm(shard: &Shard) {
    let b = &shard.broker;
    if !b.config.controller.enable || !b.is_master() || shard.serving_epoch.get() == 0 {
        return;
    }
    let Some(others) = b.role.waited_on(b.config.broker_id) else {
        return;
    };
    if others.is_empty() {
        shard.set_confirm(None);
        return;
    }
    let end = shard.store.borrow().write_offset();
    if shard.confirm.get().is_none() {
        shard.set_confirm(Some(end));
    }
    let confirm = shard.replicas.borrow().confirm_offset(&others, end);
    if let Some(c) = confirm {
        shard.advance_confirm(c);
    }
}
