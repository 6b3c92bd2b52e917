//! `migrateAuthFromV1Enabled`: `plain_acl.yml` accounts become ACL 2.0 users and policies,
//! as RocketMQ 5 migrates them. An access key that is already a user is left alone (so a
//! restart migrates nothing twice and a changed user is not overwritten).
//!
//! | plain_acl.yml | ACL 2.0 |
//! |---|---|
//! | accessKey / secretKey | username / password |
//! | admin: true | userType Super (else Normal) |
//! | topicPerms `t=PUB` | Custom entry `Topic:t`, actions Pub, Allow |
//! | groupPerms `g=SUB` | Custom entry `Group:g`, actions Sub, Allow |
//! | `PUB\|SUB` | actions Pub and Sub, Allow |
//! | `DENY` | actions All, Deny |
//! | defaultTopicPerm / defaultGroupPerm | Default entry `Topic:*` / `Group:*` |
//!
//! `whiteRemoteAddress` and `globalWhiteRemoteAddresses` have no ACL 2.0 counterpart and are
//! not migrated (RocketMQ does not migrate them either); the log says so per account.

use std::path::Path;

use ringmq_wire::command::{AclInfo, PolicyEntryInfo, PolicyInfo, UserInfo};

use super::{ops, State};
use crate::acl::file::{AclFile, Perm};

pub fn from_v1(mut st: State, path: &Path) -> Result<State, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("migrateAuthFromV1Enabled: {}: {e}", path.display()))?;
    let file = AclFile::parse(&text)
        .map_err(|e| format!("migrateAuthFromV1Enabled: {}: {e}", path.display()))?;
    let mut migrated = 0usize;
    for a in file.accounts.values() {
        if st.users.contains_key(&a.access_key) {
            continue;
        }
        let user = UserInfo {
            username: Some(a.access_key.clone()),
            password: Some(a.secret.expose().to_owned()),
            user_type: Some(if a.admin { "Super" } else { "Normal" }.to_owned()),
            user_status: None,
        };
        st = ops::create_user(&st, &a.access_key, &user)
            .map_err(|e| format!("migrating access key {}: {e}", a.access_key))?;
        let entry = |res: String, p: Perm| PolicyEntryInfo {
            resource: Some(res),
            actions: actions(p),
            source_ips: vec![],
            decision: Some(if p.is_deny() { "Deny" } else { "Allow" }.to_owned()),
        };
        let mut custom: Vec<PolicyEntryInfo> = a
            .topic_perms
            .iter()
            .map(|(t, p)| entry(format!("Topic:{t}"), *p))
            .collect();
        custom.extend(
            a.group_perms
                .iter()
                .map(|(g, p)| entry(format!("Group:{g}"), *p)),
        );
        let mut default = Vec::new();
        if let Some(p) = a.default_topic_perm {
            default.push(entry("Topic:*".to_owned(), p));
        }
        if let Some(p) = a.default_group_perm {
            default.push(entry("Group:*".to_owned(), p));
        }
        let mut policies = Vec::new();
        for (t, entries) in [("Custom", custom), ("Default", default)] {
            if !entries.is_empty() {
                policies.push(PolicyInfo {
                    policy_type: Some(t.to_owned()),
                    entries,
                });
            }
        }
        if !policies.is_empty() {
            let subject = format!("User:{}", a.access_key);
            st = ops::put_acl(
                &st,
                &subject,
                &AclInfo {
                    subject: Some(subject.clone()),
                    policies,
                },
            )
            .map_err(|e| format!("migrating access key {}: {e}", a.access_key))?;
        }
        if a.white_remote_address.is_some() {
            log::warn!(
                "ACL 2.0 migration: access key {}'s whiteRemoteAddress is not migrated (add \
                 sourceIps to its policy entries)",
                a.access_key
            );
        }
        migrated += 1;
    }
    log::info!(
        "ACL 2.0: {migrated} account(s) migrated from {}",
        path.display()
    );
    Ok(st)
}

fn actions(p: Perm) -> Vec<String> {
    let v: &[&str] = if p.is_deny() {
        &["All"]
    } else if p == Perm::ANY {
        &["Pub", "Sub"]
    } else if p == Perm::PUB {
        &["Pub"]
    } else if p == Perm::SUB {
        &["Sub"]
    } else {
        &["All"]
    };
    v.iter().map(|s| (*s).to_owned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::v2::model::{Action, PolicyType, ResType, Resource};

    #[test]
    fn accounts_become_users_and_policies() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("plain_acl.yml");
        std::fs::write(
            &p,
            "accounts:\n  - {accessKey: root, secretKey: rootsecret, admin: true}\n  - {accessKey: app, secretKey: appsecret, defaultTopicPerm: DENY, defaultGroupPerm: SUB, topicPerms: [t1=PUB, t2=PUB|SUB, t3=DENY]}\n",
        )
        .unwrap();
        let st = from_v1(State::default(), &p).unwrap();
        assert!(st.users["root"].is_super());
        assert!(!st.users["app"].is_super());
        let acl = &st.acls["app"];
        let lo = Some("127.0.0.1".parse().unwrap());
        let t = |n: &str| Resource::literal(ResType::Topic, n);
        let d = |n: &str, a| crate::acl::v2::eval::decide(Some(acl), &t(n), &[a], lo);
        assert!(d("t1", Action::Pub).is_ok());
        assert!(
            d("t1", Action::Sub).is_err(),
            "custom t1 is Pub only; default not consulted"
        );
        assert!(d("t2", Action::Sub).is_ok());
        assert!(d("t3", Action::Pub).is_err());
        assert!(d("other", Action::Pub).is_err());
        assert_eq!(acl.default.len(), 2);
        let _ = PolicyType::Default;
        // A second run migrates nothing twice.
        let again = from_v1(st.clone(), &p).unwrap();
        assert_eq!(again.users.len(), 2);
    }
}
