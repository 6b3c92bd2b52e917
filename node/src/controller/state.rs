//! The controllers' replicated state, as pure data: per broker set, its members, who is
//! master in which epoch, and the SyncStateSet with its epoch. Every change is a [`Command`]
//! in the Raft log, applied in log order on every controller; a command carries the epochs
//! it was decided against, and one that no longer matches is refused as stale, so two
//! leaders' decisions (an old one not yet deposed) can never both take effect.
//!
//! Invariants (checked by [`SetState::check`] in tests):
//! - the master, when there is one, is a member and in the SyncStateSet;
//! - the SyncStateSet holds only members;
//! - epochs only grow.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

/// One broker of a set, as registered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub addr: SocketAddr,
    pub ha_addr: Option<SocketAddr>,
    /// `brokerElectionPriority`: lower is preferred.
    pub priority: u32,
}

/// One broker set's replicated state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetState {
    pub cluster: String,
    pub master_id: Option<u64>,
    /// Grows by one at every election (0: never had a master).
    pub master_epoch: u32,
    pub sync_state_set: BTreeSet<u64>,
    pub sync_state_set_epoch: u32,
    pub members: BTreeMap<u64, Member>,
}

impl SetState {
    /// Panics if an invariant does not hold (tests and the simulator).
    pub fn check(&self) {
        if let Some(m) = self.master_id {
            assert!(self.members.contains_key(&m), "master {m} is not a member");
            assert!(
                self.sync_state_set.contains(&m),
                "master {m} is not in its SyncStateSet {:?}",
                self.sync_state_set
            );
        }
        for id in &self.sync_state_set {
            assert!(
                self.members.contains_key(id),
                "SyncStateSet member {id} unknown"
            );
        }
    }
}

/// The whole replicated state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerState {
    /// By broker name (a set's name is unique across clusters, as in RocketMQ's routes).
    pub sets: BTreeMap<String, SetState>,
}

/// A change to the replicated state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// A broker joined its set (or its addresses or priority changed).
    Register {
        cluster: String,
        broker_name: String,
        broker_id: u64,
        member: Member,
    },
    /// A new master for the set (or none), decided against `expect_master_epoch`: the
    /// epoch grows by one and the SyncStateSet becomes the new master alone.
    Elect {
        broker_name: String,
        expect_master_epoch: u32,
        new_master: Option<u64>,
    },
    /// The master of `master_epoch` replaces the SyncStateSet of `expect_sync_state_set_epoch`.
    AlterSyncStateSet {
        broker_name: String,
        master_id: u64,
        master_epoch: u32,
        expect_sync_state_set_epoch: u32,
        new_set: Vec<u64>,
    },
}

/// What applying a command did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Applied {
    Done,
    /// Not applied: the state had moved on (or the command was invalid); why.
    Refused(String),
}

impl ControllerState {
    /// Applies one command (deterministic: every controller gets the same state).
    pub fn apply(&mut self, cmd: &Command) -> Applied {
        match cmd {
            Command::Register {
                cluster,
                broker_name,
                broker_id,
                member,
            } => {
                let set = self.sets.entry(broker_name.clone()).or_default();
                if set.cluster.is_empty() {
                    set.cluster = cluster.clone();
                } else if set.cluster != *cluster {
                    return Applied::Refused(format!(
                        "broker set {broker_name} belongs to cluster {}, not {cluster}",
                        set.cluster
                    ));
                }
                set.members.insert(*broker_id, member.clone());
                Applied::Done
            }
            Command::Elect {
                broker_name,
                expect_master_epoch,
                new_master,
            } => {
                let Some(set) = self.sets.get_mut(broker_name) else {
                    return Applied::Refused(format!("no broker set {broker_name}"));
                };
                if set.master_epoch != *expect_master_epoch {
                    return Applied::Refused(format!(
                        "master epoch is {}, the election was decided at {expect_master_epoch}",
                        set.master_epoch
                    ));
                }
                if let Some(id) = new_master {
                    if !set.members.contains_key(id) {
                        return Applied::Refused(format!("broker {id} is not a member"));
                    }
                }
                set.master_epoch += 1;
                set.master_id = *new_master;
                set.sync_state_set = new_master.iter().copied().collect();
                set.sync_state_set_epoch += 1;
                Applied::Done
            }
            Command::AlterSyncStateSet {
                broker_name,
                master_id,
                master_epoch,
                expect_sync_state_set_epoch,
                new_set,
            } => {
                let Some(set) = self.sets.get_mut(broker_name) else {
                    return Applied::Refused(format!("no broker set {broker_name}"));
                };
                if set.master_id != Some(*master_id) || set.master_epoch != *master_epoch {
                    return Applied::Refused(format!(
                        "broker {master_id} is not the master of epoch {master_epoch} (master {:?}, epoch {})",
                        set.master_id, set.master_epoch
                    ));
                }
                if set.sync_state_set_epoch != *expect_sync_state_set_epoch {
                    return Applied::Refused(format!(
                        "SyncStateSet epoch is {}, the change was made against {expect_sync_state_set_epoch}",
                        set.sync_state_set_epoch
                    ));
                }
                if !new_set.contains(master_id) {
                    return Applied::Refused("the new SyncStateSet must hold the master".into());
                }
                if let Some(id) = new_set.iter().find(|id| !set.members.contains_key(id)) {
                    return Applied::Refused(format!("broker {id} is not a member"));
                }
                set.sync_state_set = new_set.iter().copied().collect();
                set.sync_state_set_epoch += 1;
                Applied::Done
            }
        }
    }
}

/// What the leader knows of a member's health (not replicated: heartbeats are frequent and
/// a new leader learns them again within one heartbeat period).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Health {
    pub epoch: u32,
    pub log_bytes: u64,
}

/// Which member to elect for `set`, given the live members' health; `exclude` (the failed
/// master) is never chosen. Candidates: for a set that never had a master, every live
/// member; otherwise the live members of the SyncStateSet, or with `unclean`, every live
/// member when none of those is left. Among candidates: the highest epoch, then the
/// longest log, then the lowest priority value, then the lowest id.
pub fn choose(
    set: &SetState,
    live: &dyn Fn(u64) -> Option<Health>,
    unclean: bool,
    exclude: Option<u64>,
) -> Option<u64> {
    let pick = |ids: &mut dyn Iterator<Item = u64>| {
        ids.filter(|id| Some(*id) != exclude)
            .filter_map(|id| live(id).map(|h| (id, h)))
            .max_by(|(a_id, a), (b_id, b)| {
                let pa = set.members.get(a_id).map_or(u32::MAX, |m| m.priority);
                let pb = set.members.get(b_id).map_or(u32::MAX, |m| m.priority);
                (
                    a.epoch,
                    a.log_bytes,
                    std::cmp::Reverse(pa),
                    std::cmp::Reverse(*a_id),
                )
                    .cmp(&(
                        b.epoch,
                        b.log_bytes,
                        std::cmp::Reverse(pb),
                        std::cmp::Reverse(*b_id),
                    ))
            })
            .map(|(id, _)| id)
    };
    if set.master_epoch == 0 || crate::planted::is(crate::planted::Bug::ElectOutOfSync) {
        return pick(&mut set.members.keys().copied());
    }
    pick(&mut set.sync_state_set.iter().copied()).or_else(|| {
        if unclean {
            pick(&mut set.members.keys().copied())
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(port: u16, priority: u32) -> Member {
        Member {
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            ha_addr: None,
            priority,
        }
    }

    fn register(st: &mut ControllerState, id: u64) {
        let cmd = Command::Register {
            cluster: "c".into(),
            broker_name: "b".into(),
            broker_id: id,
            member: member(10_000 + id as u16, 0),
        };
        assert_eq!(st.apply(&cmd), Applied::Done);
    }

    #[test]
    fn elections_and_sync_state_sets_are_fenced_by_epoch() {
        let mut st = ControllerState::default();
        for id in 1..=3 {
            register(&mut st, id);
        }
        let elect = |epoch, m| Command::Elect {
            broker_name: "b".into(),
            expect_master_epoch: epoch,
            new_master: m,
        };
        assert_eq!(st.apply(&elect(0, Some(1))), Applied::Done);
        assert!(matches!(st.apply(&elect(0, Some(2))), Applied::Refused(_)));
        let set = &st.sets["b"];
        assert_eq!((set.master_id, set.master_epoch), (Some(1), 1));
        let alter = |master, epoch, sse_epoch, new: Vec<u64>| Command::AlterSyncStateSet {
            broker_name: "b".into(),
            master_id: master,
            master_epoch: epoch,
            expect_sync_state_set_epoch: sse_epoch,
            new_set: new,
        };
        assert_eq!(st.apply(&alter(1, 1, 1, vec![1, 2, 3])), Applied::Done);
        assert!(
            matches!(st.apply(&alter(1, 1, 1, vec![1, 2])), Applied::Refused(_)),
            "stale SyncStateSet epoch"
        );
        assert!(
            matches!(st.apply(&alter(2, 1, 2, vec![2])), Applied::Refused(_)),
            "not the master"
        );
        assert!(matches!(
            st.apply(&alter(1, 1, 2, vec![2])),
            Applied::Refused(_)
        ));
        assert_eq!(st.apply(&elect(1, Some(3))), Applied::Done);
        let set = &st.sets["b"];
        set.check();
        assert_eq!(set.master_epoch, 2);
        assert_eq!(set.sync_state_set, BTreeSet::from([3]));
        assert!(
            matches!(st.apply(&alter(1, 1, 3, vec![1])), Applied::Refused(_)),
            "the old master is fenced"
        );
    }

    #[test]
    fn choice_prefers_epoch_then_log_then_priority_and_keeps_to_the_sync_state_set() {
        let mut set = SetState::default();
        for (id, prio) in [(1, 0), (2, 5), (3, 1)] {
            set.members.insert(id, member(1, prio));
        }
        let all_live = |id: u64| {
            Some(Health {
                epoch: 1,
                log_bytes: if id == 2 { 100 } else { 50 },
            })
        };
        assert_eq!(
            choose(&set, &all_live, false, None),
            Some(2),
            "first election: longest log"
        );
        set.master_epoch = 1;
        set.master_id = Some(1);
        set.sync_state_set = BTreeSet::from([1, 3]);
        assert_eq!(
            choose(&set, &all_live, false, Some(1)),
            Some(3),
            "in sync only"
        );
        let only_2 = |id: u64| {
            (id == 2).then_some(Health {
                epoch: 1,
                log_bytes: 9,
            })
        };
        assert_eq!(choose(&set, &only_2, false, Some(1)), None);
        assert_eq!(choose(&set, &only_2, true, Some(1)), Some(2), "unclean");
        set.sync_state_set = BTreeSet::from([1, 2, 3]);
        let same = |_| {
            Some(Health {
                epoch: 1,
                log_bytes: 7,
            })
        };
        assert_eq!(
            choose(&set, &same, false, Some(1)),
            Some(3),
            "priority 1 beats 5"
        );
    }
}
