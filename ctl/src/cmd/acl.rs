//! `acl list|add|update|delete|whoami`: the brokers' ACL files, through the brokers. Every
//! master is asked by default (so a cluster's files stay the same), or those of one cluster
//! (-c), or one broker (-b); each broker's answer is its own row. A new secret key is read
//! from an environment variable or stdin, never from the command line, and never printed.
//! ACL 2.0's policy verbs (`acl policy ...`) and users (`user ...`) are in [`super::user`].

use std::collections::BTreeMap;
use std::io::BufRead as _;
use std::net::SocketAddr;

use ringmq_client::admin::TopicTarget;
use ringmq_client::wire::command::{
    AclAccountChange, AclAccountView, ACL_WRITE_CREATE, ACL_WRITE_UPDATE, WHOAMI_ANONYMOUS,
};
use ringmq_client::Admin;
use serde_json::{json, Value};

use super::usage;
use crate::cli::{AclAccountArgs, AclAddArgs, AclDeleteArgs, AclTargetArgs, AclUpdateArgs};
use crate::error::{Context, CtlError, Result};
use crate::output::{json_only, text, Report, Section};

/// What `list` and `whoami` print for a secret key.
pub const SECRET_SHOWN_AS: &str = "<set>";

/// The brokers to ask: (name, address).
pub(crate) async fn targets(admin: &Admin, t: &AclTargetArgs) -> Result<Vec<(String, SocketAddr)>> {
    if let Some(b) = &t.broker {
        let addr = admin
            .broker_addr(b)
            .await
            .doing(|| format!("finding broker {b}"))?;
        return Ok(vec![(b.clone(), addr)]);
    }
    let target = match &t.cluster {
        Some(c) => TopicTarget::Cluster(c.clone()),
        None => TopicTarget::AllMasters,
    };
    Ok(admin
        .target_masters(&target)
        .await
        .doing(|| "finding the brokers to ask".into())?
        .into_iter()
        .map(|b| (b.name, b.addr))
        .collect())
}

fn account_columns() -> Vec<crate::output::Column> {
    vec![
        text("BROKER", "broker"),
        text("ADDRESS", "address"),
        text("ACCESS_KEY", "access_key"),
        text("SECRET_KEY", "secret_key"),
        text("ADMIN", "admin"),
        text("WHITE_REMOTE_ADDRESS", "white_remote_address"),
        text("DEFAULT_TOPIC_PERM", "default_topic_perm"),
        text("DEFAULT_GROUP_PERM", "default_group_perm"),
        text("TOPIC_PERMS", "topic_perms"),
        text("GROUP_PERMS", "group_perms"),
    ]
}

fn perms_text(m: &BTreeMap<String, String>) -> Value {
    if m.is_empty() {
        return Value::Null;
    }
    json!(m
        .iter()
        .map(|(k, p)| format!("{k}={p}"))
        .collect::<Vec<_>>()
        .join(","))
}

fn account_row(broker: &str, addr: SocketAddr, a: &AclAccountView) -> Vec<Value> {
    vec![
        json!(broker),
        json!(addr.to_string()),
        json!(a.access_key),
        if a.secret_set {
            json!(SECRET_SHOWN_AS)
        } else {
            Value::Null
        },
        json!(a.admin),
        json!(a.white_remote_address),
        json!(a.default_topic_perm),
        json!(a.default_group_perm),
        perms_text(&a.topic_perms),
        perms_text(&a.group_perms),
    ]
}

/// The first failure when every broker failed; else the notes for those that did.
pub(crate) fn failures(
    answers: &[(String, SocketAddr, std::result::Result<(), String>)],
    doing: &str,
) -> Result<Vec<String>> {
    let failed: Vec<String> = answers
        .iter()
        .filter_map(|(b, a, r)| r.as_ref().err().map(|e| format!("broker {b} ({a}): {e}")))
        .collect();
    if !answers.is_empty() && failed.len() == answers.len() {
        let (b, a, _) = &answers[0];
        let e = answers[0].2.as_ref().err().cloned().unwrap_or_default();
        return Err(CtlError::Refused(format!(
            "{doing} on broker {b} ({a}): {e}"
        )));
    }
    Ok(failed
        .into_iter()
        .map(|f| format!("{f} (this broker's ACL file was not changed)"))
        .collect())
}

pub async fn list(admin: &Admin, t: &AclTargetArgs) -> Result<Report> {
    let mut accounts = Section::list("accounts", account_columns());
    let mut white = Section::list(
        "global_white",
        vec![
            text("BROKER", "broker"),
            text("ADDRESS", "address"),
            text("PATTERN", "pattern"),
        ],
    );
    let mut answers = Vec::new();
    for (name, addr) in targets(admin, t).await? {
        match admin.acl_list(addr).await {
            Ok(l) => {
                for a in &l.accounts {
                    accounts.push(account_row(&name, addr, a));
                }
                for w in &l.global_white_remote_addresses {
                    white.push(vec![json!(name), json!(addr.to_string()), json!(w)]);
                }
                answers.push((name, addr, Ok(())));
            }
            Err(e) => answers.push((name, addr, Err(e.to_string()))),
        }
    }
    let notes = failures(&answers, "reading the ACL")?
        .into_iter()
        .map(|n| n.replace(" (this broker's ACL file was not changed)", ""))
        .collect();
    let mut report = Report::one(accounts).with(white);
    report.notes = notes;
    Ok(report)
}

/// The account change the options describe (the secret from the variable or stdin).
fn change(key: &str, a: &AclAccountArgs) -> Result<AclAccountChange> {
    let secret_key = if let Some(var) = &a.secret_key_env {
        match std::env::var(var) {
            Ok(s) if !s.is_empty() => Some(s),
            _ => {
                return Err(usage(format!(
                    "--secret-key-env {var}: the environment variable {var} is not set or empty"
                )))
            }
        }
    } else if a.secret_key_stdin {
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .map_err(|e| usage(format!("--secret-key-stdin: reading stdin: {e}")))?;
        let s = line.trim_end_matches(['\r', '\n']).to_owned();
        if s.is_empty() {
            return Err(usage("--secret-key-stdin: stdin gave no secret key"));
        }
        Some(s)
    } else {
        None
    };
    let pairs = |flag: &str, list: &[String]| -> Result<BTreeMap<String, String>> {
        let mut m = BTreeMap::new();
        for item in list {
            match item.rsplit_once('=') {
                Some((name, perm)) if !name.trim().is_empty() && !perm.trim().is_empty() => {
                    m.insert(name.trim().to_owned(), perm.trim().to_owned());
                }
                _ => return Err(usage(format!("{flag} {item:?}: use NAME=PERM"))),
            }
        }
        Ok(m)
    };
    Ok(AclAccountChange {
        access_key: key.to_owned(),
        secret_key,
        white_remote_address: a.white_remote_address.clone(),
        admin: if a.admin {
            Some(true)
        } else if a.no_admin {
            Some(false)
        } else {
            None
        },
        default_topic_perm: a.default_topic_perm.clone(),
        default_group_perm: a.default_group_perm.clone(),
        topic_perms: pairs("--topic-perm", &a.topic_perm)?,
        group_perms: pairs("--group-perm", &a.group_perm)?,
    })
}

fn brokers_section(
    key: &str,
    done: &str,
    answers: &[(String, SocketAddr, std::result::Result<(), String>)],
) -> Section {
    let mut s = Section::list(
        "brokers",
        vec![
            text("BROKER", "broker"),
            text("ADDRESS", "address"),
            text("ACCESS_KEY", "access_key"),
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
            json!(key),
            json!(result),
            error,
        ]);
    }
    s
}

async fn write(admin: &Admin, key: &str, a: &AclAccountArgs, mode: u8) -> Result<Report> {
    if a.secret_key_env.is_none() && !a.secret_key_stdin && mode == ACL_WRITE_CREATE {
        return Err(usage(
            "a new account needs its secret key: --secret-key-env VAR or --secret-key-stdin",
        ));
    }
    let c = change(key, a)?;
    let mut answers = Vec::new();
    for (name, addr) in targets(admin, &a.target).await? {
        let r = admin
            .acl_write(addr, mode, &c)
            .await
            .map_err(|e| e.to_string());
        answers.push((name, addr, r));
    }
    let (doing, done) = if mode == ACL_WRITE_CREATE {
        (format!("adding access key {key}"), "added")
    } else {
        (format!("updating access key {key}"), "updated")
    };
    let notes = failures(&answers, &doing)?;
    let mut report = Report::one(brokers_section(key, done, &answers));
    report.notes = notes;
    Ok(report)
}

pub async fn add(admin: &Admin, a: &AclAddArgs) -> Result<Report> {
    write(admin, &a.access_key_name, &a.account, ACL_WRITE_CREATE).await
}

pub async fn update(admin: &Admin, a: &AclUpdateArgs) -> Result<Report> {
    write(admin, &a.access_key_name, &a.account, ACL_WRITE_UPDATE).await
}

pub async fn delete(admin: &Admin, a: &AclDeleteArgs) -> Result<Report> {
    let key = &a.access_key_name;
    let mut answers = Vec::new();
    for (name, addr) in targets(admin, &a.target).await? {
        let r = admin.acl_delete(addr, key).await.map_err(|e| e.to_string());
        answers.push((name, addr, r));
    }
    let notes = failures(&answers, &format!("deleting access key {key}"))?;
    let mut report = Report::one(brokers_section(key, "deleted", &answers));
    report.notes = notes;
    Ok(report)
}

pub async fn whoami(admin: &Admin, t: &AclTargetArgs) -> Result<Report> {
    let mut cols = account_columns();
    cols.insert(2, text("CALLER", "caller"));
    let mut s = Section::list("whoami", cols);
    let mut answers = Vec::new();
    for (name, addr) in targets(admin, t).await? {
        match admin.whoami(addr).await {
            Ok(w) => {
                match (&w.account, w.kind) {
                    (Some(a), _) => {
                        let mut row = account_row(&name, addr, a);
                        row.insert(2, json!("account"));
                        s.push(row);
                    }
                    (None, k) => {
                        let caller = if k == WHOAMI_ANONYMOUS {
                            "anonymous (no credentials; admitted by the global white list)"
                        } else {
                            "unknown"
                        };
                        let mut row = vec![json!(name), json!(addr.to_string()), json!(caller)];
                        row.extend(std::iter::repeat_n(Value::Null, 8));
                        s.push(row);
                    }
                }
                answers.push((name, addr, Ok(())));
            }
            Err(e) => answers.push((name, addr, Err(e.to_string()))),
        }
    }
    let notes = failures(&answers, "asking who this client is")?
        .into_iter()
        .map(|n| n.replace(" (this broker's ACL file was not changed)", ""))
        .collect();
    let mut report = Report::one(s);
    report.notes = notes;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> AclAccountArgs {
        AclAccountArgs {
            secret_key_env: Some("RINGMQ_ACL_TEST_SECRET_UNSET_4711".into()),
            secret_key_stdin: false,
            admin: false,
            no_admin: true,
            default_topic_perm: None,
            default_group_perm: Some("SUB".into()),
            topic_perm: vec!["Orders=PUB|SUB".into()],
            group_perm: vec!["bad".into()],
            white_remote_address: None,
            target: AclTargetArgs {
                cluster: None,
                broker: None,
            },
        }
    }

    #[test]
    fn options_become_a_change_and_the_secret_is_never_in_errors() {
        let e = change("app", &args()).unwrap_err().to_string();
        assert!(e.contains("RINGMQ_ACL_TEST_SECRET_UNSET_4711"), "{e}");
        let mut a = args();
        a.secret_key_env = None;
        let e = change("app", &a).unwrap_err().to_string();
        assert!(e.contains("--group-perm"), "{e}");
        a.group_perm = vec!["billing=SUB".into()];
        let c = change("app", &a).unwrap();
        assert_eq!(c.admin, Some(false));
        assert_eq!(c.topic_perms["Orders"], "PUB|SUB");
        assert_eq!(c.group_perms["billing"], "SUB");
        assert!(c.secret_key.is_none());
    }
}
