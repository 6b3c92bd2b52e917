//! Controller mode on the broker (`enableControllerMode=true`): the broker's role comes
//! from the controllers, not from `brokerRole`.
//!
//! - **Heartbeats** ([`heartbeat_loop`], shard 0): every `brokerHeartbeatInterval` the broker
//!   tells the leader controller it is alive, its newest master epoch and how much log it
//!   holds, over one persistent connection (a dead broker's link closes at once). The answer
//!   is its set's state; the broker takes its role from it ([`apply`]).
//! - **Lease**: a master may acknowledge writes only while its last heartbeat answer is
//!   younger than three quarters of `controllerHeartBeatTimeoutMills` (the controllers wait
//!   the whole timeout before replacing it), and not at all once a heartbeat failed until
//!   one succeeds again: a master cut off from the controllers stops taking writes before a
//!   new master can be elected.
//! - **Promotion** (per shard, [`role_watch`]): the shard stops following (its follow task
//!   checks the role before every append), records the new epoch at its log end in its
//!   store, starts the master-only services (schedule, transaction checks, POP revive), and
//!   only then takes writes in that epoch. **Demotion**: the services stop, writes are
//!   refused with NOT_MASTER, and the shard follows the new master, which tells it where to
//!   truncate by comparing epochs.
//! - **SyncStateSet** (master, [`sync_state_set_loop`]): a slave whose every shard has been
//!   caught up within `haMaxTimeSlaveNotCatchup` joins; one that lost a link or fell behind
//!   leaves; each change goes to the controller (CONTROLLER_ALTER_SYNC_STATE_SET), fenced by
//!   the master and SyncStateSet epochs.

use std::collections::BTreeSet;
use std::net::{SocketAddr, ToSocketAddrs};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::Decode;
use ringmq_wire::command::{
    AlterSyncStateSet, ControllerHeartbeat, NotLeader, ReplicaSet, Response,
};

use crate::broker::role::{mono_ms, Proposal, SlaveShard};
use crate::broker::shard::ack::update_confirm;
use crate::broker::shard::Shard;
use crate::broker::{Broker, MasterAddrs};
use crate::controller::link::Link;
use crate::io::rt;
use crate::store::commitlog::shard_base;

/// How long a call to a controller may take.
pub const CALL_MS: u64 = 1_000;
/// How often a master re-evaluates its SyncStateSet.
pub const SYNC_STATE_SET_MS: u64 = 100;

fn resolve(addrs: &[String]) -> Vec<SocketAddr> {
    addrs
        .iter()
        .filter_map(|a| a.to_socket_addrs().ok().and_then(|mut i| i.next()))
        .collect()
}

/// Shard 0: heartbeats the leader controller and applies its answers, until shutdown.
pub async fn heartbeat_loop(shard: Rc<Shard>) {
    let b = Rc::clone(&shard);
    let cfg = &b.broker.config.controller;
    let controllers = resolve(&cfg.addrs);
    if controllers.is_empty() {
        crate::fail_stop("controllerAddr: no address resolves");
    }
    let links: Vec<Link> = controllers
        .iter()
        .map(|a| Link::new(*a, "ringmq-broker"))
        .collect();
    let mut current = 0usize;
    let interval = Duration::from_millis(cfg.heartbeat_interval_ms);
    let mut last_error = String::new();
    while !shard.broker.is_shutting_down() {
        let sent_at = mono_ms();
        let hb = heartbeat(&shard);
        let mut answered = None;
        // Try the current controller, follow a redirect, then the others in turn.
        for attempt in 0..links.len() * 2 {
            let link = &links[current];
            match link
                .call(
                    RequestCode::ControllerBrokerHeartbeat,
                    &hb,
                    &[],
                    Duration::from_millis(CALL_MS),
                )
                .await
            {
                Ok((Status::Success, header, _)) => match Response::<ReplicaSet>::decode(&header) {
                    Ok(Response {
                        fields: Some(set), ..
                    }) => {
                        answered = Some(set);
                        break;
                    }
                    _ => last_error = "a heartbeat answer without the set".into(),
                },
                Ok((Status::ControllerNotLeader, header, _)) => {
                    let hint = Response::<NotLeader>::decode(&header)
                        .ok()
                        .and_then(|r| r.fields)
                        .and_then(|f| f.leader_addr);
                    link.close();
                    current = match hint.and_then(|h| controllers.iter().position(|a| *a == h)) {
                        Some(i) if i != current => i,
                        _ => (current + 1) % links.len(),
                    };
                    if hint.is_none() && attempt + 1 >= links.len() {
                        // No leader elected yet: wait a moment instead of spinning.
                        rt::sleep(Duration::from_millis(50)).await;
                    }
                }
                // A refusal (the set is electing) or a broken link (the leader may take it
                // for this broker's death): fenced at once, not when the lease runs out.
                Ok((status, header, _)) => {
                    shard.broker.role.lease_until_ms.store(0, Ordering::Release);
                    let remark = ringmq_wire::command::read_remark(&header)
                        .map(|(r, _)| r.to_string())
                        .unwrap_or_default();
                    last_error = format!("{}: {remark}", status.name());
                    current = (current + 1) % links.len();
                }
                Err(e) => {
                    shard.broker.role.lease_until_ms.store(0, Ordering::Release);
                    last_error = e;
                    current = (current + 1) % links.len();
                }
            }
        }
        match answered {
            Some(set) => {
                let lease = shard.broker.config.controller.heartbeat_timeout_ms * 3 / 4;
                apply(&shard, set, sent_at + lease);
                last_error.clear();
                rt::sleep(interval).await;
            }
            None => {
                // Fenced until a controller answers again.
                shard.broker.role.lease_until_ms.store(0, Ordering::Release);
                if !last_error.is_empty() {
                    log::warn!("controller heartbeat: {last_error}");
                }
                rt::sleep(Duration::from_millis(50).min(interval)).await;
            }
        }
    }
}

/// This broker's heartbeat (its log size summed over shards from the published counters).
fn heartbeat(shard: &Shard) -> ControllerHeartbeat {
    let b = &shard.broker;
    let log_bytes = b
        .counters
        .iter()
        .enumerate()
        .map(|(i, c)| {
            c.max_offset
                .load(Ordering::Relaxed)
                .saturating_sub(shard_base(i as u16))
        })
        .sum();
    ControllerHeartbeat {
        cluster: b.config.broker_cluster_name.clone(),
        broker_name: b.config.broker_name.clone(),
        broker_id: b.config.broker_id,
        broker_addr: b.addr,
        ha_addr: b.ha_addr,
        epoch: b.store_epoch.load(Ordering::Acquire),
        log_bytes,
        election_priority: b.config.controller.election_priority,
        serving_epoch: b.role.serving_epoch.load(Ordering::Acquire),
        heartbeat_timeout_ms: b.config.controller.heartbeat_timeout_ms,
    }
}

/// Takes the role the controllers' answer gives this broker.
fn apply(shard: &Shard, set: ReplicaSet, lease_until: u64) {
    let b = &shard.broker;
    let me = b.config.broker_id;
    let role = &b.role;
    let was_master = role.master.load(Ordering::Acquire);
    let serving = role.serving_epoch.load(Ordering::Acquire);
    let master = set.master();
    let mut changed = false;
    {
        let mut m = b.master.lock().unwrap_or_else(|p| p.into_inner());
        let addrs = MasterAddrs {
            broker: master.map(|m| m.broker_addr),
            ha: master.and_then(|m| m.ha_addr),
        };
        if m.broker != addrs.broker || m.ha != addrs.ha {
            *m = addrs;
            changed = true;
        }
    }
    if set.master_id == Some(me) {
        if !was_master || serving != set.master_epoch {
            log::warn!(
                "controller: this broker ({} id {me}) is master of epoch {} (SyncStateSet {:?})",
                set.broker_name,
                set.master_epoch,
                set.sync_state_set
            );
            role.serving_epoch
                .store(set.master_epoch, Ordering::Release);
            role.master.store(true, Ordering::Release);
            changed = true;
        }
        role.lease_until_ms.store(lease_until, Ordering::Release);
    } else if was_master {
        log::warn!(
            "controller: this broker ({} id {me}) is no longer master: {} is, epoch {}",
            set.broker_name,
            set.master_id
                .map_or("no broker".to_string(), |m| format!("broker {m}")),
            set.master_epoch
        );
        role.master.store(false, Ordering::Release);
        role.serving_epoch.store(0, Ordering::Release);
        role.lease_until_ms.store(0, Ordering::Release);
        changed = true;
    }
    *role.set.lock().unwrap_or_else(|p| p.into_inner()) = Some(set);
    if changed {
        role.changed.notify(usize::MAX);
        // Routes follow at once: register the new role with the name servers now.
        b.topics_changed.notify(usize::MAX);
    }
}

/// Every shard: reacts to role changes (see the module docs), and publishes its slaves'
/// replication for the SyncStateSet decision.
pub async fn role_watch(shard: Rc<Shard>) {
    let b = Rc::clone(&shard);
    let mut running: Option<u32> = None;
    // Until a master's transfers say what its SyncStateSet confirmed (or this broker becomes
    // master), consumers read nothing here: a tail this broker wrote as an earlier master may
    // be cut when it follows the new one.
    shard.set_confirm(Some(0));
    while !b.broker.is_shutting_down() {
        let listener = b.broker.role.changed.listen();
        let master = b.broker.role.master.load(Ordering::Acquire);
        let epoch = b.broker.role.serving_epoch.load(Ordering::Acquire);
        if master && epoch > 0 && running != Some(epoch) {
            if let Err(e) = promote(&shard, epoch) {
                crate::fail_stop(&format!(
                    "shard {}: becoming master of epoch {epoch}: {e}",
                    shard.id
                ));
            }
            running = Some(epoch);
        } else if !master && running.is_some() {
            shard.serving_epoch.set(0);
            shard.leave_master();
            // The read cap stays: until the new master's transfers replace it, nothing past
            // what the SyncStateSet confirmed is served (the tail may be cut when this
            // broker follows).
            running = None;
            log::info!("shard {}: following the new master", shard.id);
        }
        publish_slaves(&shard);
        update_confirm(&shard);
        let _ = rt::timeout(Duration::from_millis(SYNC_STATE_SET_MS), listener).await;
    }
}

/// Becomes master of `epoch` on this shard: the epoch at the log end, the master services.
fn promote(shard: &Rc<Shard>, epoch: u32) -> Result<(), String> {
    {
        let mut store = shard.store.borrow_mut();
        store.begin_epoch(epoch).map_err(|e| e.to_string())?;
        shard.broker.store_epoch.fetch_max(epoch, Ordering::AcqRel);
        log::info!(
            "shard {}: master of epoch {epoch} from log offset {}",
            shard.id,
            store.write_offset()
        );
    }
    shard.become_master()?;
    shard.serving_epoch.set(epoch);
    Ok(())
}

/// Publishes this shard's slaves (acked offsets, when each last had everything).
fn publish_slaves(shard: &Shard) {
    let b = &shard.broker;
    if !b.is_master() {
        return;
    }
    let now = mono_ms();
    let end = shard.store.borrow().write_offset();
    let read_cap = shard.confirm.get().unwrap_or(end);
    let replicas = shard.replicas.borrow();
    let mut slaves = b.role.slaves.lock().unwrap_or_else(|p| p.into_inner());
    for v in slaves.values_mut() {
        if let Some(s) = v.get_mut(usize::from(shard.id)) {
            *s = None;
        }
    }
    // The join fences: from the first time this shard sees a slave joining, its
    // acknowledgements wait for it (`sync_decision` reads `joining` each time), so all this
    // shard acknowledged without it ends at or below the log end of that moment.
    let mut fences = shard.join_fence.borrow_mut();
    {
        let joining = b.role.joining.lock().unwrap_or_else(|p| p.into_inner());
        fences.retain(|id, _| joining.contains(id));
        for id in joining.iter() {
            fences.entry(*id).or_insert(end);
        }
    }
    let wall = Broker::now_ms();
    for r in replicas.iter() {
        let v = slaves
            .entry(r.broker_id)
            .or_insert_with(|| vec![None; usize::from(b.shard_count)]);
        let at = if r.acked >= end {
            Some(now)
        } else {
            r.had_all_ms
                .map(|t| now.saturating_sub((wall - t).max(0) as u64))
        };
        if let Some(s) = v.get_mut(usize::from(shard.id)) {
            *s = Some(SlaveShard {
                acked: r.acked,
                caught_up_at_ms: at,
                covers_reads: r.acked >= read_cap,
                covers_acks: fences.get(&r.broker_id).is_some_and(|f| r.acked >= *f),
            });
        }
    }
}

/// Shard 0 of a master: keeps the SyncStateSet to the slaves that are in sync.
pub async fn sync_state_set_loop(shard: Rc<Shard>) {
    let b = Rc::clone(&shard);
    let controllers = resolve(&b.broker.config.controller.addrs);
    let links: Vec<Link> = controllers
        .iter()
        .map(|a| Link::new(*a, "ringmq-broker"))
        .collect();
    let mut current = 0usize;
    while !b.broker.is_shutting_down() {
        rt::sleep(Duration::from_millis(SYNC_STATE_SET_MS)).await;
        let broker = &b.broker;
        if !broker.is_master() || links.is_empty() {
            continue;
        }
        let Some(set) = broker
            .role
            .set
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
        else {
            continue;
        };
        let me = broker.config.broker_id;
        if set.master_id != Some(me) {
            continue;
        }
        let have: BTreeSet<u64> = set.sync_state_set.iter().copied().collect();
        // A proposal is settled once a newer SyncStateSet epoch is known: that state says
        // whether it was applied.
        let pending: BTreeSet<u64> = {
            let mut p = broker
                .role
                .proposed
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if p.as_ref()
                .is_some_and(|p| set.sync_state_set_epoch > p.epoch)
            {
                *p = None;
            }
            p.as_ref()
                .map(|p| p.added.difference(&have).copied().collect())
                .unwrap_or_default()
        };
        let (want, candidates) = in_sync(broker, &set, &have);
        let joining: BTreeSet<u64> = candidates.union(&pending).copied().collect();
        *broker
            .role
            .joining
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = joining.iter().copied().collect();
        // With a proposal unsettled, a change is sent even if `want` is the set as known
        // (it settles it: it is applied, or refused because the proposal was).
        if want == have && pending.is_empty() {
            continue;
        }
        let added: BTreeSet<u64> = want.difference(&have).copied().collect();
        if !added.is_empty() {
            let mut p = broker
                .role
                .proposed
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let mut all = added;
            all.extend(pending.iter().copied());
            *p = Some(Proposal {
                epoch: set.sync_state_set_epoch,
                added: all,
            });
        }
        let req = AlterSyncStateSet {
            cluster: set.cluster.clone(),
            broker_name: set.broker_name.clone(),
            master_id: me,
            master_epoch: set.master_epoch,
            sync_state_set_epoch: set.sync_state_set_epoch,
            new_set: want.iter().copied().collect(),
        };
        for _ in 0..links.len() {
            let answer = links[current]
                .call(
                    RequestCode::ControllerAlterSyncStateSet,
                    &req,
                    &[],
                    Duration::from_millis(CALL_MS),
                )
                .await;
            match answer {
                Ok((Status::Success, header, _)) => {
                    if let Ok(Response {
                        fields: Some(new), ..
                    }) = Response::<ReplicaSet>::decode(&header)
                    {
                        log::info!(
                            "{}: SyncStateSet {:?} -> {:?} (epoch {})",
                            new.broker_name,
                            have,
                            new.sync_state_set,
                            new.sync_state_set_epoch
                        );
                        let mut s = broker.role.set.lock().unwrap_or_else(|p| p.into_inner());
                        if s.as_ref()
                            .is_some_and(|s| s.master_epoch == new.master_epoch)
                        {
                            *s = Some(new);
                        }
                    }
                    break;
                }
                Ok((Status::ControllerNotLeader, header, _)) => {
                    let hint = Response::<NotLeader>::decode(&header)
                        .ok()
                        .and_then(|r| r.fields)
                        .and_then(|f| f.leader_addr);
                    current = hint
                        .and_then(|h| controllers.iter().position(|a| *a == h))
                        .unwrap_or((current + 1) % links.len());
                }
                Ok((status, header, _)) => {
                    let remark = ringmq_wire::command::read_remark(&header)
                        .map(|(r, _)| r.to_string())
                        .unwrap_or_default();
                    log::info!("SyncStateSet change refused: {}: {remark}", status.name());
                    break;
                }
                Err(_) => current = (current + 1) % links.len(),
            }
        }
    }
}

/// The members that should be in the SyncStateSet now: this master, and every member whose
/// every shard has a link that had everything within `haMaxTimeSlaveNotCatchup`. A member
/// not yet in it first joins [`RoleState::joining`] (acknowledgements and the read cap wait
/// for it from then on) and enters only once, on every shard, it holds every byte consumers
/// may have read and everything acknowledged before they waited for it (RocketMQ's "slave
/// offset >= confirmOffset"): electing it never takes back a delivered or acknowledged
/// record. Also the members in sync but not in the set (those joining, and those entering).
fn in_sync(b: &Broker, set: &ReplicaSet, have: &BTreeSet<u64>) -> (BTreeSet<u64>, BTreeSet<u64>) {
    let me = b.config.broker_id;
    let now = mono_ms();
    let window = b.config.controller.ha_max_time_slave_not_catchup_ms;
    let slaves = b.role.slaves.lock().unwrap_or_else(|p| p.into_inner());
    let mut out = BTreeSet::from([me]);
    let mut candidates = BTreeSet::new();
    for m in &set.members {
        if m.broker_id == me {
            continue;
        }
        let Some(shards) = slaves.get(&m.broker_id) else {
            continue;
        };
        let all = shards.iter().all(|s| {
            s.and_then(|s| s.caught_up_at_ms)
                .is_some_and(|at| now.saturating_sub(at) <= window)
        });
        if !all || shards.is_empty() {
            continue;
        }
        if have.contains(&m.broker_id) {
            out.insert(m.broker_id);
            continue;
        }
        candidates.insert(m.broker_id);
        let unfenced = crate::planted::is(crate::planted::Bug::JoinUnfenced);
        let covers = shards
            .iter()
            .all(|s| s.is_some_and(|s| s.covers_reads && (s.covers_acks || unfenced)));
        if covers {
            out.insert(m.broker_id);
        }
    }
    (out, candidates)
}

/// The controller link's hooks: in controller mode every shard watches the role the
/// controllers give, and shard 0 heartbeats them and keeps the SyncStateSet.
#[derive(Debug)]
pub struct ControllerRoom;

/// The room, for the broker's list.
pub static ROOM: ControllerRoom = ControllerRoom;

impl crate::broker::shard::hooks::Room for ControllerRoom {
    fn name(&self) -> &'static str {
        "controller link"
    }

    fn start(&self, shard: &Rc<Shard>, _started: &mut crate::broker::shard::hooks::Started) {
        if !shard.broker.config.controller.enable {
            return;
        }
        // The controllers decide the role; until then this shard follows whichever master
        // they name and takes no writes.
        rt::spawn(role_watch(Rc::clone(shard)));
        if shard.id == 0 {
            rt::spawn(heartbeat_loop(Rc::clone(shard)));
            rt::spawn(sync_state_set_loop(Rc::clone(shard)));
        }
    }
}
