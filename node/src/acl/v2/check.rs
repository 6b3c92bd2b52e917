//! ACL 2.0's answer to "may this caller do what this request needs" ([`check`]), for
//! [`crate::acl::Acl::authorize`] and [`crate::acl::Acl::authorize_need`]:
//! - the AUTH_* codes (users and policies) need a super user;
//! - the table's admin requests ([`Need::Admin`]) need a super user or an entry allowing
//!   `Update` on `Cluster:<brokerClusterName>`;
//! - topic and group needs are `Pub` / `Sub` actions on `Topic:x` / `Group:x`, decided by
//!   the user's policies ([`super::eval`]);
//! - an unsigned request (admitted only when `authenticationWhitelist` is set) is served
//!   only for a code on that list, and never an admin one.

use ringmq_wire::code::RequestCode;

use super::model::{Action, ResType, Resource};
use super::Auth;
use crate::acl::file::Perm;
use crate::acl::table::{Need, Res};
use crate::acl::{Caller, Reason, Refusal};

/// Is `code` one of the requests that manage users and policies?
pub fn is_management(code: RequestCode) -> bool {
    use RequestCode as C;
    matches!(
        code,
        C::AuthSnapshot
            | C::AuthCreateUser
            | C::AuthUpdateUser
            | C::AuthDeleteUser
            | C::AuthGetUser
            | C::AuthListUser
            | C::AuthCreateAcl
            | C::AuthUpdateAcl
            | C::AuthDeleteAcl
            | C::AuthGetAcl
            | C::AuthListAcl
    )
}

/// `code` is the request's native code (none for a request another protocol's edge
/// describes as `what`).
pub fn check(
    auth: &Auth,
    caller: &Caller,
    code: Option<RequestCode>,
    what: &str,
    need: Need,
) -> Result<(), Refusal> {
    if matches!(need, Need::Never) {
        return Err(refusal(
            Reason::NoPermission,
            format!("{what} is sent by brokers and never accepted from a client"),
        ));
    }
    let (name, ip) = match caller {
        Caller::Open => return Ok(()),
        Caller::User { name, ip } => (name, Some(*ip)),
        // An ACL 1.0 account's caller shape with ACL 2.0 on: the user, address unknown
        // (every protocol edge passes `User` with its address; this stays fail-closed).
        Caller::Account(k) => (k, None),
        Caller::Anonymous => {
            let listed = code.is_some_and(|c| auth.settings().whitelist.contains(&u16::from(c)));
            return if listed && !matches!(need, Need::Admin) && !code.is_some_and(is_management) {
                Ok(())
            } else {
                Err(refusal(
                    Reason::MissingCredentials,
                    format!("{what} needs a signed request (it is not on authenticationWhitelist)"),
                ))
            };
        }
    };
    if code.is_some_and(is_management) {
        return if auth.is_super(name) {
            Ok(())
        } else {
            Err(refusal(
                Reason::NotAdmin,
                format!("{what} needs a super user; User:{name} is not one"),
            ))
        };
    }
    let fail = |reason, why: String| refusal(reason, format!("{what}: {why}"));
    match need {
        Need::Never => unreachable!("refused above"),
        Need::Authenticated => match auth.user(name) {
            Some(u) if u.status == super::model::UserStatus::Enable => Ok(()),
            _ => Err(fail(
                Reason::UnknownAccessKey,
                format!("User:{name} is disabled or gone"),
            )),
        },
        Need::Admin => {
            let cluster = Resource::literal(ResType::Cluster, &auth.settings().cluster);
            auth.allowed(name, &cluster, &[Action::Update], ip)
                .map_err(|e| fail(Reason::NotAdmin, e))
        }
        Need::Access(list) => {
            for (res, perm) in &list {
                let target = match res {
                    Res::Topic(t) => Resource::literal(ResType::Topic, t),
                    Res::Group(g) => Resource::literal(ResType::Group, g),
                };
                let action = if *perm == Perm::PUB {
                    Action::Pub
                } else {
                    Action::Sub
                };
                auth.allowed(name, &target, &[action], ip)
                    .map_err(|e| fail(Reason::NoPermission, e))?;
            }
            Ok(())
        }
    }
}

fn refusal(reason: Reason, why: String) -> Refusal {
    Refusal {
        reason,
        remark: format!("no permission: {why}"),
    }
}
