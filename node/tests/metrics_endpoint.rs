//! The Prometheus endpoint of `ringmq standalone` (`metricsExporterType=PROM`): counters match
//! what the test sent exactly, per shard and (once the shards publish) per topic and group,
//! with consumer lag, dead letters and well-formed histograms; unknown paths are 404, other
//! methods 405, a head that is not HTTP 400, an oversized one 431; a silent or trickling
//! connection is closed within the timeout while another scrape is served; connections over
//! the cap are closed at once, and the endpoint listens only where configured; pull responses
//! are counted by how their records went out (from the log file when their pages are not in
//! memory, copied when they are).
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::*;

/// A standalone node under `dir/data` with 2 shards and the Prometheus endpoint on.
fn metrics_node(dir: &std::path::Path) -> (Node, SocketAddr) {
    metrics_node_with(dir, &["--shards", "2"])
}

/// [`metrics_node`] with `extra` args instead of 2 shards.
fn metrics_node_with(dir: &std::path::Path, extra: &[&str]) -> (Node, SocketAddr) {
    let mut args = vec![
        "--set",
        "metricsExporterType=PROM",
        "--set",
        "metricsPromExporterHost=127.0.0.1",
        "--set",
        "metricsPromExporterPort=0",
    ];
    args.extend_from_slice(extra);
    let node = Node::standalone(&dir.join("data"), &args);
    let addr = metrics_addr(&node.log());
    (node, addr)
}

/// Sends `request` raw and reads the whole answer (the server closes after one).
fn http(addr: SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // A connection closed at accept (over the cap) may refuse the write; the answer is empty.
    let _ = s.write_all(request);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn get(addr: SocketAddr, path: &str) -> String {
    http(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").as_bytes(),
    )
}

/// The sum over all series of `name` (any labels).
fn sum(body: &str, name: &str) -> u64 {
    body.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum()
}

/// The value of the one series `series` (name with its labels, exactly as exposed).
fn value(body: &str, series: &str) -> Option<f64> {
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// Checks every histogram of `name` in `body`: buckets cumulative, `+Inf` equal to `_count`.
fn histograms_well_formed(body: &str, name: &str) -> usize {
    use std::collections::BTreeMap;
    /// Bucket values in order, `+Inf`, `_count`.
    type Series = (Vec<f64>, Option<f64>, Option<f64>);
    // By the labels other than `le`.
    let mut seen: BTreeMap<String, Series> = BTreeMap::new();
    for l in body.lines() {
        if let Some(rest) = l.strip_prefix(&format!("{name}_bucket{{")) {
            let (labels, v) = rest.rsplit_once("} ").unwrap();
            let v: f64 = v.parse().unwrap();
            let (others, le) = labels.rsplit_once("le=\"").unwrap();
            let e = seen
                .entry(others.trim_end_matches(',').to_string())
                .or_default();
            if le.starts_with("+Inf") {
                e.1 = Some(v);
            } else {
                e.0.push(v);
            }
        } else if let Some(rest) = l.strip_prefix(&format!("{name}_count")) {
            let (labels, v) = rest.rsplit_once(' ').unwrap();
            let labels = labels.trim_start_matches('{').trim_end_matches('}');
            seen.entry(labels.to_string()).or_default().2 = Some(v.parse().unwrap());
        }
    }
    for (labels, (buckets, inf, count)) in &seen {
        assert!(
            buckets.windows(2).all(|w| w[0] <= w[1]),
            "{name}{{{labels}}} buckets not cumulative: {buckets:?}"
        );
        assert_eq!(*inf, *count, "{name}{{{labels}}}: +Inf against _count");
        assert!(buckets.last().copied().unwrap_or(0.0) <= inf.unwrap_or(0.0));
    }
    seen.len()
}

/// The local addresses of the listening TCP sockets on `port` (`/proc/net/tcp` and
/// `/proc/net/tcp6`).
fn listening_on(port: u16) -> Vec<std::net::IpAddr> {
    let mut found = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // sl local_address rem_address st ...; st 0A is LISTEN.
            let (Some(local), Some("0A")) = (f.get(1), f.get(3).copied()) else {
                continue;
            };
            let (ip_hex, port_hex) = local.split_once(':').unwrap();
            if u16::from_str_radix(port_hex, 16).unwrap() != port {
                continue;
            }
            // The address as the kernel stores it: 32-bit words in host (little-endian) order.
            let bytes: Vec<u8> = (0..ip_hex.len() / 8)
                .flat_map(|w| {
                    let word = u32::from_str_radix(&ip_hex[w * 8..w * 8 + 8], 16).unwrap();
                    word.to_le_bytes()
                })
                .collect();
            found.push(match bytes.len() {
                4 => std::net::IpAddr::from(<[u8; 4]>::try_from(bytes).unwrap()),
                _ => std::net::IpAddr::from(<[u8; 16]>::try_from(bytes).unwrap()),
            });
        }
    }
    found
}

/// Scrapes until `ready` holds for the body (shards publish once a second).
fn scrape_until(addr: SocketAddr, what: &str, ready: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let resp = get(addr, "/metrics");
        let body = resp.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
        if ready(body) {
            return body.to_string();
        }
        assert!(Instant::now() < deadline, "{what} never showed:\n{body}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn topics_groups_lag_dead_letters_and_histograms() {
    use ringmq_wire::code::RequestCode;
    use ringmq_wire::command::{ConsumerSendBackRequest, PullResponse};

    let dir = tempdir("metrics-topics");
    let (node, addr) = metrics_node(dir.path());
    let mut c = Client::connect(node.broker_addr());
    let topic = "LagTopic";
    c.create_topic_ok(topic, 4);
    let mut sent_body_bytes = 0u64;
    let mut first = None;
    for i in 0..60u32 {
        let body = format!("lag-{i:04}");
        sent_body_bytes += body.len() as u64;
        let r = c.send_ok(&Msg::new(topic, i % 4, body));
        first.get_or_insert(r.first_physical_offset);
    }
    // Group "it-consumers" (the test client's pull group) reads 10 of queue 0's 15 and
    // commits 6; the other queues are neither pulled nor committed.
    let r = c.pull(topic, 0, 0, 10, 0);
    r.ok();
    assert_eq!(r.fields::<PullResponse>().unwrap().message_count, 10);
    c.commit_offset("it-consumers", topic, 0, 6);
    // One message sent straight to the group's dead-letter topic.
    let back = ConsumerSendBackRequest {
        consumer_group: "it-consumers".into(),
        original_topic: topic.into(),
        physical_offset: first.unwrap(),
        delay_level: -1,
        max_reconsume_times: 16,
        original_message_id: "m0".into(),
    };
    c.call(RequestCode::ConsumerSendMsgBack, &back, &[]).ok();

    let lag = "ringmq_consumer_lag_messages{topic=\"LagTopic\",consumer_group=\"it-consumers\"}";
    let age_series =
        "ringmq_consumer_lag_latency_seconds{topic=\"LagTopic\",consumer_group=\"it-consumers\"}";
    // A view published a second after the sends shows an age of at least a second.
    let body = scrape_until(addr, "the group's lag", |b| {
        value(b, lag).is_some()
            && value(b, age_series).is_some_and(|a| a >= 1.0)
            && value(
                b,
                "ringmq_send_to_dlq_messages_total{consumer_group=\"it-consumers\"}",
            )
            .is_some()
    });
    assert_eq!(
        value(&body, "ringmq_messages_in_total{topic=\"LagTopic\"}"),
        Some(60.0),
        "{body}"
    );
    assert_eq!(
        value(
            &body,
            "ringmq_messages_out_total{topic=\"LagTopic\",consumer_group=\"it-consumers\"}"
        ),
        Some(10.0),
        "{body}"
    );
    // Only queue 0 has a committed offset: 15 - 6 behind, 10 - 6 pulled and not committed.
    assert_eq!(value(&body, lag), Some(9.0), "{body}");
    assert_eq!(
        value(
            &body,
            "ringmq_consumer_inflight_messages{topic=\"LagTopic\",consumer_group=\"it-consumers\"}"
        ),
        Some(4.0),
        "{body}"
    );
    let age = value(&body, age_series).unwrap();
    assert!((1.0..120.0).contains(&age), "lag age {age} s\n{body}");
    assert_eq!(
        value(
            &body,
            "ringmq_send_to_dlq_messages_total{consumer_group=\"it-consumers\"}"
        ),
        Some(1.0),
        "{body}"
    );
    // Message sizes: the 60 bodies (the dead-letter copy is stored by the broker itself
    // through the same path, so one more).
    assert_eq!(
        value(&body, "ringmq_message_size_bytes_count"),
        Some(61.0),
        "{body}"
    );
    assert!(value(&body, "ringmq_message_size_bytes_sum").unwrap() >= sent_body_bytes as f64);
    assert_eq!(
        value(
            &body,
            "ringmq_rpc_latency_seconds_count{request_code=\"SEND_MESSAGE\",response_code=\"SUCCESS\",protocol=\"native\"}"
        ),
        Some(60.0),
        "{body}"
    );
    assert!(histograms_well_formed(&body, "ringmq_rpc_latency_seconds") >= 3);
    assert_eq!(
        histograms_well_formed(&body, "ringmq_message_size_bytes"),
        1
    );
    assert_eq!(
        histograms_well_formed(&body, "ringmq_store_append_latency_seconds"),
        1
    );
    // Every request frame passed the read stage, every reply the write stage.
    assert_eq!(
        histograms_well_formed(&body, "ringmq_request_stage_latency_seconds"),
        2
    );
    for stage in ["read_to_handler", "queued_to_written"] {
        let n = value(
            &body,
            &format!("ringmq_request_stage_latency_seconds_count{{stage=\"{stage}\"}}"),
        )
        .unwrap_or(0.0);
        assert!(n >= 60.0, "{stage}: {n}\n{body}");
    }
    assert!(value(&body, "ringmq_topics").unwrap() >= 1.0, "{body}");
    assert!(value(&body, "ringmq_storage_disk_free_bytes").unwrap() > 0.0);
    // Every sample line is `name{labels} number` and every family has one TYPE line.
    let mut types = std::collections::BTreeSet::new();
    for l in body.lines() {
        if let Some(t) = l.strip_prefix("# TYPE ") {
            assert!(
                types.insert(t.split(' ').next().unwrap().to_string()),
                "{l}"
            );
        } else if !l.starts_with('#') && !l.is_empty() {
            let (_, v) = l.rsplit_once(' ').unwrap();
            assert!(v.parse::<f64>().is_ok(), "{l}");
        }
    }
}

#[test]
fn scrape_counts_exactly_what_was_sent() {
    let dir = tempdir("metrics");
    let (node, addr) = metrics_node(dir.path());
    // Scrapes run the whole time the load does, each answered in full.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let scraper = {
        let stop = std::sync::Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut n = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let r = get(addr, "/metrics");
                assert!(r.starts_with("HTTP/1.1 200 OK"), "{r}");
                assert!(r.contains("ringmq_build_info"), "{r}");
                n += 1;
            }
            n
        })
    };
    let mut c = Client::connect(node.broker_addr());
    let topic = "MetricsTopic";
    let mut sent = 0u64;
    for i in 0..40u32 {
        c.send_ok(&Msg::new(topic, i % 8, format!("m{i}")));
        sent += 1;
    }
    let batch: Vec<Msg> = (0..10)
        .map(|i| Msg::new(topic, 3, format!("b{i}")))
        .collect();
    c.send_batch(topic, 3, &batch).ok();
    sent += 10;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let scrapes = scraper.join().unwrap();
    assert!(scrapes > 0, "no scrape ran during the load");

    let resp = get(addr, "/metrics");
    let (head, body) = resp.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    assert!(
        body.contains("# TYPE ringmq_shard_messages_in_total counter"),
        "{body}"
    );
    assert!(body.contains("ringmq_build_info{version=\""), "{body}");
    assert!(
        body.contains("ringmq_shard_messages_in_total{shard=\"1\"}"),
        "{body}"
    );
    assert_eq!(sum(body, "ringmq_shard_messages_in_total"), sent, "{body}");
    assert!(sum(body, "ringmq_shard_bytes_in_total") > 0, "{body}");
    assert_eq!(sum(body, "ringmq_connections"), 1, "{body}");
    // The standalone's broker registered with its name server before the ready line.
    assert_eq!(sum(body, "ringmq_namesrv_brokers"), 1, "{body}");
    assert!(sum(body, "ringmq_namesrv_topics") >= 1, "{body}");
    assert_eq!(
        sum(body, "ringmq_namesrv_broker_expiries_total"),
        0,
        "{body}"
    );

    let index = get(addr, "/");
    assert!(
        index.starts_with("HTTP/1.1 200 OK") && index.contains("/metrics"),
        "{index}"
    );
    let missing = get(addr, "/nope");
    assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
    let post = http(addr, b"POST /metrics HTTP/1.1\r\n\r\n");
    assert!(post.starts_with("HTTP/1.1 405"), "{post}");
    assert!(post.contains("\r\nAllow: GET\r\n"), "{post}");
    let ok = get(addr, "/metrics");
    for header in [
        "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n",
        "\r\nConnection: close\r\n",
    ] {
        assert!(ok.contains(header), "{header:?} in {ok}");
    }
    let old = http(addr, b"GET /metrics HTTP/1.0\r\n\r\n");
    assert!(old.contains(" 200 OK\r\n"), "{old}");
    let garbage = http(addr, b"GARBAGE\r\n\r\n");
    assert!(garbage.starts_with("HTTP/1.1 400"), "{garbage}");
    let mut big = b"GET /metrics HTTP/1.1\r\nX-Filler: ".to_vec();
    big.extend(std::iter::repeat_n(b'a', 16 * 1024));
    big.extend_from_slice(b"\r\n\r\n");
    let too_large = http(addr, &big);
    assert!(too_large.starts_with("HTTP/1.1 431"), "{too_large}");
}

#[test]
fn silent_connection_is_closed_and_others_are_served() {
    let dir = tempdir("metrics-silent");
    let (_node, addr) = metrics_node(dir.path());
    let started = Instant::now();
    let mut silent = TcpStream::connect(addr).unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    // A trickling client (a byte of its head every 300 ms, 12 s in all) has the same 5 s.
    let mut trickle = TcpStream::connect(addr).unwrap();
    trickle
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut trickle_w = trickle.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        for b in b"GET /metrics HTTP/1.1\r\nX-Slow: a"
            .iter()
            .chain([b'a'; 16].iter())
        {
            if trickle_w.write_all(&[*b]).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    });
    // Another scrape is served while the silent one holds its slot.
    let ok = get(addr, "/metrics");
    assert!(ok.starts_with("HTTP/1.1 200 OK"), "{ok}");
    for (what, conn) in [("silent", &mut silent), ("trickling", &mut trickle)] {
        let mut buf = [0u8; 64];
        let n = conn.read(&mut buf).unwrap_or(0);
        let waited = started.elapsed();
        assert_eq!(n, 0, "the {what} connection got an answer");
        assert!(
            waited >= Duration::from_secs(4) && waited < Duration::from_secs(10),
            "{what}: closed after {waited:?}, want about 5 s"
        );
    }
    writer.join().unwrap();
}

#[test]
fn connections_over_the_cap_are_closed_at_once() {
    let dir = tempdir("metrics-cap");
    let (node, addr) = metrics_node(dir.path());
    // Bound where configured (127.0.0.1) and nowhere else: the kernel's table of listening
    // sockets names 127.0.0.1 for this port (read, not probed: no traffic leaves 127.0.0.1).
    assert_eq!(
        listening_on(addr.port()),
        vec!["127.0.0.1".parse::<std::net::IpAddr>().unwrap()],
        "the endpoint's listening sockets"
    );
    // METRICS_CONNECTIONS_MAX (8) silent connections hold every slot for the timeout.
    let held: Vec<TcpStream> = (0..8).map(|_| TcpStream::connect(addr).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(300));
    // Message traffic goes on meanwhile.
    let mut c = Client::connect(node.broker_addr());
    for i in 0..20u32 {
        c.send_ok(&Msg::new("HeldTopic", i % 4, format!("h{i}")));
    }
    let mut extra = TcpStream::connect(addr).unwrap();
    extra
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 64];
    let n = extra.read(&mut buf).unwrap_or(usize::MAX);
    assert_eq!(n, 0, "the ninth connection was not closed at once");
    assert!(started.elapsed() < Duration::from_secs(2));
    // Once the silent ones time out, scrapes are served again.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let resp = get(addr, "/metrics");
        if resp.starts_with("HTTP/1.1 200 OK") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no scrape served after the timeout"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(held);
}

/// Per page of `path`'s first `len` bytes, whether it is in the page cache.
fn residency(path: &std::path::Path, len: usize) -> Vec<bool> {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(path).unwrap();
    // SAFETY: a read-only shared mapping of an open file, unmapped below; never read.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        )
    };
    assert_ne!(addr, libc::MAP_FAILED, "mapping {}", path.display());
    let page = page_bytes();
    let mut vec = vec![0u8; len.div_ceil(page)];
    // SAFETY: `addr` maps `len` bytes; `vec` has a byte per page of them.
    let rc = unsafe { libc::mincore(addr, len, vec.as_mut_ptr()) };
    // SAFETY: the mapping made above, not used after this.
    unsafe { libc::munmap(addr, len) };
    assert_eq!(rc, 0, "mincore");
    vec.iter().map(|b| *b & 1 == 1).collect()
}

fn page_bytes() -> usize {
    // SAFETY: sysconf has no preconditions.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap()
}

/// The KiB ranges of `path`'s first `len` bytes that are in the page cache.
fn resident_runs(path: &std::path::Path, len: usize) -> Vec<(usize, usize)> {
    let kib = page_bytes() / 1024;
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for (i, r) in residency(path, len).iter().enumerate() {
        if !*r {
            continue;
        }
        match runs.last_mut() {
            Some(last) if last.1 == i * kib => last.1 += kib,
            _ => runs.push((i * kib, (i + 1) * kib)),
        }
    }
    runs
}

/// Asks the kernel to drop the first `len` bytes of `path` from the page cache (clean pages
/// no one maps).
fn drop_cached(path: &std::path::Path, len: usize) {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(path).unwrap();
    // SAFETY: advice on an open descriptor; no memory is passed.
    let rc = unsafe {
        libc::posix_fadvise(
            f.as_raw_fd(),
            0,
            i64::try_from(len).unwrap(),
            libc::POSIX_FADV_DONTNEED,
        )
    };
    assert_eq!(rc, 0, "posix_fadvise");
}

/// Whether `dir` is on a tmpfs (whose pages cannot be dropped from memory).
fn on_tmpfs(dir: &std::path::Path) -> bool {
    let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: zeroes are a valid statfs (plain integers), filled by the call below.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a statfs to fill.
    unsafe { libc::statfs(path.as_ptr(), &mut fs) == 0 && fs.f_type == libc::TMPFS_MAGIC }
}

/// The segment files of the log under `data` (`commitlog/<shard>/<offset>`), in log order.
fn segments(data: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut dirs = vec![data.to_path_buf()];
    let mut found = Vec::new();
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.components().any(|c| c.as_os_str() == "commitlog") {
                found.push(p);
            }
        }
    }
    found.sort();
    assert!(
        !found.is_empty(),
        "no commitlog segment under {}",
        data.display()
    );
    found
}

/// The KiB ranges of each segment in the page cache, leaving out the first segment's first
/// `skip` bytes.
fn resident_in(segments: &[std::path::PathBuf], skip: usize) -> Vec<(String, Vec<(usize, usize)>)> {
    segments
        .iter()
        .enumerate()
        .map(|(i, seg)| {
            let len = usize::try_from(std::fs::metadata(seg).unwrap().len()).unwrap();
            let runs: Vec<(usize, usize)> = resident_runs(seg, len)
                .into_iter()
                .filter(|(_, end)| i > 0 || end * 1024 > skip)
                .collect();
            (
                seg.file_name().unwrap().to_string_lossy().into_owned(),
                runs,
            )
        })
        .filter(|(_, runs)| !runs.is_empty())
        .collect()
}

/// A one-shard node with metrics for the pull-path tests, `keep` its
/// `commitLogCacheKeepBytes=...`, and no key index (it reads the log behind the append and
/// would map pages back in).
fn pull_paths_node(dir: &std::path::Path, keep: &str) -> (Node, SocketAddr) {
    metrics_node_with(
        dir,
        &[
            "--shards",
            "1",
            "--set",
            keep,
            "--set",
            "messageIndexEnable=false",
        ],
    )
}

/// How pull responses went out, counted by `ringmq_pull_responses_total{path}`: a pull under
/// the 1 MiB splice threshold of bytes not in the page cache (released, or dropped by the
/// kernel) goes from the log file, so its wait for the disk falls on an io_uring worker and
/// not on the shard's thread; the same size of bytes in memory is sent from the log's
/// mapping (16 KiB and more), and a smaller one is copied. Fails if the mapping or copy
/// paths ignore residency (or the counters do not count).
#[test]
fn a_small_pull_of_bytes_not_in_memory_goes_from_the_file_and_ones_in_memory_from_the_mapping() {
    let dir = tempdir("metrics-pull-paths");
    let data = dir.path().join("data");
    // Nothing released by the node, so no read-ahead either: only the pulls below bring the
    // test's dropped pages back.
    let (node, addr) = pull_paths_node(dir.path(), "commitLogCacheKeepBytes=0");
    let mut c = Client::connect(node.broker_addr());
    let topic = "PullPaths";
    const BODY: usize = 8 << 10;
    let body = |i: u32| {
        let mut b = format!("pp-{i:06}-").into_bytes();
        b.resize(BODY, b'x');
        b
    };
    let mut sent = 0u32;
    for _ in 0..192 {
        let batch: Vec<Msg> = (sent..sent + 32)
            .map(|i| Msg::new(topic, 0, body(i)))
            .collect();
        c.send_batch(topic, 0, &batch).ok();
        sent += 32;
    }
    if on_tmpfs(&data) {
        eprintln!(
            "{}: on a tmpfs, pages cannot be dropped; not checked",
            data.display()
        );
        return;
    }
    // Once durable (ASYNC_FLUSH's checkpoint) the pages are clean and the kernel may drop
    // them, as memory pressure would; the log's first MiB is left alone (the metrics view
    // reads the oldest record's store time).
    let segs = segments(&data);
    let skip = 1usize << 20;
    let dropped = wait_for(Duration::from_secs(20), || {
        for seg in &segs {
            let len = usize::try_from(std::fs::metadata(seg).unwrap().len()).unwrap();
            drop_cached(seg, len);
        }
        resident_in(&segs, skip).is_empty().then_some(())
    });
    assert!(
        dropped.is_some(),
        "pages stayed in the page cache (segment, KiB ranges): {:?}",
        resident_in(&segs, skip)
    );

    // Three small pulls of bytes not in memory: all from the file.
    for offset in [1000u64, 3000, 5000] {
        let r = c.pull(topic, 0, offset, 4, 0);
        r.ok();
        let got: Vec<Vec<u8>> = decode_records(&r.body)
            .iter()
            .map(|m| m.body.to_vec())
            .collect();
        let want: Vec<Vec<u8>> = (offset as u32..offset as u32 + 4).map(body).collect();
        assert!(got == want, "pull at {offset}: wrong records");
    }
    let scraped = scrape_until(addr, "the cold pulls", |b| {
        sum(b, "ringmq_pull_responses_total") >= 3
    });
    let file = value(&scraped, "ringmq_pull_responses_total{path=\"file\"}").unwrap();
    assert_eq!(
        file, 3.0,
        "pulls of bytes not in memory were copied on the shard's thread:\n{scraped}"
    );
    for path in ["copy", "mapped"] {
        let n = value(
            &scraped,
            &format!("ringmq_pull_responses_total{{path=\"{path}\"}}"),
        );
        assert_eq!(n, Some(0.0), "{path}:\n{scraped}");
    }

    // Records just written are in memory: 32 KiB of them sent from the mapping, then one
    // record (8 KiB) copied.
    let batch: Vec<Msg> = (sent..sent + 5)
        .map(|i| Msg::new(topic, 0, body(i)))
        .collect();
    c.send_batch(topic, 0, &batch).ok();
    let r = c.pull(topic, 0, u64::from(sent), 4, 0);
    r.ok();
    let got: Vec<Vec<u8>> = decode_records(&r.body)
        .iter()
        .map(|m| m.body.to_vec())
        .collect();
    let want: Vec<Vec<u8>> = (sent..sent + 4).map(body).collect();
    assert!(got == want, "the warm pull: wrong records");
    let scraped = scrape_until(addr, "the warm pull", |b| {
        sum(b, "ringmq_pull_responses_total") >= 4
    });
    let mapped = value(&scraped, "ringmq_pull_responses_total{path=\"mapped\"}").unwrap();
    assert_eq!(
        mapped, 1.0,
        "the pull of 32 KiB in memory was not sent from the mapping:\n{scraped}"
    );
    let mapped_bytes = value(
        &scraped,
        "ringmq_pull_response_bytes_total{path=\"mapped\"}",
    )
    .unwrap();
    assert!(mapped_bytes >= (4 * BODY) as f64, "{scraped}");
    let r = c.pull(topic, 0, u64::from(sent) + 4, 1, 0);
    r.ok();
    assert_eq!(decode_records(&r.body)[0].body, &body(sent + 4)[..]);
    let scraped = scrape_until(addr, "the small warm pull", |b| {
        sum(b, "ringmq_pull_responses_total") >= 5
    });
    let copied = value(&scraped, "ringmq_pull_responses_total{path=\"copy\"}").unwrap();
    assert_eq!(
        copied, 1.0,
        "the pull of 8 KiB in memory was not copied:\n{scraped}"
    );
    let copied_bytes = value(&scraped, "ringmq_pull_response_bytes_total{path=\"copy\"}").unwrap();
    assert!(copied_bytes >= BODY as f64, "{scraped}");
}

/// A consumer catching up through log bytes released from memory: its pulls are read with
/// `O_DIRECT` into the shard's own buffers (`ringmq_pull_responses_total{path="direct"}`),
/// return every record as written, two queues' records interleaved in the log, and leave
/// the page cache as it was. Fails if those pulls go through the page cache (a splice or a
/// copy reads the pages back in) or return other bytes.
#[test]
fn a_consumer_catching_up_through_released_bytes_reads_them_without_the_page_cache() {
    let dir = tempdir("metrics-pull-direct");
    let data = dir.path().join("data");
    // Everything durable but the last MiB is released.
    let (node, addr) = pull_paths_node(dir.path(), "commitLogCacheKeepBytes=1048576");
    let mut c = Client::connect(node.broker_addr());
    let topic = "PullDirect";
    const BODY: usize = 8 << 10;
    let body = |q: u32, i: u32| {
        let mut b = format!("pd-{q}-{i:06}-").into_bytes();
        b.resize(BODY, b'a' + (i % 26) as u8);
        b
    };
    // 48 MiB: batches of 32 records to queue 0 and queue 1 in turn.
    const PER_QUEUE: u32 = 3072;
    for first in (0..PER_QUEUE).step_by(32) {
        for q in 0..2 {
            let batch: Vec<Msg> = (first..first + 32)
                .map(|i| Msg::new(topic, q, body(q, i)))
                .collect();
            c.send_batch(topic, q, &batch).ok();
        }
    }
    if on_tmpfs(&data) {
        eprintln!("{}: on a tmpfs, no direct I/O; not checked", data.display());
        return;
    }
    // Released once durable (ASYNC_FLUSH's checkpoint): a pull of the first records goes
    // the direct way.
    let first = wait_for(Duration::from_secs(20), || {
        let r = c.pull(topic, 0, 0, 1, 0);
        r.ok();
        let scraped = get(addr, "/metrics");
        (value(&scraped, "ringmq_pull_responses_total{path=\"direct\"}")? >= 1.0).then_some(())
    });
    assert!(
        first.is_some(),
        "no pull went the direct way:\n{}",
        get(addr, "/metrics")
    );
    // What the node's own release left in memory, and what the pull above read, dropped.
    let segs = segments(&data);
    for seg in &segs {
        let len = usize::try_from(std::fs::metadata(seg).unwrap().len()).unwrap();
        drop_cached(seg, len);
    }
    let before = resident_in(&segs[1..4], 0);
    // Both queues read back in pulls of 24 records (192 KiB), each checked.
    let mut pulls = 1;
    for q in 0..2u32 {
        let mut at = 0u64;
        while at < 2800 {
            pulls += 1;
            let r = c.pull(topic, q, at, 24, 0);
            r.ok();
            let got: Vec<Vec<u8>> = decode_records(&r.body)
                .iter()
                .map(|m| m.body.to_vec())
                .collect();
            let want: Vec<Vec<u8>> = (at as u32..at as u32 + got.len() as u32)
                .map(|i| body(q, i))
                .collect();
            assert!(!got.is_empty(), "queue {q}: nothing at {at}");
            assert!(got == want, "queue {q}: wrong records from {at}");
            at += got.len() as u64;
        }
    }
    let scraped = scrape_until(addr, "every pull", |b| {
        sum(b, "ringmq_pull_responses_total") >= pulls
    });
    let direct = value(&scraped, "ringmq_pull_responses_total{path=\"direct\"}").unwrap();
    let file = value(&scraped, "ringmq_pull_responses_total{path=\"file\"}").unwrap();
    assert!(
        direct >= 200.0,
        "{direct} pulls went the direct way:\n{scraped}"
    );
    assert_eq!(
        file, 0.0,
        "pulls of released bytes went through the page cache:\n{scraped}"
    );
    // Segments 2 to 4 (8 to 32 MiB, all released and read back above) are as they were:
    // nothing came back into the page cache.
    let after = resident_in(&segs[1..4], 0);
    let kib = |r: &Vec<(String, Vec<(usize, usize)>)>| -> usize {
        r.iter()
            .flat_map(|(_, runs)| runs.iter().map(|(a, b)| b - a))
            .sum()
    };
    assert!(
        kib(&after) <= kib(&before) + 64,
        "the pulls brought released pages back into memory: before {before:?}, after {after:?}"
    );
}
