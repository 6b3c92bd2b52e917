//! The role this broker acts in, as the controllers last gave it (controller mode) or as
//! `brokerRole` says: the state every shard reads before taking a write, and what a master
//! knows of its slaves' replication. The controller link (`broker::controller`) writes it;
//! the core and every feature read it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

use ringmq_wire::code::Status;
use ringmq_wire::command::ReplicaSet;

use crate::broker::Broker;
use crate::io::clock::Instant;
use crate::net::reply::Reply;

/// One slave's replication on one shard, as the master's shard last published it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlaveShard {
    pub acked: u64,
    /// Monotonic ms (since the process started) when it last had everything; `None`: not
    /// since this master started.
    pub caught_up_at_ms: Option<u64>,
    /// It has every byte consumers of this shard may have read (acked >= the read cap).
    pub covers_reads: bool,
    /// Waiting to join the SyncStateSet, it has everything this shard acknowledged before
    /// its acknowledgements began to wait for it (acked >= the shard's join fence).
    pub covers_acks: bool,
}

/// A SyncStateSet change that added members, sent to the controllers against SyncStateSet
/// epoch `epoch`, whose outcome this master has not learnt yet: until it hears a newer epoch
/// (which tells whether the change was applied) the added members count as members for
/// acknowledgements and the read cap.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Proposal {
    pub epoch: u32,
    pub added: BTreeSet<u64>,
}

/// The set's state as the broker last heard it, and what it did with it.
#[derive(Debug, Default)]
pub struct RoleState {
    /// This broker is its set's master (in [`Self::serving_epoch`]).
    pub master: AtomicBool,
    /// The master epoch this broker serves in; 0 while it is a slave.
    pub serving_epoch: AtomicU32,
    /// Monotonic ms until which a master may acknowledge writes.
    pub lease_until_ms: AtomicU64,
    /// Woken whenever the role or the set's master changes.
    pub changed: event_listener::Event,
    /// The last answer from a controller.
    pub set: Mutex<Option<ReplicaSet>>,
    /// Per slave broker id, per shard: its replication (master role).
    pub slaves: Mutex<BTreeMap<u64, Vec<Option<SlaveShard>>>>,
    /// Slaves in sync but not (as far as this master knows) in the SyncStateSet: the ones
    /// about to join and the ones a [`Proposal`] added. SYNC_MASTER acknowledgements with
    /// `allAckInSyncStateSet` and each shard's read cap wait for them as for members, so a
    /// slave enters the SyncStateSet (and becomes electable) only holding every record that
    /// was acknowledged or read (see [`in_sync`], [`update_confirm`]).
    pub joining: Mutex<Vec<u64>>,
    /// The last SyncStateSet change that added members, until its outcome is known.
    pub proposed: Mutex<Option<Proposal>>,
}

/// Milliseconds on the monotonic clock.
pub fn mono_ms() -> u64 {
    Instant::now().duration_since(Instant::zero()).as_millis() as u64
}

impl RoleState {
    /// The SyncStateSet (broker ids, this master included) and its epoch, if known.
    pub fn sync_state_set(&self) -> Option<(Vec<u64>, u32)> {
        let set = self.set.lock().unwrap_or_else(|p| p.into_inner());
        set.as_ref()
            .map(|s| (s.sync_state_set.clone(), s.sync_state_set_epoch))
    }

    /// The other brokers a master's acknowledgements and read cap wait for: the members of
    /// the SyncStateSet but `me`, and the [`Self::joining`] slaves.
    pub fn waited_on(&self, me: u64) -> Option<Vec<u64>> {
        let (members, _) = self.sync_state_set()?;
        let mut others: Vec<u64> = members.into_iter().filter(|m| *m != me).collect();
        for j in self
            .joining
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            if *j != me && !others.contains(j) {
                others.push(*j);
            }
        }
        Some(others)
    }

    /// Whether the lease allows acknowledging writes now.
    pub fn lease_valid(&self) -> bool {
        mono_ms() < self.lease_until_ms.load(Ordering::Acquire)
    }
}

impl Broker {
    /// Whether this broker acts as its set's master now: from the controllers in controller
    /// mode, from `brokerRole` otherwise.
    pub fn is_master(&self) -> bool {
        if self.config.controller.enable {
            self.role.master.load(Ordering::Acquire)
        } else {
            self.config.broker_role.is_master()
        }
    }

    /// The role this broker acts in now (controller mode: the configured master kind while
    /// master, SLAVE otherwise).
    pub fn effective_role(&self) -> crate::config::BrokerRole {
        use crate::config::BrokerRole;
        let configured = self.config.broker_role;
        match (self.config.controller.enable, self.is_master()) {
            (false, _) => configured,
            (true, false) => BrokerRole::Slave,
            (true, true) if configured == BrokerRole::Slave => BrokerRole::AsyncMaster,
            (true, true) => configured,
        }
    }

    /// Whether a write may be taken on `shard` now, or the status and reason to refuse it.
    pub fn write_refusal(&self, shard_epoch: u32) -> Option<(Status, String)> {
        if !self.config.controller.enable {
            return (!self.config.broker_role.is_master()).then(|| {
                (
                    Status::NoPermission,
                    "this broker is a slave: send to its master".to_string(),
                )
            });
        }
        let epoch = self.role.serving_epoch.load(Ordering::Acquire);
        if !self.role.master.load(Ordering::Acquire) || epoch == 0 {
            return Some((
                Status::NotMaster,
                format!(
                    "broker {} of {} is not the master now; refresh the route",
                    self.config.broker_id, self.config.broker_name
                ),
            ));
        }
        if shard_epoch != epoch {
            return Some((
                Status::NotMaster,
                format!("this broker is becoming master of epoch {epoch}; retry"),
            ));
        }
        if !self.role.lease_valid() && !crate::planted::is(crate::planted::Bug::NoFencing) {
            return Some((
                Status::NotMaster,
                "this master has not heard from the controllers within its lease; it takes no writes until it does".to_string(),
            ));
        }
        None
    }

    /// Controller mode: why a write other than a send (send-back, END_TRANSACTION, RECALL, POP
    /// acks) must be refused now: not master, or outside the lease. `None` outside controller
    /// mode (the callers check `brokerRole`).
    pub fn controller_refusal(&self) -> Option<Reply> {
        if !self.config.controller.enable {
            return None;
        }
        if !self.role.master.load(Ordering::Acquire) {
            return Some(Reply::error(
                Status::NotMaster,
                format!(
                    "broker {} of {} is not the master now; refresh the route",
                    self.config.broker_id, self.config.broker_name
                ),
            ));
        }
        (!self.role.lease_valid()).then(|| {
            Reply::error(
                Status::NotMaster,
                "this master has not heard from the controllers within its lease; it takes no writes until it does",
            )
        })
    }

    /// The broker id to register with name servers: 0 while master (RocketMQ's routes name
    /// the master 0), else the configured id.
    pub fn registered_id(&self) -> u64 {
        if self.config.controller.enable && !self.is_master() {
            self.config.broker_id
        } else if self.config.controller.enable {
            0
        } else {
            self.config.broker_id
        }
    }
}
