//! The AUTH_* changes as plain functions from one [`State`] to the next, so their rules are
//! tested without a broker. Each returns the new state or a refusal the client reads.
//!
//! Rules (RocketMQ 5's, with two lock-out guards of ringmq's own):
//! - create: the username is free and has a password; type `Normal` and status `enable`
//!   unless given. update: the user exists; only the given fields change.
//! - delete user: also deletes its ACL; deleting an unknown user succeeds (RocketMQ's
//!   answer). ringmq refuses deleting the caller's own user and the last enabled super user,
//!   and disabling or demoting the last enabled super user.
//! - create/update ACL: the subject is an existing user; policies merge into the stored
//!   ones (an entry for a resource already present is replaced).
//! - delete ACL: without a resource the subject's whole ACL, else that entry of the policy
//!   (`Custom` unless named); an ACL left empty is removed.

use ringmq_wire::auth::Secret;
use ringmq_wire::command::{AclInfo, UserInfo};

use super::model::{
    check_username, parse_user_status, parse_user_type, subject_user, PolicyType, Resource,
    SubjectAcl, User, UserStatus, UserType, ENTRIES_MAX, NAME_BYTES_MAX,
};
use super::State;

/// Most users, and most subjects with an ACL.
pub const USERS_MAX: usize = 65_536;

pub fn create_user(s: &State, name: &str, info: &UserInfo) -> Result<State, String> {
    check_username(name)?;
    if s.users.contains_key(name) {
        return Err(format!("The user {name} is existed"));
    }
    if s.users.len() >= USERS_MAX {
        return Err(format!("over {USERS_MAX} users"));
    }
    let password = match info.password.as_deref() {
        Some(p) if !p.is_empty() => p,
        _ => return Err("password can not be blank".to_owned()),
    };
    check_password(password)?;
    let user_type = match info.user_type.as_deref() {
        Some(t) if !t.is_empty() => parse_user_type(t)?,
        _ => UserType::Normal,
    };
    let status = match info.user_status.as_deref() {
        Some(t) if !t.is_empty() => parse_user_status(t)?,
        _ => UserStatus::Enable,
    };
    let mut out = s.clone();
    out.users.insert(
        name.to_owned(),
        User::new(name.to_owned(), Secret::new(password), user_type, status),
    );
    Ok(out)
}

pub fn update_user(s: &State, name: &str, info: &UserInfo) -> Result<State, String> {
    let Some(old) = s.users.get(name) else {
        return Err(format!("The user {name} is not exist"));
    };
    let password = match info.password.as_deref() {
        Some(p) if !p.is_empty() => {
            check_password(p)?;
            Secret::new(p)
        }
        _ => old.password.clone(),
    };
    let user_type = match info.user_type.as_deref() {
        Some(t) if !t.is_empty() => parse_user_type(t)?,
        _ => old.user_type,
    };
    let status = match info.user_status.as_deref() {
        Some(t) if !t.is_empty() => parse_user_status(t)?,
        _ => old.status,
    };
    let mut out = s.clone();
    out.users.insert(
        name.to_owned(),
        User::new(name.to_owned(), password, user_type, status),
    );
    keep_a_super_user(s, &out, name)?;
    Ok(out)
}

pub fn delete_user(s: &State, name: &str, caller: Option<&str>) -> Result<State, String> {
    if !s.users.contains_key(name) {
        return Ok(s.clone());
    }
    if caller == Some(name) {
        return Err(format!(
            "user {name} is the one this request is signed with; deleting it would lock you \
             out (delete it as another super user)"
        ));
    }
    let mut out = s.clone();
    out.users.remove(name);
    out.acls.remove(name);
    keep_a_super_user(s, &out, name)?;
    Ok(out)
}

/// AUTH_CREATE_ACL and AUTH_UPDATE_ACL (the same merge in RocketMQ 5).
pub fn put_acl(s: &State, subject: &str, info: &AclInfo) -> Result<State, String> {
    let subject = match info.subject.as_deref() {
        Some(given) if !given.is_empty() => given,
        _ => subject,
    };
    let name = subject_user(subject)?;
    if !s.users.contains_key(name) {
        return Err(format!("The subject of User:{name} is not exist"));
    }
    if info.policies.is_empty() {
        return Err("The body of acl is null (no policies)".to_owned());
    }
    let parsed = SubjectAcl::parse(&info.policies)?;
    let mut out = s.clone();
    let acl = out.acls.entry(name.to_owned()).or_default();
    acl.merge(parsed);
    if acl.len() > ENTRIES_MAX {
        return Err(format!("User:{name} would hold over {ENTRIES_MAX} entries"));
    }
    if out.acls.len() > USERS_MAX {
        return Err(format!("over {USERS_MAX} subjects with an ACL"));
    }
    Ok(out)
}

pub fn delete_acl(
    s: &State,
    subject: &str,
    policy_type: &str,
    resource: &str,
) -> Result<State, String> {
    let name = subject_user(subject)?;
    if !s.users.contains_key(name) {
        return Err("The subject is not exist.".to_owned());
    }
    if !s.acls.contains_key(name) {
        return Err("The acl is not exist.".to_owned());
    }
    let mut out = s.clone();
    if resource.trim().is_empty() {
        out.acls.remove(name);
        return Ok(out);
    }
    let t = PolicyType::parse(Some(policy_type))?;
    let r = Resource::parse(resource)?;
    if let Some(acl) = out.acls.get_mut(name) {
        acl.policy_mut(t).retain(|e| e.resource != r);
        if acl.is_empty() {
            out.acls.remove(name);
        }
    }
    Ok(out)
}

/// AUTH_LIST_USER: users whose name contains `filter`, without passwords.
pub fn list_users(s: &State, filter: &str) -> Vec<UserInfo> {
    s.users
        .values()
        .filter(|u| filter.is_empty() || u.name.contains(filter))
        .map(|u| u.info(false))
        .collect()
}

/// AUTH_LIST_ACL: subjects containing `subject_filter`, entries whose resource key contains
/// `resource_filter`; subjects left with no entry are not listed.
pub fn list_acls(s: &State, subject_filter: &str, resource_filter: &str) -> Vec<AclInfo> {
    s.acls
        .iter()
        .map(|(name, acl)| (format!("User:{name}"), acl))
        .filter(|(subject, _)| subject_filter.is_empty() || subject.contains(subject_filter))
        .map(|(subject, acl)| acl.info(&subject, resource_filter))
        .filter(|a| !a.policies.is_empty())
        .collect()
}

fn check_password(p: &str) -> Result<(), String> {
    if p.len() > NAME_BYTES_MAX {
        return Err(format!("the password is over {NAME_BYTES_MAX} bytes"));
    }
    Ok(())
}

fn enabled_supers(s: &State) -> usize {
    s.users
        .values()
        .filter(|u| u.is_super() && u.status == UserStatus::Enable)
        .count()
}

fn keep_a_super_user(before: &State, after: &State, name: &str) -> Result<(), String> {
    if enabled_supers(before) > 0 && enabled_supers(after) == 0 {
        return Err(format!(
            "user {name} is the last enabled super user; this change would lock every \
             administrator out"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringmq_wire::command::{PolicyEntryInfo, PolicyInfo};

    fn user(password: Option<&str>, t: Option<&str>) -> UserInfo {
        UserInfo {
            username: None,
            password: password.map(str::to_owned),
            user_type: t.map(str::to_owned),
            user_status: None,
        }
    }

    fn acl(entries: &[(&str, &[&str], &str)]) -> AclInfo {
        AclInfo {
            subject: None,
            policies: vec![PolicyInfo {
                policy_type: None,
                entries: entries
                    .iter()
                    .map(|(r, a, d)| PolicyEntryInfo {
                        resource: Some((*r).to_owned()),
                        actions: a.iter().map(|s| (*s).to_owned()).collect(),
                        source_ips: vec![],
                        decision: Some((*d).to_owned()),
                    })
                    .collect(),
            }],
        }
    }

    #[test]
    fn users_and_acls_change_as_rocketmq_changes_them() {
        let s = State::default();
        let s = create_user(&s, "root", &user(Some("rootpw"), Some("Super"))).unwrap();
        assert!(create_user(&s, "root", &user(Some("x"), None)).is_err());
        assert!(create_user(&s, "app", &user(None, None)).is_err());
        assert!(create_user(&s, "a:b", &user(Some("x"), None)).is_err());
        assert!(create_user(&s, "app", &user(Some("x"), Some("Boss"))).is_err());
        let s = create_user(&s, "app", &user(Some("apppw"), None)).unwrap();
        assert_eq!(s.users["app"].user_type, UserType::Normal);
        let s = put_acl(&s, "User:app", &acl(&[("Topic:a", &["Pub"], "Allow")])).unwrap();
        let s = put_acl(&s, "User:app", &acl(&[("Topic:a", &["Sub"], "Deny")])).unwrap();
        assert_eq!(s.acls["app"].custom.len(), 1, "same resource replaced");
        let s = put_acl(&s, "User:app", &acl(&[("Group:g*", &["Sub"], "Allow")])).unwrap();
        assert_eq!(s.acls["app"].custom.len(), 2);
        assert!(put_acl(&s, "User:ghost", &acl(&[("Topic:a", &["Pub"], "Allow")])).is_err());
        assert!(put_acl(&s, "User:app", &acl(&[("Topic:a", &["Fly"], "Allow")])).is_err());
        assert_eq!(list_acls(&s, "", "Group").len(), 1);
        assert_eq!(list_acls(&s, "", "Group")[0].policies[0].entries.len(), 1);
        let s2 = delete_acl(&s, "User:app", "", "Topic:a").unwrap();
        assert_eq!(s2.acls["app"].custom.len(), 1);
        let s2 = delete_acl(&s2, "User:app", "Custom", "Group:g*").unwrap();
        assert!(!s2.acls.contains_key("app"));
        let s3 = delete_user(&s, "app", Some("root")).unwrap();
        assert!(
            !s3.acls.contains_key("app"),
            "a deleted user's ACL goes too"
        );
        assert!(delete_user(&s, "root", Some("root")).is_err());
        assert!(
            delete_user(&s, "root", Some("other")).is_err(),
            "last super user"
        );
        let mut demote = user(None, Some("Normal"));
        assert!(update_user(&s, "root", &demote).is_err());
        demote.user_type = None;
        demote.user_status = Some("disable".into());
        assert!(update_user(&s, "root", &demote).is_err());
        let s4 = update_user(&s, "app", &demote).unwrap();
        assert_eq!(s4.users["app"].status, UserStatus::Disable);
        assert_eq!(s4.users["app"].password.expose(), "apppw");
        assert!(list_users(&s, "").iter().all(|u| u.password.is_none()));
    }
}
