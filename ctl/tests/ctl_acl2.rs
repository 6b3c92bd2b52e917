//! `ringmq-ctl user ...` and `ringmq-ctl acl policy ...` against a standalone node with
//! ACL 2.0 on: a super user creates a user and its policy, the user may send exactly where
//! the policy says, lists show no passwords, a normal user may not manage, and asking for a
//! user that does not exist fails.
#![allow(clippy::unwrap_used)]

mod common;

use common::{ctl_env, Node, Out};
use serde_json::Value;

const ROOT_PW: &str = "root-pw-ctl2";
const APP_PW: &str = "app-pw-never-printed-0042";

fn as_user(node: &Node, user: &str, pw: &str, args: &[&str], env: &[(&str, &str)]) -> Out {
    let mut all = vec!["-n", node.namesrv.as_str(), "--access-key", user];
    all.extend_from_slice(args);
    let mut e = vec![("RINGMQ_SECRET_KEY", pw)];
    e.extend_from_slice(env);
    ctl_env(&all, &e)
}

fn json(out: &Out, args: &[&str]) -> Value {
    out.ok(args);
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

#[test]
fn users_and_policies_are_managed_with_ringmq_ctl() {
    let init = format!(r#"initAuthenticationUser={{"username":"root","password":"{ROOT_PW}"}}"#);
    let inner =
        r#"innerClientAuthenticationCredentials={"accessKey":"inner","secretKey":"inner-pw"}"#;
    let node = Node::start_with(&[
        "authenticationEnabled=true",
        "authorizationEnabled=true",
        &init,
        inner,
    ]);
    let root = |args: &[&str], env: &[(&str, &str)]| as_user(&node, "root", ROOT_PW, args, env);
    for t in ["CtOrders", "CtOther"] {
        let a = ["topic", "create", t, "--queues", "1"];
        root(&a, &[]).ok(&a);
    }
    let create = ["user", "create", "app", "--password-env", "PW"];
    let out = root(&create, &[("PW", APP_PW)]);
    out.ok(&create);
    assert!(out.stdout.contains("created") && !out.stdout.contains(APP_PW));
    let again = root(&create, &[("PW", APP_PW)]);
    assert!(again.failed_one_line(&create).contains("existed"));

    let policy = [
        "acl",
        "policy",
        "create",
        "app",
        "-r",
        "Topic:CtOrders",
        "-a",
        "Pub",
    ];
    root(&policy, &[]).ok(&policy);
    let get = ["acl", "policy", "get", "app", "--json"];
    let g = json(&root(&get, &[]), &get);
    assert_eq!(g["entries"][0]["resource"], "Topic:CtOrders", "{g}");
    assert_eq!(g["entries"][0]["actions"], "Pub", "{g}");
    assert_eq!(g["entries"][0]["decision"], "Allow", "{g}");

    let send = ["send", "CtOrders", "hello"];
    as_user(&node, "app", APP_PW, &send, &[]).ok(&send);
    let other = ["send", "CtOther", "hello"];
    let line = as_user(&node, "app", APP_PW, &other, &[])
        .failed_one_line(&other)
        .to_owned();
    assert!(
        line.contains("NO_PERMISSION") || line.contains("no permission"),
        "{line}"
    );

    let list = ["user", "list", "--json"];
    let out = root(&list, &[]);
    let l = json(&out, &list);
    assert!(!out.stdout.contains(APP_PW) && !out.stdout.contains(ROOT_PW));
    let users: Vec<_> = l["users"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["username"].clone())
        .collect();
    assert!(
        users.contains(&Value::from("app")) && users.contains(&Value::from("root")),
        "{l}"
    );
    let line = as_user(&node, "app", APP_PW, &["user", "list"], &[])
        .failed_one_line(&["user", "list"])
        .to_owned();
    assert!(line.contains("super user"), "{line}");
    let ghost = ["user", "get", "ghost"];
    assert!(root(&ghost, &[])
        .failed_one_line(&ghost)
        .contains("does not exist"));

    // Deleting the policy takes the send away; deleting the user, the login.
    let del = ["acl", "policy", "delete", "app"];
    root(&del, &[]).ok(&del);
    as_user(&node, "app", APP_PW, &send, &[]).failed_one_line(&send);
    let del = ["user", "delete", "app"];
    root(&del, &[]).ok(&del);
    let whoami = ["user", "get", "app"];
    assert!(root(&whoami, &[])
        .failed_one_line(&whoami)
        .contains("does not exist"));
}
