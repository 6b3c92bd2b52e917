//! A blocking client for the native protocol (requests, responses, pushed requests).

use super::*;

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
    /// Signs every request (a node with `aclEnable=true`).
    signer: Option<ringmq_wire::auth::Signer>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Self {
        Self::try_connect(addr).unwrap_or_else(|e| panic!("connecting to {addr}: {e}"))
    }

    pub fn try_connect(addr: SocketAddr) -> std::io::Result<Self> {
        Self::try_connect_as(addr, None)
    }

    /// A connection whose requests are signed with `credentials` (HELLO included).
    pub fn connect_as(addr: SocketAddr, credentials: &ringmq_wire::auth::Credentials) -> Self {
        Self::try_connect_as(addr, Some(credentials))
            .unwrap_or_else(|e| panic!("connecting to {addr}: {e}"))
    }

    pub fn try_connect_as(
        addr: SocketAddr,
        credentials: Option<&ringmq_wire::auth::Credentials>,
    ) -> std::io::Result<Self> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        stream.set_read_timeout(Some(READ_TIMEOUT))?;
        stream.set_write_timeout(Some(READ_TIMEOUT))?;
        stream.set_nodelay(true)?;
        let mut c = Client {
            addr,
            stream,
            next_id: 1,
            buf: Vec::new(),
            early: HashMap::new(),
            pushed: Vec::new(),
            signer: credentials.map(|cr| {
                let nonce: [u8; 16] = rand_nonce();
                ringmq_wire::auth::Signer::new(cr.clone(), nonce)
            }),
        };
        // A native connection opens with HELLO (the listener tells the protocols apart by
        // the first frame); its answer carries OPENER_REQUEST_ID and is never waited for.
        let mut opener = ringmq_wire::command::opener_frame("it-client");
        c.sign(&mut opener);
        c.stream.write_all(&opener)?;
        Ok(c)
    }

    /// Signs `frame` if this client has credentials (the next sequence number).
    pub fn sign(&mut self, frame: &mut Vec<u8>) {
        if let Some(s) = &mut self.signer {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0);
            s.sign(frame, now).expect("signing a request");
        }
    }

    /// A connection that has sent nothing yet (for tests of what a listener does with a
    /// stream's first bytes).
    pub fn connect_raw(addr: SocketAddr) -> std::io::Result<TcpStream> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        stream.set_read_timeout(Some(READ_TIMEOUT))?;
        stream.set_write_timeout(Some(READ_TIMEOUT))?;
        Ok(stream)
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
        self.sign(&mut out);
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
                    if response && r.request_id == ringmq_wire::command::OPENER_REQUEST_ID {
                        continue;
                    }
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

/// A nonce unique to this process and call (tests need uniqueness, not secrecy).
fn rand_nonce() -> [u8; 16] {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&(t ^ u64::from(std::process::id()) << 32).to_be_bytes());
    out[8..].copy_from_slice(&N.fetch_add(1, Ordering::Relaxed).to_be_bytes());
    out
}
