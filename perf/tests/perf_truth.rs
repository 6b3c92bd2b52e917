//! ringmq-perf says when it did not do what was asked (issue #36): a produce run whose
//! every send is refused (NO_PERMISSION from the ACL) exits 1 with one line saying so,
//! never "0 sent, exit 0"; `consume --count N` consumes and commits exactly N.
#![allow(clippy::unwrap_used)]

mod common;

use common::{perf, perf_env, read_json, Node};

const ROOT_SECRET: &str = "root-secret-truth";
const READER_SECRET: &str = "reader-secret-truth";

/// ACL: `root` is the admin; `reader` may only subscribe to `Refused`.
fn acl_yaml() -> String {
    format!(
        "accounts:\n\
         \x20 - accessKey: root\n\
         \x20   secretKey: {ROOT_SECRET}\n\
         \x20   admin: true\n\
         \x20 - accessKey: reader\n\
         \x20   secretKey: {READER_SECRET}\n\
         \x20   admin: false\n\
         \x20   defaultTopicPerm: DENY\n\
         \x20   defaultGroupPerm: SUB\n\
         \x20   topicPerms:\n\
         \x20     - Refused=SUB\n"
    )
}

/// The last stderr line, which must start `ringmq-perf: `.
fn last_line(stderr: &str) -> &str {
    let line = stderr.lines().last().unwrap_or_default();
    assert!(line.starts_with("ringmq-perf: "), "{stderr}");
    line
}

#[test]
fn produce_with_every_send_refused_fails() {
    let dir = tempfile::tempdir().unwrap();
    let acl = dir.path().join("plain_acl.yml");
    std::fs::write(&acl, acl_yaml()).unwrap();
    let acl_set = format!("aclFilePath={}", acl.display());
    let node = Node::start_with(
        &dir.path().join("data"),
        &[
            "aclEnable=true",
            &acl_set,
            "innerAccessKey=root",
            &format!("innerSecretKey={ROOT_SECRET}"),
        ],
    );
    let base = [
        "produce",
        "-n",
        &node.namesrv,
        "--topic",
        "Refused",
        "--size",
        "64",
    ];
    // The topic, made by the admin.
    let mut args = base.to_vec();
    args.extend(["--count", "1", "--access-key", "root", "--quiet"]);
    let run = perf_env(&args, &[("RINGMQ_SECRET_KEY", ROOT_SECRET)]);
    assert_eq!(run.code, 0, "{}", run.stderr);

    // Every send refused: --count 10 and --duration both fail, saying why.
    let json = dir.path().join("refused.json");
    for length in [["--count", "10"], ["--duration", "1s"]] {
        let mut args = base.to_vec();
        args.extend(length);
        args.extend(["--access-key", "reader", "--quiet"]);
        args.extend(["--json", json.to_str().unwrap()]);
        let run = perf_env(&args, &[("RINGMQ_SECRET_KEY", READER_SECRET)]);
        assert_eq!(run.code, 1, "{length:?}: {}", run.stderr);
        let line = last_line(&run.stderr);
        assert!(line.contains("NO_PERMISSION"), "{line}");
        let want = if length[0] == "--count" {
            "sent 0 of 10 messages"
        } else {
            "sent no message"
        };
        assert!(line.contains(want), "{line}");
        let doc = read_json(&json);
        assert_eq!(doc["messages"], 0, "{doc}");
        assert!(doc["errors"].as_u64().unwrap() > 0, "{doc}");
    }
}

/// `consume --count N` consumes exactly N and commits exactly through them: the group's
/// next reader gets the rest, no more and no fewer; a count that cannot be reached fails.
#[test]
fn consume_count_is_exact_and_so_is_the_commit() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start(&dir.path().join("data"));
    let ns = node.namesrv.as_str();
    let topic = ["--topic", "Counted", "--queues", "4"];
    let mut args = vec!["produce", "-n", ns, "--size", "64", "--count", "6000"];
    args.extend(topic);
    args.extend(["--batch", "16", "--quiet"]);
    let run = perf(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);

    let consume = |extra: &[&str], json: &str| {
        let path = dir.path().join(json);
        let mut args = vec![
            "consume", "-n", ns, "--topic", "Counted", "--group", "exact",
        ];
        args.extend([
            "--idle-exit",
            "2s",
            "--quiet",
            "--json",
            path.to_str().unwrap(),
        ]);
        args.extend(extra);
        let run = perf(&args);
        (run, read_json(&path))
    };
    for (consumers, n) in [("1", "4000"), ("2", "1500")] {
        let (run, doc) = consume(&["--count", n, "--consumers", consumers], "counted.json");
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert_eq!(doc["messages"].to_string(), n, "{doc}");
    }
    // The rest, exactly: 6000 - 4000 - 1500.
    let (run, doc) = consume(&[], "rest.json");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(doc["messages"], 500, "{doc}");
    // Nothing left: --count 10 cannot be met.
    let (run, doc) = consume(&["--count", "10"], "short.json");
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(doc["messages"], 0, "{doc}");
    let line = last_line(&run.stderr);
    assert!(line.contains("consumed 0 of 10 messages"), "{line}");
}

/// `produce --trace` writes each send's trace record, which reads back as the message's
/// send (what `ringmq-ctl msg trace` prints); with topic auto-creation off and no trace
/// topic, the run fails saying the traces were not stored and how to fix it.
#[test]
fn produce_trace_is_read_back_and_an_unstored_trace_fails() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start(&dir.path().join("data"));
    let ns = node.namesrv.clone();
    let args = [
        "produce",
        "-n",
        &ns,
        "--topic",
        "PerfTraced",
        "--queues",
        "1",
    ];
    let mut traced = args.to_vec();
    traced.extend(["--count", "3", "--size", "64", "--trace", "--quiet"]);
    let run = perf(&traced);
    assert_eq!(run.code, 0, "{}", run.stderr);

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let admin = ringmq_client::Admin::with_config(ringmq_client::ClientConfig {
            name_servers: vec![ns.clone()],
            ..ringmq_client::ClientConfig::default()
        })
        .await
        .unwrap();
        let route = admin.topic_route("PerfTraced").await.unwrap();
        let msgs = admin
            .read_messages(&route.read_queues[0], 0, 3)
            .await
            .unwrap();
        assert_eq!(msgs.len(), 3);
        let id = msgs[0].unique_key().unwrap().to_string();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let t = admin
                .message_trace(&id, ringmq_client::trace::TRACE_TOPIC_DEFAULT)
                .await
                .unwrap();
            if let Some(s) = t.sends.first() {
                assert_eq!(s.topic, "PerfTraced", "{t:?}");
                break;
            }
            assert!(std::time::Instant::now() < deadline, "no trace of {id}");
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        admin.close();
    });

    let strict = Node::start_with(&dir.path().join("strict"), &["autoCreateTopicEnable=false"]);
    let mut args = vec!["produce", "-n", &strict.namesrv, "--topic", "PerfTraced"];
    args.extend(["--count", "3", "--size", "64", "--quiet"]);
    let run = perf(&args);
    assert_eq!(run.code, 0, "creating the topic: {}", run.stderr);
    args.push("--trace");
    let run = perf(&args);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let line = last_line(&run.stderr);
    assert!(
        line.contains("of 3 trace records") && line.contains("topic create RMQ_SYS_TRACE_TOPIC"),
        "{line}"
    );
}

/// `consume` (by duration, no `--count`) from a broker killed with SIGKILL while the name
/// server still lists it: it consumed nothing because it could not, so it exits 1 naming the
/// broker, never "0 messages, exit 0". From a live broker with nothing to read it exits 0.
#[test]
fn consume_from_a_killed_broker_fails_with_one_line() {
    let mut split = ringmq_testkit::split::Split::start();
    let namesrv = split.namesrv.clone();
    let made = perf(&[
        "produce", "-n", &namesrv, "--topic", "Gone", "--queues", "2", "--count", "1", "-q",
    ]);
    assert_eq!(made.code, 0, "{}", made.stderr);
    let args = [
        "consume",
        "-n",
        &namesrv,
        "--topic",
        "Gone",
        "--from",
        "last",
        "--idle-exit",
        "1s",
        "-q",
    ];
    let empty = perf(&args);
    assert_eq!(
        empty.code, 0,
        "nothing new to read is no failure:\n{}",
        empty.stderr
    );
    split.kill_broker();
    let run = perf(&args);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let line = last_line(&run.stderr);
    assert!(
        line.contains("consumed no message") && line.contains(&split.broker),
        "{line}"
    );
}
