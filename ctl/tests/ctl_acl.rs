//! `ringmq-ctl acl ...` against a standalone node with ACL on: whoami as a non-admin, a
//! non-admin refused `acl add`, an admin adding an account that can then send, `acl list`
//! showing it without its secret, and `acl delete` taking the send right away.
#![allow(clippy::unwrap_used)]

mod common;

use common::{ctl_env, Node, Out};
use serde_json::Value;

const ROOT_SECRET: &str = "root-secret-0815";
const VIEWER_SECRET: &str = "viewer-secret-0816";
const APP_SECRET: &str = "app-secret-never-printed-4711";

fn as_user(node: &Node, key: &str, secret: &str, args: &[&str], env: &[(&str, &str)]) -> Out {
    let mut all = vec!["-n", node.namesrv.as_str(), "--access-key", key];
    all.extend_from_slice(args);
    let mut e = vec![("RINGMQ_SECRET_KEY", secret)];
    e.extend_from_slice(env);
    ctl_env(&all, &e)
}

fn json(out: &Out, args: &[&str]) -> Value {
    out.ok(args);
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

#[test]
fn acl_accounts_are_administered_through_the_broker() {
    let acl_dir = tempfile::tempdir().unwrap();
    let acl_file = acl_dir.path().join("plain_acl.yml");
    std::fs::write(
        &acl_file,
        format!(
            "globalWhiteRemoteAddresses: []\naccounts:\n  - accessKey: root\n    secretKey: {ROOT_SECRET}\n    admin: true\n  - accessKey: viewer\n    secretKey: {VIEWER_SECRET}\n    admin: false\n    defaultTopicPerm: SUB\n    defaultGroupPerm: SUB\n"
        ),
    )
    .unwrap();
    let file_set = format!("aclFilePath={}", acl_file.display());
    let inner = format!("innerSecretKey={ROOT_SECRET}");
    let node = Node::start_with(&["aclEnable=true", "innerAccessKey=root", &inner, &file_set]);

    // whoami as a non-admin.
    let args = ["acl", "whoami", "--json"];
    let w = json(&as_user(&node, "viewer", VIEWER_SECRET, &args, &[]), &args);
    let me = &w["whoami"][0];
    assert_eq!(me["access_key"], "viewer", "{w}");
    assert_eq!(me["admin"], false, "{w}");
    assert_eq!(me["default_topic_perm"], "SUB", "{w}");
    assert_eq!(me["secret_key"], "<set>", "{w}");

    // acl add as a non-admin is refused.
    let add = [
        "acl",
        "add",
        "--access-key-name",
        "app",
        "--secret-key-env",
        "NEW_SECRET",
        "--topic-perm",
        "AclOrders=PUB",
    ];
    let env = [("NEW_SECRET", APP_SECRET)];
    let out = as_user(&node, "viewer", VIEWER_SECRET, &add, &env);
    let line = out.failed_one_line(&add);
    assert!(
        line.contains("NO_PERMISSION") || line.contains("admin"),
        "{line}"
    );

    // As the admin: a topic, then the account.
    let create = ["topic", "create", "AclOrders", "--queues", "2"];
    as_user(&node, "root", ROOT_SECRET, &create, &[]).ok(&create);
    let out = as_user(&node, "root", ROOT_SECRET, &add, &env);
    out.ok(&add);
    assert!(out.stdout.contains("added"), "{}", out.stdout);
    assert!(!out.stdout.contains(APP_SECRET) && !out.stderr.contains(APP_SECRET));
    assert!(!std::fs::read_to_string(&acl_file).unwrap().is_empty());
    let again = as_user(&node, "root", ROOT_SECRET, &add, &env);
    assert!(again.failed_one_line(&add).contains("already exists"));

    // The new account can send (the broker has it at once; a standalone's name server
    // reads the changed file within its reload interval, 0.5 s).
    let send = ["send", "AclOrders", "hello"];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let out = as_user(&node, "app", APP_SECRET, &send, &[]);
        if out.code == 0 || std::time::Instant::now() > deadline {
            out.ok(&send);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }

    // An offset reset is an admin request: the viewer (SUB on every topic) is refused, root
    // is not.
    let reset = [
        "group",
        "reset-offset",
        "acl-readers",
        "--topic",
        "AclOrders",
        "--to",
        "latest",
    ];
    let line = as_user(&node, "viewer", VIEWER_SECRET, &reset, &[])
        .failed_one_line(&reset)
        .to_owned();
    assert!(line.contains("INVOKE_BROKER_TO_RESET_OFFSET"), "{line}");
    as_user(&node, "root", ROOT_SECRET, &reset, &[]).ok(&reset);

    // acl list shows it without its secret.
    let list = ["acl", "list", "--json"];
    let out = as_user(&node, "root", ROOT_SECRET, &list, &[]);
    let l = json(&out, &list);
    assert!(!out.stdout.contains(APP_SECRET) && !out.stdout.contains(ROOT_SECRET));
    let accounts = l["accounts"].as_array().unwrap();
    let app = accounts
        .iter()
        .find(|a| a["access_key"] == "app")
        .unwrap_or_else(|| panic!("{l}"));
    assert_eq!(app["secret_key"], "<set>");
    assert_eq!(app["topic_perms"], "AclOrders=PUB");
    let table = as_user(&node, "root", ROOT_SECRET, &["acl", "list"], &[]);
    table.ok(&["acl", "list"]);
    assert!(table.stdout.contains("<set>") && !table.stdout.contains(APP_SECRET));

    // Lock-out protection: the caller's own key is not deleted.
    let own = ["acl", "delete", "root"];
    let line = as_user(&node, "root", ROOT_SECRET, &own, &[])
        .failed_one_line(&own)
        .to_owned();
    assert!(line.contains("lock"), "{line}");

    // delete removes it; its sends are refused afterwards.
    let del = ["acl", "delete", "app"];
    let out = as_user(&node, "root", ROOT_SECRET, &del, &[]);
    out.ok(&del);
    assert!(out.stdout.contains("deleted"), "{}", out.stdout);
    let out = as_user(&node, "app", APP_SECRET, &send, &[]);
    assert_ne!(out.code, 0, "{}", out.stdout);
}

#[test]
fn acl_help_explains_each_command() {
    for sub in ["list", "add", "update", "delete", "whoami"] {
        let out = ctl_env(&["acl", sub, "--help"], &[]);
        out.ok(&["acl", sub, "--help"]);
        assert!(out.stdout.contains("Usage"), "{}", out.stdout);
    }
    let out = ctl_env(&["acl", "add", "--help"], &[]);
    for flag in [
        "--secret-key-env",
        "--secret-key-stdin",
        "--topic-perm",
        "--admin",
    ] {
        assert!(out.stdout.contains(flag), "{flag}: {}", out.stdout);
    }
    assert!(out.stdout.contains("never from"), "{}", out.stdout);
}
