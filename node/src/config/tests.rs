//! Config tests: RocketMQ's sample files parse unchanged, typos and bad values are errors
//! that name the key, TOML gives the same config as properties.

use super::*;

/// RocketMQ's `conf/2m-2s-sync/broker-a.properties`, license header included.
const BROKER_A_2M_2S_SYNC: &str = "\
# Licensed to the Apache Software Foundation (ASF) under one or more
# contributor license agreements.  See the NOTICE file distributed with
# this work for additional information regarding copyright ownership.
# The ASF licenses this file to You under the Apache License, Version 2.0
# (the \"License\"); you may not use this file except in compliance with
# the License.  You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
#  Unless required by applicable law or agreed to in writing, software
#  distributed under the License is distributed on an \"AS IS\" BASIS,
#  WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
#  See the License for the specific language governing permissions and
#  limitations under the License.
brokerClusterName=DefaultCluster
brokerName=broker-a
brokerId=0
deleteWhen=04
fileReservedTime=48
brokerRole=SYNC_MASTER
flushDiskType=ASYNC_FLUSH
";

/// RocketMQ's `conf/2m-2s-sync/broker-a-s.properties`.
const BROKER_A_S_2M_2S_SYNC: &str = "\
brokerClusterName=DefaultCluster
brokerName=broker-a
brokerId=1
deleteWhen=04
fileReservedTime=48
brokerRole=SLAVE
flushDiskType=ASYNC_FLUSH
";

fn props(text: &str) -> Result<LoadedConfig<BrokerConfig>, ConfigError> {
    BrokerConfig::from_properties_str(text, "broker.properties")
}

fn err(text: &str) -> String {
    props(text).unwrap_err().to_string()
}

#[test]
fn rocketmq_sample_broker_a_parses_unchanged() {
    let loaded = props(BROKER_A_2M_2S_SYNC).unwrap();
    assert!(loaded.ignored.is_empty());
    assert!(loaded.warnings.is_empty());
    let c = loaded.config;
    assert_eq!(c.broker_cluster_name, "DefaultCluster");
    assert_eq!(c.broker_name, "broker-a");
    assert_eq!(c.broker_id, 0);
    assert_eq!(c.delete_when_hours, vec![4]);
    assert_eq!(c.file_reserved_time_hours, 48);
    assert_eq!(c.broker_role, BrokerRole::SyncMaster);
    assert_eq!(c.flush_disk_type, FlushDiskType::AsyncFlush);
    // Everything else keeps RocketMQ's defaults.
    assert_eq!(c.listen_port, 10911);
    assert_eq!(c.ha_listen_port(), Some(10912));
    assert_eq!(c.mapped_file_size_commit_log_bytes, 1 << 30);
    assert_eq!(c.consume_queue_file_bytes(), 6_000_000);
}

#[test]
fn rocketmq_sample_slave_parses() {
    let c = props(BROKER_A_S_2M_2S_SYNC).unwrap().config;
    assert_eq!(c.broker_role, BrokerRole::Slave);
    assert_eq!(c.broker_id, 1);
}

#[test]
fn defaults_follow_rocketmq() {
    let c = BrokerConfig::default();
    assert_eq!(c.broker_cluster_name, "DefaultCluster");
    assert_eq!(c.broker_id, 0);
    assert_eq!(c.broker_role, BrokerRole::AsyncMaster);
    assert_eq!(c.flush_disk_type, FlushDiskType::AsyncFlush);
    assert_eq!(c.listen_port, 10911);
    assert_eq!(c.ha_listen_port, None);
    assert_eq!(c.ha_listen_port(), Some(10912));
    assert_eq!(c.mapped_file_size_commit_log_bytes, 1024 * 1024 * 1024);
    assert_eq!(c.mapped_file_size_consume_queue_bytes, 300_000 * 20);
    assert_eq!(c.flush_interval_commit_log_ms, 500);
    assert_eq!(c.sync_flush_timeout_ms, 5000);
    assert_eq!(c.file_reserved_time_hours, 72);
    assert_eq!(c.delete_when_hours, vec![4]);
    assert_eq!(c.disk_max_used_space_ratio, 75);
    assert!(c.auto_create_topic_enable);
    assert_eq!(c.default_topic_queue_nums, 8);
    assert_eq!(c.max_message_size_bytes, 4 * 1024 * 1024);
    assert_eq!(c.wait_time_mills_in_send_queue, 200);
    assert!(!c.transfer_msg_by_heap);
    assert_eq!(c.register_name_server_period_ms, 30_000);
    assert_eq!(c.broker_permission, 6);
    assert_eq!(c.message_delay_level_ms.len(), 18);
    assert_eq!(c.message_delay_level_ms[0], 1_000);
    assert_eq!(c.message_delay_level_ms[17], 2 * 3_600_000);
    assert_eq!(c.shards, None);
    assert!(c.pin_cores);
    assert!(c.store_path_root_dir.ends_with("store"));
    assert_eq!(
        c.store_path_commit_log(),
        c.store_path_root_dir.join("commitlog")
    );
    c.validate().unwrap();
}

#[test]
fn full_file_with_ringmq_keys() {
    let text = "\
brokerClusterName = ProdCluster
brokerName = broker-b
brokerId = 0
brokerRole = ASYNC_MASTER
flushDiskType = SYNC_FLUSH
namesrvAddr = 10.0.0.1:9876;10.0.0.2:9876
brokerIP1 = 10.0.0.7
listenPort = 20911
storePathRootDir = /data/rmq/store
storePathCommitLog = /data/rmq/store/commitlog
mappedFileSizeCommitLog = 134217728
mappedFileSizeConsumeQueue = 6000001
flushIntervalCommitLog = 200
syncFlushTimeout = 3000
fileReservedTime = 24
deleteWhen = 04;16
diskMaxUsedSpaceRatio = 88
autoCreateTopicEnable = false
defaultTopicQueueNums = 16
maxMessageSize = 1048576
waitTimeMillsInSendQueue = 1000
transferMsgByHeap = true
messageDelayLevel = 1s 10s 1m
shards = 4
pinCores = false
";
    let c = props(text).unwrap().config;
    assert_eq!(c.broker_cluster_name, "ProdCluster");
    assert_eq!(c.flush_disk_type, FlushDiskType::SyncFlush);
    assert_eq!(c.namesrv_addr, vec!["10.0.0.1:9876", "10.0.0.2:9876"]);
    assert_eq!(c.broker_ip1.as_deref(), Some("10.0.0.7"));
    assert_eq!(c.ha_listen_port(), Some(20912));
    assert_eq!(
        c.store_path_commit_log(),
        PathBuf::from("/data/rmq/store/commitlog")
    );
    assert_eq!(c.mapped_file_size_commit_log_bytes, 128 << 20);
    assert_eq!(c.consume_queue_file_bytes(), 6_000_020);
    assert_eq!(c.flush_interval_commit_log_ms, 200);
    assert_eq!(c.sync_flush_timeout_ms, 3000);
    assert_eq!(c.file_reserved_time_hours, 24);
    assert_eq!(c.delete_when_hours, vec![4, 16]);
    assert_eq!(c.disk_max_used_space_ratio, 88);
    assert!(!c.auto_create_topic_enable);
    assert_eq!(c.default_topic_queue_nums, 16);
    assert_eq!(c.max_message_size_bytes, 1 << 20);
    assert_eq!(c.wait_time_mills_in_send_queue, 1000);
    assert!(c.transfer_msg_by_heap);
    assert_eq!(c.message_delay_level_ms, vec![1_000, 10_000, 60_000]);
    assert_eq!(c.shards, Some(4));
    assert!(!c.pin_cores);
}

#[test]
fn warm_segments_are_off_unless_set() {
    let c = props("brokerName=a").unwrap().config;
    assert!(!c.warm_segments(), "ASYNC_FLUSH: cold segments by default");
    let c = props("flushDiskType=SYNC_FLUSH").unwrap().config;
    assert!(!c.warm_segments(), "SYNC_FLUSH: cold segments by default");
    let c = props("flushDiskType=SYNC_FLUSH\nwarmMapedFileEnable=true")
        .unwrap()
        .config;
    assert!(c.warm_segments());
    let c = props("warmMapedFileEnable=true").unwrap().config;
    assert!(c.warm_segments());
    assert!(err("warmMapedFileEnable=maybe").contains("warmMapedFileEnable"));
}

#[test]
fn page_cache_window_as_set_or_by_the_machine() {
    use crate::config::COMMIT_LOG_CACHE_KEEP_BYTES_REPORTING;
    let c = props("commitLogCacheKeepBytes=4096").unwrap().config;
    assert_eq!(c.cache_keep_bytes(), 4096);
    let c = props("commitLogCacheKeepBytes=0").unwrap().config;
    assert_eq!(c.cache_keep_bytes(), 0);
    let c = props("brokerName=a").unwrap().config;
    assert_eq!(c.commit_log_cache_keep_bytes, None);
    let by_machine = if crate::io::memory::freed_memory_goes_to_host() {
        COMMIT_LOG_CACHE_KEEP_BYTES_REPORTING
    } else {
        0
    };
    assert_eq!(c.cache_keep_bytes(), by_machine);
    assert!(err("commitLogCacheKeepBytes=-1").contains("commitLogCacheKeepBytes"));
}

#[test]
fn zeros_ahead_of_the_log_only_under_async_flush_with_fallocated_segments() {
    use crate::config::COMMIT_LOG_PREWRITE_BYTES_DEFAULT;
    let c = props("brokerName=a").unwrap().config;
    assert_eq!(c.prewrite_bytes(), COMMIT_LOG_PREWRITE_BYTES_DEFAULT);
    assert_eq!(COMMIT_LOG_PREWRITE_BYTES_DEFAULT, 256 << 10);
    let c = props("commitLogPrewriteBytes=1048576").unwrap().config;
    assert_eq!(c.prewrite_bytes(), 1 << 20);
    let c = props("commitLogPrewriteBytes=0").unwrap().config;
    assert_eq!(c.prewrite_bytes(), 0);
    let c = props("flushDiskType=SYNC_FLUSH\ncommitLogPrewriteBytes=1048576")
        .unwrap()
        .config;
    assert_eq!(c.prewrite_bytes(), 0, "SYNC_FLUSH: not used");
    let c = props("warmMapedFileEnable=true").unwrap().config;
    assert_eq!(c.prewrite_bytes(), 0, "pre-written segments: not used");
    assert!(err("commitLogPrewriteBytes=-1").contains("commitLogPrewriteBytes"));
    assert!(err("commitLogPrewriteBytes=68719476736").contains("commitLogPrewriteBytes"));
}

#[test]
fn unknown_key_is_an_error_naming_it_with_a_suggestion() {
    assert_eq!(
        err("brokerName=a\nflushDiskTyp=ASYNC_FLUSH\n"),
        "broker.properties:2: unknown key \"flushDiskTyp\" (did you mean \"flushDiskType\"?)"
    );
    assert_eq!(
        err("brokername=a"),
        "broker.properties:1: unknown key \"brokername\" (did you mean \"brokerName\"?)"
    );
    assert_eq!(
        err("completelyMadeUp=1"),
        "broker.properties:1: unknown key \"completelyMadeUp\""
    );
}

#[test]
fn rocketmq_keys_not_implemented_are_reported_not_fatal() {
    let loaded =
        props("brokerName=a\nsendMessageThreadPoolNums=4\n\nserverWorkerThreads=8\n").unwrap();
    let keys: Vec<_> = loaded
        .ignored
        .iter()
        .map(|k| (k.key.as_str(), k.line))
        .collect();
    assert_eq!(
        keys,
        vec![("sendMessageThreadPoolNums", 2), ("serverWorkerThreads", 4)]
    );
    assert_eq!(
        loaded.ignored[0].to_string(),
        "broker.properties:2: sendMessageThreadPoolNums ignored (not implemented)"
    );
}

#[test]
fn bad_values_name_key_and_expectation() {
    for (text, expected) in [
        (
            "flushDiskType=x",
            "broker.properties:1: flushDiskType: expected ASYNC_FLUSH or SYNC_FLUSH, got \"x\"",
        ),
        (
            "brokerRole=MASTER",
            "broker.properties:1: brokerRole: expected ASYNC_MASTER, SYNC_MASTER or SLAVE, got \"MASTER\"",
        ),
        (
            "listenPort=70000",
            "broker.properties:1: listenPort: expected an integer in 0..=65535, got \"70000\"",
        ),
        (
            "brokerId=-1",
            "broker.properties:1: brokerId: expected an integer in 0..=9223372036854775807, got \"-1\"",
        ),
        (
            "autoCreateTopicEnable=yes",
            "broker.properties:1: autoCreateTopicEnable: expected true or false, got \"yes\"",
        ),
        (
            "deleteWhen=25",
            "broker.properties:1: deleteWhen: expected hours 00..23 separated by ';', got \"25\"",
        ),
        (
            "namesrvAddr=localhost",
            "broker.properties:1: namesrvAddr: expected host:port, got \"localhost\"",
        ),
        (
            "maxMessageSize=4194305",
            "broker.properties:1: maxMessageSize: expected an integer in 1..=4194304, got \"4194305\"",
        ),
        (
            "brokerName=",
            "broker.properties:1: brokerName: expected a name, got an empty value",
        ),
    ] {
        assert_eq!(err(text), expected, "{text}");
    }
    assert!(err("mappedFileSizeCommitLog=1024")
        .contains("mappedFileSizeCommitLog: expected an integer in"));
    assert!(err("shards=0").contains("(or \"auto\")"));
}

#[test]
fn cross_field_checks() {
    assert_eq!(
        err("brokerRole=SLAVE\nbrokerId=0"),
        "brokerId: a SLAVE must have brokerId > 0, got 0"
    );
    assert_eq!(
        err("listenPort=65535"),
        "haListenPort: listenPort is 65535, so the default listenPort + 1 does not exist; set it"
    );
    assert_eq!(
        err("listenPort=10911\nhaListenPort=10911"),
        "haListenPort: equals listenPort (10911)"
    );
    let c = props("listenPort=65535\nhaListenPort=10000")
        .unwrap()
        .config;
    assert_eq!(c.ha_listen_port(), Some(10000));
}

#[test]
fn rocketmq_adjustments_are_made_and_reported() {
    // RocketMQ forces a master's brokerId to 0 and clamps diskMaxUsedSpaceRatio.
    let loaded = props("brokerRole=SYNC_MASTER\nbrokerId=3\ndiskMaxUsedSpaceRatio=99").unwrap();
    assert_eq!(loaded.config.broker_id, 0);
    assert_eq!(loaded.config.disk_max_used_space_ratio, 95);
    assert_eq!(loaded.warnings.len(), 2, "{:?}", loaded.warnings);
}

#[test]
fn duplicate_key_last_wins_with_a_warning() {
    let loaded = props("brokerName=a\nbrokerName=b").unwrap();
    assert_eq!(loaded.config.broker_name, "b");
    assert_eq!(
        loaded.warnings,
        vec!["broker.properties:2: brokerName set again; the value from line 1 is overridden"]
    );
}

#[test]
fn overrides_after_load() {
    let mut c = props(BROKER_A_2M_2S_SYNC).unwrap().config;
    assert!(c
        .set("namesrvAddr", "n1:9876;n2:9876", "--namesrv")
        .unwrap());
    assert_eq!(c.namesrv_addr, vec!["n1:9876", "n2:9876"]);
    assert!(!c.set("filterDataCleanTimeSpan", "1", "-D").unwrap());
    assert_eq!(
        c.set("shards", "x", "--shards").unwrap_err().to_string(),
        "--shards: shards: expected an integer in 1..=256, got \"x\" (or \"auto\")"
    );
    c.shards = Some(0);
    assert!(c.validate().is_err());
    c.shards = Some(2);
    c.broker_id = 1;
    assert_eq!(
        c.validate().unwrap_err().to_string(),
        "brokerId: a SYNC_MASTER must have brokerId 0, got 1"
    );
}

#[test]
fn toml_equivalent_of_the_sample() {
    let toml = r#"
# conf/2m-2s-sync/broker-a as TOML
brokerClusterName = "DefaultCluster"
brokerName = "broker-a"
brokerId = 0
deleteWhen = "04"
fileReservedTime = 48
brokerRole = "SYNC_MASTER"
flushDiskType = "ASYNC_FLUSH"
"#;
    let from_toml = BrokerConfig::from_toml_str(toml, "broker-a.toml").unwrap();
    let from_props = props(BROKER_A_2M_2S_SYNC).unwrap();
    assert_eq!(from_toml.config, from_props.config);
}

#[test]
fn toml_arrays_typos_and_types() {
    let c = BrokerConfig::from_toml_str(
        "namesrvAddr = [\"h1:9876\", \"h2:9876\"]\ndeleteWhen = [4, 16]\nmessageDelayLevel = [\"1s\", \"2s\"]\nshards = 2\npinCores = false",
        "b.toml",
    )
    .unwrap()
    .config;
    assert_eq!(c.namesrv_addr, vec!["h1:9876", "h2:9876"]);
    assert_eq!(c.delete_when_hours, vec![4, 16]);
    assert_eq!(c.message_delay_level_ms, vec![1000, 2000]);
    assert_eq!(c.shards, Some(2));
    assert!(!c.pin_cores);

    let typo = BrokerConfig::from_toml_str("brokerNmae = \"x\"", "b.toml").unwrap_err();
    assert_eq!(
        typo.to_string(),
        "b.toml:1: unknown key \"brokerNmae\" (did you mean \"brokerName\"?)"
    );
    let array = BrokerConfig::from_toml_str("brokerName = [\"a\"]", "b.toml").unwrap_err();
    assert_eq!(
        array.to_string(),
        "b.toml:1: brokerName: expected a single value, not an array"
    );
    let bad = BrokerConfig::from_toml_str("flushDiskType = \"x\"", "b.toml").unwrap_err();
    assert_eq!(
        bad.to_string(),
        "b.toml:1: flushDiskType: expected ASYNC_FLUSH or SYNC_FLUSH, got \"x\""
    );
}

#[test]
fn load_picks_the_reader_by_extension() {
    let dir = tempfile::tempdir().unwrap();
    let props_path = dir.path().join("broker-a.properties");
    std::fs::write(&props_path, BROKER_A_2M_2S_SYNC).unwrap();
    let toml_path = dir.path().join("broker-a.toml");
    std::fs::write(
        &toml_path,
        "brokerName = \"broker-a\"\nbrokerRole = \"SYNC_MASTER\"",
    )
    .unwrap();
    let a = BrokerConfig::load(&props_path).unwrap().config;
    let b = BrokerConfig::load(&toml_path).unwrap().config;
    assert_eq!(a.broker_role, b.broker_role);
    assert_eq!(a.broker_name, b.broker_name);

    let missing = BrokerConfig::load(&dir.path().join("nope.properties")).unwrap_err();
    assert!(matches!(missing, ConfigError::Io { .. }));
    // A properties line in a .toml file is a syntax error, not silently misread.
    std::fs::write(&toml_path, "brokerName=broker-a").unwrap();
    assert!(matches!(
        BrokerConfig::load(&toml_path).unwrap_err(),
        ConfigError::Syntax { .. }
    ));
}

#[test]
fn namesrv_config() {
    let d = NamesrvConfig::default();
    assert_eq!(d.listen_port, 9876);
    assert_eq!(d.listen_host, "0.0.0.0");
    assert_eq!(d.scan_not_active_broker_interval_ms, 10_000);
    assert_eq!(d.broker_channel_expired_time_ms, 120_000);

    let loaded = NamesrvConfig::from_properties_str(
        "listenPort=9877\nscanNotActiveBrokerInterval=100\nbrokerChannelExpiredTime=500\norderMessageEnable=true\n",
        "namesrv.properties",
    )
    .unwrap();
    assert_eq!(loaded.config.listen_port, 9877);
    assert_eq!(loaded.config.scan_not_active_broker_interval_ms, 100);
    assert_eq!(loaded.config.broker_channel_expired_time_ms, 500);
    assert_eq!(loaded.ignored.len(), 1);

    let toml = NamesrvConfig::from_toml_str("bindAddress = \"127.0.0.1\"", "n.toml").unwrap();
    assert_eq!(toml.config.listen_host, "127.0.0.1");

    assert!(NamesrvConfig::from_properties_str("brokerName=x", "n").is_err());
    assert_eq!(
        NamesrvConfig::from_properties_str("scanNotActiveBrokerInterval=200000", "n")
            .unwrap_err()
            .to_string(),
        "scanNotActiveBrokerInterval: 200000 ms is longer than brokerChannelExpiredTime (120000 ms)"
    );
}

/// Every config field a key sets (`c.<field> = ...` in `keys.rs`) is read somewhere outside
/// the config module (`.<field>`): a key that is parsed and then read by nothing would
/// pretend to take effect. Such a key belongs in `ignored.rs`, reported at start.
#[test]
fn every_applied_key_is_read_by_something() {
    fn sources(dir: &std::path::Path, skip: &std::path::Path, out: &mut String) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.starts_with(skip) {
                continue;
            }
            if p.is_dir() {
                sources(&p, skip, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push_str(&std::fs::read_to_string(&p).unwrap());
            }
        }
    }
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let keys = std::fs::read_to_string(src.join("config").join("keys.rs")).unwrap();
    let mut fields = std::collections::BTreeSet::new();
    for (i, _) in keys.match_indices("c.") {
        let rest = &keys[i + 2..];
        let name: String = rest.chars().take_while(|&c| is_ident(c)).collect();
        if !name.is_empty() && rest[name.len()..].trim_start().starts_with('=') {
            fields.insert(name);
        }
    }
    assert!(
        fields.len() > 30,
        "found only {} key fields: {fields:?}",
        fields.len()
    );
    let mut other = String::new();
    sources(&src, &src.join("config"), &mut other);
    let read = |f: &str| {
        let pat = format!(".{f}");
        other
            .match_indices(&pat)
            .any(|(i, _)| !other[i + pat.len()..].chars().next().is_some_and(is_ident))
    };
    let unread: Vec<&String> = fields.iter().filter(|f| !read(f)).collect();
    assert!(
        unread.is_empty(),
        "config fields set by a key but read by nothing outside config/: {unread:?} \
         (make them take effect, or move their keys to ignored.rs)"
    );
}

/// Values tried for every key: enough that each key meets a value it takes and one it
/// refuses.
const PROBE_VALUES: &[&str] = &[
    "true",
    "0",
    "1",
    "99",
    "x",
    "",
    "ASYNC_MASTER",
    "SLAVE",
    "SYNC_FLUSH",
    "127.0.0.1:9876",
    "/tmp/ringmq-probe",
    "PROM",
];

/// What a key's fate looks like, without where it came from (a file line or `--set`).
fn fate<C: std::fmt::Debug + PartialEq>(
    r: Result<LoadedConfig<C>, ConfigError>,
) -> Result<(C, Vec<String>, usize), std::mem::Discriminant<ConfigError>> {
    r.map(|l| {
        let ignored = l.ignored.iter().map(|i| i.key.clone()).collect();
        (l.config, ignored, l.warnings.len())
    })
    .map_err(|e| std::mem::discriminant(&e))
}

#[test]
fn a_key_given_with_set_is_judged_as_in_a_file() {
    let table = &keys::BROKER;
    let names = table
        .keys
        .iter()
        .map(|k| k.name)
        .chain(table.ignored.iter().flat_map(|l| l.iter().copied()));
    let mut checked = 0;
    for key in names.chain(["checkCRCOnRecover", "noSuchKey"]) {
        for v in PROBE_VALUES {
            let line = format!("{key}={v}");
            let file = fate(BrokerConfig::from_properties_str(&line, "f"));
            let set = fate(
                BrokerConfig::default()
                    .apply_overrides(std::slice::from_ref(&line), "--set")
                    .and_then(|l| l.config.validate().map(|()| l)),
            );
            assert_eq!(file, set, "{line}: file and --set disagree");
            // The same key and value in a TOML file (a key with dots quoted).
            let toml = fate(BrokerConfig::from_toml_str(
                &format!("{key:?} = {v:?}"),
                "f",
            ));
            assert_eq!(toml, set, "{line}: TOML and --set disagree");
            checked += 1;
        }
    }
    assert!(checked > 1000, "{checked}");
    let table = &keys::NAMESRV;
    let names = table
        .keys
        .iter()
        .map(|k| k.name)
        .chain(table.ignored.iter().flat_map(|l| l.iter().copied()));
    for key in names {
        for v in PROBE_VALUES {
            let line = format!("{key}={v}");
            let file = fate(NamesrvConfig::from_properties_str(&line, "f"));
            let set = fate(
                NamesrvConfig::default()
                    .apply_overrides(std::slice::from_ref(&line), "--set")
                    .and_then(|l| l.config.validate().map(|()| l)),
            );
            assert_eq!(file, set, "namesrv {line}: file and --set disagree");
            let toml = fate(NamesrvConfig::from_toml_str(
                &format!("{key:?} = {v:?}"),
                "f",
            ));
            assert_eq!(toml, set, "namesrv {line}: TOML and --set disagree");
        }
    }
}

#[test]
fn set_reports_an_ignored_key_and_adjustments_as_a_file_does() {
    let sets = [
        "checkCRCOnRecover=true".to_string(),
        "diskMaxUsedSpaceRatio=5".to_string(),
        "brokerName=a".to_string(),
        "brokerName=b".to_string(),
    ];
    let loaded = BrokerConfig::default()
        .apply_overrides(&sets, "--set")
        .unwrap();
    assert_eq!(
        loaded
            .ignored
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        vec!["--set: checkCRCOnRecover ignored (not implemented)"]
    );
    assert_eq!(loaded.config.disk_max_used_space_ratio, 10);
    assert_eq!(loaded.config.broker_name, "b");
    assert_eq!(loaded.warnings.len(), 2, "{:?}", loaded.warnings);
    assert_eq!(
        BrokerConfig::default()
            .apply_overrides(&["checkCRCOnRecover".to_string()], "--set")
            .unwrap_err()
            .to_string(),
        "--set: expected KEY=VALUE, got \"checkCRCOnRecover\""
    );
}
