//! Starting a broker: the topic table, the shared [`Broker`], and its shards. For real: the
//! store root's lock first (`io::dir_lock`: one process per store), listeners on ports no
//! other process serves, then one pinned thread per shard, each opening its store (recovery
//! happens here) and running its loop ([`super::run`]) on its SO_REUSEPORT listener;
//! `BrokerHandle::stop` is the graceful shutdown. In the simulator ([`start_sim`]), the same
//! shards on the simulated world's executor, disk and network.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use crate::broker::offsets::ConsumerOffsets;
use crate::broker::shard::hooks::Hooks;
use crate::broker::shard::run::run;
use crate::broker::shard::Shard;
use crate::broker::{Broker, ConsumerGroups, MasterAddrs, Runtime, ShardCounters, Topics};
use crate::config::BrokerConfig;
use crate::io::clock;
use crate::io::dir_lock;
use crate::io::disk::RealDisk;
use crate::io::net::{self as ionet, Listener};
use crate::io::node_disk::{NodeDisk, SimDisk};
use crate::io::rt::{EventLoop, LoopDriver};
use crate::io::sim;
use crate::limits;
use crate::shard::mailbox::Mail;
use crate::store::{Store, StoreConfig};

/// How a broker is started beyond its config file.
#[derive(Debug, Clone)]
pub struct StartOptions {
    /// Address to listen on (host and `listenPort`; port 0 = any free port).
    pub listen: SocketAddr,
    /// The host published to name servers and written into records (`brokerIP1`).
    pub publish_host: std::net::IpAddr,
    /// Skip io_uring (`RINGMQ_IO=epoll`): event loops on epoll, store writes by pwrite.
    pub force_fallback: bool,
    pub transfer_msg_by_heap: bool,
}

/// A running broker.
#[derive(Debug)]
pub struct BrokerHandle {
    pub broker: Arc<Broker>,
    pub addr: SocketAddr,
    threads: Vec<std::thread::JoinHandle<()>>,
    /// The store root's lock, released when the handle goes (after the shards stopped).
    _dir_lock: dir_lock::DirLock,
}

/// What a shard reports once started.
type Ready = Result<String, String>;

/// Starts every shard; returns once all of them have opened their store and listen.
pub fn start(
    config: BrokerConfig,
    opts: StartOptions,
    hooks: Hooks,
) -> Result<BrokerHandle, String> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let shard_count = config.shards.unwrap_or(cores).clamp(1, limits::SHARDS_MAX) as u16;
    let root = config.store_path_root_dir.clone();
    // Before anything under the root is read or written: one process per store.
    let dir_lock = dir_lock::lock(&root, "data directory")?;
    check_shard_count(&root, shard_count)?;
    let topics = Topics::load(&root, shard_count).map_err(|e| format!("loading topics: {e}"))?;
    let listeners = ionet::bind_shared(opts.listen, usize::from(shard_count))
        .map_err(|e| format!("binding {}: {e}", opts.listen))?;
    let port = listeners[0].local_addr().map_err(|e| e.to_string())?.port();
    let own_listeners = super::ports::bind(
        &root,
        opts.listen.ip(),
        shard_count,
        &config.shard_listen_ports,
    )?;
    let shard_addrs = own_listeners
        .iter()
        .map(|l| {
            l.local_addr()
                .map(|a| SocketAddr::new(opts.publish_host, a.port()))
        })
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(|e| e.to_string())?;
    let ha_listeners = bind_ha(&config, opts.listen, shard_count)?;
    let addr = SocketAddr::new(opts.publish_host, port);
    let ha_addr = ha_listeners
        .first()
        .and_then(|l| l.local_addr().ok())
        .map(|a| SocketAddr::new(opts.publish_host, a.port()));
    let (broker, inboxes) = build_broker(
        config,
        hooks,
        topics,
        shard_count,
        Published {
            addr,
            ha_addr,
            shard_addrs,
        },
        opts.transfer_msg_by_heap,
    )?;
    let (ready_tx, ready_rx) = mpsc::channel::<(u16, Ready)>();
    let mut threads = Vec::new();
    let mut ha_listeners = ha_listeners.into_iter();
    let mut own_listeners = own_listeners.into_iter();
    for (id, (listener, inbox)) in listeners.into_iter().zip(inboxes).enumerate() {
        let ha_listener = ha_listeners.next();
        let own_listener = own_listeners.next();
        let id = id as u16;
        let broker = Arc::clone(&broker);
        let ready = ready_tx.clone();
        let pin = broker.config.pin_cores.then_some(id as usize % cores);
        let fallback = opts.force_fallback;
        let t = std::thread::Builder::new()
            .name(format!("ringmq-shard-{id}"))
            .spawn(move || {
                shard_thread(
                    id,
                    broker,
                    listener,
                    own_listener,
                    ha_listener,
                    inbox,
                    pin,
                    fallback,
                    ready,
                )
            })
            .map_err(|e| format!("spawning shard {id}: {e}"))?;
        threads.push(t);
    }
    drop(ready_tx);
    let mut errors = Vec::new();
    for _ in 0..shard_count {
        match ready_rx.recv() {
            Ok((id, Ok(info))) => log::info!("shard {id}: {info}"),
            Ok((id, Err(e))) => errors.push(format!("shard {id}: {e}")),
            Err(_) => errors.push("a shard thread died while starting".to_string()),
        }
    }
    let handle = BrokerHandle {
        broker,
        addr,
        threads,
        _dir_lock: dir_lock,
    };
    if !errors.is_empty() {
        handle.stop();
        return Err(errors.join("; "));
    }
    log::info!(
        "broker listeners (port {port}{}): {}; own connections to name servers and the master: {}",
        handle
            .broker
            .ha_addr
            .map(|a| format!(", HA port {}", a.port()))
            .unwrap_or_default(),
        handle.broker.tls.listener_mode(),
        handle
            .broker
            .tls
            .client
            .as_ref()
            .map_or("plaintext".to_string(), |c| c.describe()),
    );
    // Routes name this broker only once a name server has its registration: wait a moment
    // for the first one, so "ready" means clients can find it.
    if !handle.broker.config.namesrv_addr.is_empty() {
        if let Err(e) = handle.wait_registered(Duration::from_secs(3)) {
            log::warn!("{e}; retrying in the background");
        }
    }
    Ok(handle)
}

impl BrokerHandle {
    /// Waits, at most `limit`, until a name server has taken this broker's registration.
    /// Returns at once when a name server refused it and none took it: a refusal (ACL,
    /// credentials) stays a refusal for this process.
    pub fn wait_registered(&self, limit: Duration) -> Result<(), String> {
        let b = &self.broker;
        let deadline = clock::Instant::now() + limit;
        loop {
            if b.registered.load(Ordering::SeqCst) {
                return Ok(());
            }
            if let Some(refusal) = b.registration_refusal() {
                return Err(refusal);
            }
            if clock::Instant::now() >= deadline {
                return Err(format!(
                    "no name server ({}) took the registration within {} ms",
                    b.config.namesrv_addr.join(";"),
                    limit.as_millis()
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Graceful stop: refuse new work, finish in-flight requests, flush, checkpoint, close.
    pub fn stop(self) {
        self.broker.shutting_down.store(true, Ordering::SeqCst);
        for mb in &self.broker.mailboxes {
            let _ = mb.send(Mail::Shutdown);
        }
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// One SO_REUSEPORT listener per shard on the HA port (masters and brokers in controller
/// mode), refused when another process serves the port. With an ephemeral broker port the
/// HA port is ephemeral too.
fn bind_ha(
    config: &BrokerConfig,
    listen: SocketAddr,
    shards: u16,
) -> Result<Vec<std::net::TcpListener>, String> {
    if !config.broker_role.is_master() && !config.controller.enable {
        return Ok(Vec::new());
    }
    let port = config.ha_listen_port().unwrap_or(0);
    ionet::bind_shared(SocketAddr::new(listen.ip(), port), usize::from(shards))
        .map_err(|e| format!("binding the HA port {port}: {e}"))
}

fn check_shard_count(root: &std::path::Path, shards: u16) -> Result<(), String> {
    let path = root.join("config").join("shards");
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let had: u16 = text
                .trim()
                .parse()
                .map_err(|_| format!("{}: not a number", path.display()))?;
            if had != shards {
                return Err(format!(
                    "{} was written with {had} shards and this start asks for {shards}: queues live in per-shard CommitLogs, so the shard count cannot change (start with --shards {had})",
                    root.display()
                ));
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            crate::broker::topics::write_atomically(&path, format!("{shards}\n").as_bytes())
                .map_err(|e| format!("{}: {e}", path.display()))
        }
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// The addresses a broker publishes: its port, its HA port, each shard's own port.
struct Published {
    addr: SocketAddr,
    ha_addr: Option<SocketAddr>,
    shard_addrs: Vec<SocketAddr>,
}

/// The state every shard shares, and each shard's mailbox receiver.
fn build_broker(
    config: BrokerConfig,
    hooks: Hooks,
    topics: Topics,
    shard_count: u16,
    published: Published,
    transfer_msg_by_heap: bool,
) -> Result<(Arc<Broker>, Vec<flume::Receiver<Mail>>), String> {
    let Published {
        addr,
        ha_addr,
        shard_addrs,
    } = published;
    let tls = crate::net::tls_load::node_tls(&config.tls, true, "broker")?;
    for room in hooks.rooms {
        room.prepare(&topics, &config)?;
    }
    let mut mailboxes = Vec::new();
    let mut inboxes = Vec::new();
    for _ in 0..shard_count {
        let (tx, rx) = flume::bounded(limits::MAILBOX_MESSAGES_MAX);
        mailboxes.push(tx);
        inboxes.push(rx);
    }
    let rt_cfg = Runtime {
        flush: config.flush_disk_type,
        frame_bytes_max: limits::FRAME_BYTES_MAX,
        transfer_msg_by_heap: transfer_msg_by_heap || config.transfer_msg_by_heap,
        long_polling: config.long_polling_enable,
        slave_read_behind_bytes: config.slave_read_enable.then(|| {
            crate::io::memory::total_bytes() / 100
                * u64::from(config.access_message_in_memory_max_ratio)
        }),
    };
    let master = MasterAddrs {
        broker: None,
        ha: match &config.ha_master_address {
            Some(a) => Some(
                a.parse()
                    .map_err(|_| format!("haMasterAddress {a} is not host:port"))?,
            ),
            None => None,
        },
    };
    let group_configs =
        crate::broker::group_config::GroupConfigs::load(&config.store_path_root_dir)
            .map_err(|e| format!("loading consumer group settings: {e}"))?;
    let acl = if config.acl.v2() {
        Some(open_acl_v2(&config)?)
    } else if config.acl.enable {
        let acl = crate::acl::Acl::open(crate::acl::AclSettings {
            file: config.acl.file_path(None),
            replay_window_ms: config.acl.replay_window_ms,
        })?;
        if config.acl.inner_access_key.is_none() {
            log::warn!(
                "aclEnable=true without innerAccessKey/innerSecretKey: this broker's own \
                 requests (name server registration, replication) are unsigned and a name \
                 server or master with ACL on refuses them"
            );
        }
        Some(acl)
    } else {
        None
    };
    let inner_credentials = config.acl.inner_credentials().map_err(|e| e.to_string())?;
    let broker = Arc::new(Broker {
        hooks,
        acl,
        inner_credentials,
        group_configs: Mutex::new(group_configs),
        rt: rt_cfg,
        live: crate::broker::live::Live::new(&config),
        addr,
        shard_count,
        topics,
        groups: Mutex::new(ConsumerGroups::default()),
        locks: Mutex::default(),
        next_conn: Default::default(),
        push_seq: Default::default(),
        counters: (0..shard_count).map(|_| ShardCounters::default()).collect(),
        metric_views: (0..shard_count).map(|_| Mutex::default()).collect(),
        schedule: (0..shard_count).map(|_| Mutex::default()).collect(),
        txn: (0..shard_count).map(|_| Mutex::default()).collect(),
        mailboxes,
        connections: Default::default(),
        shutting_down: Default::default(),
        registered: Default::default(),
        registration_refused: Default::default(),
        topics_changed: event_listener::Event::new(),
        started_ms: Broker::now_ms(),
        master: Mutex::new(master),
        ha_addr,
        shard_addrs,
        tls,
        role: Default::default(),
        store_epoch: Default::default(),
        config,
    });
    Ok((broker, inboxes))
}

/// Opens shard `id`'s store (recovering it), consumer offsets and key index on `disk`.
/// Returns the shard and a line for the log (recovery, log range).
pub fn open_shard(
    id: u16,
    broker: Arc<Broker>,
    disk: NodeDisk,
    splice_ok: bool,
) -> Result<(Shard, String), String> {
    let cfg = &broker.config;
    let mut scfg = StoreConfig::new(&cfg.store_path_root_dir, id, broker.addr);
    scfg.segment_bytes = cfg.mapped_file_size_commit_log_bytes;
    scfg.cq_units_per_file = cfg.consume_queue_file_bytes() / 20;
    scfg.disk_full_ratio = f64::from(cfg.disk_space_warning_level_ratio) / 100.0;
    scfg.cache_keep_bytes = cfg.cache_keep_bytes();
    scfg.prewrite_bytes = cfg.prewrite_bytes();
    let mut store = Store::open(disk, scfg).map_err(|e| format!("opening the store: {e}"))?;
    if cfg.broker_role.is_master() && cfg.warm_segments() {
        // A fresh store's first segment is pre-written before the broker says it is ready:
        // otherwise the first send waits for it (4.7 s for 2 x 1 GiB on the test VM, past a
        // client's 3 s send timeout).
        let started = clock::Instant::now();
        let opened = store
            .open_active_segment()
            .map_err(|e| format!("preparing the first log segment: {e}"))?;
        if opened {
            log::info!(
                "shard {id}: log segment at {} pre-written in {} ms (warmMapedFileEnable)",
                store.write_offset(),
                started.elapsed().as_millis()
            );
        }
    }
    let rec = store.recovery().clone();
    let offsets = ConsumerOffsets::load(&cfg.store_path_root_dir, id)
        .map_err(|e| format!("loading consumer offsets: {e}"))?;
    let info = format!(
        "{} shutdown last time, log {}..{}{}",
        if rec.clean {
            "clean"
        } else {
            "unclean (recovered)"
        },
        store.min_offset(),
        store.write_offset(),
        rec.torn_tail
            .as_ref()
            .map(|t| format!(", torn tail truncated: {t}"))
            .unwrap_or_default(),
    );
    let index = if cfg.message_index_enable {
        let dir = cfg.store_path_root_dir.join("index").join(id.to_string());
        let index = crate::store::index::KeyIndex::open(
            store.disk(),
            &dir,
            cfg.max_hash_slot_num,
            cfg.max_index_num,
        )
        .map_err(|e| format!("opening the key index: {e}"))?;
        Some(std::cell::RefCell::new(index))
    } else {
        None
    };
    let segment_bytes = store.segment_bytes();
    let (direct, keep) = (cfg.commit_log_direct_catch_up, cfg.cache_keep_bytes());
    let mut shard = Shard::new(id, broker, store, offsets, splice_ok);
    shard.index = index;
    let direct = shard.catch_up.enable(direct, segment_bytes, keep);
    shard.store.get_mut().set_direct_catch_up(direct);
    Ok((shard, info))
}

#[allow(clippy::too_many_arguments)]
fn shard_thread(
    id: u16,
    broker: Arc<Broker>,
    listener: std::net::TcpListener,
    own_listener: Option<std::net::TcpListener>,
    ha_listener: Option<std::net::TcpListener>,
    inbox: flume::Receiver<Mail>,
    pin: Option<usize>,
    fallback: bool,
    ready: mpsc::Sender<(u16, Ready)>,
) {
    let event_loop = match EventLoop::new(pin, fallback) {
        Ok(l) => l,
        Err(e) => {
            let _ = ready.send((id, Err(format!("event loop: {e}"))));
            return;
        }
    };
    let disk = if fallback {
        RealDisk::fallback("RINGMQ_IO=epoll")
    } else {
        RealDisk::new()
    };
    disk.set_warm_segments(broker.config.warm_segments());
    let driver = disk.driver().clone();
    let splice_ok = event_loop.driver() == LoopDriver::IoUring;
    let (shard, info) = match open_shard(id, broker, NodeDisk::Real(disk), splice_ok) {
        Ok(s) => s,
        Err(e) => {
            let _ = ready.send((id, Err(e)));
            return;
        }
    };
    let info = format!(
        "event loop {}, store writes {driver}, pinned to {}, {info}",
        event_loop.driver(),
        pin.map_or("no core".to_string(), |c| format!("core {c}")),
    );
    let shard = Rc::new(shard);
    event_loop.block_on(async move {
        let listener = match Listener::from_std(listener) {
            Ok(l) => l,
            Err(e) => {
                let _ = ready.send((id, Err(format!("listener: {e}"))));
                return;
            }
        };
        let own = match own_listener.map(Listener::from_std).transpose() {
            Ok(l) => l,
            Err(e) => {
                let _ = ready.send((id, Err(format!("the shard's own listener: {e}"))));
                return;
            }
        };
        let ha_listener = match ha_listener.map(Listener::from_std).transpose() {
            Ok(l) => l,
            Err(e) => {
                let _ = ready.send((id, Err(format!("HA listener: {e}"))));
                return;
            }
        };
        let _ = ready.send((id, Ok(info)));
        run(shard, listener, own, ha_listener, inbox).await;
    });
}

/// A broker started in the simulated world installed on this thread.
#[derive(Debug)]
pub struct SimBroker {
    pub broker: Arc<Broker>,
    pub shards: Vec<Rc<Shard>>,
}

/// Starts a broker of one shard in the simulated world, as the running node (see
/// [`sim::World::spawn_on`]): its store on `disk`, listening on `addr` (and, for a master or
/// a broker in controller mode, replication on `addr`'s port + 1). The configuration files under
/// `storePathRootDir` (topics, consumer offsets) are real files, written atomically.
/// One shard: handing a connection to another shard moves a socket between threads, which
/// the simulated network does not model.
pub fn start_sim(
    config: BrokerConfig,
    addr: SocketAddr,
    disk: SimDisk,
    hooks: Hooks,
) -> Result<SimBroker, String> {
    let world = sim::current().ok_or("no simulated world on this thread")?;
    if config.tls.server_mode() != crate::config::TlsMode::Disabled || config.tls.client_enable {
        return Err("TLS is not simulated".to_string());
    }
    let root = config.store_path_root_dir.clone();
    let topics = Topics::load(&root, 1).map_err(|e| format!("loading topics: {e}"))?;
    // As `bind_ha`: masters, and every broker in controller mode (any may become master).
    let ha_addr = (config.broker_role.is_master() || config.controller.enable)
        .then(|| SocketAddr::new(addr.ip(), addr.port() + 1));
    let listener = Listener::bind_sim(addr).map_err(|e| format!("binding {addr}: {e}"))?;
    let ha_listener = ha_addr
        .map(Listener::bind_sim)
        .transpose()
        .map_err(|e| format!("binding the HA port: {e}"))?;
    let (broker, mut inboxes) = build_broker(
        config,
        hooks,
        topics,
        1,
        Published {
            addr,
            ha_addr,
            shard_addrs: Vec::new(),
        },
        true,
    )?;
    let (shard, info) = open_shard(0, Arc::clone(&broker), NodeDisk::Sim(disk), false)?;
    log::debug!("sim broker {addr}: {info}");
    let shard = Rc::new(shard);
    let inbox = inboxes.pop().ok_or("no mailbox")?;
    world.spawn(run(Rc::clone(&shard), listener, None, ha_listener, inbox));
    Ok(SimBroker {
        broker,
        shards: vec![shard],
    })
}

/// The broker's ACL with ACL 2.0 on (`crate::acl::v2`), from its config.
fn open_acl_v2(config: &BrokerConfig) -> Result<crate::acl::Acl, String> {
    let a = &config.acl;
    let pair = |p: &Option<(String, ringmq_wire::auth::Secret)>| {
        p.as_ref().map(|(n, s)| (n.clone(), s.expose().to_owned()))
    };
    let settings = crate::acl::v2::AuthSettings {
        authentication: a.authentication_enabled,
        authorization: a.authorization_enabled,
        whitelist: a.authentication_whitelist.clone(),
        init_user: pair(&a.init_user),
        inner_user: pair(&a.inner_client),
        migrate_from: a.migrate_from_v1.then(|| a.file_path(None)),
        dir: config.store_path_root_dir.join("config"),
        cluster: config.broker_cluster_name.clone(),
    };
    let auth = crate::acl::v2::Auth::open(settings)?;
    if a.inner_credentials().ok().flatten().is_none() {
        log::warn!(
            "ACL 2.0 on without innerClientAuthenticationCredentials: this broker's own \
             requests (replication, a slave's copy of users and policies) are unsigned and a \
             master with ACL 2.0 refuses them"
        );
    }
    Ok(crate::acl::Acl::with_v2(a.replay_window_ms, auth))
}
