//! ACL 2.0's users and policies administered through the broker: the AUTH_* requests
//! (RocketMQ 5's codes 3001-3010, native and remoting alike) and AUTH_SNAPSHOT, and the
//! room that keeps a slave's copy in step with its master (every [`SYNC_MS`], shard 0, as
//! the topic table is copied). Who may ask is decided before these run
//! (`crate::acl::v2::check`: super users); the rules of each change are
//! `crate::acl::v2::ops`; the store and its file are `crate::acl::v2`.

use std::rc::Rc;
use std::time::Duration;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::Empty;
use ringmq_wire::command::{
    AclInfo, AuthAclRequest, AuthDeleteAclRequest, AuthListAclsRequest, AuthListUsersRequest,
    AuthSnapshot, AuthUserRequest, UserInfo,
};
use ringmq_wire::remoting::body::JsonBody;

use crate::acl::v2::model::subject_user;
use crate::acl::v2::{ops, Auth, ChangeError};
use crate::acl::{Acl, Caller};
use crate::broker::shard::hooks::{Room, Started};
use crate::broker::shard::Shard;
use crate::io::rt;
use crate::net::reply::{Body, Reply};

/// The remark of every AUTH_* request on a broker without ACL 2.0.
pub const V2_OFF: &str =
    "ACL 2.0 is off on this broker (authenticationEnabled and authorizationEnabled are false)";

/// How often a slave copies its master's users and policies.
pub const SYNC_MS: u64 = 3_000;

fn auth(acl: Option<&Acl>) -> Result<&Auth, Reply> {
    acl.and_then(|a| a.v2().map(|v| &**v))
        .ok_or_else(|| Reply::error(Status::MessageIllegal, V2_OFF))
}

fn json<T: JsonBody>(value: &T) -> Reply {
    Reply::ok_body(Empty, Body::Bytes(value.to_json()))
}

fn changed(r: Result<(), ChangeError>) -> Reply {
    match r {
        Ok(()) => Reply::ok(Empty),
        Err(ChangeError::Refused(e)) => Reply::error(Status::MessageIllegal, e),
        Err(ChangeError::Io(e)) => {
            log::error!("ACL 2.0: {e}");
            Reply::error(
                Status::SystemError,
                format!("users and policies were not changed: {e}"),
            )
        }
    }
}

fn body<T: JsonBody>(what: &str, bytes: &[u8]) -> Result<T, Reply> {
    T::from_json(bytes).map_err(|e| Reply::error(Status::MalformedRequest, format!("{what}: {e}")))
}

/// One AUTH_* request or AUTH_SNAPSHOT. `caller` is who signed it (for the guard against
/// deleting one's own user).
pub fn serve(
    acl: Option<&Acl>,
    request: AuthRequest,
    req_body: &[u8],
    caller: Option<&Caller>,
) -> Reply {
    let a = match auth(acl) {
        Ok(a) => a,
        Err(r) => return r,
    };
    let run = || -> Result<Reply, Reply> {
        Ok(match request {
            AuthRequest::CreateUser(h) | AuthRequest::UpdateUser(h)
                if h.username.trim().is_empty() =>
            {
                Reply::error(Status::MessageIllegal, "The username is blank")
            }
            AuthRequest::CreateUser(h) => {
                let info: UserInfo = body("UserInfo", req_body)?;
                changed(a.change(|s| ops::create_user(s, &h.username, &info)))
            }
            AuthRequest::UpdateUser(h) => {
                let info: UserInfo = body("UserInfo", req_body)?;
                changed(a.change(|s| ops::update_user(s, &h.username, &info)))
            }
            AuthRequest::DeleteUser(h) => {
                let me = match caller {
                    Some(Caller::User { name, .. }) => Some(&**name),
                    _ => None,
                };
                changed(a.change(|s| ops::delete_user(s, &h.username, me)))
            }
            AuthRequest::GetUser(h) => match a.user(&h.username) {
                Some(u) => json(&u.info(false)),
                None => Reply::ok(Empty),
            },
            AuthRequest::ListUser(h) => json(&ops::list_users(&a.state(), &h.filter)),
            AuthRequest::PutAcl(h) => {
                let info: AclInfo = body("AclInfo", req_body)?;
                changed(a.change(|s| ops::put_acl(s, &h.subject, &info)))
            }
            AuthRequest::DeleteAcl(h) => {
                changed(a.change(|s| ops::delete_acl(s, &h.subject, &h.policy_type, &h.resource)))
            }
            AuthRequest::GetAcl(h) => {
                let st = a.state();
                let name = subject_user(&h.subject)
                    .map_err(|e| Reply::error(Status::MessageIllegal, e))?;
                if !st.users.contains_key(name) {
                    return Err(Reply::error(
                        Status::MessageIllegal,
                        "The subject is not exist.",
                    ));
                }
                match st.acls.get(name) {
                    Some(acl) => json(&acl.info(&format!("User:{name}"), "")),
                    None => Reply::ok(Empty),
                }
            }
            AuthRequest::ListAcl(h) => json(&ops::list_acls(
                &a.state(),
                &h.subject_filter,
                &h.resource_filter,
            )),
            AuthRequest::Snapshot => json(&a.state().snapshot()),
        })
    };
    run().unwrap_or_else(|r| r)
}

/// The ACL 2.0 requests, as dispatch hands them over.
#[derive(Debug)]
pub enum AuthRequest {
    CreateUser(AuthUserRequest),
    UpdateUser(AuthUserRequest),
    DeleteUser(AuthUserRequest),
    GetUser(AuthUserRequest),
    ListUser(AuthListUsersRequest),
    /// AUTH_CREATE_ACL and AUTH_UPDATE_ACL (one merge, as in RocketMQ 5).
    PutAcl(AuthAclRequest),
    DeleteAcl(AuthDeleteAclRequest),
    GetAcl(AuthAclRequest),
    ListAcl(AuthListAclsRequest),
    Snapshot,
}

/// The room: a slave (or a broker that may follow, in controller mode) copies its master's
/// users and policies.
#[derive(Debug)]
pub struct AuthRoom;

pub static ROOM: AuthRoom = AuthRoom;

impl Room for AuthRoom {
    fn name(&self) -> &'static str {
        "acl-2.0"
    }

    fn start(&self, shard: &Rc<Shard>, _started: &mut Started) {
        let b = &shard.broker;
        let v2 = b.acl.as_ref().is_some_and(|a| a.v2().is_some());
        if v2 && shard.id == 0 && (b.config.controller.enable || !b.config.broker_role.is_master())
        {
            rt::spawn(sync_from_master(Rc::clone(shard)));
        }
    }
}

async fn sync_from_master(shard: Rc<Shard>) {
    let mut last_error = String::new();
    while !shard.broker.is_shutting_down() {
        let addr = match shard.broker.master_broker_addr() {
            Some(_) if shard.broker.is_master() => None,
            other => other,
        };
        if let Some(addr) = addr {
            let r = crate::net::call::call(
                addr,
                RequestCode::AuthSnapshot,
                &Empty,
                &[],
                shard.broker.inner_credentials.as_ref(),
                shard.broker.tls.client.as_deref(),
            )
            .await;
            let outcome = match r {
                Ok((Status::Success, _, body)) => AuthSnapshot::from_json(&body)
                    .map_err(|e| e.to_string())
                    .and_then(|snap| {
                        let auth = shard.broker.acl.as_ref().and_then(|a| a.v2().cloned());
                        match auth {
                            Some(a) => a.replace(&snap),
                            None => Ok(false),
                        }
                    }),
                Ok((status, header, _)) => Err(format!(
                    "{}: {}",
                    status.name(),
                    ringmq_wire::command::read_remark(&header)
                        .map(|(r, _)| r.to_owned())
                        .unwrap_or_default()
                )),
                Err(e) => Err(e),
            };
            match outcome {
                Ok(true) => {
                    last_error.clear();
                    log::info!("ACL 2.0 users and policies copied from master {addr}");
                }
                Ok(false) => last_error.clear(),
                Err(e) if e != last_error => {
                    log::warn!("ACL 2.0 users and policies from master {addr}: {e}");
                    last_error = e;
                }
                Err(_) => {}
            }
        }
        rt::sleep(Duration::from_millis(SYNC_MS)).await;
    }
}
