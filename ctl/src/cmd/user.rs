//! ACL 2.0 through the brokers (brokers with authenticationEnabled or authorizationEnabled):
//! `user create|update|delete|get|list` and `acl policy create|update|delete|get|list`, with
//! RocketMQ 5's AUTH_* requests. Every master is asked by default (so a cluster's users and
//! policies stay alike), or those of one cluster (-c), or one broker (-b); each broker's
//! answer is its own row. A password is read from an environment variable or stdin, never
//! from the command line, and never printed (no broker sends one back).

use std::io::BufRead as _;
use std::net::SocketAddr;

use ringmq_client::wire::command::{AclInfo, PolicyEntryInfo, PolicyInfo, UserInfo};
use ringmq_client::Admin;
use serde_json::{json, Value};

use super::acl::{failures, targets};
use super::usage;
use crate::cli::{
    PolicyDeleteArgs, PolicyListArgs, PolicySubjectArgs, PolicyWriteArgs, UserListArgs,
    UserNameArgs, UserWriteArgs,
};
use crate::error::Result;
use crate::output::{json_only, text, Report, Section};

fn result_section(name: &'static str, what: &str, done: &str, answers: &[Answer]) -> Section {
    let mut s = Section::list(
        name,
        vec![
            text("BROKER", "broker"),
            text("ADDRESS", "address"),
            text("NAME", "name"),
            text("RESULT", "result"),
            json_only("error"),
        ],
    );
    for (b, a, r) in answers {
        let (result, error) = match r {
            Ok(()) => (done.to_owned(), Value::Null),
            Err(e) => (format!("failed: {e}"), json!(e)),
        };
        s.push(vec![
            json!(b),
            json!(a.to_string()),
            json!(what),
            json!(result),
            error,
        ]);
    }
    s
}

type Answer = (String, SocketAddr, std::result::Result<(), String>);

fn report(
    name: &'static str,
    what: &str,
    doing: &str,
    done: &str,
    answers: Vec<Answer>,
) -> Result<Report> {
    let notes = failures(&answers, doing)?
        .into_iter()
        .map(|n| n.replace("ACL file", "users and policies"))
        .collect();
    let mut r = Report::one(result_section(name, what, done, &answers));
    r.notes = notes;
    Ok(r)
}

fn password(a: &UserWriteArgs) -> Result<Option<String>> {
    if let Some(var) = &a.password_env {
        return match std::env::var(var) {
            Ok(s) if !s.is_empty() => Ok(Some(s)),
            _ => Err(usage(format!(
                "--password-env {var}: the environment variable {var} is not set or empty"
            ))),
        };
    }
    if a.password_stdin {
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .map_err(|e| usage(format!("--password-stdin: reading stdin: {e}")))?;
        let s = line.trim_end_matches(['\r', '\n']).to_owned();
        if s.is_empty() {
            return Err(usage("--password-stdin: stdin gave no password"));
        }
        return Ok(Some(s));
    }
    Ok(None)
}

pub async fn user_write(admin: &Admin, a: &UserWriteArgs, update: bool) -> Result<Report> {
    let password = password(a)?;
    if password.is_none() && !update {
        return Err(usage(
            "a new user needs its password: --password-env VAR or --password-stdin",
        ));
    }
    let info = UserInfo {
        username: Some(a.username.clone()),
        password,
        user_type: a.user_type.clone(),
        user_status: a.user_status.clone(),
    };
    let mut answers = Vec::new();
    for (name, addr) in targets(admin, &a.target).await? {
        let r = admin.user_write(addr, update, &info).await;
        answers.push((name, addr, r.map_err(|e| e.to_string())));
    }
    let (doing, done) = if update {
        (format!("updating user {}", a.username), "updated")
    } else {
        (format!("creating user {}", a.username), "created")
    };
    report("brokers", &a.username, &doing, done, answers)
}

pub async fn user_delete(admin: &Admin, a: &UserNameArgs) -> Result<Report> {
    let mut answers = Vec::new();
    for (name, addr) in targets(admin, &a.target).await? {
        let r = admin.user_delete(addr, &a.username).await;
        answers.push((name, addr, r.map_err(|e| e.to_string())));
    }
    let doing = format!("deleting user {}", a.username);
    report("brokers", &a.username, &doing, "deleted", answers)
}

fn user_columns() -> Vec<crate::output::Column> {
    vec![
        text("BROKER", "broker"),
        text("ADDRESS", "address"),
        text("USERNAME", "username"),
        text("USER_TYPE", "user_type"),
        text("USER_STATUS", "user_status"),
    ]
}

fn user_row(b: &str, addr: SocketAddr, u: &UserInfo) -> Vec<Value> {
    vec![
        json!(b),
        json!(addr.to_string()),
        json!(u.username),
        json!(u.user_type),
        json!(u.user_status),
    ]
}

/// `user get`: the user on each broker; a broker where it does not exist is a failure, and
/// the command fails when it exists on none.
pub async fn user_get(admin: &Admin, a: &UserNameArgs) -> Result<Report> {
    let mut s = Section::list("users", user_columns());
    let mut answers = Vec::new();
    for (name, addr) in targets(admin, &a.target).await? {
        let r = match admin.user_get(addr, &a.username).await {
            Ok(Some(u)) => {
                s.push(user_row(&name, addr, &u));
                Ok(())
            }
            Ok(None) => Err(format!("user {} does not exist", a.username)),
            Err(e) => Err(e.to_string()),
        };
        answers.push((name, addr, r));
    }
    read_report(s, &answers, &format!("reading user {}", a.username))
}

pub async fn user_list(admin: &Admin, a: &UserListArgs) -> Result<Report> {
    let mut s = Section::list("users", user_columns());
    let mut answers = Vec::new();
    for (name, addr) in targets(admin, &a.target).await? {
        let r = match admin
            .user_list(addr, a.filter.as_deref().unwrap_or(""))
            .await
        {
            Ok(users) => {
                for u in &users {
                    s.push(user_row(&name, addr, u));
                }
                Ok(())
            }
            Err(e) => Err(e.to_string()),
        };
        answers.push((name, addr, r));
    }
    read_report(s, &answers, "listing users")
}

fn read_report(s: Section, answers: &[Answer], doing: &str) -> Result<Report> {
    let notes = failures(answers, doing)?
        .into_iter()
        .map(|n| n.replace(" (this broker's ACL file was not changed)", ""))
        .collect();
    let mut r = Report::one(s);
    r.notes = notes;
    Ok(r)
}

/// `User:name` for a bare `name`.
fn subject(s: &str) -> String {
    if s.contains(':') {
        s.to_owned()
    } else {
        format!("User:{s}")
    }
}

/// The ACL `acl policy create|update` sends: one entry per --resource, each with the same
/// actions, source addresses and decision (as RocketMQ's mqadmin createAcl builds it).
fn acl_of(a: &PolicyWriteArgs) -> Result<AclInfo> {
    let actions: Vec<String> = a
        .actions
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    if actions.is_empty() {
        return Err(usage("--actions: name at least one (Pub,Sub,...)"));
    }
    let entries = a
        .resource
        .iter()
        .map(|r| PolicyEntryInfo {
            resource: Some(r.clone()),
            actions: actions.clone(),
            source_ips: a.source_ip.clone(),
            decision: Some(a.decision.clone()),
        })
        .collect();
    Ok(AclInfo {
        subject: Some(subject(&a.subject)),
        policies: vec![PolicyInfo {
            policy_type: Some(a.policy_type.clone()),
            entries,
        }],
    })
}

pub async fn policy_write(admin: &Admin, a: &PolicyWriteArgs, update: bool) -> Result<Report> {
    let acl = acl_of(a)?;
    let subject = subject(&a.subject);
    let mut answers = Vec::new();
    for (name, addr) in targets(admin, &a.target).await? {
        let r = admin.policy_write(addr, update, &acl).await;
        answers.push((name, addr, r.map_err(|e| e.to_string())));
    }
    let doing = format!("writing the policy of {subject}");
    report(
        "brokers",
        &subject,
        &doing,
        if update { "updated" } else { "created" },
        answers,
    )
}

pub async fn policy_delete(admin: &Admin, a: &PolicyDeleteArgs) -> Result<Report> {
    let subject = subject(&a.subject);
    let mut answers = Vec::new();
    for (name, addr) in targets(admin, &a.target).await? {
        let r = admin
            .policy_delete(
                addr,
                &subject,
                a.policy_type.as_deref().unwrap_or(""),
                a.resource.as_deref().unwrap_or(""),
            )
            .await;
        answers.push((name, addr, r.map_err(|e| e.to_string())));
    }
    let doing = format!("deleting the policy of {subject}");
    report("brokers", &subject, &doing, "deleted", answers)
}

fn entry_columns() -> Vec<crate::output::Column> {
    vec![
        text("BROKER", "broker"),
        text("ADDRESS", "address"),
        text("SUBJECT", "subject"),
        text("POLICY_TYPE", "policy_type"),
        text("RESOURCE", "resource"),
        text("ACTIONS", "actions"),
        text("SOURCE_IPS", "source_ips"),
        text("DECISION", "decision"),
    ]
}

fn push_entries(s: &mut Section, b: &str, addr: SocketAddr, acl: &AclInfo) {
    for p in &acl.policies {
        for e in &p.entries {
            s.push(vec![
                json!(b),
                json!(addr.to_string()),
                json!(acl.subject),
                json!(p.policy_type),
                json!(e.resource),
                json!(e.actions.join(",")),
                if e.source_ips.is_empty() {
                    Value::Null
                } else {
                    json!(e.source_ips.join(","))
                },
                json!(e.decision),
            ]);
        }
    }
}

/// `acl policy get`: a subject with no ACL on a broker is a failure there.
pub async fn policy_get(admin: &Admin, a: &PolicySubjectArgs) -> Result<Report> {
    let subject = subject(&a.subject);
    let mut s = Section::list("entries", entry_columns());
    let mut answers = Vec::new();
    for (name, addr) in targets(admin, &a.target).await? {
        let r = match admin.policy_get(addr, &subject).await {
            Ok(Some(acl)) => {
                push_entries(&mut s, &name, addr, &acl);
                Ok(())
            }
            Ok(None) => Err(format!("{subject} has no policy")),
            Err(e) => Err(e.to_string()),
        };
        answers.push((name, addr, r));
    }
    read_report(s, &answers, &format!("reading the policy of {subject}"))
}

pub async fn policy_list(admin: &Admin, a: &PolicyListArgs) -> Result<Report> {
    let mut s = Section::list("entries", entry_columns());
    let mut answers = Vec::new();
    for (name, addr) in targets(admin, &a.target).await? {
        let r = admin
            .policy_list(
                addr,
                a.subject_filter.as_deref().unwrap_or(""),
                a.resource_filter.as_deref().unwrap_or(""),
            )
            .await;
        let r = match r {
            Ok(acls) => {
                for acl in &acls {
                    push_entries(&mut s, &name, addr, acl);
                }
                Ok(())
            }
            Err(e) => Err(e.to_string()),
        };
        answers.push((name, addr, r));
    }
    read_report(s, &answers, "listing policies")
}
