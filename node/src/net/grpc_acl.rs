//! The node's ACL as the gRPC edge's [`Authority`]: RocketMQ 5's signature checked against
//! the same accounts, address rules and permissions as the native and remoting protocols
//! ([`Acl::authenticate_with`], [`Acl::authorize_need`]), and the signature's stamp held to
//! the same replay window (`aclReplayWindowMs`) as a native request's.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use ringmq_grpc::auth::{self as grpc, Authority, Signature};

use crate::acl::file::Perm;
use crate::acl::table::{Need, Res};
use crate::acl::{Acl, Caller, Reason};

/// [`Authority`] over the node's [`Acl`].
#[derive(Debug)]
pub struct GrpcAcl {
    acl: Acl,
    replay_window_ms: u64,
}

impl GrpcAcl {
    pub fn new(acl: Acl, replay_window_ms: u64) -> Arc<GrpcAcl> {
        Arc::new(GrpcAcl {
            acl,
            replay_window_ms,
        })
    }

    fn check_stamp(&self, s: &Signature, now_ms: u64) -> Result<(), String> {
        let Some(at) = s.signed_at_ms() else {
            self.acl.count(Reason::MalformedTrailer);
            return Err(format!(
                "{} `{}` is not a date (yyyyMMddTHHmmssZ or RFC 3339)",
                grpc::DATE_TIME_HEADER,
                s.date_time()
            ));
        };
        let off = at.abs_diff(now_ms);
        if off > self.replay_window_ms {
            self.acl.count(Reason::StaleTimestamp);
            return Err(format!(
                "{} is {off} ms from the broker's clock, over the replay window of {} ms \
                 (an old signature, or the client's clock is off)",
                grpc::DATE_TIME_HEADER,
                self.replay_window_ms
            ));
        }
        Ok(())
    }
}

impl Authority for GrpcAcl {
    fn authenticate(
        &self,
        peer: IpAddr,
        signature: Option<&Signature>,
    ) -> Result<grpc::Caller, String> {
        let caller = self
            .acl
            .authenticate_with(peer, signature.map(Signature::access_key), |secret| {
                signature.is_some_and(|s| s.verify(secret.expose().as_bytes()))
            })
            .map_err(|r| r.remark)?;
        if let Some(s) = signature {
            self.check_stamp(s, now_ms())?;
        }
        Ok(match caller {
            Caller::Account(k) => grpc::Caller::Account(k),
            Caller::User { name, ip } => grpc::Caller::User { name, peer: ip },
            Caller::Open | Caller::Anonymous => grpc::Caller::Anonymous,
        })
    }

    fn authorize(&self, caller: &grpc::Caller, rpc: &str, need: grpc::Need) -> Result<(), String> {
        let caller = match caller {
            grpc::Caller::Account(k) => Caller::Account(Arc::clone(k)),
            grpc::Caller::User { name, peer } => Caller::User {
                name: Arc::clone(name),
                ip: *peer,
            },
            grpc::Caller::Anonymous => Caller::Anonymous,
        };
        let need = match need {
            grpc::Need::Authenticated => Need::Authenticated,
            grpc::Need::Access(list) => Need::Access(
                list.into_iter()
                    .map(|(res, perm)| {
                        let res = match res {
                            grpc::Resource::Topic(t) => Res::Topic(t),
                            grpc::Resource::Group(g) => Res::Group(g),
                        };
                        let perm = match perm {
                            grpc::Perm::Pub => Perm::PUB,
                            grpc::Perm::Sub => Perm::SUB,
                        };
                        (res, perm)
                    })
                    .collect(),
            ),
        };
        self.acl
            .authorize_need(&caller, rpc, need)
            .map_err(|r| r.remark)
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
