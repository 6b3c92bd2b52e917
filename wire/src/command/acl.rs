//! The broker's ACL file, administered through the broker: GET_BROKER_CLUSTER_ACL_CONFIG
//! (54) lists it, UPDATE_AND_CREATE_ACL_CONFIG (50) adds or changes one account,
//! DELETE_ACL_CONFIG (51) removes one, and WHOAMI (1012, ringmq) says who the caller is to
//! the ACL. The three ACL codes need an admin account; WHOAMI any authenticated caller.
//!
//! Secret keys are write-only: [`AclAccountChange`] carries one (in the request body), and
//! no response type has a field for one ([`AclAccountView`] says only that it is set).
//!
//! | code | header | request body | response fields | response body |
//! |---|---|---|---|---|
//! | UPDATE_AND_CREATE_ACL_CONFIG | [`AclWriteRequest`] | [`AclAccountChange`] | `Empty` | - |
//! | DELETE_ACL_CONFIG | [`DeleteAclRequest`] | - | `Empty` | - |
//! | GET_BROKER_CLUSTER_ACL_CONFIG | `Empty` | - | `Empty` | [`AclConfigList`] |
//! | WHOAMI | `Empty` | - | `Empty` | [`WhoAmI`] |

use std::collections::BTreeMap;

/// [`AclWriteRequest::mode`]: add a new account; an existing access key is refused.
pub const ACL_WRITE_CREATE: u8 = 0;
/// [`AclWriteRequest::mode`]: change an existing account (only the given fields); an
/// unknown access key is refused.
pub const ACL_WRITE_UPDATE: u8 = 1;

crate::wire_struct! {
    /// UPDATE_AND_CREATE_ACL_CONFIG request header.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct AclWriteRequest {
        /// [`ACL_WRITE_CREATE`] or [`ACL_WRITE_UPDATE`].
        pub mode: u8,
    }
}

crate::wire_struct! {
    /// UPDATE_AND_CREATE_ACL_CONFIG request body: one account, `None` = unchanged (for a new
    /// account: RocketMQ's default). Its `Debug` does not show the secret key.
    #[derive(Clone, PartialEq, Eq)]
    pub struct AclAccountChange {
        pub access_key: String,
        /// Required for a new account; never sent back by any response.
        pub secret_key: Option<String>,
        /// An address pattern; `Some("")` removes the restriction.
        pub white_remote_address: Option<String>,
        pub admin: Option<bool>,
        /// `DENY`, `PUB`, `SUB` or `PUB|SUB`.
        pub default_topic_perm: Option<String>,
        pub default_group_perm: Option<String>,
        /// Resource -> permission, set (or replaced) one by one; others stay.
        pub topic_perms: BTreeMap<String, String>,
        pub group_perms: BTreeMap<String, String>,
    }
}

impl std::fmt::Debug for AclAccountChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AclAccountChange")
            .field("access_key", &self.access_key)
            .field(
                "secret_key",
                &self.secret_key.as_ref().map(|_| "<redacted>"),
            )
            .field("white_remote_address", &self.white_remote_address)
            .field("admin", &self.admin)
            .field("default_topic_perm", &self.default_topic_perm)
            .field("default_group_perm", &self.default_group_perm)
            .field("topic_perms", &self.topic_perms)
            .field("group_perms", &self.group_perms)
            .finish()
    }
}

crate::wire_struct! {
    /// DELETE_ACL_CONFIG request header.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct DeleteAclRequest {
        pub access_key: String,
    }
}

crate::wire_struct! {
    /// One account as the broker reports it: never its secret key.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct AclAccountView {
        pub access_key: String,
        /// Whether the account has a secret key (every account in force has one).
        pub secret_set: bool,
        pub white_remote_address: Option<String>,
        pub admin: bool,
        /// The permission in force where no explicit one is listed (the file's, else
        /// RocketMQ's default: `DENY`, or `PUB|SUB` for an admin).
        pub default_topic_perm: String,
        pub default_group_perm: String,
        pub topic_perms: BTreeMap<String, String>,
        pub group_perms: BTreeMap<String, String>,
    }
}

crate::wire_struct! {
    /// GET_BROKER_CLUSTER_ACL_CONFIG response body.
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct AclConfigList {
        pub global_white_remote_addresses: Vec<String>,
        pub accounts: Vec<AclAccountView>,
    }
}

/// [`WhoAmI::kind`]: a signed request of an account.
pub const WHOAMI_ACCOUNT: u8 = 0;
/// [`WhoAmI::kind`]: no credentials, admitted by the global white list.
pub const WHOAMI_ANONYMOUS: u8 = 1;

crate::wire_struct! {
    /// WHOAMI response body.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct WhoAmI {
        /// [`WHOAMI_ACCOUNT`] or [`WHOAMI_ANONYMOUS`].
        pub kind: u8,
        /// The caller's account ([`WHOAMI_ACCOUNT`]).
        pub account: Option<AclAccountView>,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Decode, Encode};

    #[test]
    fn acl_round_trips_and_debug_hides_the_secret() {
        let c = AclAccountChange {
            access_key: "app".into(),
            secret_key: Some("s3cret-xyz".into()),
            white_remote_address: None,
            admin: Some(false),
            default_topic_perm: Some("DENY".into()),
            default_group_perm: None,
            topic_perms: BTreeMap::from([("t".into(), "PUB".into())]),
            group_perms: BTreeMap::new(),
        };
        assert_eq!(AclAccountChange::decode(&c.to_vec().unwrap()).unwrap(), c);
        assert!(!format!("{c:?}").contains("s3cret-xyz"));
        let w = WhoAmI {
            kind: WHOAMI_ACCOUNT,
            account: Some(AclAccountView {
                access_key: "app".into(),
                secret_set: true,
                white_remote_address: Some("10.*".into()),
                admin: false,
                default_topic_perm: "DENY".into(),
                default_group_perm: "SUB".into(),
                topic_perms: BTreeMap::new(),
                group_perms: BTreeMap::from([("g".into(), "SUB".into())]),
            }),
        };
        assert_eq!(WhoAmI::decode(&w.to_vec().unwrap()).unwrap(), w);
        let d = DeleteAclRequest {
            access_key: "app".into(),
        };
        assert_eq!(DeleteAclRequest::decode(&d.to_vec().unwrap()).unwrap(), d);
    }
}
