//! The name server process side: one thread with its own event loop serving the route table
//! (`crate::namesrv`, pure) over the native protocol, plus the expiry scan that drops brokers
//! silent for `brokerChannelExpiredTime` (checked every `scanNotActiveBrokerInterval`), on
//! the monotonic clock.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ringmq_wire::code::Status;
use ringmq_wire::codec::{Decode, Empty, Encode};
use ringmq_wire::command::route::BrokerRegistration;
use ringmq_wire::command::{GetKvResponse, RegisterBrokerResponse, Request};
use ringmq_wire::frame;

use crate::acl::{Acl, AclSettings, Caller};
use crate::config::{NamesrvConfig, TlsMode};
use crate::controller::Controller;
use crate::io::clock;
use crate::io::dir_lock;
use crate::io::net::{self as ionet, Listener};
use crate::io::node_disk::NodeDisk;
use crate::io::rt::{self, EventLoop};
use crate::io::tls::TlsServer;
use crate::limits;
use crate::metrics::NamesrvCounts;
use crate::namesrv::{KvStore, RouteTable};
use crate::net::admit::admit;
use crate::net::connection::{self, Service};
use crate::net::reply::{Body, Outcome, Reply};

/// A running name server.
#[derive(Debug)]
pub struct NamesrvHandle {
    pub addr: SocketAddr,
    /// The ACL when `aclEnable=true` (the metrics endpoint reads its refusal counts).
    pub acl: Option<Acl>,
    /// Route table counts for the metrics endpoint, published as they change.
    pub counts: Arc<NamesrvCounts>,
    stop: flume::Sender<()>,
    thread: std::thread::JoinHandle<()>,
    /// The controller directory's lock (`enableControllerInNamesrv`), released on stop.
    _dir_lock: Option<dir_lock::DirLock>,
}

impl NamesrvHandle {
    pub fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}

struct State {
    routes: RouteTable,
    kv: KvStore,
    /// Zero of the route table's time: leases run on the monotonic clock, so a jump of the
    /// wall clock neither drops brokers early nor keeps silent ones (found by the simulator).
    started: clock::Instant,
    counts: Arc<NamesrvCounts>,
}

impl State {
    /// Publishes the route table's counts (read by the metrics thread).
    fn publish(&self) {
        let c = &self.counts;
        c.brokers
            .store(self.routes.broker_count() as u64, Ordering::Relaxed);
        c.topics
            .store(self.routes.topic_count() as u64, Ordering::Relaxed);
    }

    /// Monotonic milliseconds since this name server started (the route table's `now_ms`).
    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }
}

struct NamesrvService {
    state: Rc<RefCell<State>>,
    acl: Option<Acl>,
    /// The embedded controller (`enableControllerInNamesrv=true`).
    controller: Option<Rc<Controller>>,
    /// This connection's id at the controller (its heartbeats' link).
    conn: u64,
}

/// The name server's ACL when `aclEnable=true` (read now: a file that does not parse stops
/// the start), watched for changes.
fn load_acl(cfg: &NamesrvConfig) -> Result<Option<Acl>, String> {
    if !cfg.acl.enable {
        return Ok(None);
    }
    let acl = Acl::open(AclSettings {
        file: cfg.acl.file_path(None),
        replay_window_ms: cfg.acl.replay_window_ms,
    })?;
    Ok(Some(acl))
}

/// Starts a name server on `listen` (port 0 = any free port).
pub fn start(
    cfg: NamesrvConfig,
    listen: SocketAddr,
    force_fallback: bool,
) -> Result<NamesrvHandle, String> {
    let acl = load_acl(&cfg)?;
    let acl_handle = acl.clone();
    let counts = Arc::new(NamesrvCounts::default());
    let counts_state = Arc::clone(&counts);
    let tls_mode = crate::net::tls_load::node_tls(&cfg.tls, false, "name server")?;
    let tls = tls_mode.server.clone();
    // The controller's Raft log and snapshots: one process per directory.
    let dir_lock = if cfg.controller.enable {
        Some(dir_lock::lock(
            &cfg.controller.dir(),
            "controller directory",
        )?)
    } else {
        None
    };
    let std_listener =
        ionet::bind_exclusive(listen).map_err(|e| format!("binding {listen}: {e}"))?;
    let addr = std_listener.local_addr().map_err(|e| e.to_string())?;
    let (stop_tx, stop_rx) = flume::bounded::<()>(1);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<String, String>>();
    let thread = std::thread::Builder::new()
        .name("ringmq-namesrv".to_string())
        .spawn(move || {
            let event_loop = match EventLoop::new(None, force_fallback) {
                Ok(l) => l,
                Err(e) => {
                    let _ = ready_tx.send(Err(format!("event loop: {e}")));
                    return;
                }
            };
            let driver = event_loop.driver();
            event_loop.block_on(async move {
                let listener = match Listener::from_std(std_listener) {
                    Ok(l) => l,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(format!("event loop {driver}")));
                serve(cfg, listener, acl, tls, stop_rx, counts_state).await;
            });
        })
        .map_err(|e| e.to_string())?;
    match ready_rx.recv() {
        Ok(Ok(info)) => log::info!(
            "name server listening on {addr}, {info}, {}",
            tls_mode.listener_mode()
        ),
        Ok(Err(e)) => return Err(e),
        Err(_) => return Err("name server thread died while starting".to_string()),
    }
    Ok(NamesrvHandle {
        addr,
        acl: acl_handle,
        counts,
        stop: stop_tx,
        thread,
        _dir_lock: dir_lock,
    })
}

/// A name server started in the simulated world installed on this thread (see
/// [`crate::io::sim`]): the same request handling and expiry scan as [`start`], as tasks of
/// the running node, listening on `addr` of the simulated network. Killing the node ends it.
pub struct SimNamesrv {
    state: Rc<RefCell<State>>,
    /// The embedded controller once it started (`enableControllerInNamesrv`).
    controller: ControllerSlot,
    /// Held so the server runs until its node is killed.
    _stop: flume::Sender<()>,
}

/// Where a simulated name server puts its controller once started.
type ControllerSlot = Rc<RefCell<Option<Rc<Controller>>>>;

impl SimNamesrv {
    /// Reads the route table (the simulator's invariants look at it between steps).
    pub fn with_routes<T>(&self, f: impl FnOnce(&RouteTable) -> T) -> T {
        f(&self.state.borrow().routes)
    }

    /// The embedded controller, once it started.
    pub fn controller(&self) -> Option<Rc<Controller>> {
        self.controller.borrow().clone()
    }
}

/// Starts a name server in the simulated world, as the running node. With
/// `enableControllerInNamesrv` its controller keeps its Raft log and snapshots on
/// `controller_disk` (required then), and talks to its peers over the simulated network.
pub fn start_sim(
    cfg: NamesrvConfig,
    addr: SocketAddr,
    controller_disk: Option<crate::io::node_disk::SimDisk>,
) -> Result<SimNamesrv, String> {
    let listener = Listener::bind_sim(addr).map_err(|e| format!("binding {addr}: {e}"))?;
    let state = new_state(Arc::default());
    let acl = load_acl(&cfg)?;
    if cfg.tls.server_mode() != TlsMode::Disabled {
        return Err("tls.server.mode: TLS is not simulated".to_string());
    }
    let controller_disk = match (cfg.controller.enable, controller_disk) {
        (false, _) => None,
        (true, Some(d)) => Some(NodeDisk::Sim(d)),
        (true, None) => {
            return Err("enableControllerInNamesrv: the controller needs a simulated disk".into())
        }
    };
    let (stop_tx, stop_rx) = flume::bounded::<()>(1);
    let slot = ControllerSlot::default();
    rt::spawn(serve_state(
        cfg,
        listener,
        Rc::clone(&state),
        acl,
        None,
        stop_rx,
        controller_disk.map(|d| (d, Rc::clone(&slot))),
    ));
    Ok(SimNamesrv {
        state,
        controller: slot,
        _stop: stop_tx,
    })
}

fn new_state(counts: Arc<NamesrvCounts>) -> Rc<RefCell<State>> {
    Rc::new(RefCell::new(State {
        routes: RouteTable::new(),
        kv: KvStore::new(),
        started: clock::Instant::now(),
        counts,
    }))
}

async fn serve(
    cfg: NamesrvConfig,
    listener: Listener,
    acl: Option<Acl>,
    tls: Option<Arc<TlsServer>>,
    stop: flume::Receiver<()>,
    counts: Arc<NamesrvCounts>,
) {
    serve_state(cfg, listener, new_state(counts), acl, tls, stop, None).await;
}

async fn serve_state(
    cfg: NamesrvConfig,
    listener: Listener,
    state: Rc<RefCell<State>>,
    acl: Option<Acl>,
    tls: Option<Arc<TlsServer>>,
    stop: flume::Receiver<()>,
    sim_controller: Option<(NodeDisk, ControllerSlot)>,
) {
    let controller = if cfg.controller.enable {
        // Real: the controller's small Raft log through plain file I/O; simulated: the
        // node's fault disk, and the controller goes to the simulator's slot.
        let (disk, slot) = match sim_controller {
            Some((d, slot)) => (d, Some(slot)),
            None => {
                let d = crate::io::disk::RealDisk::fallback("the controller's small Raft log");
                (NodeDisk::Real(d), None)
            }
        };
        match Controller::start(&cfg.controller, disk).await {
            Ok(c) => {
                if let Some(slot) = slot {
                    *slot.borrow_mut() = Some(Rc::clone(&c));
                }
                Some(c)
            }
            Err(e) => crate::fail_stop(&format!("controller: {e}")),
        }
    } else {
        None
    };
    let scan_state = Rc::clone(&state);
    let scan_ms = cfg.scan_not_active_broker_interval_ms.max(10);
    let expiry_ms = cfg.broker_channel_expired_time_ms;
    rt::spawn(async move {
        loop {
            rt::sleep(Duration::from_millis(scan_ms)).await;
            if crate::planted::is(crate::planted::Bug::NamesrvNoExpiry) {
                continue;
            }
            let mut st = scan_state.borrow_mut();
            let now = st.now_ms();
            let dropped = st.routes.expire(now, expiry_ms);
            st.counts
                .expired_total
                .fetch_add(dropped.len() as u64, Ordering::Relaxed);
            st.publish();
            drop(st);
            for d in dropped {
                log::warn!(
                    "name server: dropped broker {}/{} id {} at {}: silent for over {expiry_ms} ms",
                    d.key.cluster,
                    d.key.broker_name,
                    d.key.broker_id,
                    d.address
                );
            }
        }
    });
    let accept_state = Rc::clone(&state);
    let accept = rt::spawn_joinable(async move {
        loop {
            match listener.accept().await {
                Ok((conn, _)) => {
                    let svc = Rc::new(NamesrvService {
                        state: Rc::clone(&accept_state),
                        acl: acl.clone(),
                        controller: controller.clone(),
                        conn: controller.as_ref().map_or(0, |c| c.new_conn()),
                    });
                    let tls = tls.clone();
                    let acl = acl.clone();
                    rt::spawn(async move {
                        let count = || {
                            if let Some(acl) = &acl {
                                acl.count(crate::acl::Reason::TlsRequired);
                            }
                        };
                        let admitted = admit(tls.as_deref(), conn, "name server", count).await;
                        if let Some((conn, pending)) = admitted {
                            let _ = connection::serve(Rc::clone(&svc), conn, pending).await;
                        }
                        if let Some(c) = &svc.controller {
                            c.link_closed(svc.conn);
                        }
                    });
                }
                Err(e) => {
                    log::warn!("name server accept: {e}");
                    rt::sleep(Duration::from_millis(10)).await;
                }
            }
        }
    });
    let _ = stop.recv_async().await;
    drop(accept);
    log::info!("name server stopped");
}

impl Service for NamesrvService {
    fn frame_bytes_max(&self) -> usize {
        limits::FRAME_BYTES_MAX
    }

    fn handle(&self, frame_bytes: Vec<u8>, caller: &Caller) -> Outcome {
        if let Some(outcome) = self.controller_request(&frame_bytes) {
            return outcome;
        }
        let authorize = |request: &Request, body: &[u8]| match &self.acl {
            Some(acl) => acl.authorize(caller, request, body).map_err(|r| r.remark),
            None => Ok(()),
        };
        handle(&self.state, &frame_bytes, authorize).into()
    }

    fn acl(&self) -> Option<&Acl> {
        self.acl.as_ref()
    }
}

impl NamesrvService {
    /// A controller request, served by the embedded controller (or refused when there is
    /// none); `None` for any other request.
    fn controller_request(&self, frame_bytes: &[u8]) -> Option<Outcome> {
        let f = frame::parse(frame_bytes).ok()?;
        let code = f.request_code().ok()?;
        if !(1200..1300).contains(&u16::from(code)) {
            return None;
        }
        let Some(c) = self.controller.clone() else {
            return Some(
                Reply::error(
                    Status::RequestCodeNotSupported,
                    format!(
                        "{} goes to a controller; this name server runs none (enableControllerInNamesrv=false)",
                        code.name()
                    ),
                )
                .into(),
            );
        };
        let request = match Request::decode(code, f.header) {
            Ok(r) => r,
            Err(e) => return Some(Reply::error(Status::MalformedRequest, e.to_string()).into()),
        };
        let body = f.body.to_vec();
        let conn = self.conn;
        Some(match request {
            Request::ControllerGetReplicaInfo(h) => c.replica_info(&h).into(),
            Request::ControllerGetMetadataInfo(_) => c.metadata().into(),
            Request::ControllerBrokerHeartbeat(h) => {
                Outcome::later(async move { c.heartbeat(h, conn).await })
            }
            Request::ControllerAlterSyncStateSet(h) => {
                Outcome::later(async move { c.alter_sync_state_set(h).await })
            }
            Request::ControllerElectMaster(h) => {
                Outcome::later(async move { c.elect_master(h).await })
            }
            Request::ControllerRaft(h) => Outcome::later(async move {
                match crate::controller::raft::serve_rpc(&c.raft, h.kind, &body).await {
                    Ok(json) => Reply::ok_body(Empty, Body::Bytes(json)),
                    Err(e) => Reply::error(Status::MalformedRequest, e),
                }
            }),
            other => Reply::error(
                Status::RequestCodeNotSupported,
                format!("{} is not a controller request", other.code().name()),
            )
            .into(),
        })
    }
}

fn handle(
    state: &RefCell<State>,
    frame_bytes: &[u8],
    authorize: impl FnOnce(&Request, &[u8]) -> Result<(), String>,
) -> Reply {
    let f = match frame::parse(frame_bytes) {
        Ok(f) => f,
        Err(e) => return Reply::error(Status::MalformedRequest, e.to_string()),
    };
    let request = match f.request_code().and_then(|c| Request::decode(c, f.header)) {
        Ok(r) => r,
        Err(e) => return Reply::error(Status::RequestCodeNotSupported, e.to_string()),
    };
    if let Err(remark) = authorize(&request, f.body) {
        return Reply::error(Status::NoPermission, remark);
    }
    let mut st = state.borrow_mut();
    let now = st.now_ms();
    match request {
        Request::RegisterBroker(_) => {
            let reg = match BrokerRegistration::decode(f.body) {
                Ok(r) => r,
                Err(e) => {
                    return Reply::error(
                        Status::MalformedRequest,
                        format!("registration body: {e}"),
                    )
                }
            };
            let registered = st.routes.register(&reg, now);
            st.publish();
            match registered {
                Ok(out) => {
                    if out.new_broker {
                        log::info!(
                            "name server: broker {}/{} id {} registered at {} ({} topics)",
                            reg.cluster,
                            reg.broker_name,
                            reg.broker_id,
                            reg.address,
                            reg.topics.len()
                        );
                    }
                    Reply::ok(RegisterBrokerResponse {
                        master_address: out.master_address.unwrap_or_default(),
                        ha_master_address: out.master_ha_address.unwrap_or_default(),
                    })
                }
                Err(e) => Reply::error(Status::MessageIllegal, e.to_string()),
            }
        }
        Request::UnregisterBroker(h) => {
            st.routes
                .unregister(&h.cluster, &h.broker_name, h.broker_id, &h.address);
            st.publish();
            Reply::ok(Empty)
        }
        Request::GetRouteInfoByTopic(h) => match st.routes.route_by_topic(&h.topic) {
            Some(route) => {
                st.counts.route_requests.fetch_add(1, Ordering::Relaxed);
                body(route)
            }
            None => {
                st.counts.route_misses.fetch_add(1, Ordering::Relaxed);
                Reply::error(
                    Status::TopicNotExist,
                    format!("no route for topic {}: no live broker has it", h.topic),
                )
            }
        },
        Request::GetBrokerClusterInfo(_) => body(st.routes.cluster_info()),
        Request::GetAllTopicListFromNameserver(_) => body(st.routes.topic_list()),
        Request::DeleteTopicInNamesrv(h) => {
            let deleted = st.routes.delete_topic(&h.topic, h.cluster.as_deref());
            st.publish();
            if deleted {
                Reply::ok(Empty)
            } else {
                Reply::error(
                    Status::TopicNotExist,
                    format!("topic {} is not registered", h.topic),
                )
            }
        }
        Request::PutKvConfig(h) => match st.kv.put(&h.namespace, &h.key, &h.value) {
            Ok(_) => Reply::ok(Empty),
            Err(e) => Reply::error(Status::MessageIllegal, e.to_string()),
        },
        Request::GetKvConfig(h) => match st.kv.get(&h.namespace, &h.key) {
            Some(v) => Reply::ok(GetKvResponse {
                value: v.to_string(),
            }),
            None => Reply::error(
                Status::QueryNotFound,
                format!("no KV {}/{}", h.namespace, h.key),
            ),
        },
        Request::Hello(h) => {
            if h.protocol_version != ringmq_wire::code::PROTOCOL_VERSION {
                return Reply::error(
                    Status::ProtocolVersionNotSupported,
                    format!(
                        "this name server speaks protocol version {}, the client {}",
                        ringmq_wire::code::PROTOCOL_VERSION,
                        h.protocol_version
                    ),
                );
            }
            Reply::ok(ringmq_wire::command::HelloResponse {
                protocol_version: ringmq_wire::code::PROTOCOL_VERSION,
                cluster: String::new(),
                broker_name: String::new(),
                broker_id: 0,
                shard_count: 1,
                shard_id: 0,
                frame_bytes_max: limits::FRAME_BYTES_MAX as u32,
                tls_session: ringmq_wire::codec::Appended(true),
            })
        }
        Request::DeleteKvConfig(h) => {
            st.kv.delete(&h.namespace, &h.key);
            Reply::ok(Empty)
        }
        other => Reply::error(
            Status::RequestCodeNotSupported,
            format!(
                "{} is a broker request; this is a name server",
                other.code().name()
            ),
        ),
    }
}

fn body<T: Encode>(value: T) -> Reply {
    match value.to_vec() {
        Ok(bytes) => Reply::ok_body(Empty, Body::Bytes(bytes)),
        Err(e) => Reply::error(Status::SystemError, format!("encoding the reply: {e}")),
    }
}
