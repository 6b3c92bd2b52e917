//! The controller: a Raft group (embedded in name servers or standalone) that keeps, per
//! broker set, who is master, the master epoch and the SyncStateSet (RocketMQ 5's controller
//! mode), elects a new master when one dies, and the Raft messages between controllers.
//!
//! | code | request header | request body | response fields | response body |
//! |---|---|---|---|---|
//! | CONTROLLER_BROKER_HEARTBEAT (broker -> leader) | [`ControllerHeartbeat`] | - | [`ReplicaSet`] | - |
//! | CONTROLLER_ALTER_SYNC_STATE_SET (master -> leader) | [`AlterSyncStateSet`] | - | [`ReplicaSet`] | - |
//! | CONTROLLER_ELECT_MASTER (operator -> leader) | [`ElectMasterRequest`] | - | [`ReplicaSet`] | - |
//! | CONTROLLER_GET_REPLICA_INFO (any controller) | [`GetReplicaInfoRequest`] | - | [`Empty`](crate::codec::Empty) | [`ReplicaSets`] |
//! | CONTROLLER_GET_METADATA_INFO (any controller) | [`Empty`](crate::codec::Empty) | - | [`ControllerMetadata`] | - |
//! | CONTROLLER_RAFT (controller -> controller) | [`ControllerRaftRequest`] | JSON of the Raft RPC | [`Empty`](crate::codec::Empty) | JSON of its answer |
//!
//! A request that must reach the leader and reaches a follower is answered
//! CONTROLLER_NOT_LEADER with [`NotLeader`] fields (the leader's address when known).

use std::net::SocketAddr;

crate::wire_struct! {
    /// CONTROLLER_BROKER_HEARTBEAT request header: a broker of a set says it is alive and
    /// how far its log goes. The answer is its set's state, from which the broker takes its
    /// role.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ControllerHeartbeat {
        pub cluster: String,
        pub broker_name: String,
        /// The broker's id in its set (`brokerId`, unique per set, >= 1 in controller mode).
        pub broker_id: u64,
        /// Client address (`brokerIP1:listenPort`).
        pub broker_addr: SocketAddr,
        /// Replication address.
        pub ha_addr: Option<SocketAddr>,
        /// The newest master epoch in the broker's store.
        pub epoch: u32,
        /// Bytes of CommitLog the broker holds past its shards' bases, summed over shards
        /// (longest log wins an election among equal epochs).
        pub log_bytes: u64,
        /// `brokerElectionPriority`: lower is preferred.
        pub election_priority: u32,
        /// The master epoch the broker currently serves as master in, 0 when it is a slave.
        pub serving_epoch: u32,
        /// Silence after which the controller may take this broker for dead
        /// (`controllerHeartBeatTimeoutMills`).
        pub heartbeat_timeout_ms: u64,
    }
}

crate::wire_struct! {
    /// One broker of a set as the leader controller sees it.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ReplicaMember {
        pub broker_id: u64,
        pub broker_addr: SocketAddr,
        pub ha_addr: Option<SocketAddr>,
        /// Heard from within the heartbeat timeout (as the leader controller knows it).
        pub alive: bool,
        pub epoch: u32,
        pub log_bytes: u64,
        pub election_priority: u32,
    }
}

crate::wire_struct! {
    /// A broker set's replicated state: master, epochs, SyncStateSet, members.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ReplicaSet {
        pub cluster: String,
        pub broker_name: String,
        /// The master's broker id; `None` while the set has no master.
        pub master_id: Option<u64>,
        pub master_epoch: u32,
        /// Broker ids in sync with the master (the master included).
        pub sync_state_set: Vec<u64>,
        pub sync_state_set_epoch: u32,
        pub members: Vec<ReplicaMember>,
    }
}

impl ReplicaSet {
    /// The member with `broker_id`.
    pub fn member(&self, broker_id: u64) -> Option<&ReplicaMember> {
        self.members.iter().find(|m| m.broker_id == broker_id)
    }

    /// The master's member entry.
    pub fn master(&self) -> Option<&ReplicaMember> {
        self.master_id.and_then(|id| self.member(id))
    }
}

crate::wire_struct! {
    /// CONTROLLER_ALTER_SYNC_STATE_SET request header: the master of `master_epoch` asks to
    /// replace the SyncStateSet of epoch `sync_state_set_epoch` with `new_set` (which must
    /// hold the master). Stale epochs are refused (CONTROLLER_FENCED_EPOCH).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct AlterSyncStateSet {
        pub cluster: String,
        pub broker_name: String,
        pub master_id: u64,
        pub master_epoch: u32,
        pub sync_state_set_epoch: u32,
        pub new_set: Vec<u64>,
    }
}

crate::wire_struct! {
    /// CONTROLLER_ELECT_MASTER request header (RocketMQ's `electMaster`): elect a master for
    /// the set now, `broker_id` if given (it must be alive and, unless
    /// `enableElectUncleanMaster`, in the SyncStateSet), else the best candidate.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ElectMasterRequest {
        pub cluster: String,
        pub broker_name: String,
        pub broker_id: Option<u64>,
    }
}

crate::wire_struct! {
    /// CONTROLLER_GET_REPLICA_INFO request header: one set by name, or all when empty.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct GetReplicaInfoRequest {
        pub broker_name: String,
    }
}

crate::wire_struct! {
    /// CONTROLLER_GET_REPLICA_INFO response body.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ReplicaSets {
        pub sets: Vec<ReplicaSet>,
    }
}

crate::wire_struct! {
    /// One controller of the Raft group.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ControllerMember {
        pub id: u64,
        pub addr: SocketAddr,
    }
}

crate::wire_struct! {
    /// CONTROLLER_GET_METADATA_INFO response fields: this controller's view of the group.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ControllerMetadata {
        pub self_id: u64,
        pub self_addr: SocketAddr,
        pub leader_id: Option<u64>,
        pub leader_addr: Option<SocketAddr>,
        /// The Raft term this controller is in.
        pub term: u64,
        /// Index of the last entry in its Raft log, and of the last one applied.
        pub last_log_index: u64,
        pub applied_index: u64,
        pub members: Vec<ControllerMember>,
    }
}

crate::wire_struct! {
    /// CONTROLLER_NOT_LEADER response fields.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct NotLeader {
        pub leader_addr: Option<SocketAddr>,
    }
}

crate::wire_struct! {
    /// CONTROLLER_RAFT request header; the body is the Raft message as JSON.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct ControllerRaftRequest {
        /// 1 = append entries, 2 = vote, 3 = install snapshot.
        pub kind: u8,
        /// The sending controller's id.
        pub from: u64,
    }
}

/// [`ControllerRaftRequest::kind`] values.
pub mod raft_kind {
    pub const APPEND: u8 = 1;
    pub const VOTE: u8 = 2;
    pub const SNAPSHOT: u8 = 3;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Decode, Encode};

    #[test]
    fn controller_round_trip() {
        let addr: SocketAddr = "127.0.0.1:10911".parse().unwrap();
        let set = ReplicaSet {
            cluster: "DefaultCluster".into(),
            broker_name: "broker-a".into(),
            master_id: Some(1),
            master_epoch: 3,
            sync_state_set: vec![1, 2],
            sync_state_set_epoch: 5,
            members: vec![ReplicaMember {
                broker_id: 1,
                broker_addr: addr,
                ha_addr: None,
                alive: true,
                epoch: 3,
                log_bytes: 4096,
                election_priority: 0,
            }],
        };
        assert_eq!(ReplicaSet::decode(&set.to_vec().unwrap()).unwrap(), set);
        assert_eq!(set.master().map(|m| m.broker_addr), Some(addr));
        let hb = ControllerHeartbeat {
            cluster: "c".into(),
            broker_name: "b".into(),
            broker_id: 2,
            broker_addr: addr,
            ha_addr: Some(addr),
            epoch: 1,
            log_bytes: 0,
            election_priority: 1,
            serving_epoch: 0,
            heartbeat_timeout_ms: 2_000,
        };
        assert_eq!(
            ControllerHeartbeat::decode(&hb.to_vec().unwrap()).unwrap(),
            hb
        );
    }
}
