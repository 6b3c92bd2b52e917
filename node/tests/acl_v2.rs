//! ACL 2.0 on real processes: users and policies managed with the AUTH_* requests (native
//! and a hand-built, signed remoting frame), each permission allowing exactly what it names
//! (topic, prefixed pattern, deny first, source address), kept across a kill -9, copied to
//! a slave, and migrated from plain_acl.yml.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use common::*;
use ringmq_wire::auth::{sign_remoting, Credentials, RemotingKey};
use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::command::{
    AclInfo, AuthAclRequest, AuthListUsersRequest, AuthUserRequest, UserInfo,
};
use ringmq_wire::remoting::body::JsonBody;
use ringmq_wire::remoting::frame::{self as rframe, Command, SerializeType};

const ROOT: (&str, &str) = ("root", "root-pw-2.0");
const INNER: (&str, &str) = ("inner", "inner-pw-2.0");
const APP: (&str, &str) = ("app", "app-pw-2.0");

fn creds(c: (&str, &str)) -> Credentials {
    Credentials::new(c.0, c.1).expect("creds")
}

fn v2_sets() -> Vec<String> {
    vec![
        "authenticationEnabled=true".into(),
        "authorizationEnabled=true".into(),
        format!(
            r#"initAuthenticationUser={{"username":"{}","password":"{}"}}"#,
            ROOT.0, ROOT.1
        ),
        format!(
            r#"innerClientAuthenticationCredentials={{"accessKey":"{}","secretKey":"{}"}}"#,
            INNER.0, INNER.1
        ),
    ]
}

fn standalone(dir: &Path, more: &[String]) -> Node {
    let mut args: Vec<String> = vec!["--shards".into(), "1".into()];
    for s in v2_sets().iter().chain(more) {
        args.push("--set".into());
        args.push(s.clone());
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let launch = standalone_launch(&dir.join("data"), &refs);
    Node::start("standalone", dir, launch)
}

fn create_user(c: &mut Client, name: &str, password: &str) {
    let body = UserInfo {
        username: Some(name.into()),
        password: Some(password.into()),
        ..UserInfo::default()
    };
    let h = AuthUserRequest {
        username: name.into(),
    };
    c.call(RequestCode::AuthCreateUser, &h, &body.to_json())
        .ok();
}

/// One AUTH_UPDATE_ACL entry for `User:app`.
fn put_entry(c: &mut Client, resource: &str, actions: &[&str], ips: &[&str], decision: &str) {
    let acl = AclInfo::from_json(
        serde_json::json!({
            "subject": "User:app",
            "policies": [{"policyType": "Custom", "entries": [{
                "resource": resource, "actions": actions, "sourceIps": ips, "decision": decision
            }]}]
        })
        .to_string()
        .as_bytes(),
    )
    .expect("acl json");
    let h = AuthAclRequest {
        subject: "User:app".into(),
    };
    c.call(RequestCode::AuthUpdateAcl, &h, &acl.to_json()).ok();
}

fn send_status(c: &mut Client, topic: &str) -> Status {
    c.send(&Msg::new(topic, 0, b"acl2".to_vec())).status()
}

/// A RocketMQ remoting request, signed as AclClientRPCHook signs it when `signer` is given.
fn remoting(
    addr: SocketAddr,
    code: i32,
    ext: &[(&str, &str)],
    body: &[u8],
    signer: Option<(&str, &str)>,
) -> (Command, Vec<u8>) {
    let mut fields: ringmq_wire::remoting::ext::ExtFields = ext.iter().copied().collect();
    if let Some(c) = signer {
        let key = RemotingKey::new(c.1.as_bytes());
        sign_remoting(&mut fields, &creds(c), &key, body);
    }
    let cmd = Command::request(code, 7, fields);
    let f = rframe::encode(&cmd, SerializeType::Json, body).expect("encode");
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s.write_all(&f).expect("write");
    let mut buf = Vec::new();
    loop {
        if let Some(n) = rframe::check(&buf, rframe::FRAME_BYTES_MAX).expect("frame") {
            let p = rframe::parse(&buf[..n]).expect("parse");
            return (p.command.clone(), p.body.to_vec());
        }
        let mut chunk = [0u8; 65536];
        let n = s.read(&mut chunk).expect("read");
        assert!(n > 0, "the broker closed the connection");
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[test]
fn each_permission_allows_exactly_what_it_names_and_survives_kill9() {
    let dir = ringmq_testkit::tempdir("acl-v2");
    let mut node = standalone(dir.path(), &[]);
    let addr = node.broker_addr();
    let mut root = Client::connect_as(addr, &creds(ROOT));
    for t in ["TA", "TB", "pre-x", "pre-y"] {
        root.create_topic_ok(t, 1);
    }
    create_user(&mut root, APP.0, APP.1);
    put_entry(&mut root, "Topic:TA", &["Pub"], &[], "Allow");

    let mut app = Client::connect_as(addr, &creds(APP));
    assert_eq!(send_status(&mut app, "TA"), Status::Success);
    assert_eq!(send_status(&mut app, "TB"), Status::NoPermission);
    let r = app.pull("TA", 0, 0, 1, 0);
    assert_eq!(
        r.status(),
        Status::NoPermission,
        "pub does not allow sub: {}",
        r.remark()
    );
    // Nobody unsigned, nor a wrong password.
    let mut anon = Client::connect(addr);
    assert_eq!(send_status(&mut anon, "TA"), Status::NoPermission);
    let wrong = Client::try_connect_as(addr, Some(&creds((APP.0, "not-the-password"))));
    if let Ok(mut w) = wrong {
        assert_ne!(send_status(&mut w, "TA"), Status::Success);
    }

    // Prefixed, and a Deny on a more specific resource first.
    put_entry(&mut root, "Topic:pre*", &["Pub"], &[], "Allow");
    assert_eq!(send_status(&mut app, "pre-y"), Status::Success);
    put_entry(&mut root, "Topic:pre-x", &["Pub"], &[], "Deny");
    assert_eq!(send_status(&mut app, "pre-x"), Status::NoPermission);
    assert_eq!(send_status(&mut app, "pre-y"), Status::Success);

    // Source address: an entry for 10.0.0.0/8 does not apply from 127.0.0.1.
    put_entry(&mut root, "Topic:TB", &["Pub"], &["10.0.0.0/8"], "Allow");
    assert_eq!(send_status(&mut app, "TB"), Status::NoPermission);
    put_entry(&mut root, "Topic:TB", &["Pub"], &["127.0.0.1/32"], "Allow");
    assert_eq!(send_status(&mut app, "TB"), Status::Success);

    // Only a super user manages.
    let list = AuthListUsersRequest {
        filter: String::new(),
    };
    let r = app.call(RequestCode::AuthListUser, &list, &[]);
    assert_eq!(r.status(), Status::NoPermission, "{}", r.remark());

    // A remoting AUTH_CREATE_USER (3001) signed by root, then AUTH_LIST_USER (3005).
    let body = br#"{"username":"rem","password":"rem-pw","userType":"Normal"}"#;
    let (resp, _) = remoting(addr, 3001, &[("username", "rem")], body, Some(ROOT));
    assert_eq!(resp.code, 0, "{:?}", resp.remark);
    let (resp, listed) = remoting(addr, 3005, &[], &[], Some(ROOT));
    assert_eq!(resp.code, 0, "{:?}", resp.remark);
    let users = Vec::<UserInfo>::from_json(&listed).expect("user list json");
    let names: Vec<_> = users.iter().filter_map(|u| u.username.clone()).collect();
    assert!(
        names.contains(&"rem".to_string()) && names.contains(&"app".to_string()),
        "{names:?}"
    );
    assert!(
        users.iter().all(|u| u.password.is_none()),
        "no passwords listed"
    );
    let (resp, _) = remoting(addr, 3005, &[], &[], None);
    assert_eq!(resp.code, 16, "unsigned: NO_PERMISSION {:?}", resp.remark);
    let (resp, _) = remoting(addr, 3005, &[], &[], Some(APP));
    assert_eq!(resp.code, 16, "not a super user: {:?}", resp.remark);

    // kill -9: users and policies are back as they were.
    drop((root, app, anon));
    node.kill9();
    let node = standalone(dir.path(), &[]);
    let addr = node.broker_addr();
    let mut app = Client::connect_as(addr, &creds(APP));
    assert_eq!(send_status(&mut app, "TA"), Status::Success);
    assert_eq!(send_status(&mut app, "TB"), Status::Success);
    assert_eq!(send_status(&mut app, "pre-y"), Status::Success);
    assert_eq!(send_status(&mut app, "pre-x"), Status::NoPermission);
    let mut root = Client::connect_as(addr, &creds(ROOT));
    let h = AuthUserRequest {
        username: "rem".into(),
    };
    let r = root.call(RequestCode::AuthGetUser, &h, &[]);
    r.ok();
    assert!(String::from_utf8_lossy(&r.body).contains("\"rem\""));
}

#[test]
fn plain_acl_accounts_are_migrated() {
    let dir = ringmq_testkit::tempdir("acl-v2-migrate");
    let acl = dir.path().join("plain_acl.yml");
    std::fs::write(
        &acl,
        "accounts:\n  - {accessKey: v1root, secretKey: v1root-secret, admin: true}\n  - {accessKey: v1app, secretKey: v1app-secret, topicPerms: [TM=PUB]}\n",
    )
    .expect("acl file");
    let more = vec![
        "migrateAuthFromV1Enabled=true".to_string(),
        format!("aclFilePath={}", acl.display()),
    ];
    let node = standalone(dir.path(), &more);
    let addr = node.broker_addr();
    let mut v1root = Client::connect_as(addr, &creds(("v1root", "v1root-secret")));
    v1root.create_topic_ok("TM", 1);
    v1root.create_topic_ok("TN", 1);
    let mut v1app = Client::connect_as(addr, &creds(("v1app", "v1app-secret")));
    assert_eq!(send_status(&mut v1app, "TM"), Status::Success);
    assert_eq!(send_status(&mut v1app, "TN"), Status::NoPermission);
}

#[test]
fn a_slave_has_its_masters_users_and_policies() {
    let dir = ringmq_testkit::tempdir("acl-v2-slave");
    let ns = Node::namesrv(dir.path(), &[]);
    let nsa = ns.namesrv_addr();
    let mut mcfg = HaBroker::master(&dir.path().join("master"), "ASYNC_MASTER", 1);
    mcfg.extra = v2_sets();
    let master = mcfg.start(nsa);
    mcfg.pin_ports(&master, nsa);
    let ha = SocketAddr::from(([127, 0, 0, 1], mcfg.ha_listen_port.expect("ha port")));
    let mut scfg = HaBroker::slave(&dir.path().join("slave"), 1, Some(ha));
    // The slave knows only its inner user; root and app come from the master.
    scfg.extra = v2_sets()
        .into_iter()
        .filter(|s| !s.starts_with("initAuthenticationUser"))
        .collect();
    let slave = scfg.start(nsa);
    let mut root = Client::connect_as(master.broker_addr(), &creds(ROOT));
    create_user(&mut root, APP.0, APP.1);
    put_entry(&mut root, "Topic:orders*", &["Sub"], &[], "Allow");

    let mut inner = Client::connect_as(slave.broker_addr(), &creds(INNER));
    let h = AuthAclRequest {
        subject: "User:app".into(),
    };
    let mut last = String::new();
    let copied = (0..100).any(|_| {
        let r = inner.call(RequestCode::AuthGetAcl, &h, &[]);
        last = format!("{:?} {}", r.status(), String::from_utf8_lossy(&r.body));
        if r.status() == Status::Success && last.contains("Topic:orders*") {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
        false
    });
    assert!(
        copied,
        "the slave did not get app's policy: {last}\n{}",
        slave.log()
    );
    // The slave authenticates app with the copied password.
    let mut app = Client::connect_as(slave.broker_addr(), &creds(APP));
    let r = app.call(
        RequestCode::AuthGetUser,
        &AuthUserRequest {
            username: "app".into(),
        },
        &[],
    );
    assert_eq!(
        r.status(),
        Status::NoPermission,
        "authenticated, not super: {}",
        r.remark()
    );
    assert!(
        std::fs::read_to_string(scfg.store_root().join("config/auth.json"))
            .expect("the slave's file")
            .contains("Topic:orders*")
    );
}
