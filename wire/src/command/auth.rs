//! ACL 2.0 (RocketMQ 5's users and policies), administered through the broker with
//! RocketMQ's own request numbers, AUTH_CREATE_USER (3001) to AUTH_LIST_ACL (3010), and
//! AUTH_SNAPSHOT (1013, ringmq), with which a slave copies its master's users and policies.
//!
//! The headers are native (binary) and carry what RocketMQ's remoting headers carry; the
//! bodies are RocketMQ's JSON (`UserInfo`, `AclInfo`, lists of them), so a remoting request
//! and a native one hold the same body bytes and the broker reads one format.
//!
//! | code | header | request body | response body |
//! |---|---|---|---|
//! | AUTH_CREATE_USER, AUTH_UPDATE_USER | [`AuthUserRequest`] | [`UserInfo`] | - |
//! | AUTH_DELETE_USER | [`AuthUserRequest`] | - | - |
//! | AUTH_GET_USER | [`AuthUserRequest`] | - | [`UserInfo`] (no password), empty when none |
//! | AUTH_LIST_USER | [`AuthListUsersRequest`] | - | `[UserInfo]` (no passwords) |
//! | AUTH_CREATE_ACL, AUTH_UPDATE_ACL | [`AuthAclRequest`] | [`AclInfo`] | - |
//! | AUTH_DELETE_ACL | [`AuthDeleteAclRequest`] | - | - |
//! | AUTH_GET_ACL | [`AuthAclRequest`] | - | [`AclInfo`], empty when none |
//! | AUTH_LIST_ACL | [`AuthListAclsRequest`] | - | `[AclInfo]` |
//! | AUTH_SNAPSHOT | `Empty` | - | [`AuthSnapshot`] (with passwords: super users only) |
//!
//! JSON field names are RocketMQ's (`username`, `password`, `userType`, `userStatus`;
//! `subject`, `policies`, `policyType`, `entries`, `resource`, `actions`, `sourceIps`,
//! `decision`); a field that is absent or `null` is `None` / empty.

use serde::{Deserialize, Serialize};

use crate::remoting::body::JsonBody;

crate::wire_struct! {
    /// AUTH_CREATE_USER / AUTH_UPDATE_USER / AUTH_DELETE_USER / AUTH_GET_USER header.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct AuthUserRequest {
        pub username: String,
    }
}

crate::wire_struct! {
    /// AUTH_LIST_USER header: usernames that contain `filter` (all when empty).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct AuthListUsersRequest {
        pub filter: String,
    }
}

crate::wire_struct! {
    /// AUTH_CREATE_ACL / AUTH_UPDATE_ACL / AUTH_GET_ACL header: the subject (`User:name`).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct AuthAclRequest {
        pub subject: String,
    }
}

crate::wire_struct! {
    /// AUTH_DELETE_ACL header: the subject's whole ACL when `resource` is empty, else the
    /// entry for `resource` in the policy of `policy_type` (`Custom` when empty).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct AuthDeleteAclRequest {
        pub subject: String,
        pub policy_type: String,
        pub resource: String,
    }
}

crate::wire_struct! {
    /// AUTH_LIST_ACL header: subjects that contain `subject_filter`, entries whose resource
    /// contains `resource_filter` (each: all when empty).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct AuthListAclsRequest {
        pub subject_filter: String,
        pub resource_filter: String,
    }
}

/// RocketMQ's `UserInfo`. `Debug` does not show the password.
#[derive(Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct UserInfo {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// `Super` or `Normal`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_type: Option<String>,
    /// `enable` or `disable`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_status: Option<String>,
}

impl std::fmt::Debug for UserInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserInfo")
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("user_type", &self.user_type)
            .field("user_status", &self.user_status)
            .finish()
    }
}

impl JsonBody for UserInfo {
    const WHAT: &'static str = "UserInfo";
}

impl JsonBody for Vec<UserInfo> {
    const WHAT: &'static str = "List<UserInfo>";
}

/// RocketMQ's `AclInfo`: a subject's policies.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AclInfo {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    #[serde(deserialize_with = "null_as_empty")]
    pub policies: Vec<PolicyInfo>,
}

impl JsonBody for AclInfo {
    const WHAT: &'static str = "AclInfo";
}

impl JsonBody for Vec<AclInfo> {
    const WHAT: &'static str = "List<AclInfo>";
}

/// RocketMQ's `AclInfo.PolicyInfo`: `Custom` (the default) or `Default` policy entries.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PolicyInfo {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_type: Option<String>,
    #[serde(deserialize_with = "null_as_empty")]
    pub entries: Vec<PolicyEntryInfo>,
}

/// RocketMQ's `AclInfo.PolicyEntryInfo`: `resource` as `Topic:name`, `Group:prefix*`,
/// `Cluster:*` or `*`; `actions` of `Pub`, `Sub`, `Create`, `Update`, `Delete`, `Get`,
/// `List`, `All`; `sourceIps` as addresses or CIDR ranges (any when empty); `decision`
/// `Allow` or `Deny`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PolicyEntryInfo {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    #[serde(deserialize_with = "null_as_empty")]
    pub actions: Vec<String>,
    #[serde(deserialize_with = "null_as_empty")]
    pub source_ips: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
}

/// AUTH_SNAPSHOT response body: every user (with its password) and every ACL, and the
/// version that changes with each change on the master.
#[derive(Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AuthSnapshot {
    pub version: u64,
    #[serde(deserialize_with = "null_as_empty")]
    pub users: Vec<UserInfo>,
    #[serde(deserialize_with = "null_as_empty")]
    pub acls: Vec<AclInfo>,
}

impl std::fmt::Debug for AuthSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthSnapshot")
            .field("version", &self.version)
            .field("users", &self.users)
            .field("acls", &self.acls.len())
            .finish()
    }
}

impl JsonBody for AuthSnapshot {
    const WHAT: &'static str = "AuthSnapshot";
}

fn null_as_empty<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Decode, Encode};

    #[test]
    fn headers_round_trip() {
        let d = AuthDeleteAclRequest {
            subject: "User:app".into(),
            policy_type: String::new(),
            resource: "Topic:t*".into(),
        };
        assert_eq!(
            AuthDeleteAclRequest::decode(&d.to_vec().unwrap()).unwrap(),
            d
        );
        let l = AuthListAclsRequest {
            subject_filter: "app".into(),
            resource_filter: String::new(),
        };
        assert_eq!(
            AuthListAclsRequest::decode(&l.to_vec().unwrap()).unwrap(),
            l
        );
    }

    #[test]
    fn rocketmq_json_reads_and_debug_hides_the_password() {
        let u = UserInfo::from_json(
            br#"{"username":"app","password":"s3cret-xyz","userType":"Normal","userStatus":null}"#,
        )
        .unwrap();
        assert_eq!(u.username.as_deref(), Some("app"));
        assert_eq!(u.user_status, None);
        assert!(!format!("{u:?}").contains("s3cret-xyz"));
        let a = AclInfo::from_json(
            br#"{"subject":"User:app","policies":[{"entries":[{"resource":"Topic:t*","actions":["Pub"],"sourceIps":null,"decision":"Allow"}]}]}"#,
        )
        .unwrap();
        assert_eq!(a.policies[0].policy_type, None);
        assert_eq!(a.policies[0].entries[0].actions, vec!["Pub".to_string()]);
        assert!(a.policies[0].entries[0].source_ips.is_empty());
        let back = AclInfo::from_json(&a.to_json()).unwrap();
        assert_eq!(back, a);
        assert!(AclInfo::from_json(b"[1,2").is_err());
    }
}
