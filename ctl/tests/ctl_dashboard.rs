//! `ringmq-ctl dashboard` against a real standalone node:
//!
//! - the JSON API over a TCP socket: the topic the test created with the messages it sent,
//!   the lag it built (equal to `group progress`), a lookup by key and by id finding the
//!   body it sent; malformed, oversized, unknown and cross-origin requests answered
//!   400/431/413/404/405/403 (405 with `Allow`, HEAD included), the headers every answer
//!   carries, a slow client (answered 408 after 10 s) and a flood of idle connections (503
//!   past the cap) not stopping it from serving;
//! - the page in headless Chromium (chromedriver, W3C WebDriver): what a person sees: the
//!   topic, the lag number, the lag graph's line, a lookup's body, a dead letter put back
//!   into its topic with the Resend button;
//! - with ACL on: the login form, a wrong secret refused, the right one showing data, an
//!   account without rights on a topic not seeing it, the page saying what it does not show,
//!   and an action the account may not take refused in place;
//! - administration in the page, each action checked against the broker: a topic created
//!   (and refused a second time), updated and deleted; a group's connections (consumer and
//!   producer), its consume-rate history and the topic's in/out history; a message's detail
//!   with its trace timeline; offsets reset to the earliest message and one queue to an
//!   offset (and one past the queue's end refused); a group's settings saved and deleted;
//!   a broker key changed and a fixed one refused; a 1 KiB dead letter one line high until
//!   clicked.
//!
//! Screenshots go to `target/dashboard-screenshots/` (printed).
#![allow(clippy::unwrap_used)]

mod common;
#[path = "common/webdriver.rs"]
mod webdriver;

use std::io::Write as _;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::{ctl_env, Node, SECURITY_ENV};
use ringmq_testkit::{Proc, Spawn};
use serde_json::Value;
use webdriver::{http_raw, Browser};

const HTTP_LIMIT: Duration = Duration::from_secs(60);

/// A running `ringmq-ctl dashboard` (killed when dropped).
struct Dashboard {
    _proc: Proc,
    addr: SocketAddr,
}

impl Dashboard {
    /// `ringmq-ctl -n NODE [--access-key KEY] dashboard --listen 127.0.0.1:0 --refresh 1s
    /// --history 30s`.
    fn start(node: &Node, creds: Option<(&str, &str)>) -> Dashboard {
        let mut spawn = Spawn::new("ringmq-ctl-dashboard", env!("CARGO_BIN_EXE_ringmq-ctl"))
            .args(["-n", node.namesrv.as_str()])
            .env_remove("RINGMQ_NAMESRV")
            .log(node.dir.path().join("dashboard.log"));
        for k in SECURITY_ENV {
            spawn = spawn.env_remove(k);
        }
        if let Some((key, secret)) = creds {
            spawn = spawn
                .args(["--access-key", key])
                .env("RINGMQ_SECRET_KEY", secret);
        }
        let mut proc = spawn
            .args([
                "dashboard",
                "--listen",
                "127.0.0.1:0",
                "--refresh",
                "1s",
                "--history",
                "30s",
            ])
            .start();
        let line = proc.wait_line(Duration::from_secs(30), "its listening line", |l| {
            l.starts_with("ringmq dashboard: http://")
        });
        let addr = line
            .trim_start_matches("ringmq dashboard: http://")
            .trim_end_matches('/')
            .parse()
            .unwrap_or_else(|e| panic!("{line:?}: {e}"));
        Dashboard { _proc: proc, addr }
    }

    fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// `GET path` with an optional cookie; (status, JSON).
    fn get(&self, path: &str, cookie: Option<&str>) -> (u16, Value) {
        let cookie = cookie
            .map(|c| format!("Cookie: {c}\r\n"))
            .unwrap_or_default();
        let req = format!("GET {path} HTTP/1.1\r\nHost: {}\r\n{cookie}\r\n", self.addr);
        let (status, _, body) = http_raw(self.addr, req.as_bytes(), HTTP_LIMIT);
        let v = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"));
        (status, v)
    }

    /// `GET path` that must answer 200.
    fn ok(&self, path: &str) -> Value {
        let (status, v) = self.get(path, None);
        assert_eq!(status, 200, "{path}: {v}");
        v
    }

    /// `POST path` with a JSON body; (status, head, JSON).
    fn post(&self, path: &str, body: &str) -> (u16, String, Value) {
        let req = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.addr,
            body.len()
        );
        let (status, head, body) = http_raw(self.addr, req.as_bytes(), HTTP_LIMIT);
        (
            status,
            head,
            serde_json::from_str(&body).unwrap_or(Value::Null),
        )
    }

    /// Sends raw bytes; the status answered.
    fn raw(&self, bytes: &[u8]) -> u16 {
        http_raw(self.addr, bytes, HTTP_LIMIT).0
    }
}

/// Creates `topic` (2 queues), sends `n` messages to its queue 0 with keys `{prefix}-i`
/// and bodies `{prefix} body i`, and lets `group` consume `consumed` of them (so the
/// group's lag is `n - consumed`, all on queue 0).
fn fill(node: &Node, topic: &str, prefix: &str, n: usize, group: &str, consumed: usize) {
    node.json(&["topic", "create", topic, "--queues", "2"]);
    for i in 0..n {
        let key = format!("{prefix}-{i}");
        let body = format!("{prefix} body {i}");
        node.json(&["send", topic, &body, "--key", &key, "--queue", "0"]);
    }
    let count = consumed.to_string();
    let out = node.ctl(&[
        "consume", topic, "-g", group, "--count", &count, "--wait", "3s", "--json",
    ]);
    out.ok(&["consume"]);
    let got: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(got["messages"].as_array().unwrap().len(), consumed, "{got}");
}

fn find<'a>(list: &'a Value, key: &str, name: &str) -> Option<&'a Value> {
    list.as_array()?.iter().find(|x| x[key] == name)
}

#[test]
fn dashboard_api_serves_what_ctl_reads_and_refuses_bad_requests() {
    let node = Node::start();
    fill(&node, "DashOrders", "dash", 10, "dash-billing", 4);
    let progress = node.json(&["group", "progress", "dash-billing"]);
    assert_eq!(progress["summary"]["total_lag"], 6, "{progress}");
    let d = Dashboard::start(&node, None);

    let config = d.ok("/api/config");
    assert_eq!(config["acl"], false, "{config}");
    assert_eq!(config["refresh_ms"], 1000, "{config}");

    let topics = d.ok("/api/topics");
    let t = find(&topics["topics"], "topic", "DashOrders").unwrap_or_else(|| panic!("{topics}"));
    assert_eq!(t["queues"], 2, "{t}");
    assert_eq!(t["stored_msgs"], 10, "{t}");

    let groups = d.ok("/api/groups");
    let g = find(&groups["groups"], "group", "dash-billing").unwrap_or_else(|| panic!("{groups}"));
    assert_eq!(g["total_lag"], progress["summary"]["total_lag"], "{g}");
    assert_eq!(g["topics"], serde_json::json!(["DashOrders"]), "{g}");

    // The sampler keeps one lag reading per --refresh.
    let history =
        ringmq_testkit::wait::wait_for(Duration::from_secs(15), "two lag readings", || {
            let h = d.ok("/api/lag-history?group=dash-billing");
            (h["points"].as_array().unwrap().len() >= 2).then_some(h)
        });
    assert!(
        history["points"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["lag"] == 6),
        "{history}"
    );
    let group = d.ok("/api/group?group=dash-billing");
    let lags: u64 = group["queues"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|q| q["topic"] == "DashOrders")
        .filter_map(|q| Some(q["broker_offset"].as_u64()? - q["consumer_offset"].as_u64()?))
        .sum();
    assert_eq!(lags, 6, "lag is the difference of offsets: {group}");

    // Rates: 5 more messages in, seen as msg/s > 0 by a later reading.
    for i in 10..15 {
        node.json(&[
            "send",
            "DashOrders",
            &format!("dash body {i}"),
            "--key",
            &format!("dash-{i}"),
        ]);
    }
    ringmq_testkit::wait::wait_until(Duration::from_secs(15), "an in-rate", || {
        let t = d.ok("/api/topics");
        find(&t["topics"], "topic", "DashOrders")
            .is_some_and(|t| t["in_per_s"].as_f64().unwrap_or(0.0) > 0.0)
    });

    // Lookups find what the test sent.
    let by_key = d.ok("/api/msg/key?topic=DashOrders&key=dash-7");
    let msgs = by_key["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 1, "{by_key}");
    assert_eq!(msgs[0]["body"], "dash body 7");
    let id = msgs[0]["msg_id"].as_str().unwrap();
    let by_id = d.ok(&format!("/api/msg/id?id={id}"));
    assert_eq!(by_id["message"]["body"], "dash body 7", "{by_id}");
    let cluster = d.ok("/api/cluster");
    assert_eq!(
        cluster["brokers"][0]["address"],
        node.broker.as_str(),
        "{cluster}"
    );
    // A sampler round reads the brokers' counters before the topics' offsets, so the round
    // that first showed the in-rate may have read the counters before the last sends.
    ringmq_testkit::wait::wait_until(Duration::from_secs(15), "msgs_in of 15", || {
        let c = d.ok("/api/cluster");
        c["brokers"][0]["msgs_in"].as_u64().unwrap_or(0) >= 15
    });
    d.ok("/api/delay");
    d.ok("/api/txn");
    let dlq = d.ok("/api/dlq?group=dash-billing");
    assert_eq!(dlq["summary"]["dead_letters"], 0, "{dlq}");

    // Refusals, each as JSON with its status.
    assert_eq!(d.get("/api/nope", None).0, 404);
    assert_eq!(d.get("/api/topic", None).0, 400, "a missing parameter");
    assert_eq!(
        d.get("/api/msg/time?topic=DashOrders&begin=yesterday", None)
            .0,
        400
    );
    let (status, head, _) = d.post("/api/topics", "");
    assert_eq!(status, 405, "{head}");
    assert!(head.contains("\r\nAllow: GET\r\n"), "{head}");
    let head_req = format!("HEAD /api/topics HTTP/1.1\r\nHost: {}\r\n\r\n", d.addr);
    let (status, head, _) = http_raw(d.addr, head_req.as_bytes(), HTTP_LIMIT);
    assert_eq!(status, 405, "HEAD is not GET: {head}");
    // Every answer: one request per connection, nothing cached or sniffed, the page's policy.
    let (_, head, _) = http_raw(d.addr, b"GET /api/config HTTP/1.1\r\n\r\n", HTTP_LIMIT);
    for line in [
        "Content-Type: application/json",
        "Connection: close",
        "Cache-Control: no-store",
        "X-Content-Type-Options: nosniff",
        "Content-Security-Policy: default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    ] {
        assert!(head.lines().any(|l| l == line), "{line:?} in {head}");
    }
    assert_eq!(d.post("/api/dlq/resend", "not json").0, 400);
    assert_eq!(d.raw(b"GARBAGE\r\n\r\n"), 400);
    assert_eq!(
        d.raw(b"GET /api/config HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"),
        400
    );
    let big = format!(
        "GET /api/config HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(20_000)
    );
    assert_eq!(d.raw(big.as_bytes()), 431);
    assert_eq!(
        d.raw(b"POST /api/login HTTP/1.1\r\nContent-Length: 10000000\r\n\r\n"),
        413
    );
    let cross = format!(
        "POST /api/dlq/resend HTTP/1.1\r\nHost: {}\r\nOrigin: http://evil.example\r\nContent-Length: 2\r\n\r\n{{}}",
        d.addr
    );
    assert_eq!(d.raw(cross.as_bytes()), 403);
    assert_eq!(d.post("/api/login", "{}").0, 400, "no ACL: no login");
    let (status, _, v) = d.post("/api/dlq/resend", r#"{"group":"dash-billing"}"#);
    assert_eq!(status, 409, "nothing to resend: {v}");
    assert!(
        v["error"].as_str().unwrap().contains("no dead letters"),
        "{v}"
    );

    // A slow client (half a head) does not hold up others; a flood of idle connections
    // past the limit is answered 503, and the server serves again once they leave.
    let mut slow = TcpStream::connect(d.addr).unwrap();
    slow.write_all(b"GET /api/config HTTP/1.1\r\nHo").unwrap();
    assert_eq!(d.get("/api/config", None).0, 200);
    let idle: Vec<TcpStream> = (0..40)
        .map(|_| TcpStream::connect(d.addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(d.raw(b"GET /api/config HTTP/1.1\r\n\r\n"), 503);
    drop(idle);
    ringmq_testkit::wait::wait_until(Duration::from_secs(15), "serving again", || {
        d.raw(b"GET /api/config HTTP/1.1\r\n\r\n") == 200
    });
    // The half head gets 408 once its 10 s are up (then the connection closes).
    slow.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut answer = String::new();
    let _ = std::io::Read::read_to_string(&mut slow, &mut answer);
    assert!(answer.starts_with("HTTP/1.1 408 "), "{answer}");
    assert!(answer.contains("not received in time"), "{answer}");
    let page = http_raw(d.addr, b"GET / HTTP/1.1\r\n\r\n", HTTP_LIMIT);
    assert_eq!(page.0, 200);
    assert!(page.2.contains("<title>ringmq dashboard</title>"));
    assert!(
        !page.2.contains("https://") && !page.2.contains("http://"),
        "no external URL"
    );
}

#[test]
fn dashboard_help_names_every_flag_and_bad_values_are_refused() {
    let args = ["dashboard", "--help"];
    let out = ctl_env(&args, &[]);
    out.ok(&args);
    for want in [
        "--listen",
        "127.0.0.1:8080",
        "--refresh",
        "--history",
        "10,000",
        "ACL",
        "msg/s",
    ] {
        assert!(out.stdout.contains(want), "{want}: {}", out.stdout);
    }
    for bad in [
        &["dashboard", "--refresh", "0s"][..],
        &["dashboard", "--refresh", "5s", "--history", "2s"],
        &["dashboard", "--refresh", "1s", "--history", "5h"],
    ] {
        let out = ctl_env(bad, &[]);
        let line = out.failed_one_line(bad);
        assert!(
            line.contains("--refresh") || line.contains("--history"),
            "{line}"
        );
        assert_eq!(out.code, 2, "{bad:?}");
    }
}

#[test]
fn dashboard_page_in_headless_chromium_shows_topic_lag_graph_and_lookup() {
    webdriver::require_chromium();
    let node = Node::start();
    fill(&node, "PageOrders", "page", 8, "page-billing", 3);
    let d = Dashboard::start(&node, None);
    let b = Browser::start();
    b.goto(&d.url());

    b.wait_text("#topic-table", "PageOrders");
    let row = b.wait_text("#group-table", "page-billing");
    assert!(row.contains('5'), "lag 5 in the group row: {row}");
    b.click("#group-table tbody tr");
    b.wait_text("#sum-lag", "5 msg");
    // The oldest of the 5 waiting messages was sent by this test, seconds ago.
    let waited = b.wait_text("#sum-oldest-waiting", " s");
    let secs: f64 = waited.trim_end_matches(" s").trim().parse().unwrap_or(-1.0);
    assert!((0.0..300.0).contains(&secs), "oldest waiting: {waited:?}");
    // The graph: an SVG path with at least two readings.
    let d_attr = b.wait_for(Duration::from_secs(20), "a lag line with 2+ points", |b| {
        let v = b.js(
            "const p = document.querySelector('#lag-chart svg path.line'); \
             return p ? [p.getAttribute('d'), p.getAttribute('data-points')] : null;",
            serde_json::json!([]),
        );
        let n: usize = v[1].as_str()?.parse().ok()?;
        (n >= 2).then(|| v[0].as_str().unwrap_or_default().to_string())
    });
    assert!(d_attr.starts_with('M') && d_attr.contains('L'), "{d_attr}");
    let broker = b.text("#brokers");
    assert!(
        broker.contains("ASYNC_MASTER") && broker.contains(&node.broker),
        "{broker}"
    );
    b.screenshot("overview.png");

    b.type_into("#msg-key-topic", "PageOrders");
    b.type_into("#msg-key-key", "page-5");
    b.click("#msg-key-submit");
    let results = b.wait_text("#msg-results", "page body 5");
    assert!(results.contains("page-5"), "{results}");
    b.screenshot("lookup.png");

    // A dead letter, listed on the page and put back into PageOrders with its button.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dead = rt.block_on(dead_letter_one(&node.namesrv, "PageOrders", "page-dlq"));
    b.type_into("#dlq-group", "page-dlq");
    b.click("#dlq-show");
    let table = b.wait_text("#dlq-table", &dead);
    assert!(
        table.contains("PageOrders"),
        "original topic shown: {table}"
    );
    b.click("#dlq-table tbody tr button");
    b.wait_for(Duration::from_secs(10), "the confirm dialog", |b| {
        b.accept_alert().then_some(())
    });
    b.wait_text("#dlq-result", "resent 1 msg of page-dlq");
    b.js(
        "document.getElementById('dead-letters').scrollIntoView();",
        serde_json::json!([]),
    );
    b.screenshot("dead-letters.png");
    ringmq_testkit::wait::wait_until(
        Duration::from_secs(15),
        "the resent copy in PageOrders",
        || {
            let st = node.json(&["topic", "status", "PageOrders"]);
            let stored: u64 = st["queues"]
                .as_array()
                .unwrap()
                .iter()
                .map(|q| q["max_offset"].as_u64().unwrap())
                .sum();
            stored == 9
        },
    );
}

/// Group `group` reads one message of `topic` and sends it back straight to its
/// dead-letter topic; the message's body.
async fn dead_letter_one(namesrv: &str, topic: &str, group: &str) -> String {
    use ringmq_client::{PullConsumer, StartPosition};
    let c = PullConsumer::builder()
        .name_servers(namesrv)
        .group(group)
        .start_position(StartPosition::First)
        .start()
        .await
        .unwrap();
    let queues = c.fetch_queues(topic).await.unwrap();
    c.assign(queues);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let m = loop {
        assert!(
            std::time::Instant::now() < deadline,
            "no message of {topic} read"
        );
        if let Some(m) = c
            .poll(Duration::from_millis(500))
            .await
            .unwrap()
            .into_iter()
            .next()
        {
            break m;
        }
    };
    c.send_back(&m, -1).await.unwrap();
    c.shutdown().await;
    String::from_utf8(m.body.to_vec()).unwrap()
}

const ROOT_SECRET: &str = "root-secret-dash-1";
const VIEWER_SECRET: &str = "viewer-secret-dash-2";

#[test]
fn dashboard_with_acl_asks_for_a_login_and_shows_only_what_the_account_may_read() {
    webdriver::require_chromium();
    let acl_dir = tempfile::tempdir().unwrap();
    let acl_file = acl_dir.path().join("plain_acl.yml");
    std::fs::write(
        &acl_file,
        format!(
            "globalWhiteRemoteAddresses: []\naccounts:\n  - accessKey: root\n    secretKey: {ROOT_SECRET}\n    admin: true\n  - accessKey: viewer\n    secretKey: {VIEWER_SECRET}\n    admin: false\n    defaultTopicPerm: DENY\n    defaultGroupPerm: SUB\n    topicPerms:\n      - AclSeen=SUB\n"
        ),
    )
    .unwrap();
    let file_set = format!("aclFilePath={}", acl_file.display());
    let inner = format!("innerSecretKey={ROOT_SECRET}");
    let node = Node::start_with(&["aclEnable=true", "innerAccessKey=root", &inner, &file_set]);
    let as_root = |args: &[&str]| {
        let mut all = vec!["-n", node.namesrv.as_str(), "--access-key", "root"];
        all.extend_from_slice(args);
        let out = ctl_env(&all, &[("RINGMQ_SECRET_KEY", ROOT_SECRET)]);
        out.ok(args);
    };
    for t in ["AclSeen", "AclHidden"] {
        as_root(&["topic", "create", t, "--queues", "1"]);
        as_root(&[
            "send",
            t,
            &format!("{t} body"),
            "--key",
            &format!("{t}-key"),
        ]);
    }
    let d = Dashboard::start(&node, Some(("root", ROOT_SECRET)));

    // The API: ACL on, nothing without a session, a session sees only its topics.
    assert_eq!(d.ok("/api/config")["acl"], true);
    let (status, v) = d.get("/api/topics", None);
    assert_eq!((status, &v["login"]), (401, &Value::Bool(true)), "{v}");
    let wrong = format!(r#"{{"access_key":"viewer","secret_key":"wrong-{VIEWER_SECRET}"}}"#);
    let (status, head, v) = d.post("/api/login", &wrong);
    assert_eq!(status, 401, "{v}");
    assert!(!head.contains("Set-Cookie"), "{head}");
    assert!(
        !v.to_string().contains(VIEWER_SECRET),
        "the secret is never echoed: {v}"
    );
    let right = format!(r#"{{"access_key":"viewer","secret_key":"{VIEWER_SECRET}"}}"#);
    let (status, head, v) = d.post("/api/login", &right);
    assert_eq!(status, 200, "{v}");
    assert!(!v.to_string().contains(VIEWER_SECRET), "{v}");
    let cookie_line = head
        .lines()
        .find(|l| l.starts_with("Set-Cookie: "))
        .unwrap_or_else(|| panic!("{head}"));
    assert!(cookie_line.contains("HttpOnly") && cookie_line.contains("SameSite=Strict"));
    let cookie = cookie_line["Set-Cookie: ".len()..]
        .split(';')
        .next()
        .unwrap();
    let (status, topics) = d.get("/api/topics", Some(cookie));
    assert_eq!(status, 200, "{topics}");
    assert!(
        find(&topics["topics"], "topic", "AclSeen").is_some(),
        "{topics}"
    );
    assert!(
        find(&topics["topics"], "topic", "AclHidden").is_none(),
        "{topics}"
    );
    let (status, v) = d.get("/api/topic?name=AclHidden", Some(cookie));
    assert_eq!(
        (status, &v["not_allowed"]),
        (403, &Value::Bool(true)),
        "{v}"
    );
    let (status, v) = d.get("/api/msg/key?topic=AclSeen&key=AclSeen-key", Some(cookie));
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["messages"][0]["body"], "AclSeen body", "{v}");

    // The page, as a person: login form, a refused secret, then the data.
    let b = Browser::start();
    b.goto(&d.url());
    b.wait_for(Duration::from_secs(20), "the login form", |b| {
        let shown = b.js(
            "return !document.getElementById('login').hidden && document.getElementById('main').hidden;",
            serde_json::json!([]),
        );
        (shown == Value::Bool(true)).then_some(())
    });
    b.screenshot("acl-login.png");
    b.type_into("#login-access-key", "viewer");
    b.type_into("#login-secret-key", "not-the-secret");
    b.click("#login-submit");
    let refusal = b.wait_text("#login-error", "refused");
    assert!(!refusal.contains(VIEWER_SECRET), "{refusal}");
    b.screenshot("acl-refused.png");
    b.type_into("#login-access-key", "viewer");
    b.type_into("#login-secret-key", VIEWER_SECRET);
    b.click("#login-submit");
    let topics = b.wait_text("#topic-table", "AclSeen");
    assert!(!topics.contains("AclHidden"), "{topics}");
    b.wait_text("#account-key", "viewer");
    // Scheduled and transactional state need an admin: shown as not allowed, in place.
    b.wait_text("#delay-error", "not allowed");
    // Listing every group needs an admin too: the page says whose names it shows.
    b.wait_text("#groups-hidden", "needs an admin account");
    b.screenshot("acl-viewer.png");
    // An action this account may not take is refused in place, and nothing is made.
    b.type_into("#topic-create-name", "ViewerMade");
    b.click("#topic-create-submit");
    b.wait_text("#topics-action-error", "not allowed");
    let out = ctl_env(
        &[
            "-n",
            node.namesrv.as_str(),
            "--access-key",
            "root",
            "topic",
            "route",
            "ViewerMade",
        ],
        &[("RINGMQ_SECRET_KEY", ROOT_SECRET)],
    );
    assert_ne!(out.code, 0, "ViewerMade was created: {}", out.stdout);
}

/// Clicks the row of table `table` whose text contains `text`, as the page's click handler
/// sees a person's click (the table is redrawn every reading, so the row is found and
/// clicked in one step).
fn click_row(b: &Browser, table: &str, text: &str) {
    b.wait_for(
        Duration::from_secs(30),
        &format!("a row of {table} with {text:?}"),
        |b| {
            let clicked = b.js(
                "const tr = [...document.querySelectorAll(arguments[0] + ' tbody tr')]
                   .find((tr) => tr.innerText.includes(arguments[1]));
                 if (!tr) return false;
                 tr.click();
                 return true;",
                serde_json::json!([table, text]),
            );
            (clicked == Value::Bool(true)).then_some(())
        },
    );
}

/// Clicks the `Ok` of the confirm dialog the last click opened.
fn confirm(b: &Browser) {
    b.wait_for(Duration::from_secs(10), "the confirm dialog", |b| {
        b.accept_alert().then_some(())
    });
}

/// How many points the chart line `css` (an SVG path) has drawn.
fn chart_points(b: &Browser, css: &str) -> usize {
    let v = b.js(
        "const p = document.querySelector(arguments[0]); return p ? p.getAttribute('data-points') : null;",
        serde_json::json!([css]),
    );
    v.as_str().and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// The retry limit and orderly flag the master keeps for `group` (the brokers' answer to
/// GET_ALL_SUBSCRIPTIONGROUP_CONFIG).
fn group_settings(rt: &tokio::runtime::Runtime, node: &Node, group: &str) -> Option<(u32, bool)> {
    rt.block_on(async {
        let admin = ringmq_client::Admin::connect(&node.namesrv).await.unwrap();
        let addr = node.broker.parse().unwrap();
        let list = admin.subscription_groups(addr).await.unwrap();
        admin.close();
        list.groups
            .into_iter()
            .find(|g| g.group == group)
            .map(|g| (g.retry_max_times, g.consume_message_orderly))
    })
}

/// A traced producer (group `group`) that sent `n` messages to `topic` with keys
/// `admin-i`, and a traced push consumer of group `group` that consumed them all.
async fn traced_clients(
    namesrv: &str,
    topic: &str,
    group: &str,
    n: usize,
) -> (ringmq_client::Producer, ringmq_client::PushConsumer) {
    use ringmq_client::{
        ConsumeContext, ConsumeResult, Message, Producer, PushConsumer, ReceivedMessage,
        StartPosition,
    };
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let p = Producer::builder()
        .group(group)
        .name_server(namesrv)
        .trace(true)
        .start()
        .await
        .unwrap();
    for i in 0..n {
        let m = Message::new(topic, format!("admin body {i}")).with_key(format!("admin-{i}"));
        p.send(m).await.unwrap();
    }
    let seen = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&seen);
    let c = PushConsumer::builder()
        .group(group)
        .name_server(namesrv)
        .subscribe(topic, "*")
        .start_position(StartPosition::First)
        .rebalance_interval(Duration::from_millis(300))
        .long_poll(Duration::from_secs(2))
        .trace(true)
        .start(move |m: Vec<ReceivedMessage>, _: ConsumeContext| {
            let counted = Arc::clone(&counted);
            async move {
                counted.fetch_add(m.len(), Ordering::SeqCst);
                ConsumeResult::Success
            }
        })
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while seen.load(Ordering::SeqCst) < n {
        assert!(
            std::time::Instant::now() < deadline,
            "consumed {} of {n}",
            seen.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (p, c)
}

/// The committed offsets of `group` on `topic` per queue, as `group progress` reads them.
fn committed(node: &Node, group: &str, topic: &str) -> Vec<(u64, Option<u64>)> {
    let p = node.json(&["group", "progress", group, "--topic", topic]);
    p["queues"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|q| q["topic"] == topic)
        .map(|q| (q["queue"].as_u64().unwrap(), q["consumer_offset"].as_u64()))
        .collect()
}

#[test]
fn dashboard_administers_topics_groups_offsets_and_broker_config_checked_against_the_broker() {
    webdriver::require_chromium();
    let node = Node::start();
    let d = Dashboard::start(&node, None);
    let b = Browser::start();
    b.goto(&d.url());
    b.wait_text("#brokers", &node.broker);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();

    // Create a topic from the form; the broker has it as asked. Again: refused, with why.
    b.type_into("#topic-create-name", "AdminOrders");
    b.type_into("#topic-create-queues", "4");
    b.click("#topic-create-submit");
    b.wait_text("#topics-result", "created AdminOrders on broker-a");
    let q = node.json(&["topic", "route", "AdminOrders"])["queues"][0].clone();
    assert_eq!(
        (&q["read_queues"], &q["write_queues"], &q["perm"]),
        (&Value::from(4), &Value::from(4), &Value::from(6)),
        "{q}"
    );
    b.click("#topic-create-submit");
    b.wait_text("#topics-action-error", "already exists");

    // Update it: 6 queues, read-only; then read-write again.
    click_row(&b, "#topic-table", "AdminOrders");
    b.wait_text("#topic-detail-name", "AdminOrders");
    b.type_into("#topic-update-queues", "6");
    b.click("#topic-update-perm option[value='r']");
    b.click("#topic-update-submit");
    b.wait_text("#topic-action-result", "updated AdminOrders");
    let q = node.json(&["topic", "route", "AdminOrders"])["queues"][0].clone();
    assert_eq!(
        (&q["read_queues"], &q["write_queues"], &q["perm"]),
        (&Value::from(6), &Value::from(6), &Value::from(4)),
        "{q}"
    );
    b.type_into("#topic-update-queues", "");
    b.click("#topic-update-perm option[value='rw']");
    b.click("#topic-update-submit");
    ringmq_testkit::wait::wait_until(Duration::from_secs(10), "AdminOrders writable", || {
        node.json(&["topic", "route", "AdminOrders"])["queues"][0]["perm"] == 6
    });

    // Live clients of group admin-billing: 12 traced messages sent and consumed.
    let (producer, consumer) = rt.block_on(traced_clients(
        &node.namesrv,
        "AdminOrders",
        "admin-billing",
        12,
    ));

    // The group's connections, and its throughput history beside the topic's.
    click_row(&b, "#group-table", "admin-billing");
    b.wait_text("#group-detail-name", "admin-billing");
    let conns = b.wait_text("#group-connections", "producer");
    assert!(
        conns.contains("consumer") && conns.contains("broker-a"),
        "{conns}"
    );
    b.wait_for(Duration::from_secs(30), "2+ consume-rate readings", |b| {
        (chart_points(b, "#consume-chart svg path.line") >= 2).then_some(())
    });
    click_row(&b, "#topic-table", "AdminOrders");
    b.wait_for(
        Duration::from_secs(30),
        "2+ readings of the topic's rates",
        |b| {
            let (i, o) = (
                chart_points(b, "#topic-chart svg path[data-series='in']"),
                chart_points(b, "#topic-chart svg path[data-series='out']"),
            );
            (i >= 2 && o >= 2).then_some(())
        },
    );
    b.screenshot("admin-topic.png");

    // A message's detail with its trace: the send and the consume, on a timeline.
    b.type_into("#msg-key-topic", "AdminOrders");
    b.type_into("#msg-key-key", "admin-3");
    b.click("#msg-key-submit");
    b.wait_text("#msg-results", "admin body 3");
    click_row(&b, "#msg-results", "admin body 3");
    b.wait_text("#msg-fields", "UNIQ_KEY");
    b.wait_for(
        Duration::from_secs(30),
        "the send and the consume traced",
        |b| {
            let t = b.text("#msg-trace tbody");
            (t.contains("send") && t.contains("consume") && t.contains("admin-billing"))
                .then_some(())
        },
    );
    let marks = b.js(
        "return [document.querySelectorAll('#trace-chart rect.event.send').length, \
                 document.querySelectorAll('#trace-chart rect.event.consume').length];",
        serde_json::json!([]),
    );
    assert!(
        marks[0].as_u64() >= Some(1) && marks[1].as_u64() >= Some(1),
        "{marks}"
    );
    b.js(
        "document.getElementById('msg-detail').scrollIntoView();",
        serde_json::json!([]),
    );
    b.screenshot("admin-trace.png");

    // Reset offsets (consumer stopped first, as the page says): to the earliest message,
    // then one queue to an offset.
    rt.block_on(consumer.shutdown());
    click_row(&b, "#group-table", "admin-billing");
    b.wait_text("#group-reset-topic", "AdminOrders");
    b.click("#group-reset-topic option[value='AdminOrders']");
    b.click("#group-reset-mode option[value='earliest']");
    b.click("#group-reset-submit");
    confirm(&b);
    b.wait_text("#group-action-result", "reset broker-a#0");
    let offsets = committed(&node, "admin-billing", "AdminOrders");
    assert!(
        !offsets.is_empty() && offsets.iter().all(|(_, o)| *o == Some(0)),
        "{offsets:?}"
    );
    b.click("#group-reset-mode option[value='offset']");
    b.type_into("#group-reset-queue", "1");
    b.type_into("#group-reset-offset", "2");
    b.click("#group-reset-submit");
    confirm(&b);
    b.wait_text("#group-action-result", "broker-a#1: 0 → 2");
    let offsets = committed(&node, "admin-billing", "AdminOrders");
    assert!(offsets.contains(&(1, Some(2))), "{offsets:?}");
    // Past the queue's end: refused, nothing moved.
    b.type_into("#group-reset-offset", "99");
    b.click("#group-reset-submit");
    confirm(&b);
    b.wait_text("#group-action-error", "outside queue 1");
    assert!(committed(&node, "admin-billing", "AdminOrders").contains(&(1, Some(2))));

    // The group's settings: saved, then deleted (the brokers' defaults again).
    b.type_into("#group-create-name", "admin-billing");
    b.type_into("#group-create-retries", "3");
    b.click("#group-create-orderly");
    b.click("#group-create-submit");
    b.wait_text("#groups-result", "saved the settings of admin-billing");
    assert_eq!(group_settings(&rt, &node, "admin-billing"), Some((3, true)));
    b.click("#group-delete");
    confirm(&b);
    b.wait_text(
        "#group-action-result",
        "deleted the settings of admin-billing",
    );
    let after = group_settings(&rt, &node, "admin-billing");
    assert!(
        after.is_none_or(|(n, orderly)| n != 3 && !orderly),
        "{after:?}"
    );

    // The broker's configuration: read, one runtime key changed, a fixed key refused.
    click_row(&b, "#brokers", &node.broker);
    b.wait_text("#broker-config", "maxMessageSize");
    b.type_into("#broker-config-key", "maxMessageSize");
    b.type_into("#broker-config-value", "2097152");
    b.click("#broker-config-submit");
    b.wait_text("#broker-config-result", "maxMessageSize=2097152");
    let cfg = node.json(&["broker", "config", &node.broker]);
    let size = cfg["config"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["key"] == "maxMessageSize")
        .map(|c| c["value"].clone());
    assert_eq!(size, Some(Value::from("2097152")), "{cfg}");
    b.type_into("#broker-config-key", "listenPort");
    b.type_into("#broker-config-value", "1");
    b.click("#broker-config-submit");
    b.wait_text("#broker-config-error", "cannot be changed at run time");
    b.screenshot("admin-broker-config.png");

    // A dead letter with a 1 KiB body is one line high until clicked.
    node.ctl(&["topic", "create", "AdminDlq", "--queues", "1"])
        .ok(&[]);
    let big = "x".repeat(1024);
    node.ctl(&["send", "AdminDlq", &big]).ok(&[]);
    rt.block_on(dead_letter_one(&node.namesrv, "AdminDlq", "admin-dlq"));
    b.type_into("#dlq-group", "admin-dlq");
    b.click("#dlq-show");
    b.wait_text("#dlq-table", "AdminDlq");
    let height = |b: &Browser| {
        b.js(
            "return document.querySelector('#dlq-table tbody tr').getBoundingClientRect().height;",
            serde_json::json!([]),
        )
        .as_f64()
        .unwrap()
    };
    let h = height(&b);
    assert!(h < 40.0, "a dead letter row is {h} px high");
    b.js(
        "document.querySelector('#dlq-table tbody tr td.clip span').click();",
        serde_json::json!([]),
    );
    let open = height(&b);
    assert!(open > 2.0 * h, "the clicked body opens: {open} px");

    // Delete the topic: confirmed, gone from the broker.
    click_row(&b, "#topic-table", "AdminOrders");
    b.wait_text("#topic-detail-name", "AdminOrders");
    b.click("#topic-delete");
    confirm(&b);
    b.wait_text("#topics-result", "deleted AdminOrders");
    ringmq_testkit::wait::wait_until(Duration::from_secs(10), "AdminOrders gone", || {
        node.ctl(&["topic", "route", "AdminOrders"]).code != 0
    });
    rt.block_on(producer.shutdown());
}
