//! RocketMQ 5's ACL 2.0 requests over remoting -> the native requests with the same numbers
//! (`ringmq_wire::command::auth`): the header's `extFields` become the native header, the
//! JSON body (`UserInfo`, `AclInfo`) passes unchanged, and the answer's body (JSON, or
//! empty for "none", as RocketMQ answers) passes back unchanged.
//!
//! | remoting code | extFields read |
//! |---|---|
//! | AUTH_CREATE_USER 3001, AUTH_UPDATE_USER 3002, AUTH_DELETE_USER 3003, AUTH_GET_USER 3004 | `username` |
//! | AUTH_LIST_USER 3005 | `filter` (optional) |
//! | AUTH_CREATE_ACL 3006, AUTH_UPDATE_ACL 3007, AUTH_GET_ACL 3009 | `subject` |
//! | AUTH_DELETE_ACL 3008 | `subject`, `policyType` and `resource` (optional) |
//! | AUTH_LIST_ACL 3010 | `subjectFilter`, `resourceFilter` (optional) |

use ringmq_wire::code::RequestCode;
use ringmq_wire::command::{
    AuthAclRequest, AuthDeleteAclRequest, AuthListAclsRequest, AuthListUsersRequest,
    AuthUserRequest,
};
use ringmq_wire::remoting::ext::{opt_str, req_str, ExtFields};

use super::{native, Refusal, ReplyKind, Result, Translated};

/// The translation of ACL 2.0 request `code`; `None` for any other code.
pub fn translate(code: i32, ext: &ExtFields, body: &[u8]) -> Result<Option<Translated>> {
    let Some(native_code) = u16::try_from(code)
        .ok()
        .and_then(|c| RequestCode::try_from(c).ok())
        .filter(|c| (3001..=3010).contains(&u16::from(*c)))
    else {
        return Ok(None);
    };
    let req = |field: &'static str| {
        req_str(ext, field)
            .map(str::to_owned)
            .map_err(|e| Refusal::bad(format!("request code {code}: {e}")))
    };
    let opt = |field: &'static str| opt_str(ext, field).unwrap_or("").to_owned();
    use RequestCode as C;
    let kind = ReplyKind::Records;
    let t = match native_code {
        C::AuthCreateUser | C::AuthUpdateUser | C::AuthDeleteUser | C::AuthGetUser => {
            let h = AuthUserRequest {
                username: req("username")?,
            };
            native(native_code, &h, body, kind)?
        }
        C::AuthListUser => native(
            native_code,
            &AuthListUsersRequest {
                filter: opt("filter"),
            },
            &[],
            kind,
        )?,
        C::AuthCreateAcl | C::AuthUpdateAcl | C::AuthGetAcl => {
            let h = AuthAclRequest {
                subject: req("subject")?,
            };
            native(native_code, &h, body, kind)?
        }
        C::AuthDeleteAcl => {
            let h = AuthDeleteAclRequest {
                subject: req("subject")?,
                policy_type: opt("policyType"),
                resource: opt("resource"),
            };
            native(native_code, &h, &[], kind)?
        }
        C::AuthListAcl => {
            let h = AuthListAclsRequest {
                subject_filter: opt("subjectFilter"),
                resource_filter: opt("resourceFilter"),
            };
            native(native_code, &h, &[], kind)?
        }
        _ => return Ok(None),
    };
    Ok(Some(t))
}
