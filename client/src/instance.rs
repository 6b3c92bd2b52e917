//! The state one producer or consumer owns: its client id, its connection pool, its route
//! cache, and calls to name servers and brokers built on them. Nothing is shared between
//! producers and consumers unless the caller shares them; there is no global state (only a
//! process-wide sequence that keeps default client ids unique).
//!
//! Routes are fetched from the name servers on first use, refreshed every
//! `route_refresh_interval` by the owner's timer, and at once (throttled to one fetch per
//! `ROUTE_REFETCH_GAP`) after a routing error.
//!
//! A failover is noticed without waiting for either: when a request to a broker fails in a
//! way that says it may no longer be master ([`Error::failover_suspect`]: unreachable,
//! NOT_MASTER, SERVICE_NOT_AVAILABLE) and the cached route still names it as a master, the
//! route is fetched at once ([`Instance::refresh_route_after_failure`]: at most one fetch per
//! `ROUTE_FAILOVER_REFETCH_GAP` per topic, concurrent failures share one fetch). If the name
//! servers still name that master, further failures on it fetch at the `ROUTE_REFETCH_GAP`
//! pace, so a dead broker that is still registered costs the name servers a few requests per
//! second per client and topic, not one per failed request.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::{Empty, Encode};
use ringmq_wire::command::{
    ClusterInfo, GetRouteRequest, HeartbeatData, TopicRoute, UnregisterClientRequest,
};

use crate::error::{Error, Result};
use crate::net::{Answer, BrokerHello, Connection, Endpoint, Peer, Pool, PoolConfig};
use crate::route::{MessageQueue, TopicRouteInfo};
use crate::security::{Credentials, Security};
use crate::tls::TlsOptions;

/// The body of a heartbeat; `None` (logged) if it cannot be encoded.
pub fn encode_heartbeat(heartbeat: &HeartbeatData) -> Option<Vec<u8>> {
    match heartbeat.to_vec() {
        Ok(b) => Some(b),
        Err(e) => {
            log::warn!("encoding a heartbeat: {e}");
            None
        }
    }
}

/// A forced route fetch for a topic happens at most this often.
pub const ROUTE_REFETCH_GAP: Duration = Duration::from_millis(200);
/// A route fetch after a failure on a master the cached route names happens at most this
/// often per topic (the first one after each fetch; see the module docs).
pub const ROUTE_FAILOVER_REFETCH_GAP: Duration = Duration::from_millis(5);
/// Masters remembered per route as "failed, yet still named by the name servers".
const FAILED_MASTERS_MAX: usize = 16;

/// Settings shared by producers and consumers.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Name server addresses, `host:port`.
    pub name_servers: Vec<String>,
    /// Names this client instance (client id `host@instance`); default: pid and a sequence.
    pub instance_name: Option<String>,
    /// How long one request may wait for its answer (sends, offsets, routes).
    pub request_timeout: Duration,
    pub connect_timeout: Duration,
    /// How often routes are fetched again (RocketMQ `pollNameServerInterval`, 30 s).
    pub route_refresh_interval: Duration,
    /// First pause after a failed connection attempt; doubles up to the maximum.
    pub reconnect_backoff_min: Duration,
    pub reconnect_backoff_max: Duration,
    /// Requests in flight per connection (the broker allows 256).
    pub requests_in_flight_max: usize,
    /// TLS on every connection (name servers and brokers); default: plaintext.
    pub tls: TlsOptions,
    /// The access key and secret key requests are signed with; default: none.
    pub credentials: Option<Credentials>,
    /// Brokers of this process reached without a socket (a protocol edge inside the
    /// broker); default: none, every connection is TCP.
    pub in_process: Option<crate::net::InProcess>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            name_servers: Vec::new(),
            instance_name: None,
            request_timeout: Duration::from_secs(3),
            connect_timeout: Duration::from_secs(3),
            route_refresh_interval: Duration::from_secs(30),
            reconnect_backoff_min: Duration::from_millis(100),
            reconnect_backoff_max: Duration::from_secs(3),
            requests_in_flight_max: 256,
            tls: TlsOptions::default(),
            credentials: None,
            in_process: None,
        }
    }
}

impl ClientConfig {
    /// Checks the settings.
    pub fn validate(&self) -> Result<()> {
        if self.name_servers.is_empty() {
            return Err(Error::Config("at least one name server is needed".into()));
        }
        if self.request_timeout.is_zero() || self.connect_timeout.is_zero() {
            return Err(Error::Config("timeouts must be above zero".into()));
        }
        if self.requests_in_flight_max == 0 {
            return Err(Error::Config(
                "requests_in_flight_max must be above zero".into(),
            ));
        }
        if self.route_refresh_interval < Duration::from_millis(10) {
            return Err(Error::Config(
                "route_refresh_interval is below 10 ms".into(),
            ));
        }
        self.tls.validate()?;
        if let Some(c) = &self.credentials {
            c.validate()?;
        }
        Ok(())
    }

    /// The instance name used for the client id and local offset files.
    pub fn instance(&self) -> String {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        match &self.instance_name {
            Some(n) => n.clone(),
            None => format!(
                "{}#{}",
                std::process::id(),
                SEQ.fetch_add(1, Ordering::Relaxed)
            ),
        }
    }
}

struct RouteEntry {
    info: Arc<TopicRouteInfo>,
    /// When the fetch that produced `info` was sent.
    fetched: Instant,
    /// Masters a request failed on that this route, fetched after that failure, still
    /// names: further failures on them wait out [`ROUTE_REFETCH_GAP`].
    failed_masters: Vec<SocketAddr>,
}

/// One client's connections and routes.
pub struct Instance {
    pub id: String,
    pub cfg: ClientConfig,
    pub pool: Pool,
    name_servers: Vec<SocketAddr>,
    next_ns: AtomicUsize,
    routes: Mutex<HashMap<String, RouteEntry>>,
    /// Serializes fetches after failures, so concurrent failures share one fetch.
    failover_gate: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance")
            .field("id", &self.id)
            .field("name_servers", &self.name_servers)
            .finish_non_exhaustive()
    }
}

impl Instance {
    /// Validates the config, reads the TLS files and resolves the name server addresses.
    pub async fn new(cfg: ClientConfig) -> Result<Arc<Instance>> {
        cfg.validate()?;
        let security = Security::load(&cfg.tls, cfg.credentials.as_ref())?;
        let mut name_servers = Vec::new();
        for ns in &cfg.name_servers {
            let found = tokio::net::lookup_host(ns.as_str())
                .await
                .map_err(|e| Error::Config(format!("name server {ns}: {e}")))?;
            let first = found
                .into_iter()
                .next()
                .ok_or_else(|| Error::Config(format!("name server {ns} resolves to nothing")))?;
            name_servers.push(first);
        }
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "localhost".to_string());
        let id = format!("{host}@{}", cfg.instance());
        let pool = Pool::new(PoolConfig {
            client_id: id.clone(),
            connect_timeout: cfg.connect_timeout,
            requests_in_flight_max: cfg.requests_in_flight_max,
            reconnect_backoff_min: cfg.reconnect_backoff_min,
            reconnect_backoff_max: cfg.reconnect_backoff_max,
            security,
            in_process: cfg.in_process.clone(),
        });
        Ok(Arc::new(Instance {
            id,
            cfg,
            pool,
            name_servers,
            next_ns: AtomicUsize::new(0),
            routes: Mutex::new(HashMap::new()),
            failover_gate: tokio::sync::Mutex::new(()),
        }))
    }

    /// Calls the name servers, starting with the last one that answered and moving on when
    /// one cannot be reached.
    pub async fn namesrv_call(
        &self,
        code: RequestCode,
        header: &(impl Encode + ?Sized),
    ) -> Result<Answer> {
        let n = self.name_servers.len();
        let start = self.next_ns.load(Ordering::Relaxed);
        let mut last = None;
        for i in 0..n {
            let idx = (start + i) % n;
            let ep = Endpoint {
                addr: self.name_servers[idx],
                peer: Peer::Namesrv,
            };
            let result = match self.pool.get(ep).await {
                Ok((conn, _)) => conn.call(code, header, &[], self.cfg.request_timeout).await,
                Err(e) => Err(e),
            };
            match result {
                Ok(a) => {
                    self.next_ns.store(idx, Ordering::Relaxed);
                    return Ok(a);
                }
                Err(e) => {
                    log::debug!("name server {}: {e}", ep.addr);
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or(Error::Config("no name server".into())))
    }

    /// The cached route of `topic`, fetched if absent.
    pub async fn route(&self, topic: &str) -> Result<Arc<TopicRouteInfo>> {
        if let Some(e) = self.lock_routes().get(topic) {
            return Ok(Arc::clone(&e.info));
        }
        self.fetch_route(topic).await
    }

    /// Fetches the route again unless it was fetched within [`ROUTE_REFETCH_GAP`].
    pub async fn refresh_route(&self, topic: &str) -> Result<Arc<TopicRouteInfo>> {
        if let Some(e) = self.lock_routes().get(topic) {
            if e.fetched.elapsed() < ROUTE_REFETCH_GAP {
                return Ok(Arc::clone(&e.info));
            }
        }
        self.fetch_route(topic).await
    }

    /// The route of `topic` after a request to `failed` failed in a way that says it may no
    /// longer be master ([`Error::failover_suspect`]): fetched at once when the cached route
    /// still names `failed` as a master and was fetched before the failure (at most once per
    /// [`ROUTE_FAILOVER_REFETCH_GAP`]; per [`ROUTE_REFETCH_GAP`] while the name servers keep
    /// naming it), else the cached one. See the module docs.
    pub async fn refresh_route_after_failure(
        &self,
        topic: &str,
        failed: SocketAddr,
    ) -> Result<Arc<TopicRouteInfo>> {
        let failed_at = Instant::now();
        let _gate = self.failover_gate.lock().await;
        if let Some(e) = self.lock_routes().get(topic) {
            let gap = if e.failed_masters.contains(&failed) {
                ROUTE_REFETCH_GAP
            } else {
                ROUTE_FAILOVER_REFETCH_GAP
            };
            let fresh = e.fetched >= failed_at || e.fetched.elapsed() < gap;
            if !e.info.names_master(failed) || fresh {
                return Ok(Arc::clone(&e.info));
            }
        }
        let info = self.fetch_route(topic).await?;
        if info.names_master(failed) {
            log::debug!("route of {topic}: the name servers still name {failed} as a master");
            if let Some(e) = self.lock_routes().get_mut(topic) {
                if Arc::ptr_eq(&e.info, &info) && e.failed_masters.len() < FAILED_MASTERS_MAX {
                    e.failed_masters.push(failed);
                }
            }
        }
        Ok(info)
    }

    /// [`Instance::refresh_route_after_failure`] for every cached topic whose route names
    /// `failed` as a master (after a heartbeat or lock request to it failed).
    pub async fn refresh_routes_naming(&self, failed: SocketAddr) {
        let topics: Vec<String> = self
            .lock_routes()
            .iter()
            .filter(|(_, e)| e.info.names_master(failed))
            .map(|(t, _)| t.clone())
            .collect();
        for t in topics {
            if let Err(e) = self.refresh_route_after_failure(&t, failed).await {
                log::debug!("refreshing the route of {t} after {failed} failed: {e}");
            }
        }
    }

    /// Fetches every cached route again (the periodic refresh).
    pub async fn refresh_all_routes(&self) {
        let topics: Vec<String> = self.lock_routes().keys().cloned().collect();
        for t in topics {
            if let Err(e) = self.fetch_route(&t).await {
                log::debug!("refreshing the route of {t}: {e}");
            }
        }
    }

    /// The route as the name servers have it now.
    pub async fn fetch_route(&self, topic: &str) -> Result<Arc<TopicRouteInfo>> {
        let sent = Instant::now();
        let answer = self
            .namesrv_call(
                RequestCode::GetRouteInfoByTopic,
                &GetRouteRequest {
                    topic: topic.to_string(),
                },
            )
            .await?;
        let status = answer.status()?;
        if status == Status::TopicNotExist {
            return Err(Error::no_route_answer(topic, answer.remark()));
        }
        let answer = answer.expect(&[Status::Success])?;
        let route: TopicRoute = answer.decode_body()?;
        let info = Arc::new(TopicRouteInfo::from_wire(&route));
        let mut routes = self.lock_routes();
        if let Some(old) = routes.get(topic) {
            if *old.info != *info {
                log::info!(
                    "route of {topic} changed: {} write / {} read queues",
                    info.write_queues.len(),
                    info.read_queues.len()
                );
            }
        }
        routes.insert(
            topic.to_string(),
            RouteEntry {
                info: Arc::clone(&info),
                fetched: sent,
                failed_masters: Vec::new(),
            },
        );
        Ok(info)
    }

    /// Every broker the name servers know (for topics that have no route yet).
    pub async fn cluster_info(&self) -> Result<ClusterInfo> {
        let answer = self
            .namesrv_call(RequestCode::GetBrokerClusterInfo, &Empty)
            .await?
            .expect(&[Status::Success])?;
        answer.decode_body()
    }

    /// The connection to a broker's shard.
    pub async fn broker_conn(
        &self,
        addr: SocketAddr,
        shard: Option<u16>,
    ) -> Result<(Arc<Connection>, Option<BrokerHello>)> {
        self.pool
            .get(Endpoint {
                addr,
                peer: Peer::Broker(shard),
            })
            .await
    }

    /// One request to a broker's shard; the answer has any status.
    pub async fn broker_call(
        &self,
        addr: SocketAddr,
        shard: Option<u16>,
        code: RequestCode,
        header: &(impl Encode + ?Sized),
        body: &[u8],
        timeout: Duration,
    ) -> Result<Answer> {
        let (conn, _) = self.broker_conn(addr, shard).await?;
        conn.call(code, header, body, timeout).await
    }

    /// Where a queue's requests go: its broker's master and the queue's shard.
    pub async fn queue_endpoint(&self, mq: &MessageQueue) -> Result<(SocketAddr, Option<u16>)> {
        let route = self.route(&mq.topic).await?;
        let route = if route.master(&mq.broker_name).is_none() {
            self.refresh_route(&mq.topic).await?
        } else {
            route
        };
        match route.master(&mq.broker_name) {
            Some(addr) => Ok((addr, route.shard(mq))),
            None => Err(Error::NoRoute {
                topic: mq.topic.clone(),
                detail: format!("broker {} has no master", mq.broker_name),
            }),
        }
    }

    /// One request about a queue, sent to the shard that owns it. A routing failure
    /// refreshes the route before the error is returned.
    pub async fn queue_call(
        &self,
        mq: &MessageQueue,
        code: RequestCode,
        header: &(impl Encode + ?Sized),
        timeout: Duration,
    ) -> Result<Answer> {
        let (addr, shard) = self.queue_endpoint(mq).await?;
        let result = self
            .broker_call(addr, shard, code, header, &[], timeout)
            .await;
        self.refresh_if_misrouted(&mq.topic, &result).await;
        result
    }

    /// Fetches the route of `topic` again when `result` (of a request about one of its
    /// queues) says the route is stale: a routing error, or an answer that the topic, shard
    /// or permission is wrong, or that the broker is not (or no longer) master. A failure
    /// that suggests a failover fetches at once ([`Instance::refresh_route_after_failure`]).
    pub async fn refresh_if_misrouted(&self, topic: &str, result: &Result<Answer>) {
        let (suspect, routing) = match result {
            Err(e) => (e.failover_suspect(), e.is_routing_error()),
            Ok(a) => match a.status() {
                Ok(Status::NotMaster | Status::ServiceNotAvailable) => (Some(a.addr), true),
                Ok(Status::TopicNotExist | Status::WrongShard | Status::NoPermission) => {
                    (None, true)
                }
                _ => (None, false),
            },
        };
        match suspect {
            Some(addr) => {
                let _ = self.refresh_route_after_failure(topic, addr).await;
            }
            None if routing => {
                let _ = self.refresh_route(topic).await;
            }
            None => {}
        }
    }

    /// Sends the heartbeat `body` (see [`encode_heartbeat`]) to each of `brokers`; returns
    /// those that acknowledged it (a failure is logged, not returned).
    pub async fn heartbeat_to(&self, brokers: Vec<SocketAddr>, body: &[u8]) -> Vec<SocketAddr> {
        let mut acked = Vec::with_capacity(brokers.len());
        for addr in brokers {
            let r = self
                .broker_call(
                    addr,
                    None,
                    RequestCode::HeartBeat,
                    &Empty,
                    body,
                    self.cfg.request_timeout,
                )
                .await
                .and_then(|a| a.expect(&[Status::Success]));
            match r {
                Ok(_) => acked.push(addr),
                Err(e) => {
                    log::debug!("heartbeat to {addr}: {e}");
                    if e.failover_suspect().is_some() {
                        self.refresh_routes_naming(addr).await;
                    }
                }
            }
        }
        acked
    }

    /// Sends `req` (UNREGISTER_CLIENT) to each of `brokers`, ignoring failures.
    pub async fn unregister_from(&self, brokers: Vec<SocketAddr>, req: &UnregisterClientRequest) {
        for addr in brokers {
            let _ = self
                .broker_call(
                    addr,
                    None,
                    RequestCode::UnregisterClient,
                    req,
                    &[],
                    self.cfg.request_timeout,
                )
                .await;
        }
    }

    /// Masters of every broker in the cached routes, deduplicated.
    pub fn known_masters(&self) -> Vec<SocketAddr> {
        let mut out: Vec<SocketAddr> = self
            .lock_routes()
            .values()
            .flat_map(|e| e.info.masters())
            .collect();
        out.sort();
        out.dedup();
        out
    }

    fn lock_routes(&self) -> std::sync::MutexGuard<'_, HashMap<String, RouteEntry>> {
        self.routes.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The [`ClientConfig`] setters every builder has (the builder keeps it in `self.client`).
macro_rules! client_setters {
    () => {
        /// One name server (`host:port`); call again to add more.
        pub fn name_server(mut self, addr: impl Into<String>) -> Self {
            self.client.name_servers.push(addr.into());
            self
        }

        /// Name servers as RocketMQ writes them: `host:port;host:port`.
        pub fn name_servers(mut self, addrs: &str) -> Self {
            self.client.name_servers.extend(
                addrs
                    .split(';')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from),
            );
            self
        }

        /// The instance name (client id `host@name`; local offset files live under it).
        pub fn instance_name(mut self, name: impl Into<String>) -> Self {
            self.client.instance_name = Some(name.into());
            self
        }

        /// How long one request waits for its answer (default 3 s).
        pub fn request_timeout(mut self, t: std::time::Duration) -> Self {
            self.client.request_timeout = t;
            self
        }

        /// How long a TCP connect may take (default 3 s).
        pub fn connect_timeout(mut self, t: std::time::Duration) -> Self {
            self.client.connect_timeout = t;
            self
        }

        /// How often routes are fetched again (default 30 s).
        pub fn route_refresh_interval(mut self, t: std::time::Duration) -> Self {
            self.client.route_refresh_interval = t;
            self
        }

        /// Reconnect backoff: first pause and cap (defaults 100 ms and 3 s).
        pub fn reconnect_backoff(
            mut self,
            min: std::time::Duration,
            max: std::time::Duration,
        ) -> Self {
            self.client.reconnect_backoff_min = min;
            self.client.reconnect_backoff_max = max;
            self
        }

        /// Reach brokers of this process without a socket (see
        /// [`InProcess`](crate::net::InProcess)).
        pub fn in_process(mut self, p: crate::net::InProcess) -> Self {
            self.client.in_process = Some(p);
            self
        }

        /// Requests in flight per connection (default 256, the broker's limit).
        pub fn requests_in_flight_max(mut self, n: usize) -> Self {
            self.client.requests_in_flight_max = n;
            self
        }

        /// TLS on every connection (name servers and brokers); see
        /// [`TlsOptions`]($crate::TlsOptions).
        pub fn tls(mut self, tls: $crate::TlsOptions) -> Self {
            self.client.tls = tls;
            self
        }

        /// The access key and secret key requests are signed with.
        pub fn credentials(mut self, credentials: $crate::Credentials) -> Self {
            self.client.credentials = Some(credentials);
            self
        }

        /// Replaces every client setting at once.
        pub fn client_config(mut self, cfg: $crate::instance::ClientConfig) -> Self {
            self.client = cfg;
            self
        }
    };
}
pub(crate) use client_setters;
