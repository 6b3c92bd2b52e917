//! Shared by the integration tests: a small blocking client for the native protocol over
//! `std::net::TcpStream` (built only on `ringmq_wire`: frame check/parse, typed request
//! headers, `Response<T>` decoding), and [`Node`], a guard around a spawned `ringmq` process
//! (temp dir, ready line parsed from stdout with a timeout, stderr captured to a file that is
//! printed when a test fails, SIGKILL on drop).
//!
//! Every wait here is bounded: socket reads time out, the ready line has a deadline, `term`
//! gives up after a while. A hung broker fails the test instead of hanging the suite.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ringmq_wire::code::{RequestCode, Status, PROTOCOL_VERSION};
use ringmq_wire::codec::{Decode, Empty, Encode};
use ringmq_wire::command::pull::FilterType;
use ringmq_wire::command::route::{perm, ClusterInfo, GetRouteRequest, TopicConfig, TopicRoute};
use ringmq_wire::command::{
    read_remark, Boundary, BrokerRuntimeInfo, CreateTopicRequest, GetOffsetRequest, HelloRequest,
    HelloResponse, OffsetResponse, PullRequest, PullResponse, QueryConsumerOffsetRequest,
    QueryConsumerOffsetResponse, Response, SearchOffsetRequest, SendRequest, SendResponse,
    UpdateConsumerOffsetRequest, ViewMessageRequest,
};
use ringmq_wire::frame;
use ringmq_wire::properties;
use ringmq_wire::record::{self, Message, RecordView};

/// `queue_id` of a send whose records each name their own queue (multi-queue batch).
pub const MULTI_QUEUE: u32 = u32::MAX;
/// 8 MiB CommitLog segments: the 1 GiB default would pre-write GiBs of zeros per test.
pub const SEGMENT_SET: &str = "mappedFileSizeCommitLog=8388608";
/// How long a socket read may block before the test fails.
pub const READ_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a node may take to print its ready line.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// The `ringmq` binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_ringmq")
}

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

// ---------------------------------------------------------------------------------------
// Records
// ---------------------------------------------------------------------------------------

/// What a test sends as one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Msg {
    pub topic: String,
    pub queue_id: u32,
    pub body: Vec<u8>,
    /// Encoded properties block (TAGS, KEYS, user properties).
    pub properties: Vec<u8>,
}

impl Msg {
    pub fn new(topic: &str, queue_id: u32, body: impl Into<Vec<u8>>) -> Self {
        Msg {
            topic: topic.to_string(),
            queue_id,
            body: body.into(),
            properties: Vec::new(),
        }
    }

    /// Adds properties (e.g. `("TAGS", "TagA")`, `("KEYS", "k1")`, user keys).
    pub fn props(mut self, pairs: &[(&str, &str)]) -> Self {
        properties::encode(pairs.iter().copied(), &mut self.properties)
            .expect("test properties are valid");
        self
    }

    /// The record bytes a producer sends (broker-owned fields zero, IPv4 store host slot).
    pub fn encode(&self) -> Vec<u8> {
        let m = Message {
            topic: &self.topic,
            queue_id: self.queue_id,
            flag: 7,
            sys_flag: 0,
            born_timestamp_ms: now_ms(),
            born_host: SocketAddr::from(([127, 0, 0, 1], 40000)),
            store_host_v6: false,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: &self.body,
            properties: &self.properties,
        };
        let mut out = Vec::new();
        record::encode(&m, &mut out).expect("test record encodes");
        out
    }
}

/// Records back to back, as a batch body.
pub fn batch_body(msgs: &[Msg]) -> (Vec<u8>, Vec<usize>) {
    let mut body = Vec::new();
    let mut lens = Vec::new();
    for m in msgs {
        let r = m.encode();
        lens.push(r.len());
        body.extend_from_slice(&r);
    }
    (body, lens)
}

/// Decodes every record of a pull or view body; panics on a bad record.
pub fn decode_records(body: &[u8]) -> Vec<RecordView<'_>> {
    record::iter(body)
        .map(|r| r.expect("broker returned a valid record"))
        .collect()
}

/// Checks a stored record against what was sent: the same bytes except the broker-owned
/// fields (queue offset, physical offset, store timestamp, store host), which are patched
/// into a copy of the sent bytes from the stored record before comparing.
pub fn assert_same_record(sent: &[u8], got: &RecordView<'_>) {
    let mut want = sent.to_vec();
    record::patch_broker_fields(
        &mut want,
        &record::BrokerFields {
            queue_offset: got.queue_offset,
            physical_offset: got.physical_offset,
            store_timestamp_ms: got.store_timestamp_ms,
            store_host: got.store_host,
        },
    )
    .expect("patching the sent record");
    assert_eq!(
        want, got.bytes,
        "stored record differs from the sent one beyond the broker-owned fields \
         (queue {} offset {})",
        got.queue_id, got.queue_offset
    );
}

// ---------------------------------------------------------------------------------------
// Client
// ---------------------------------------------------------------------------------------

/// One response frame, owned.
#[derive(Debug, Clone)]
pub struct Resp {
    pub request_id: u64,
    /// The raw status code (an unknown one stays visible).
    pub code: u16,
    pub header: Vec<u8>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn status(&self) -> Status {
        Status::try_from(self.code)
            .unwrap_or_else(|_| panic!("response with unknown status code {}", self.code))
    }

    pub fn remark(&self) -> String {
        read_remark(&self.header)
            .map(|(r, _)| r.to_string())
            .unwrap_or_else(|e| format!("<undecodable header: {e}>"))
    }

    /// The typed fields of the response header, if the responder sent them.
    pub fn fields<T: Decode>(&self) -> Option<T> {
        Response::<T>::decode(&self.header)
            .unwrap_or_else(|e| panic!("response header does not decode: {e}"))
            .fields
    }

    /// Panics with the status and remark unless the status is `want`.
    #[track_caller]
    pub fn expect_status(&self, want: Status) -> &Self {
        assert_eq!(
            self.status(),
            want,
            "want {} got {} (remark: {:?})",
            want.name(),
            self.status().name(),
            self.remark()
        );
        self
    }

    #[track_caller]
    pub fn ok(&self) -> &Self {
        self.expect_status(Status::Success)
    }
}

/// A blocking connection speaking the native protocol, with request ids and pipelining.
pub struct Client {
    pub addr: SocketAddr,
    stream: TcpStream,
    next_id: u64,
    buf: Vec<u8>,
    /// Responses read while waiting for another request id.
    early: HashMap<u64, Resp>,
    /// Requests the server sent on its own (oneway notifications), in arrival order.
    pushed: Vec<Resp>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Self {
        Self::try_connect(addr).unwrap_or_else(|e| panic!("connecting to {addr}: {e}"))
    }

    pub fn try_connect(addr: SocketAddr) -> std::io::Result<Self> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        stream.set_read_timeout(Some(READ_TIMEOUT))?;
        stream.set_write_timeout(Some(READ_TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(Client {
            addr,
            stream,
            next_id: 1,
            buf: Vec::new(),
            early: HashMap::new(),
            pushed: Vec::new(),
        })
    }

    /// The raw socket (for sending garbage).
    pub fn stream(&mut self) -> &mut TcpStream {
        &mut self.stream
    }

    pub fn set_read_timeout(&mut self, d: Duration) {
        self.stream
            .set_read_timeout(Some(d))
            .expect("setting the read timeout");
    }

    /// Writes one request frame and returns its request id (pipelining: read later).
    pub fn send_frame(&mut self, code: RequestCode, header: &impl Encode, body: &[u8]) -> u64 {
        self.try_send_frame(code, header, body)
            .unwrap_or_else(|e| panic!("sending {}: {e}", code.name()))
    }

    /// Like [`Client::send_frame`] but a dead connection is an `Err`, not a panic.
    pub fn try_send_frame(
        &mut self,
        code: RequestCode,
        header: &impl Encode,
        body: &[u8],
    ) -> Result<u64, String> {
        let id = self.next_id;
        self.next_id += 1;
        let mut out = Vec::new();
        frame::encode_request(&mut out, code, false, id, header, body)
            .map_err(|e| format!("encoding: {e}"))?;
        self.stream
            .write_all(&out)
            .map_err(|e| format!("write: {e}"))?;
        Ok(id)
    }

    /// Writes raw bytes.
    pub fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Reads the next response frame, whatever its id (requests the server sends on its own
    /// are kept for [`Client::take_pushed`]). `Err` on EOF, timeout or a bad frame.
    pub fn read_any(&mut self) -> Result<Resp, String> {
        loop {
            match frame::check(&self.buf, frame::FRAME_BYTES_MAX) {
                Ok(Some(n)) => {
                    let f = frame::parse(&self.buf[..n]).map_err(|e| e.to_string())?;
                    let r = Resp {
                        request_id: f.request_id,
                        code: f.code,
                        header: f.header.to_vec(),
                        body: f.body.to_vec(),
                    };
                    let response = f.is_response();
                    if !response && !f.is_oneway() {
                        return Err(format!(
                            "server sent a request frame that wants an answer (code {})",
                            f.code
                        ));
                    }
                    self.buf.drain(..n);
                    if !response {
                        self.pushed.push(r);
                        continue;
                    }
                    return Ok(r);
                }
                Ok(None) => {}
                Err(e) => return Err(format!("bad frame from the server: {e}")),
            }
            let mut chunk = [0u8; 64 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err("connection closed".to_string()),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) => return Err(format!("read: {e}")),
            }
        }
    }

    /// Requests the server pushed so far (oneway; `code` is the request code).
    pub fn take_pushed(&mut self) -> Vec<Resp> {
        std::mem::take(&mut self.pushed)
    }

    /// Reads until the server pushes a request or `timeout` passes; returns what was pushed.
    pub fn wait_pushed(&mut self, timeout: Duration) -> Vec<Resp> {
        let deadline = Instant::now() + timeout;
        while self.pushed.is_empty() && Instant::now() < deadline {
            self.set_read_timeout(Duration::from_millis(100));
            match self.read_any() {
                Ok(r) => {
                    self.early.insert(r.request_id, r);
                }
                Err(e) if e.contains("read:") => {}
                Err(e) => panic!("waiting for a pushed request: {e}"),
            }
        }
        self.set_read_timeout(READ_TIMEOUT);
        self.take_pushed()
    }

    /// Reads until the response to `id` arrives (others are kept for later).
    pub fn recv(&mut self, id: u64) -> Resp {
        self.try_recv(id)
            .unwrap_or_else(|e| panic!("waiting for the response to request {id}: {e}"))
    }

    pub fn try_recv(&mut self, id: u64) -> Result<Resp, String> {
        if let Some(r) = self.early.remove(&id) {
            return Ok(r);
        }
        loop {
            let r = self.read_any()?;
            if r.request_id == id {
                return Ok(r);
            }
            self.early.insert(r.request_id, r);
        }
    }

    /// One request, one response.
    pub fn call(&mut self, code: RequestCode, header: &impl Encode, body: &[u8]) -> Resp {
        let id = self.send_frame(code, header, body);
        self.recv(id)
    }

    /// Like [`Client::call`] but a dead connection is an `Err`, not a panic.
    pub fn try_call(
        &mut self,
        code: RequestCode,
        header: &impl Encode,
        body: &[u8],
    ) -> Result<Resp, String> {
        let id = self.try_send_frame(code, header, body)?;
        self.try_recv(id)
    }

    // ---- broker requests --------------------------------------------------------------

    /// HELLO; returns the response fields (panics unless SUCCESS).
    pub fn hello(&mut self, preferred_shard: Option<u16>) -> HelloResponse {
        let h = HelloRequest {
            client_id: format!("127.0.0.1@{}", std::process::id()),
            protocol_version: PROTOCOL_VERSION,
            client_version: "ringmq integration tests".to_string(),
            preferred_shard,
        };
        let r = self.call(RequestCode::Hello, &h, &[]);
        r.ok();
        r.fields::<HelloResponse>().expect("HELLO response fields")
    }

    pub fn send_request(topic: &str, queue_id: u32, batch: bool, count: usize) -> SendRequest {
        SendRequest {
            producer_group: "it-producers".to_string(),
            topic: topic.to_string(),
            queue_id,
            batch,
            record_count: count as u32,
        }
    }

    /// SEND_MESSAGE of one record; returns the raw response.
    pub fn send(&mut self, msg: &Msg) -> Resp {
        let h = Self::send_request(&msg.topic, msg.queue_id, false, 1);
        self.call(RequestCode::SendMessage, &h, &msg.encode())
    }

    /// SEND_MESSAGE of pre-encoded record bytes.
    pub fn send_bytes(&mut self, topic: &str, queue_id: u32, record: &[u8]) -> Resp {
        let h = Self::send_request(topic, queue_id, false, 1);
        self.call(RequestCode::SendMessage, &h, record)
    }

    /// SEND_MESSAGE; panics unless SUCCESS; returns the fields.
    pub fn send_ok(&mut self, msg: &Msg) -> SendResponse {
        let r = self.send(msg);
        r.ok();
        r.fields::<SendResponse>().expect("send response fields")
    }

    /// SEND_BATCH_MESSAGE to `queue_id` (or [`MULTI_QUEUE`]).
    pub fn send_batch(&mut self, topic: &str, queue_id: u32, msgs: &[Msg]) -> Resp {
        let (body, _) = batch_body(msgs);
        let h = Self::send_request(topic, queue_id, true, msgs.len());
        self.call(RequestCode::SendBatchMessage, &h, &body)
    }

    /// PULL_MESSAGE with a tag filter of `*`.
    pub fn pull(
        &mut self,
        topic: &str,
        queue_id: u32,
        offset: u64,
        max_messages: u32,
        suspend_timeout_ms: u32,
    ) -> Resp {
        let h = pull_request(topic, queue_id, offset, max_messages, suspend_timeout_ms);
        self.call(RequestCode::PullMessage, &h, &[])
    }

    /// Pulls `queue` from `offset` until `count` records arrived; panics on anything else.
    pub fn pull_all(&mut self, topic: &str, queue_id: u32, offset: u64, count: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let mut got = 0usize;
        let mut at = offset;
        while got < count {
            let r = self.pull(topic, queue_id, at, 256, 0);
            r.ok();
            let f = r.fields::<PullResponse>().expect("pull fields");
            assert!(f.message_count > 0, "pull returned SUCCESS with no records");
            got += f.message_count as usize;
            at = f.next_begin_offset;
            out.extend_from_slice(&r.body);
        }
        out
    }

    pub fn create_topic(&mut self, topic: &str, queues: u32) -> Resp {
        let h = CreateTopicRequest {
            topic: topic.to_string(),
            read_queue_count: queues,
            write_queue_count: queues,
            perm: perm::READ_WRITE,
            attributes: Default::default(),
        };
        self.call(RequestCode::UpdateAndCreateTopic, &h, &[])
    }

    pub fn create_topic_ok(&mut self, topic: &str, queues: u32) -> TopicConfig {
        let r = self.create_topic(topic, queues);
        r.ok();
        r.fields::<TopicConfig>().expect("topic config fields")
    }

    fn offset_call(&mut self, code: RequestCode, topic: &str, queue_id: u32) -> u64 {
        let h = GetOffsetRequest {
            topic: topic.to_string(),
            queue_id,
        };
        let r = self.call(code, &h, &[]);
        r.ok();
        r.fields::<OffsetResponse>()
            .expect("offset response fields")
            .offset
    }

    pub fn max_offset(&mut self, topic: &str, queue_id: u32) -> u64 {
        self.offset_call(RequestCode::GetMaxOffset, topic, queue_id)
    }

    pub fn min_offset(&mut self, topic: &str, queue_id: u32) -> u64 {
        self.offset_call(RequestCode::GetMinOffset, topic, queue_id)
    }

    pub fn search_offset(&mut self, topic: &str, queue_id: u32, timestamp_ms: i64) -> u64 {
        let h = SearchOffsetRequest {
            topic: topic.to_string(),
            queue_id,
            timestamp_ms,
            boundary: Boundary::Lower,
        };
        let r = self.call(RequestCode::SearchOffsetByTimestamp, &h, &[]);
        r.ok();
        r.fields::<OffsetResponse>()
            .expect("offset response fields")
            .offset
    }

    pub fn commit_offset(&mut self, group: &str, topic: &str, queue_id: u32, offset: u64) {
        let h = UpdateConsumerOffsetRequest {
            consumer_group: group.to_string(),
            topic: topic.to_string(),
            queue_id,
            offset,
        };
        self.call(RequestCode::UpdateConsumerOffset, &h, &[]).ok();
    }

    /// The committed offset, `None` on QUERY_NOT_FOUND.
    pub fn query_offset(&mut self, group: &str, topic: &str, queue_id: u32) -> Option<u64> {
        let h = QueryConsumerOffsetRequest {
            consumer_group: group.to_string(),
            topic: topic.to_string(),
            queue_id,
        };
        let r = self.call(RequestCode::QueryConsumerOffset, &h, &[]);
        if r.status() == Status::QueryNotFound {
            return None;
        }
        r.ok();
        Some(
            r.fields::<QueryConsumerOffsetResponse>()
                .expect("query offset fields")
                .offset,
        )
    }

    pub fn view_message(&mut self, physical_offset: u64) -> Resp {
        self.call(
            RequestCode::ViewMessageById,
            &ViewMessageRequest { physical_offset },
            &[],
        )
    }

    pub fn runtime_info(&mut self) -> BrokerRuntimeInfo {
        let r = self.call(RequestCode::GetBrokerRuntimeInfo, &Empty, &[]);
        r.ok();
        BrokerRuntimeInfo::decode(&r.body).expect("runtime info body")
    }

    // ---- name server requests ---------------------------------------------------------

    /// The topic's route, `None` on TOPIC_NOT_EXIST.
    pub fn route(&mut self, topic: &str) -> Option<TopicRoute> {
        let r = self.call(
            RequestCode::GetRouteInfoByTopic,
            &GetRouteRequest {
                topic: topic.to_string(),
            },
            &[],
        );
        if r.status() == Status::TopicNotExist {
            return None;
        }
        r.ok();
        Some(TopicRoute::decode(&r.body).expect("route body"))
    }

    pub fn cluster_info(&mut self) -> ClusterInfo {
        let r = self.call(RequestCode::GetBrokerClusterInfo, &Empty, &[]);
        r.ok();
        ClusterInfo::decode(&r.body).expect("cluster info body")
    }
}

/// A PULL_MESSAGE header (tag filter `*`, 8 MiB max bytes, no commit).
pub fn pull_request(
    topic: &str,
    queue_id: u32,
    offset: u64,
    max_messages: u32,
    suspend_timeout_ms: u32,
) -> PullRequest {
    PullRequest {
        consumer_group: "it-consumers".to_string(),
        topic: topic.to_string(),
        queue_id,
        queue_offset: offset,
        max_messages,
        max_bytes: 8 << 20,
        filter_type: FilterType::Tag,
        expression: "*".to_string(),
        suspend_timeout_ms,
        commit_offset: None,
    }
}

/// Retries `f` every 50 ms until it returns `Some` or `timeout` passes.
pub fn wait_for<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

// ---------------------------------------------------------------------------------------
// Node: a spawned ringmq process
// ---------------------------------------------------------------------------------------

/// Addresses a node printed on its ready line.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ready {
    pub namesrv: Option<SocketAddr>,
    pub broker: Option<SocketAddr>,
    pub shards: u16,
}

static LOG_SEQ: AtomicUsize = AtomicUsize::new(0);

/// A running `ringmq` process; SIGKILLed on drop if still alive. When the test thread is
/// panicking, drop prints the tail of the node's stderr log.
pub struct Node {
    pub name: String,
    child: Option<Child>,
    pub ready: Ready,
    pub log_path: PathBuf,
    pub exit: Option<ExitStatus>,
}

/// How to launch a node.
#[derive(Debug, Clone, Default)]
pub struct Launch {
    /// Programs the binary is run through (e.g. `prlimit ... setpriv ...`); each must exec,
    /// so the child's pid stays the node's pid.
    pub prefix: Vec<String>,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

impl Node {
    /// `ringmq standalone` with data under `data`, ephemeral ports, 8 MiB segments, plus
    /// `extra` args. Logs go next to the data dir.
    pub fn standalone(data: &Path, extra: &[&str]) -> Node {
        Node::start(
            "standalone",
            data.parent().unwrap_or(data),
            standalone_launch(data, extra),
        )
    }

    /// `ringmq namesrv` on an ephemeral port.
    pub fn namesrv(log_dir: &Path, extra: &[&str]) -> Node {
        let mut args: Vec<String> = ["namesrv", "--host", "127.0.0.1", "--port", "0"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        Node::start(
            "namesrv",
            log_dir,
            Launch {
                args,
                ..Launch::default()
            },
        )
    }

    /// `ringmq broker -c config --namesrv "ns1;ns2"` (+ 8 MiB segments, extra args).
    pub fn broker(log_dir: &Path, config: &Path, namesrvs: &[SocketAddr], extra: &[&str]) -> Node {
        let list = namesrvs
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(";");
        let mut args: Vec<String> = vec![
            "broker".into(),
            "-c".into(),
            config.display().to_string(),
            "--namesrv".into(),
            list,
            "--host".into(),
            "127.0.0.1".into(),
            "--set".into(),
            SEGMENT_SET.into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        Node::start(
            "broker",
            log_dir,
            Launch {
                args,
                ..Launch::default()
            },
        )
    }

    /// Spawns the binary and waits for its ready line (panics with the log otherwise).
    pub fn start(name: &str, log_dir: &Path, launch: Launch) -> Node {
        let seq = LOG_SEQ.fetch_add(1, Ordering::Relaxed);
        std::fs::create_dir_all(log_dir).expect("creating the log dir");
        let log_path = log_dir.join(format!("{name}-{seq}.stderr.log"));
        let log = std::fs::File::create(&log_path).expect("creating the stderr log");
        let mut cmd = match launch.prefix.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(bin());
                c
            }
            None => Command::new(bin()),
        };
        cmd.args(&launch.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log));
        for (k, v) in &launch.env {
            cmd.env(k, v);
        }
        if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", "info");
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {} {:?}: {e}", bin(), launch.args));
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel::<String>();
        std::thread::spawn(move || {
            // Keep draining stdout so the node never blocks on a full pipe.
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = tx.send(line);
            }
        });
        let mut node = Node {
            name: format!("{name}-{seq}"),
            child: Some(child),
            ready: Ready::default(),
            log_path,
            exit: None,
        };
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left.min(Duration::from_millis(100))) {
                Ok(line) => {
                    if let Some(r) = parse_ready(&line) {
                        node.ready = r;
                        return node;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    std::thread::sleep(Duration::from_millis(100));
                    let status = node
                        .child
                        .as_mut()
                        .and_then(|c| c.try_wait().ok().flatten());
                    panic!(
                        "{} exited before its ready line ({status:?}); stderr:\n{}",
                        node.name,
                        node.log()
                    );
                }
            }
            if let Some(c) = node.child.as_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    std::thread::sleep(Duration::from_millis(50));
                    panic!(
                        "{} exited before its ready line ({status}); stderr:\n{}",
                        node.name,
                        node.log()
                    );
                }
            }
            if Instant::now() >= deadline {
                panic!(
                    "{} printed no ready line within {READY_TIMEOUT:?}; stderr:\n{}",
                    node.name,
                    node.log()
                );
            }
        }
    }

    /// Runs the binary expecting it to refuse to start: waits (at most 30 s) for it to exit
    /// without a ready line and returns its exit status and stderr.
    pub fn start_expect_exit(name: &str, log_dir: &Path, launch: Launch) -> (ExitStatus, String) {
        std::fs::create_dir_all(log_dir).expect("creating the log dir");
        let log_path = log_dir.join(format!(
            "{name}-{}.stderr.log",
            LOG_SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let log = std::fs::File::create(&log_path).expect("creating the stderr log");
        let out = Command::new(bin())
            .args(&launch.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("spawning the binary");
        let mut child = out;
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Ok(Some(s)) = child.try_wait() {
                break s;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{name} did not exit within 30 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut stdout = String::new();
        if let Some(mut o) = child.stdout.take() {
            let _ = o.read_to_string(&mut stdout);
        }
        assert!(
            parse_ready(stdout.lines().next().unwrap_or("")).is_none(),
            "{name} printed a ready line: {stdout}"
        );
        (
            status,
            std::fs::read_to_string(&log_path).unwrap_or_default(),
        )
    }

    pub fn broker_addr(&self) -> SocketAddr {
        self.ready.broker.expect("this node runs a broker")
    }

    pub fn namesrv_addr(&self) -> SocketAddr {
        self.ready.namesrv.expect("this node runs a name server")
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().map_or(-1, |c| c.id() as i32)
    }

    /// The node's stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// Prints the stderr log to the test output.
    pub fn dump_log(&self) {
        eprintln!(
            "----- {} stderr ({}) -----\n{}\n----- end {} -----",
            self.name,
            self.log_path.display(),
            self.log(),
            self.name
        );
    }

    /// SIGTERM, then waits (at most 30 s) for the exit status.
    pub fn term(&mut self) -> ExitStatus {
        self.signal(libc::SIGTERM);
        self.wait(Duration::from_secs(30))
            .unwrap_or_else(|| panic!("{} did not exit within 30 s of SIGTERM", self.name))
    }

    /// SIGKILL, then waits for the process to be gone.
    pub fn kill9(&mut self) -> ExitStatus {
        self.signal(libc::SIGKILL);
        self.wait(Duration::from_secs(10))
            .unwrap_or_else(|| panic!("{} survived SIGKILL", self.name))
    }

    fn signal(&self, sig: i32) {
        let pid = self.pid();
        if pid > 0 && self.exit.is_none() {
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::try_from(sig).expect("a valid signal"),
            )
            .unwrap_or_else(|e| panic!("signal {sig} to {}: {e}", self.name));
        }
    }

    /// Waits up to `timeout` for the process to exit.
    pub fn wait(&mut self, timeout: Duration) -> Option<ExitStatus> {
        if let Some(s) = self.exit {
            return Some(s);
        }
        let deadline = Instant::now() + timeout;
        let child = self.child.as_mut()?;
        loop {
            if let Ok(Some(s)) = child.try_wait() {
                self.exit = Some(s);
                return Some(s);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            if self.exit.is_none() && !matches!(child.try_wait(), Ok(Some(_))) {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        if std::thread::panicking() {
            let log = self.log();
            let lines: Vec<&str> = log.lines().collect();
            let tail = &lines[lines.len().saturating_sub(80)..];
            eprintln!(
                "----- {} stderr, last {} lines ({}) -----\n{}\n-----",
                self.name,
                tail.len(),
                self.log_path.display(),
                tail.join("\n")
            );
        }
    }
}

/// The launch of `ringmq standalone` on loopback with ephemeral ports.
pub fn standalone_launch(data: &Path, extra: &[&str]) -> Launch {
    let mut args: Vec<String> = vec![
        "standalone".into(),
        "--data".into(),
        data.display().to_string(),
        "--host".into(),
        "127.0.0.1".into(),
        "--namesrv-port".into(),
        "0".into(),
        "--broker-port".into(),
        "0".into(),
        "--set".into(),
        SEGMENT_SET.into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    Launch {
        args,
        ..Launch::default()
    }
}

/// Parses the three ready lines `ringmq` prints on stdout.
pub fn parse_ready(line: &str) -> Option<Ready> {
    let addr = |s: &str| s.parse::<SocketAddr>().ok();
    let shards = |s: &str| s.trim_start_matches('(').parse::<u16>().ok();
    if let Some(rest) = line.strip_prefix("ringmq standalone ready: ") {
        // namesrv A broker B (N shards)
        let w: Vec<&str> = rest.split_whitespace().collect();
        if w.len() >= 5 && w[0] == "namesrv" && w[2] == "broker" {
            return Some(Ready {
                namesrv: addr(w[1]),
                broker: addr(w[3]),
                shards: shards(w[4])?,
            });
        }
    } else if let Some(rest) = line.strip_prefix("ringmq namesrv ready: ") {
        return Some(Ready {
            namesrv: addr(rest.trim()),
            broker: None,
            shards: 0,
        });
    } else if let Some(rest) = line.strip_prefix("ringmq broker ready: ") {
        let w: Vec<&str> = rest.split_whitespace().collect();
        if w.len() >= 2 {
            return Some(Ready {
                namesrv: None,
                broker: addr(w[0]),
                shards: shards(w[1])?,
            });
        }
    }
    None
}

/// A fresh temp dir for one test (removed on drop; a failing test prints the node logs).
pub fn tempdir(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("ringmq-it-{prefix}-"))
        .tempdir()
        .expect("creating a temp dir")
}

/// The log lines containing `needle` (e.g. `clean shutdown last time`).
pub fn log_lines_containing<'a>(log: &'a str, needle: &str) -> Vec<&'a str> {
    log.lines().filter(|l| l.contains(needle)).collect()
}

// ---------------------------------------------------------------------------------------
// Replication pairs (the ha_*.rs tests)
// ---------------------------------------------------------------------------------------

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// CommitLog segment size for replication tests: the smallest the config takes
/// (`RECORD_BYTES_MAX` + a BLANK, about 4.07 MiB) rounded up to 4 MiB + 128 KiB, so a test
/// crosses segment ends after a few MiB.
pub const HA_SEGMENT_BYTES: u64 = 4_325_376;
const _: () = assert!(HA_SEGMENT_BYTES >= (record::RECORD_BYTES_MAX + record::BLANK_BYTES) as u64);

/// One broker of a master/slave pair, written out as a broker.properties file. Data lives in
/// `home/store`, logs in `home`.
#[derive(Debug, Clone)]
pub struct HaBroker {
    pub home: PathBuf,
    pub broker_name: String,
    /// `SYNC_MASTER`, `ASYNC_MASTER` or `SLAVE`.
    pub role: &'static str,
    /// 0 for a master; slaves 1 and up.
    pub broker_id: u64,
    pub shards: u16,
    /// 0 = any free port (a restart should pin the port the first start got).
    pub listen_port: u16,
    /// Masters: `haListenPort` (0 = any free port).
    pub ha_listen_port: Option<u16>,
    /// Slaves: `haMasterAddress` (otherwise learned from the name server).
    pub ha_master_address: Option<SocketAddr>,
    pub sync_flush_timeout_ms: u64,
    /// Further `key=value` lines for the file.
    pub extra: Vec<String>,
}

impl HaBroker {
    pub fn master(home: &Path, role: &'static str, shards: u16) -> Self {
        HaBroker {
            home: home.to_path_buf(),
            broker_name: "broker-ha".to_string(),
            role,
            broker_id: 0,
            shards,
            listen_port: 0,
            ha_listen_port: Some(0),
            ha_master_address: None,
            sync_flush_timeout_ms: 5_000,
            extra: Vec::new(),
        }
    }

    pub fn slave(home: &Path, shards: u16, master_ha: Option<SocketAddr>) -> Self {
        HaBroker {
            role: "SLAVE",
            broker_id: 1,
            ha_listen_port: None,
            ha_master_address: master_ha,
            ..HaBroker::master(home, "SLAVE", shards)
        }
    }

    pub fn store_root(&self) -> PathBuf {
        self.home.join("store")
    }

    /// The directory of shard `shard`'s CommitLog segments.
    pub fn commitlog_dir(&self, shard: u16) -> PathBuf {
        self.store_root().join("commitlog").join(shard.to_string())
    }

    /// Writes `home/broker.properties` and returns its path.
    pub fn write_config(&self) -> PathBuf {
        std::fs::create_dir_all(&self.home).expect("creating the broker home");
        let mut text = format!(
            "# written by the ha_* integration tests\n\
             brokerClusterName=HaCluster\n\
             brokerName={}\n\
             brokerId={}\n\
             brokerRole={}\n\
             listenPort={}\n\
             storePathRootDir={}\n\
             flushDiskType=ASYNC_FLUSH\n\
             syncFlushTimeout={}\n\
             registerNameServerPeriod=1000\n",
            self.broker_name,
            self.broker_id,
            self.role,
            self.listen_port,
            self.store_root().display(),
            self.sync_flush_timeout_ms,
        );
        if let Some(p) = self.ha_listen_port {
            text.push_str(&format!("haListenPort={p}\n"));
        }
        if let Some(a) = self.ha_master_address {
            text.push_str(&format!("haMasterAddress={a}\n"));
        }
        for line in &self.extra {
            text.push_str(line);
            text.push('\n');
        }
        let path = self.home.join("broker.properties");
        std::fs::write(&path, text).expect("writing broker.properties");
        path
    }

    /// Writes the config and starts `ringmq broker -c` with small segments.
    pub fn start(&self, namesrv: SocketAddr) -> Node {
        let config = self.write_config();
        let seg = format!("mappedFileSizeCommitLog={HA_SEGMENT_BYTES}");
        let shards = self.shards.to_string();
        Node::broker(
            &self.home,
            &config,
            &[namesrv],
            &["--shards", &shards, "--set", &seg],
        )
    }

    /// After a first start with port 0: pin the ports it got (its broker port and, for a
    /// master, the HA port it registered), so a restart comes back on the same ports.
    pub fn pin_ports(&mut self, node: &Node, namesrv: SocketAddr) {
        self.listen_port = node.broker_addr().port();
        if self.role != "SLAVE" {
            self.ha_listen_port = Some(registered_ha_address(namesrv, &self.broker_name).port());
        }
    }
}

/// The HA address the master of `broker_name` registered with the name server (waits up to
/// 10 s for the registration).
pub fn registered_ha_address(namesrv: SocketAddr, broker_name: &str) -> SocketAddr {
    let mut ns = Client::connect(namesrv);
    wait_for(Duration::from_secs(10), || {
        ns.cluster_info()
            .brokers
            .iter()
            .find(|b| b.broker_name == broker_name)
            .and_then(|b| b.master())
            .and_then(|m| m.ha_address.parse::<SocketAddr>().ok())
    })
    .unwrap_or_else(|| panic!("{broker_name} registered no HA address within 10 s"))
}

/// The runtime info `extra` value `shard.{shard}.{key}` as a number (`None` if absent).
pub fn shard_extra(info: &BrokerRuntimeInfo, shard: usize, key: &str) -> Option<u64> {
    info.extra
        .get(&format!("shard.{shard}.{key}"))
        .and_then(|v| v.parse().ok())
}

/// Each shard's CommitLog end offset from runtime info.
pub fn log_ends(c: &mut Client) -> Vec<u64> {
    let mut shards = c.runtime_info().shards;
    shards.sort_by_key(|s| s.shard_id);
    shards.iter().map(|s| s.commitlog_max_offset).collect()
}

/// Waits until every shard of the master has a slave (`ha_slaves` >= 1).
pub fn wait_slaves_connected(master: SocketAddr, shards: usize, timeout: Duration) -> bool {
    let mut c = Client::connect(master);
    wait_for(timeout, || {
        let info = c.runtime_info();
        (0..shards)
            .all(|s| shard_extra(&info, s, "ha_slaves").unwrap_or(0) >= 1)
            .then_some(())
    })
    .is_some()
}

/// Waits until the slave's log ends equal the master's on every shard and the master
/// reports no lag, unchanged over 1.1 s (runtime info counters are refreshed on each shard's
/// timer tick, every `flushIntervalCommitLog` = 500 ms, so one matching sample can be stale);
/// returns how long it took, `None` on timeout (the last ends are printed).
pub fn wait_caught_up(
    master: SocketAddr,
    slave: SocketAddr,
    timeout: Duration,
) -> Option<Duration> {
    let t0 = Instant::now();
    let mut m = Client::connect(master);
    let mut s = Client::connect(slave);
    let mut last = (Vec::new(), Vec::new(), Vec::new());
    let mut stable_since: Option<(Instant, Vec<u64>)> = None;
    let done = wait_for(timeout, || {
        let info = m.runtime_info();
        let mut ms = info.shards.clone();
        ms.sort_by_key(|x| x.shard_id);
        let m_ends: Vec<u64> = ms.iter().map(|x| x.commitlog_max_offset).collect();
        let s_ends = log_ends(&mut s);
        let lag: Vec<u64> = (0..m_ends.len())
            .map(|i| shard_extra(&info, i, "ha_lag_bytes").unwrap_or(u64::MAX))
            .collect();
        let ok = m_ends == s_ends && lag.iter().all(|&l| l == 0);
        last = (m_ends.clone(), s_ends, lag);
        if !ok {
            stable_since = None;
            return None;
        }
        match &stable_since {
            Some((at, ends)) if *ends == m_ends => {
                (at.elapsed() >= Duration::from_millis(1_100)).then_some(())
            }
            _ => {
                stable_since = Some((Instant::now(), m_ends));
                None
            }
        }
    });
    if done.is_none() {
        eprintln!(
            "not caught up after {timeout:?}: master ends {:?}, slave ends {:?}, master lag bytes {:?}",
            last.0, last.1, last.2
        );
    }
    done.map(|()| t0.elapsed())
}

/// Waits until the slave knows `topic` (it copies its master's topic table every 3 s).
pub fn wait_topic_on(addr: SocketAddr, topic: &str, timeout: Duration) -> bool {
    let mut c = Client::connect(addr);
    wait_for(timeout, || {
        let h = GetOffsetRequest {
            topic: topic.to_string(),
            queue_id: 0,
        };
        (c.call(RequestCode::GetMaxOffset, &h, &[]).status() == Status::Success).then_some(())
    })
    .is_some()
}

/// A record as stored, read back by a pull.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub physical_offset: u64,
    pub body: Vec<u8>,
    /// The whole record, broker-owned fields included.
    pub bytes: Vec<u8>,
}

/// Every record of `topic`/`queue` by queue offset, pulled from `min_offset` to
/// `max_offset`; panics on a hole or a record of another queue.
pub fn read_queue_stored(c: &mut Client, topic: &str, queue: u32) -> BTreeMap<u64, Stored> {
    let min = c.min_offset(topic, queue);
    let max = c.max_offset(topic, queue);
    let mut out = BTreeMap::new();
    let mut at = min;
    while at < max {
        let r = c.pull(topic, queue, at, 512, 0);
        r.ok();
        let f = r.fields::<PullResponse>().expect("pull response fields");
        for rec in decode_records(&r.body) {
            assert_eq!(
                rec.queue_id, queue,
                "{topic}/{queue}: a record of another queue"
            );
            let prev = out.insert(
                rec.queue_offset,
                Stored {
                    physical_offset: rec.physical_offset,
                    body: rec.body.to_vec(),
                    bytes: rec.bytes.to_vec(),
                },
            );
            assert!(
                prev.is_none(),
                "{topic}/{queue}: offset {} twice",
                rec.queue_offset
            );
        }
        assert!(
            f.next_begin_offset > at,
            "{topic}/{queue}: pull made no progress at {at}"
        );
        at = f.next_begin_offset;
    }
    assert_eq!(
        out.len() as u64,
        max - min,
        "{topic}/{queue}: holes between {min} and {max}"
    );
    out
}

/// One acknowledged send.
#[derive(Debug, Clone)]
pub struct AckedSend {
    pub queue: u32,
    pub offset: u64,
    pub body: Vec<u8>,
}

/// What one sending thread saw.
#[derive(Debug, Default)]
pub struct SendLog {
    pub acked: Vec<AckedSend>,
    /// Answers other than SUCCESS, by status name.
    pub refused: BTreeMap<&'static str, u64>,
    /// How the thread ended (connection error text), if not by the stop flag.
    pub ended_by: Option<String>,
}

/// Body of sequence number `seq` of producer `id` (parse back with [`parse_body`]).
pub fn seq_body(id: usize, seq: u64) -> Vec<u8> {
    format!(
        "producer {id} seq {seq:08} {}",
        "x".repeat(100 + (seq % 100) as usize)
    )
    .into_bytes()
}

/// `(producer, seq)` of a [`seq_body`] body.
pub fn parse_body(body: &[u8]) -> Option<(usize, u64)> {
    let s = std::str::from_utf8(body).ok()?;
    let mut w = s.split(' ');
    if w.next()? != "producer" {
        return None;
    }
    let id = w.next()?.parse().ok()?;
    if w.next()? != "seq" {
        return None;
    }
    let seq = w.next()?.parse().ok()?;
    let pad = w.next()?;
    (pad.len() as u64 == 100 + seq % 100 && pad.bytes().all(|b| b == b'x')).then_some((id, seq))
}

/// Sends single records to `queues` round robin, `pipeline` in flight, until `stop` is set
/// or the connection fails; records every SUCCESS.
pub fn spawn_sender(
    addr: SocketAddr,
    topic: &str,
    id: usize,
    queues: Vec<u32>,
    pipeline: usize,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<SendLog> {
    let topic = topic.to_string();
    std::thread::spawn(move || {
        let mut out = SendLog::default();
        let mut c = match Client::try_connect(addr) {
            Ok(c) => c,
            Err(e) => {
                out.ended_by = Some(format!("connect: {e}"));
                return out;
            }
        };
        let mut seq = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let mut inflight = Vec::with_capacity(pipeline);
            for _ in 0..pipeline {
                let q = queues[seq as usize % queues.len()];
                let body = seq_body(id, seq);
                seq += 1;
                let msg = Msg::new(&topic, q, body.clone());
                let h = Client::send_request(&topic, q, false, 1);
                match c.try_send_frame(RequestCode::SendMessage, &h, &msg.encode()) {
                    Ok(rid) => inflight.push((rid, q, body)),
                    Err(e) => {
                        out.ended_by = Some(e);
                        return out;
                    }
                }
            }
            for (rid, q, body) in inflight {
                match c.try_recv(rid) {
                    Ok(r) if r.status() == Status::Success => {
                        let s = r.fields::<SendResponse>().expect("send response fields");
                        assert_eq!(s.queue_id, q, "acknowledged on another queue");
                        out.acked.push(AckedSend {
                            queue: q,
                            offset: s.first_queue_offset,
                            body,
                        });
                    }
                    Ok(r) => *out.refused.entry(r.status().name()).or_default() += 1,
                    Err(e) => {
                        out.ended_by = Some(e);
                        return out;
                    }
                }
            }
        }
        out
    })
}

/// The CommitLog segment files of a shard directory, by start offset.
pub fn segment_files(dir: &Path) -> BTreeMap<u64, PathBuf> {
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if let Ok(start) = name.parse::<u64>() {
            if name.len() == 20 {
                out.insert(start, e.path());
            }
        }
    }
    out
}

/// Compares two shards' CommitLog segment files byte for byte over `[from, to)` (physical
/// offsets): every segment overlapping the range must exist on both sides with the same
/// bytes. Returns (segments compared, bytes compared); panics at the first difference.
pub fn assert_same_commitlog(a: &Path, b: &Path, from: u64, to: u64) -> (usize, u64) {
    let (sa, sb) = (segment_files(a), segment_files(b));
    let mut segments = 0;
    let mut bytes = 0u64;
    for (&start, pa) in &sa {
        let len = std::fs::metadata(pa).expect("segment metadata").len();
        let (lo, hi) = (from.max(start), to.min(start + len));
        if lo >= hi {
            continue;
        }
        let pb = sb.get(&start).unwrap_or_else(|| {
            panic!(
                "segment {start:020} of {} is missing in {} (it has {:?})",
                a.display(),
                b.display(),
                sb.keys().collect::<Vec<_>>()
            )
        });
        let read = |p: &Path| {
            let mut f = std::fs::File::open(p).expect("opening a segment");
            let mut buf = vec![0u8; (hi - lo) as usize];
            std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(lo - start)).expect("seek");
            f.read_exact(&mut buf)
                .unwrap_or_else(|e| panic!("reading {}..{hi} of {}: {e}", lo, p.display()));
            buf
        };
        let (x, y) = (read(pa), read(pb));
        if let Some(i) = x.iter().zip(&y).position(|(p, q)| p != q) {
            panic!(
                "CommitLogs differ at physical offset {} (segment {start:020}): {} vs {}",
                lo + i as u64,
                pa.display(),
                pb.display()
            );
        }
        segments += 1;
        bytes += hi - lo;
    }
    // Every byte of the range must have been covered by some segment.
    assert!(
        bytes == to.saturating_sub(from),
        "segments of {} cover {bytes} of the {} bytes {from}..{to}",
        a.display(),
        to.saturating_sub(from)
    );
    (segments, bytes)
}

/// What [`master_kill9_scenario`] measured.
#[derive(Debug, Default)]
pub struct KillMasterReport {
    /// Sends acknowledged with SUCCESS before the kill.
    pub acked: usize,
    /// Acknowledged sends the slave did not have when the master died: (queue, offset).
    pub lost: Vec<(u32, u64)>,
    /// Records on the slave that no producer saw acknowledged (in flight at the kill).
    pub unacked_on_slave: usize,
    /// Records on the slave after the kill, all queues.
    pub on_slave: usize,
    /// Answers other than SUCCESS before the kill, by status name.
    pub refused: BTreeMap<&'static str, u64>,
    /// "ahead of its master" lines in the slave's log after the master came back.
    pub slave_truncations: usize,
    /// Segments and bytes found identical after the pair converged.
    pub identical_segments: usize,
    pub identical_bytes: u64,
}

/// A master (`role`) and a slave, `shards` shards each, a name server: producers send
/// continuously recording every acknowledged (queue, offset, body); `kill -9` takes the
/// master down mid-stream; everything is pulled from the slave and checked against the
/// acknowledgements (the slave's queues dense, no record of another body at an acknowledged
/// offset, each producer's records in send order per queue; acknowledged records missing
/// are reported in `lost`, never asserted here). Then the master restarts on the same data
/// and ports, the slave rejoins, new sends go through, the pair converges (same log ends,
/// no lag, every acknowledged record on the slave) and, after a graceful stop of both, the
/// CommitLog segment files are compared byte for byte up to the log end.
pub fn master_kill9_scenario(name: &str, role: &'static str, shards: u16) -> KillMasterReport {
    const QUEUES: u32 = 4;
    const PRODUCERS: usize = 2;
    let topic = format!("Ha{name}");
    let t0 = Instant::now();
    let dir = tempdir(name);
    let ns = Node::namesrv(dir.path(), &[]);
    let nsa = ns.namesrv_addr();
    let mut mcfg = HaBroker::master(&dir.path().join("master"), role, shards);
    let mut master = mcfg.start(nsa);
    mcfg.pin_ports(&master, nsa);
    let ha = SocketAddr::from(([127, 0, 0, 1], mcfg.ha_listen_port.expect("pinned")));
    let scfg = HaBroker::slave(&dir.path().join("slave"), shards, Some(ha));
    let mut slave = scfg.start(nsa);
    let (maddr, saddr) = (master.broker_addr(), slave.broker_addr());
    let cfg = Client::connect(maddr).create_topic_ok(&topic, QUEUES);
    for s in 0..shards {
        assert!(
            cfg.queue_shards.contains(&s),
            "no queue of {topic} on shard {s}: {:?}",
            cfg.queue_shards
        );
    }
    assert!(
        wait_slaves_connected(maddr, shards.into(), Duration::from_secs(10)),
        "the slave did not connect to every shard of the master within 10 s"
    );
    assert!(
        wait_topic_on(saddr, &topic, Duration::from_secs(10)),
        "the slave did not copy the topic table within 10 s"
    );
    eprintln!("[{name}] pair up in {:?}", t0.elapsed());

    // Produce, kill -9 the master mid-stream.
    let stop = Arc::new(AtomicBool::new(false));
    let senders: Vec<_> = (0..PRODUCERS)
        .map(|id| {
            spawn_sender(
                maddr,
                &topic,
                id,
                (0..QUEUES).collect(),
                4,
                Arc::clone(&stop),
            )
        })
        .collect();
    std::thread::sleep(Duration::from_millis(2_000));
    master.kill9();
    stop.store(true, Ordering::Relaxed);
    let logs: Vec<SendLog> = senders
        .into_iter()
        .map(|h| h.join().expect("sender"))
        .collect();
    let mut report = KillMasterReport::default();
    for l in &logs {
        report.acked += l.acked.len();
        for (k, v) in &l.refused {
            *report.refused.entry(k).or_default() += v;
        }
    }
    assert!(report.acked > 0, "nothing was acknowledged before the kill");

    // Everything the slave has, against the acknowledgements.
    let mut sc = Client::connect(saddr);
    let refused = sc.send(&Msg::new(&topic, 0, "to a slave"));
    assert_eq!(
        refused.status(),
        Status::NoPermission,
        "a slave must refuse sends"
    );
    let acked_at: HashMap<(u32, u64), &[u8]> = logs
        .iter()
        .flat_map(|l| l.acked.iter())
        .map(|a| ((a.queue, a.offset), a.body.as_slice()))
        .collect();
    assert_eq!(
        acked_at.len(),
        report.acked,
        "two acknowledgements for one (queue, offset)"
    );
    let mut slave_queues = Vec::new();
    for q in 0..QUEUES {
        let stored = read_queue_stored(&mut sc, &topic, q);
        assert_eq!(
            sc.min_offset(&topic, q),
            0,
            "{topic}/{q} on the slave does not start at 0"
        );
        check_producer_order(&topic, q, &stored);
        for (off, rec) in &stored {
            match acked_at.get(&(q, *off)) {
                Some(body) => assert_eq!(
                    *body,
                    rec.body.as_slice(),
                    "{topic}/{q} offset {off}: the slave holds another body than the acknowledged one"
                ),
                None => report.unacked_on_slave += 1,
            }
        }
        report.on_slave += stored.len();
        slave_queues.push(stored);
    }
    for &(q, off) in acked_at.keys() {
        if !slave_queues[q as usize].contains_key(&off) {
            report.lost.push((q, off));
        }
    }
    report.lost.sort();
    eprintln!(
        "[{name}] kill -9 of the {role} after {} acknowledged sends (refused: {:?}): slave has {} records, {} acknowledged missing (loss window), {} not acknowledged (in flight)",
        report.acked, report.refused, report.on_slave, report.lost.len(), report.unacked_on_slave
    );

    // Restart the master on the same data and ports; the slave rejoins.
    let t1 = Instant::now();
    let mut master = mcfg.start(nsa);
    assert_eq!(
        master.broker_addr(),
        maddr,
        "the master came back on another port"
    );
    assert!(
        wait_slaves_connected(maddr, shards.into(), Duration::from_secs(10)),
        "the slave did not rejoin the restarted master within 10 s"
    );
    eprintln!(
        "[{name}] master restarted and slave rejoined in {:?}",
        t1.elapsed()
    );
    let mut mc = Client::connect(maddr);
    let mut new_ok = 0;
    for i in 0..200u32 {
        let q = i % QUEUES;
        mc.send(&Msg::new(&topic, q, format!("after the restart {i}")))
            .ok();
        new_ok += 1;
    }
    let took = wait_caught_up(maddr, saddr, Duration::from_secs(20))
        .expect("master and slave did not converge within 20 s");
    eprintln!("[{name}] {new_ok} sends after the restart OK; converged {took:?} later");
    for q in 0..QUEUES {
        assert_eq!(
            mc.max_offset(&topic, q),
            sc.max_offset(&topic, q),
            "{topic}/{q}: max offsets differ after converging"
        );
        let stored = read_queue_stored(&mut sc, &topic, q);
        for (off, rec) in &stored {
            if let Some(body) = acked_at.get(&(q, *off)) {
                assert_eq!(
                    *body,
                    rec.body.as_slice(),
                    "{topic}/{q} offset {off} changed"
                );
            }
        }
        slave_queues[q as usize] = stored;
    }
    for &(q, off) in acked_at.keys() {
        assert!(
            slave_queues[q as usize].contains_key(&off),
            "{topic}/{q} offset {off}: acknowledged, on the restarted master's log, still not on the slave"
        );
    }
    let m_info = mc.runtime_info();
    let s_info = sc.runtime_info();
    drop((mc, sc));
    report.slave_truncations = log_lines_containing(&slave.log(), "ahead of its master").len();

    // Both stop gracefully; then the files must be byte-identical up to the log end.
    term_after_idle(&mut slave);
    term_after_idle(&mut master);
    for s in 0..shards {
        let find = |info: &BrokerRuntimeInfo| {
            info.shards
                .iter()
                .find(|x| x.shard_id == s)
                .map(|x| (x.commitlog_min_offset, x.commitlog_max_offset))
                .expect("stats of every shard")
        };
        let ((m_min, m_end), (s_min, s_end)) = (find(&m_info), find(&s_info));
        assert_eq!(
            (m_min, m_end),
            (s_min, s_end),
            "shard {s}: log ranges differ"
        );
        let (segs, bytes) =
            assert_same_commitlog(&mcfg.commitlog_dir(s), &scfg.commitlog_dir(s), m_min, m_end);
        report.identical_segments += segs;
        report.identical_bytes += bytes;
    }
    eprintln!(
        "[{name}] CommitLogs byte-identical: {} segments, {} bytes; slave truncations: {}; total {:?}",
        report.identical_segments,
        report.identical_bytes,
        report.slave_truncations,
        t0.elapsed()
    );
    drop(ns);
    report
}

/// Each producer's records in a queue must appear in the order it sent them, and every body
/// must be one a producer made (no garbage).
pub fn check_producer_order(topic: &str, queue: u32, stored: &BTreeMap<u64, Stored>) {
    let mut last: HashMap<usize, u64> = HashMap::new();
    for (off, rec) in stored {
        let (id, seq) = parse_body(&rec.body).unwrap_or_else(|| {
            panic!(
                "{topic}/{queue} offset {off}: a body no producer sent: {:?}",
                String::from_utf8_lossy(&rec.body[..rec.body.len().min(64)])
            )
        });
        if let Some(prev) = last.insert(id, seq) {
            assert!(
                seq > prev,
                "{topic}/{queue} offset {off}: producer {id} seq {seq} after seq {prev} (reordered or duplicated)"
            );
        }
    }
}

/// Master and slave hold the same records at the same queue offsets (whole record bytes:
/// the slave appends the master's bytes verbatim); returns the records compared.
pub fn assert_same_queues(maddr: SocketAddr, saddr: SocketAddr, topic: &str, queues: u32) -> usize {
    let mut mc = Client::connect(maddr);
    let mut sc = Client::connect(saddr);
    let mut n = 0;
    for q in 0..queues {
        let m = read_queue_stored(&mut mc, topic, q);
        let s = read_queue_stored(&mut sc, topic, q);
        assert_eq!(
            (sc.min_offset(topic, q), sc.max_offset(topic, q)),
            (mc.min_offset(topic, q), mc.max_offset(topic, q)),
            "{topic}/{q}: queue ranges differ"
        );
        assert_eq!(m.len(), s.len(), "{topic}/{q}: record counts differ");
        for ((mo, mr), (so, sr)) in m.iter().zip(&s) {
            assert_eq!(mo, so, "{topic}/{q}: offsets differ");
            assert!(
                mr == sr,
                "{topic}/{q} offset {mo}: the slave's record differs"
            );
        }
        n += m.len();
    }
    n
}

/// The fail-stop a graceful stop can end in when a shard's timer checkpoint was waiting for
/// an fdatasync while the stop closed the store (node/src/shard/run.rs `timers`: no
/// shutdown check after `flusher::sync_log(..).await`). Not a replication bug.
pub const CHECKPOINT_STOP_RACE: &str = "checkpoint: store stopped after an earlier fatal error";

/// SIGTERM to an idle broker: it must exit 0, except for the known shutdown race
/// [`CHECKPOINT_STOP_RACE`] (exit 70 after the store was closed cleanly), which is printed
/// and tolerated. Returns whether the race was hit.
pub fn term_after_idle(node: &mut Node) -> bool {
    let status = node.term();
    if status.success() {
        return false;
    }
    let log = node.log();
    let raced = status.code() == Some(70)
        && log.contains("SIGTERM: stopping")
        && log_lines_containing(&log, "fatal:")
            .iter()
            .all(|l| l.contains(CHECKPOINT_STOP_RACE));
    assert!(raced, "{} exited {status} on SIGTERM:\n{log}", node.name);
    eprintln!(
        "NOTE: {} hit the known SIGTERM race (timer checkpoint after the store closed, exit 70): {CHECKPOINT_STOP_RACE}",
        node.name
    );
    true
}
