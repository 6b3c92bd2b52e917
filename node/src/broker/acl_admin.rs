//! The broker's ACL file administered through the broker (`ringmq-ctl acl ...`):
//! GET_BROKER_CLUSTER_ACL_CONFIG lists the accounts (never a secret key),
//! UPDATE_AND_CREATE_ACL_CONFIG adds or changes one, DELETE_ACL_CONFIG removes one, WHOAMI
//! tells the caller who it is. Writes go through [`Acl::write`] (temporary file, sync,
//! rename), one at a time per process, so two changes at once do not lose one.
//!
//! Lock-out protection: the last admin account cannot be deleted (nor made non-admin), and
//! no caller deletes its own access key.
//!
//! The rules are plain functions on [`AclFile`] ([`apply_change`], [`apply_delete`],
//! [`view`]) so they are tested without a broker.

use std::sync::Mutex;

use ringmq_wire::auth::Secret;
use ringmq_wire::code::Status;
use ringmq_wire::codec::{Empty, Encode};
use ringmq_wire::command::{
    AclAccountChange, AclAccountView, AclConfigList, AclWriteRequest, DeleteAclRequest, WhoAmI,
    ACL_WRITE_CREATE, ACL_WRITE_UPDATE, WHOAMI_ACCOUNT, WHOAMI_ANONYMOUS,
};

use crate::acl::addr::AddrPattern;
use crate::acl::file::{Account, AclFile, Perm};
use crate::acl::{Acl, Caller};
use crate::net::reply::{Body, Reply};

/// The remark of every ACL request on a broker without ACL.
pub const ACL_OFF: &str = "ACL is off on this broker (aclEnable=false)";

/// One read-modify-write of the file at a time (shards answer on threads of their own).
static WRITES: Mutex<()> = Mutex::new(());

fn acl_or_off(acl: Option<&Acl>) -> Result<&Acl, Reply> {
    acl.ok_or_else(|| Reply::error(Status::MessageIllegal, ACL_OFF))
}

/// An account as the wire reports it: no secret key, effective default permissions.
pub fn view(a: &Account) -> AclAccountView {
    let default = |p: Option<Perm>| {
        p.unwrap_or(if a.admin { Perm::ANY } else { Perm::DENY })
            .name()
            .to_owned()
    };
    let names = |m: &std::collections::BTreeMap<String, Perm>| {
        m.iter()
            .map(|(k, p)| (k.clone(), p.name().to_owned()))
            .collect()
    };
    AclAccountView {
        access_key: a.access_key.clone(),
        secret_set: !a.secret.expose().is_empty(),
        white_remote_address: a
            .white_remote_address
            .as_ref()
            .map(|w| w.as_str().to_owned()),
        admin: a.admin,
        default_topic_perm: default(a.default_topic_perm),
        default_group_perm: default(a.default_group_perm),
        topic_perms: names(&a.topic_perms),
        group_perms: names(&a.group_perms),
    }
}

/// The file with `change` applied: a new account (`mode` [`ACL_WRITE_CREATE`], refused if
/// the key exists) or the given fields of an existing one ([`ACL_WRITE_UPDATE`], refused if
/// it does not).
pub fn apply_change(file: &AclFile, mode: u8, c: &AclAccountChange) -> Result<AclFile, String> {
    let key = c.access_key.trim();
    if key.is_empty() {
        return Err("the access key is empty".to_owned());
    }
    if key.len() > ringmq_wire::auth::ACCESS_KEY_BYTES_MAX {
        return Err("the access key is over 255 bytes".to_owned());
    }
    let existing = file.accounts.get(key);
    let old = match (mode, existing) {
        (ACL_WRITE_CREATE, Some(_)) => {
            return Err(format!(
                "access key {key} already exists (use `acl update` to change it)"
            ))
        }
        (ACL_WRITE_CREATE, None) => None,
        (ACL_WRITE_UPDATE, Some(a)) => Some(a),
        (ACL_WRITE_UPDATE, None) => {
            return Err(format!(
                "access key {key} does not exist (use `acl add` to create it)"
            ))
        }
        (m, _) => return Err(format!("unknown write mode {m}")),
    };
    let secret = match (&c.secret_key, old) {
        (Some(s), _) if s.is_empty() => return Err("the secret key is empty".to_owned()),
        (Some(s), _) => Secret::new(s.clone()),
        (None, Some(a)) => a.secret.clone(),
        (None, None) => return Err(format!("a new account ({key}) needs a secret key")),
    };
    let mut a = Account::new(key.to_owned(), secret);
    if let Some(o) = old {
        a.white_remote_address = o.white_remote_address.clone();
        a.admin = o.admin;
        a.default_topic_perm = o.default_topic_perm;
        a.default_group_perm = o.default_group_perm;
        a.topic_perms = o.topic_perms.clone();
        a.group_perms = o.group_perms.clone();
    }
    if let Some(w) = &c.white_remote_address {
        a.white_remote_address = if w.trim().is_empty() {
            None
        } else {
            Some(AddrPattern::parse(w).map_err(|e| format!("white remote address: {e}"))?)
        };
    }
    if let Some(admin) = c.admin {
        a.admin = admin;
    }
    let perm = |what: &str, s: &str| Perm::parse(s).map_err(|e| format!("{what}: {e}"));
    if let Some(p) = &c.default_topic_perm {
        a.default_topic_perm = Some(perm("default topic permission", p)?);
    }
    if let Some(p) = &c.default_group_perm {
        a.default_group_perm = Some(perm("default group permission", p)?);
    }
    for (name, p) in &c.topic_perms {
        check_name("topic", name)?;
        a.topic_perms
            .insert(name.trim().to_owned(), perm(&format!("topic {name}"), p)?);
    }
    for (name, p) in &c.group_perms {
        check_name("group", name)?;
        a.group_perms
            .insert(name.trim().to_owned(), perm(&format!("group {name}"), p)?);
    }
    let mut out = file.clone();
    out.accounts.insert(key.to_owned(), a);
    if !out.accounts.values().any(|a| a.admin) && file.accounts.values().any(|a| a.admin) {
        return Err(format!(
            "access key {key} is the last admin account; making it non-admin would lock \
             every administrator out"
        ));
    }
    Ok(out)
}

fn check_name(kind: &str, name: &str) -> Result<(), String> {
    let n = name.trim();
    if n.is_empty() || n.contains(['=', '\n', '"']) {
        return Err(format!(
            "{kind} name {name:?} is empty or holds `=`, `\"` or a newline"
        ));
    }
    Ok(())
}

/// The file without `key`: refused for an unknown key, the caller's own key, and the last
/// admin account.
pub fn apply_delete(file: &AclFile, key: &str, caller: Option<&Caller>) -> Result<AclFile, String> {
    let Some(a) = file.accounts.get(key) else {
        return Err(format!("access key {key} does not exist"));
    };
    if let Some(Caller::Account(own)) = caller {
        if &**own == key {
            return Err(format!(
                "access key {key} is the one this request is signed with; deleting it would \
                 lock you out (delete it with another admin account)"
            ));
        }
    }
    if a.admin && file.accounts.values().filter(|a| a.admin).count() == 1 {
        return Err(format!(
            "access key {key} is the last admin account; deleting it would lock every \
             administrator out"
        ));
    }
    let mut out = file.clone();
    out.accounts.remove(key);
    Ok(out)
}

fn body<T: Encode>(value: &T) -> Reply {
    match value.to_vec() {
        Ok(bytes) => Reply::ok_body(Empty, Body::Bytes(bytes)),
        Err(e) => Reply::error(Status::SystemError, format!("encoding the reply: {e}")),
    }
}

/// GET_BROKER_CLUSTER_ACL_CONFIG.
pub fn list(acl: Option<&Acl>) -> Reply {
    let acl = match acl_or_off(acl) {
        Ok(a) => a,
        Err(r) => return r,
    };
    let file = acl.current();
    body(&AclConfigList {
        global_white_remote_addresses: file
            .global_white
            .iter()
            .map(|w| w.as_str().to_owned())
            .collect(),
        accounts: file.accounts.values().map(view).collect(),
    })
}

/// UPDATE_AND_CREATE_ACL_CONFIG.
pub fn write(acl: Option<&Acl>, h: &AclWriteRequest, request_body: &[u8]) -> Reply {
    use ringmq_wire::codec::Decode;
    let acl = match acl_or_off(acl) {
        Ok(a) => a,
        Err(r) => return r,
    };
    let change = match AclAccountChange::decode(request_body) {
        Ok(c) => c,
        Err(e) => return Reply::error(Status::MalformedRequest, format!("ACL account: {e}")),
    };
    let _one = WRITES.lock().unwrap_or_else(|p| p.into_inner());
    match apply_change(&acl.current(), h.mode, &change) {
        Ok(file) => commit(acl, file),
        Err(e) => Reply::error(Status::MessageIllegal, e),
    }
}

/// DELETE_ACL_CONFIG.
pub fn delete(acl: Option<&Acl>, h: &DeleteAclRequest, caller: Option<&Caller>) -> Reply {
    let acl = match acl_or_off(acl) {
        Ok(a) => a,
        Err(r) => return r,
    };
    let _one = WRITES.lock().unwrap_or_else(|p| p.into_inner());
    match apply_delete(&acl.current(), &h.access_key, caller) {
        Ok(file) => commit(acl, file),
        Err(e) => Reply::error(Status::MessageIllegal, e),
    }
}

fn commit(acl: &Acl, file: AclFile) -> Reply {
    match acl.write(file) {
        Ok(()) => Reply::ok(Empty),
        Err(e) => {
            log::error!("ACL: {e}");
            Reply::error(
                Status::SystemError,
                format!("the ACL file was not changed: {e}"),
            )
        }
    }
}

/// WHOAMI.
pub fn whoami(acl: Option<&Acl>, caller: Option<&Caller>) -> Reply {
    let acl = match acl_or_off(acl) {
        Ok(a) => a,
        Err(r) => return r,
    };
    match caller {
        Some(Caller::Anonymous) => body(&WhoAmI {
            kind: WHOAMI_ANONYMOUS,
            account: None,
        }),
        Some(c @ Caller::Account(k)) => match acl.describe(c) {
            Some(a) => body(&WhoAmI {
                kind: WHOAMI_ACCOUNT,
                account: Some(view(&a)),
            }),
            None => Reply::error(
                Status::NoPermission,
                format!("access key {k} is not in the ACL"),
            ),
        },
        Some(Caller::User { name, .. }) => match acl.v2().and_then(|a| a.user(name)) {
            Some(u) => body(&WhoAmI {
                kind: WHOAMI_ACCOUNT,
                account: Some(AclAccountView {
                    access_key: u.name.clone(),
                    secret_set: true,
                    white_remote_address: None,
                    admin: u.is_super(),
                    default_topic_perm: String::new(),
                    default_group_perm: String::new(),
                    topic_perms: Default::default(),
                    group_perms: Default::default(),
                }),
            }),
            None => Reply::error(Status::NoPermission, format!("user {name} does not exist")),
        },
        Some(Caller::Open) | None => Reply::error(
            Status::MessageIllegal,
            "the caller is not known here (a request the broker forwarded or made itself)",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    fn file() -> AclFile {
        AclFile::parse(
            "globalWhiteRemoteAddresses: [10.1.*]\naccounts:\n  - {accessKey: root, secretKey: rootsecret, admin: true}\n  - {accessKey: app, secretKey: appsecret, defaultTopicPerm: SUB, topicPerms: [t1=PUB]}\n",
        )
        .expect("parses")
    }

    fn change(key: &str) -> AclAccountChange {
        AclAccountChange {
            access_key: key.into(),
            secret_key: None,
            white_remote_address: None,
            admin: None,
            default_topic_perm: None,
            default_group_perm: None,
            topic_perms: BTreeMap::new(),
            group_perms: BTreeMap::new(),
        }
    }

    #[test]
    fn add_refuses_an_existing_key_and_needs_a_secret() {
        let f = file();
        let e = apply_change(&f, ACL_WRITE_CREATE, &change("app")).unwrap_err();
        assert!(e.contains("already exists"), "{e}");
        let e = apply_change(&f, ACL_WRITE_CREATE, &change("new")).unwrap_err();
        assert!(e.contains("needs a secret key"), "{e}");
        let mut c = change("new");
        c.secret_key = Some("newsecret".into());
        c.topic_perms.insert("orders".into(), "PUB|SUB".into());
        c.default_group_perm = Some("SUB".into());
        let out = apply_change(&f, ACL_WRITE_CREATE, &c).unwrap();
        let a = &out.accounts["new"];
        assert_eq!(a.secret.expose(), "newsecret");
        assert_eq!(a.topic_perm("orders"), Perm::ANY);
        assert_eq!(a.topic_perm("other"), Perm::DENY);
        assert_eq!(a.group_perm("g"), Perm::SUB);
        c.topic_perms.insert("bad".into(), "WRITE".into());
        assert!(apply_change(&f, ACL_WRITE_CREATE, &c).is_err());
    }

    #[test]
    fn update_changes_only_the_given_fields() {
        let f = file();
        let e = apply_change(&f, ACL_WRITE_UPDATE, &change("ghost")).unwrap_err();
        assert!(e.contains("does not exist"), "{e}");
        let mut c = change("app");
        c.group_perms.insert("g1".into(), "SUB".into());
        let out = apply_change(&f, ACL_WRITE_UPDATE, &c).unwrap();
        let a = &out.accounts["app"];
        assert_eq!(a.secret.expose(), "appsecret", "secret kept");
        assert_eq!(a.topic_perm("t1"), Perm::PUB, "old perms kept");
        assert_eq!(a.default_topic_perm, Some(Perm::SUB));
        assert_eq!(a.group_perm("g1"), Perm::SUB);
        let mut c = change("root");
        c.admin = Some(false);
        let e = apply_change(&f, ACL_WRITE_UPDATE, &c).unwrap_err();
        assert!(e.contains("last admin"), "{e}");
    }

    #[test]
    fn delete_protects_the_caller_and_the_last_admin() {
        let f = file();
        let me = Caller::Account(Arc::from("app"));
        let e = apply_delete(&f, "app", Some(&me)).unwrap_err();
        assert!(e.contains("lock you out"), "{e}");
        let e = apply_delete(&f, "root", Some(&Caller::Account(Arc::from("x")))).unwrap_err();
        assert!(e.contains("last admin"), "{e}");
        assert!(apply_delete(&f, "ghost", None).is_err());
        let out = apply_delete(&f, "app", Some(&Caller::Account(Arc::from("root")))).unwrap();
        assert!(!out.accounts.contains_key("app"));
    }

    #[test]
    fn views_never_carry_the_secret() {
        let f = file();
        let v = view(&f.accounts["app"]);
        assert!(v.secret_set);
        assert_eq!(v.default_topic_perm, "SUB");
        assert_eq!(v.default_group_perm, "DENY");
        assert_eq!(v.topic_perms["t1"], "PUB");
        let bytes = v.to_vec().unwrap();
        assert!(!bytes.windows(9).any(|w| w == b"appsecret"));
        assert_eq!(view(&f.accounts["root"]).default_topic_perm, "PUB|SUB");
    }

    #[test]
    fn acl_off_answers_a_clear_error() {
        for r in [
            list(None),
            whoami(None, None),
            delete(
                None,
                &DeleteAclRequest {
                    access_key: "a".into(),
                },
                None,
            ),
            write(None, &AclWriteRequest { mode: 0 }, &[]),
        ] {
            assert_eq!(r.status, Status::MessageIllegal);
            assert!(r.remark().ends_with(ACL_OFF), "{}", r.remark());
        }
    }

    #[test]
    fn writes_go_to_the_file_and_are_in_force() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plain_acl.yml");
        std::fs::write(&path, file().to_yaml()).unwrap();
        let acl = Acl::load(crate::acl::AclSettings {
            file: path.clone(),
            replay_window_ms: 1000,
        })
        .unwrap();
        let mut c = change("new");
        c.secret_key = Some("newsecret".into());
        let r = write(
            Some(&acl),
            &AclWriteRequest {
                mode: ACL_WRITE_CREATE,
            },
            &c.to_vec().unwrap(),
        );
        assert_eq!(r.status, Status::Success, "{}", r.remark());
        assert!(acl.current().accounts.contains_key("new"));
        let again = AclFile::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert!(again.accounts.contains_key("new"));
        let root = Caller::Account(Arc::from("root"));
        let r = delete(
            Some(&acl),
            &DeleteAclRequest {
                access_key: "new".into(),
            },
            Some(&root),
        );
        assert_eq!(r.status, Status::Success, "{}", r.remark());
        assert!(!acl.current().accounts.contains_key("new"));
        let r = whoami(Some(&acl), Some(&Caller::Anonymous));
        assert_eq!(r.status, Status::Success);
    }
}
