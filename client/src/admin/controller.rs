//! The controllers (RocketMQ 5's controller mode: a Raft group, embedded in the name servers
//! with `enableControllerInNamesrv=true` or on its own, that keeps each broker set's master,
//! master epoch and SyncStateSet): their Raft state, the sets' replicas, and electing a
//! master by hand.
//!
//! Controllers answer on the native protocol like name servers. Reads
//! (CONTROLLER_GET_METADATA_INFO, CONTROLLER_GET_REPLICA_INFO) are answered by any
//! controller, but only the leader knows which brokers are alive (heartbeats go to it):
//! [`Admin::replica_info`] asks the leader first (found from the first controller's
//! metadata), then the others in turn until one answers.
//! CONTROLLER_ELECT_MASTER must reach the Raft leader: [`Admin::elect_master`] follows a
//! CONTROLLER_NOT_LEADER answer to the leader it names, or tries the next controller when
//! it names none, at most [`CONTROLLER_HOPS_MAX`] requests in all.

use std::collections::VecDeque;
use std::net::SocketAddr;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::{Empty, Encode};
use ringmq_wire::command::{
    ControllerMetadata, ElectMasterRequest, GetReplicaInfoRequest, NotLeader, ReplicaSet,
    ReplicaSets,
};

use super::Admin;
use crate::error::{Error, Result};
use crate::net::{Answer, Endpoint, Peer};

/// Most requests one [`Admin::elect_master`] sends (controllers tried plus redirects followed).
pub const CONTROLLER_HOPS_MAX: usize = 8;

impl Admin {
    /// One controller's view of the Raft group (CONTROLLER_GET_METADATA_INFO): its id, the
    /// leader, its term, last log index and applied index, the members.
    pub async fn controller_metadata(&self, controller: SocketAddr) -> Result<ControllerMetadata> {
        self.controller_call(controller, RequestCode::ControllerGetMetadataInfo, &Empty)
            .await?
            .expect(&[Status::Success])?
            .required_fields()
    }

    /// The replicated state of the broker set `broker_name`, or of every set when `None`
    /// (CONTROLLER_GET_REPLICA_INFO), from the leader, else the first of `controllers` that
    /// answers (a follower reports every member as not alive: it hears no heartbeats).
    pub async fn replica_info(
        &self,
        controllers: &[SocketAddr],
        broker_name: Option<&str>,
    ) -> Result<Vec<ReplicaSet>> {
        let req = GetReplicaInfoRequest {
            broker_name: broker_name.unwrap_or_default().to_string(),
        };
        let mut order: Vec<SocketAddr> = Vec::new();
        for &c in controllers {
            if let Ok(m) = self.controller_metadata(c).await {
                order.extend(m.leader_addr);
                break;
            }
        }
        for &c in controllers {
            if !order.contains(&c) {
                order.push(c);
            }
        }
        let mut last = None;
        for c in order {
            let answer = match self
                .controller_call(c, RequestCode::ControllerGetReplicaInfo, &req)
                .await
            {
                Ok(a) => a,
                Err(e) => {
                    log::debug!("controller {c}: {e}");
                    last = Some(e);
                    continue;
                }
            };
            return match answer.status()? {
                Status::Success => Ok(answer.decode_body::<ReplicaSets>()?.sets),
                Status::ControllerUnknownSet => Err(Error::NotFound {
                    what: format!(
                        "the controllers know no broker set {:?}",
                        broker_name.unwrap_or_default()
                    ),
                }),
                other => Err(answer.error(other)),
            };
        }
        Err(last.unwrap_or_else(no_controller))
    }

    /// Elects a master for the broker set `broker_name` of `cluster` now
    /// (CONTROLLER_ELECT_MASTER): `broker_id` if given (it must be alive and in the
    /// SyncStateSet unless the controllers allow unclean elections), else the controllers'
    /// best candidate. Goes to the Raft leader (see the module docs); returns the set as it
    /// is after the election.
    pub async fn elect_master(
        &self,
        controllers: &[SocketAddr],
        cluster: &str,
        broker_name: &str,
        broker_id: Option<u64>,
    ) -> Result<ReplicaSet> {
        let req = ElectMasterRequest {
            cluster: cluster.to_string(),
            broker_name: broker_name.to_string(),
            broker_id,
        };
        let mut to_try: VecDeque<SocketAddr> = controllers.iter().copied().collect();
        let mut last = None;
        for _ in 0..CONTROLLER_HOPS_MAX {
            let Some(c) = to_try.pop_front() else {
                break;
            };
            let answer = match self
                .controller_call(c, RequestCode::ControllerElectMaster, &req)
                .await
            {
                Ok(a) => a,
                Err(e) => {
                    log::debug!("controller {c}: {e}");
                    last = Some(e);
                    continue;
                }
            };
            match answer.status()? {
                Status::Success => return answer.required_fields(),
                Status::ControllerNotLeader => {
                    let leader = answer.fields::<NotLeader>()?.and_then(|n| n.leader_addr);
                    log::debug!("controller {c} is not the leader (leader: {leader:?})");
                    if let Some(l) = leader.filter(|&l| l != c) {
                        to_try.retain(|&a| a != l);
                        to_try.push_front(l);
                    }
                    last = Some(answer.error(Status::ControllerNotLeader));
                }
                Status::ControllerUnknownSet => {
                    return Err(Error::NotFound {
                        what: format!(
                        "the controllers know no broker set {broker_name:?} in cluster {cluster:?}"
                    ),
                    })
                }
                other => return Err(answer.error(other)),
            }
        }
        Err(last.unwrap_or_else(no_controller))
    }

    /// One request to a controller (a name-server-like peer).
    async fn controller_call(
        &self,
        controller: SocketAddr,
        code: RequestCode,
        header: &(impl Encode + ?Sized),
    ) -> Result<Answer> {
        let ep = Endpoint {
            addr: controller,
            peer: Peer::Namesrv,
        };
        let (conn, _) = self.inst.pool.get(ep).await?;
        conn.call(code, header, &[], self.inst.cfg.request_timeout)
            .await
    }
}

/// Controller addresses `host:port;host:port` (as `controllerAddr` writes them), resolved.
pub async fn resolve_controllers(list: &str) -> Result<Vec<SocketAddr>> {
    let mut out = Vec::new();
    for a in super::split_name_servers(list) {
        let found = tokio::net::lookup_host(a.as_str())
            .await
            .map_err(|e| Error::Config(format!("controller {a}: {e}")))?
            .next()
            .ok_or_else(|| Error::Config(format!("controller {a} resolves to nothing")))?;
        if !out.contains(&found) {
            out.push(found);
        }
    }
    if out.is_empty() {
        return Err(Error::Config("no controller address given".into()));
    }
    Ok(out)
}

fn no_controller() -> Error {
    Error::Config("no controller address given".into())
}

/// Bytes of CommitLog `member` is behind the set's master (`None` without a master, or for
/// a broker id not in the set). A member ahead of the master counts as 0.
pub fn replica_lag_bytes(set: &ReplicaSet, broker_id: u64) -> Option<u64> {
    let master = set.master()?;
    let member = set.member(broker_id)?;
    Some(master.log_bytes.saturating_sub(member.log_bytes))
}

#[cfg(test)]
mod tests {
    use ringmq_wire::command::ReplicaMember;

    use super::*;

    fn member(id: u64, log_bytes: u64) -> ReplicaMember {
        ReplicaMember {
            broker_id: id,
            broker_addr: SocketAddr::from(([127, 0, 0, 1], 10_000 + id as u16)),
            ha_addr: None,
            alive: true,
            epoch: 2,
            log_bytes,
            election_priority: 0,
        }
    }

    #[test]
    fn lag_is_behind_the_master_in_bytes() {
        let mut set = ReplicaSet {
            cluster: "c".into(),
            broker_name: "b".into(),
            master_id: Some(1),
            master_epoch: 2,
            sync_state_set: vec![1, 2],
            sync_state_set_epoch: 3,
            members: vec![member(1, 4096), member(2, 1024), member(3, 8192)],
        };
        assert_eq!(replica_lag_bytes(&set, 1), Some(0));
        assert_eq!(replica_lag_bytes(&set, 2), Some(3072));
        assert_eq!(replica_lag_bytes(&set, 3), Some(0), "ahead counts as 0");
        assert_eq!(replica_lag_bytes(&set, 9), None);
        set.master_id = None;
        assert_eq!(replica_lag_bytes(&set, 2), None, "no master, no lag");
    }

    #[tokio::test]
    async fn controller_lists_resolve() {
        let got = resolve_controllers("127.0.0.1:9876; 127.0.0.1:9877;127.0.0.1:9876")
            .await
            .unwrap();
        assert_eq!(got.len(), 2);
        assert!(resolve_controllers(" ; ").await.is_err());
    }
}
