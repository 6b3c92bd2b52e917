//! Starting and stopping a broker's shards: one pinned thread per shard, each opening its
//! store (recovery happens here), binding its SO_REUSEPORT listener, and running its loop:
//! accept, mailbox, flusher, timers. `BrokerHandle::stop` is the graceful shutdown.

use std::net::SocketAddr;
use std::path::Path;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use crate::broker::offsets::{ConsumerOffsets, OFFSET_PERSIST_INTERVAL_MS};
use crate::broker::{
    register, Broker, ConsumerGroups, MasterAddrs, Runtime, ShardCounters, Topics,
};
use crate::config::{BrokerConfig, FlushDiskType};
use crate::io::clock;
use crate::io::disk::RealDisk;
use crate::io::net::{self as ionet, Conn, Listener, SharedFile};
use crate::io::rt::{self, EventLoop, LoopDriver};
use crate::limits;
use crate::net::connection::{self, ReadEnd, Service};
use crate::net::dispatch::{dispatch, Origin};
use crate::net::reply::Outcome;
use crate::shard::mailbox::Mail;
use crate::shard::{flusher, ha, Flusher, Shard};
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
}

/// What a shard reports once started.
type Ready = Result<String, String>;

/// Starts every shard; returns once all of them have opened their store and listen.
pub fn start(config: BrokerConfig, opts: StartOptions) -> Result<BrokerHandle, String> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let shard_count = config.shards.unwrap_or(cores).clamp(1, limits::SHARDS_MAX) as u16;
    let root = config.store_path_root_dir.clone();
    check_shard_count(&root, shard_count)?;
    let topics = Topics::load(&root, shard_count).map_err(|e| format!("loading topics: {e}"))?;
    let first =
        ionet::bind_reuseport(opts.listen).map_err(|e| format!("binding {}: {e}", opts.listen))?;
    let port = first.local_addr().map_err(|e| e.to_string())?.port();
    let mut listeners = vec![first];
    for _ in 1..shard_count {
        let addr = SocketAddr::new(opts.listen.ip(), port);
        listeners.push(ionet::bind_reuseport(addr).map_err(|e| format!("binding {addr}: {e}"))?);
    }
    let ha_listeners = bind_ha(&config, opts.listen, shard_count)?;
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
        transfer_msg_by_heap: opts.transfer_msg_by_heap,
        long_polling: config.long_polling_enable,
    };
    let addr = SocketAddr::new(opts.publish_host, port);
    let ha_addr = ha_listeners
        .first()
        .and_then(|l| l.local_addr().ok())
        .map(|a| SocketAddr::new(opts.publish_host, a.port()));
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
    let broker = Arc::new(Broker {
        rt: rt_cfg,
        live: crate::broker::live::Live::new(&config),
        addr,
        shard_count,
        topics,
        groups: Mutex::new(ConsumerGroups::default()),
        counters: (0..shard_count).map(|_| ShardCounters::default()).collect(),
        mailboxes,
        connections: Default::default(),
        shutting_down: Default::default(),
        registered: Default::default(),
        topics_changed: event_listener::Event::new(),
        started_ms: Broker::now_ms(),
        master: Mutex::new(master),
        ha_addr,
        config,
    });
    let (ready_tx, ready_rx) = mpsc::channel::<(u16, Ready)>();
    let mut threads = Vec::new();
    let mut ha_listeners = ha_listeners.into_iter();
    for (id, (listener, inbox)) in listeners.into_iter().zip(inboxes).enumerate() {
        let ha_listener = ha_listeners.next();
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
    };
    if !errors.is_empty() {
        handle.stop();
        return Err(errors.join("; "));
    }
    // Routes name this broker only once a name server has its registration: wait a moment
    // for the first one, so "ready" means clients can find it.
    if !handle.broker.config.namesrv_addr.is_empty() {
        let deadline = std::time::Instant::now() + Duration::from_secs(3);
        while !handle.broker.registered.load(Ordering::SeqCst)
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        if !handle.broker.registered.load(Ordering::SeqCst) {
            log::warn!("no name server accepted the registration yet; retrying in the background");
        }
    }
    Ok(handle)
}

impl BrokerHandle {
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

/// One SO_REUSEPORT listener per shard on the HA port (masters only). With an ephemeral
/// broker port the HA port is ephemeral too.
fn bind_ha(
    config: &BrokerConfig,
    listen: SocketAddr,
    shards: u16,
) -> Result<Vec<std::net::TcpListener>, String> {
    if !config.broker_role.is_master() {
        return Ok(Vec::new());
    }
    let port = config.ha_listen_port().unwrap_or(0);
    let first = ionet::bind_reuseport(SocketAddr::new(listen.ip(), port))
        .map_err(|e| format!("binding the HA port {port}: {e}"))?;
    let port = first.local_addr().map_err(|e| e.to_string())?.port();
    let mut out = vec![first];
    for _ in 1..shards {
        out.push(
            ionet::bind_reuseport(SocketAddr::new(listen.ip(), port))
                .map_err(|e| format!("binding the HA port {port}: {e}"))?,
        );
    }
    Ok(out)
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

#[allow(clippy::too_many_arguments)]
fn shard_thread(
    id: u16,
    broker: Arc<Broker>,
    listener: std::net::TcpListener,
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
    let cfg = &broker.config;
    disk.set_warm_segments(cfg.warm_segments());
    let mut scfg = StoreConfig::new(&cfg.store_path_root_dir, id, broker.addr);
    scfg.segment_bytes = cfg.mapped_file_size_commit_log_bytes;
    scfg.cq_units_per_file = cfg.consume_queue_file_bytes() / 20;
    scfg.disk_full_ratio = f64::from(cfg.disk_space_warning_level_ratio) / 100.0;
    let driver = disk.driver().clone();
    let mut store = match Store::open(disk, scfg) {
        Ok(s) => s,
        Err(e) => {
            let _ = ready.send((id, Err(format!("opening the store: {e}"))));
            return;
        }
    };
    if cfg.broker_role.is_master() && cfg.warm_segments() {
        // A fresh store's first segment is pre-written before the broker says it is ready:
        // otherwise the first send waits for it (4.7 s for 2 x 1 GiB on the test VM, past a
        // client's 3 s send timeout).
        let started = std::time::Instant::now();
        match store.open_active_segment() {
            Ok(true) => log::info!(
                "shard {id}: log segment at {} pre-written in {} ms (warmMapedFileEnable)",
                store.write_offset(),
                started.elapsed().as_millis()
            ),
            Ok(false) => {}
            Err(e) => {
                let _ = ready.send((id, Err(format!("preparing the first log segment: {e}"))));
                return;
            }
        }
    }
    let rec = store.recovery().clone();
    let offsets = match ConsumerOffsets::load(&cfg.store_path_root_dir, id) {
        Ok(o) => o,
        Err(e) => {
            let _ = ready.send((id, Err(format!("loading consumer offsets: {e}"))));
            return;
        }
    };
    let info = format!(
        "event loop {}, store writes {}, pinned to {}, {} shutdown last time, log {}..{}{}",
        event_loop.driver(),
        driver,
        pin.map_or("no core".to_string(), |c| format!("core {c}")),
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
    let splice_ok = event_loop.driver() == LoopDriver::IoUring;
    let index = if cfg.message_index_enable {
        let dir = cfg.store_path_root_dir.join("index").join(id.to_string());
        match crate::store::index::KeyIndex::open(
            store.disk(),
            &dir,
            cfg.max_hash_slot_num,
            cfg.max_index_num,
        ) {
            Ok(i) => Some(std::cell::RefCell::new(i)),
            Err(e) => {
                let _ = ready.send((id, Err(format!("opening the key index: {e}"))));
                return;
            }
        }
    } else {
        None
    };
    let mut shard = Shard::new(id, broker, store, offsets, splice_ok);
    shard.index = index;
    let shard = Rc::new(shard);
    event_loop.block_on(async move {
        let listener = match Listener::from_std(listener) {
            Ok(l) => l,
            Err(e) => {
                let _ = ready.send((id, Err(format!("listener: {e}"))));
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
        run(shard, listener, ha_listener, inbox).await;
    });
}

/// The shard's loop: accept, mailbox, background tasks; returns after a graceful stop.
async fn run(
    shard: Rc<Shard>,
    listener: Listener,
    ha_listener: Option<Listener>,
    inbox: flume::Receiver<Mail>,
) {
    rt::spawn(Flusher::run(Rc::clone(&shard)));
    rt::spawn(timers(Rc::clone(&shard)));
    if shard.id == 0 {
        rt::spawn(register::run(Rc::clone(&shard)));
    }
    let ha_accept = ha_listener.map(|l| rt::spawn_joinable(ha::accept_loop(Rc::clone(&shard), l)));
    if !shard.broker.config.broker_role.is_master() {
        rt::spawn(ha::follow_loop(Rc::clone(&shard)));
        rt::spawn(ha::sync_offsets_loop(Rc::clone(&shard)));
        if shard.id == 0 {
            rt::spawn(register::sync_from_master(Rc::clone(&shard)));
        }
    }
    let accept = rt::spawn_joinable(accept_loop(Rc::clone(&shard), listener));
    while let Ok(mail) = inbox.recv_async().await {
        match mail {
            Mail::Request { frame, reply } => {
                let origin = Origin {
                    forwarded: true,
                    zero_copy: false,
                };
                match dispatch(&shard, frame, origin) {
                    Outcome::Now(r) => {
                        let _ = reply.send(r.into_send());
                    }
                    Outcome::Later(fut) => rt::spawn(async move {
                        let _ = reply.send(fut.await.into_send());
                    }),
                }
            }
            Mail::Adopt {
                stream,
                hello_frame,
                pending,
            } => match Conn::from_std(stream) {
                Ok(conn) => rt::spawn(serve_adopted(Rc::clone(&shard), conn, hello_frame, pending)),
                Err(e) => log::warn!("shard {}: adopting a connection: {e}", shard.id),
            },
            Mail::AdoptHa {
                stream,
                subscribe,
                pending,
            } => match Conn::from_std(stream) {
                Ok(conn) => rt::spawn(ha::serve_adopted(
                    Rc::clone(&shard),
                    conn,
                    subscribe,
                    pending,
                )),
                Err(e) => log::warn!("shard {}: adopting a replication link: {e}", shard.id),
            },
            Mail::DeleteTopic { topic } => {
                if let Err(e) = shard.store.borrow_mut().delete_topic(&topic) {
                    log::warn!("shard {}: deleting topic {topic}: {e}", shard.id);
                }
                shard.offsets.borrow_mut().remove_topic(&topic);
            }
            Mail::Shutdown => break,
        }
    }
    drop(accept);
    drop(ha_accept);
    stop(&shard).await;
}

async fn accept_loop(shard: Rc<Shard>, listener: Listener) {
    loop {
        let (conn, _peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                log::warn!("shard {}: accept: {e}", shard.id);
                rt::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if shard.broker.is_shutting_down() {
            continue;
        }
        if shard.broker.connections.load(Ordering::Relaxed) >= limits::CONNECTIONS_MAX {
            log::warn!(
                "shard {}: refusing a connection: {} connections open",
                shard.id,
                limits::CONNECTIONS_MAX
            );
            rt::spawn(refuse_connection(conn));
            continue;
        }
        rt::spawn(serve_conn(Rc::clone(&shard), conn, Vec::new()));
    }
}

/// Tells a client over the connection limit why, then closes (request id 0: no request was
/// read).
async fn refuse_connection(conn: Conn) {
    let reply = crate::net::reply::Reply::error(
        ringmq_wire::code::Status::LimitExceeded,
        format!(
            "over {} connections open on this broker",
            limits::CONNECTIONS_MAX
        ),
    );
    let mut out = Vec::new();
    let framed = ringmq_wire::frame::encode_prefix(
        &mut out,
        reply.status,
        ringmq_wire::frame::Flags::RESPONSE,
        0,
        reply.header.len(),
        0,
    );
    if framed.is_ok() {
        out.extend_from_slice(&reply.header);
        let _ = conn.write_all(out).await;
    }
    conn.shutdown().await;
}

/// Serves a connection, and hands it to another shard if its HELLO asks for one.
async fn serve_conn(shard: Rc<Shard>, conn: Conn, pending: Vec<u8>) {
    let svc = Rc::new(ShardService(Rc::clone(&shard)));
    match connection::serve(svc, conn.clone(), pending).await {
        ReadEnd::Closed => {}
        ReadEnd::HandOff {
            shard: target,
            hello_frame,
            pending,
        } => {
            let stream = match conn.to_std() {
                Ok(s) => s,
                Err(e) => {
                    log::warn!("shard {}: hand-off to shard {target}: {e}", shard.id);
                    return;
                }
            };
            drop(conn);
            let mail = Mail::Adopt {
                stream,
                hello_frame,
                pending,
            };
            if let Some(mb) = shard.broker.mailboxes.get(usize::from(target)) {
                if mb.try_send(mail).is_err() {
                    log::warn!(
                        "shard {}: shard {target} did not take a handed-off connection",
                        shard.id
                    );
                }
            }
        }
    }
}

async fn serve_adopted(shard: Rc<Shard>, conn: Conn, hello_frame: Vec<u8>, pending: Vec<u8>) {
    // The HELLO is answered by the shard that now owns the connection: put it back in front.
    let mut bytes = hello_frame;
    bytes.extend_from_slice(&pending);
    let svc = Rc::new(ShardService(Rc::clone(&shard)));
    let _ = connection::serve(svc, conn, bytes).await;
}

/// The broker's frames on one shard.
struct ShardService(Rc<Shard>);

impl Service for ShardService {
    fn frame_bytes_max(&self) -> usize {
        self.0.broker.rt.frame_bytes_max
    }

    fn handle(&self, frame: Vec<u8>) -> Outcome {
        dispatch(
            &self.0,
            frame,
            Origin {
                forwarded: false,
                zero_copy: true,
            },
        )
    }

    fn handoff_target(&self, frame: &[u8]) -> Option<u16> {
        let target = register::hello_target(frame)?;
        (target != self.0.id && target < self.0.broker.shard_count).then_some(target)
    }

    fn opened(&self) {
        self.0.broker.connections.fetch_add(1, Ordering::Relaxed);
        self.0
            .counters()
            .connections
            .fetch_add(1, Ordering::Relaxed);
    }

    fn closed(&self) {
        self.0.broker.connections.fetch_sub(1, Ordering::Relaxed);
        self.0
            .counters()
            .connections
            .fetch_sub(1, Ordering::Relaxed);
    }
}

/// Periodic work of a shard: ASYNC_FLUSH checkpoints, offset persistence, retention,
/// counters.
async fn timers(shard: Rc<Shard>) {
    let mut flush_ms = shard.broker.live.flush_interval_commit_log_ms().max(1);
    let mut tick_ms = flush_ms.min(1000);
    let mut since_offsets = 0u64;
    let mut since_retention = 0u64;
    let mut since_checkpoint = 0u64;
    loop {
        rt::sleep(Duration::from_millis(tick_ms)).await;
        if shard.broker.is_shutting_down() {
            return;
        }
        flush_ms = shard.broker.live.flush_interval_commit_log_ms().max(1);
        tick_ms = flush_ms.min(1000);
        since_checkpoint += tick_ms;
        let checkpoint_due = match shard.broker.rt.flush {
            FlushDiskType::AsyncFlush => since_checkpoint >= flush_ms,
            FlushDiskType::SyncFlush => since_checkpoint >= 1000,
        };
        if checkpoint_due {
            since_checkpoint = 0;
            let end = flusher::sync_log(&shard).await;
            shard.flusher.note_synced(end);
            if shard.broker.is_shutting_down() {
                // The stop sequence may have closed the store while the sync ran; it
                // checkpoints itself.
                return;
            }
            flush_index(&shard).await;
            if !checkpoint(&shard, end).await {
                return;
            }
        }
        since_offsets += tick_ms;
        if since_offsets >= OFFSET_PERSIST_INTERVAL_MS {
            since_offsets = 0;
            save_offsets(&shard).await;
        }
        since_retention += tick_ms;
        if since_retention >= 10_000 {
            since_retention = 0;
            retention(&shard);
        }
        shard.index_pending();
        update_counters(&shard);
    }
}

/// The ASYNC_FLUSH checkpoint after the log is durable through `end`, its fdatasyncs on the
/// loop's ring (they can take hundreds of ms while the disk writes back the log; the shard
/// keeps serving). False when the broker began stopping meanwhile (the stop sequence
/// checkpoints itself).
async fn checkpoint(shard: &Shard, end: u64) -> bool {
    // Files first, then the directories they were created in: both before the checkpoint.
    let all: Vec<std::io::Result<SharedFile>> = {
        let mut store = shard.store.borrow_mut();
        let (files, dirs) = store.take_dirty_queue_files();
        let files = files.into_iter().map(|f| SharedFile::dup(f.std()));
        files
            .chain(dirs.into_iter().map(SharedFile::open_dir))
            .collect()
    };
    for f in all {
        let synced = match f {
            Ok(f) => f.sync_data().await,
            Err(e) => Err(e),
        };
        if let Err(e) = synced {
            crate::fail_stop(&format!(
                "shard {}: fdatasync of a ConsumeQueue: {e}",
                shard.id
            ));
        }
    }
    if shard.broker.is_shutting_down() {
        return false;
    }
    let written = {
        let mut store = shard.store.borrow_mut();
        store.write_checkpoint(end).and_then(|next| match next {
            Some(next) => SharedFile::dup(store.checkpoint_file().std())
                .map(|f| Some((next, f)))
                .map_err(|e| crate::store::StoreError::io(Path::new("checkpoint"), e)),
            None => Ok(None),
        })
    };
    let (next, file) = match written {
        Ok(Some(w)) => w,
        Ok(None) => return true,
        Err(e) => crate::fail_stop(&format!("shard {}: checkpoint: {e}", shard.id)),
    };
    if let Err(e) = file.sync_data().await {
        crate::fail_stop(&format!(
            "shard {}: fdatasync of the checkpoint: {e}",
            shard.id
        ));
    }
    shard.store.borrow_mut().checkpoint_written(next);
    !shard.broker.is_shutting_down()
}

/// Key index headers, written now, fdatasynced on the ring (the index is rebuilt from the
/// log after a crash, so a failure is only logged).
async fn flush_index(shard: &Shard) {
    let Some(index) = &shard.index else { return };
    let files: Vec<SharedFile> = {
        let mut index = index.borrow_mut();
        match index.write_headers() {
            Ok(files) => files
                .into_iter()
                .filter_map(|f| SharedFile::dup(f.std()).ok())
                .collect(),
            Err(e) => {
                log::warn!("shard {}: key index flush: {e}", shard.id);
                return;
            }
        }
    };
    for f in files {
        if let Err(e) = f.sync_data().await {
            log::warn!("shard {}: key index fdatasync: {e}", shard.id);
        }
    }
}

/// Consumer offsets to disk on a helper thread (write, fsync, rename, directory fsync).
async fn save_offsets(shard: &Shard) {
    let snapshot = shard.offsets.borrow_mut().snapshot();
    let (path, bytes) = match snapshot {
        Ok(Some(s)) => s,
        Ok(None) => return,
        Err(e) => {
            log::warn!("shard {}: saving consumer offsets: {e}", shard.id);
            return;
        }
    };
    let res = rt::blocking(move || crate::broker::topics::write_atomically(&path, &bytes)).await;
    let failed = match res {
        Some(Ok(())) => None,
        Some(Err(e)) => Some(e.to_string()),
        None => Some("the writer thread panicked".to_string()),
    };
    if let Some(e) = failed {
        log::warn!("shard {}: saving consumer offsets: {e}", shard.id);
        shard.offsets.borrow_mut().mark_dirty();
    }
}

fn retention(shard: &Shard) {
    let live = &shard.broker.live;
    let now = Broker::now_ms();
    let used = shard.store.borrow().disk_used_ratio().unwrap_or(0.0) * 100.0;
    let pressure = used > f64::from(live.disk_max_used_space_ratio());
    let forced =
        live.clean_file_forcibly() && used > f64::from(live.disk_space_clean_forcibly_ratio());
    let hour_due = live.delete_when_hours().contains(&clock::local_hour(now));
    if !(hour_due || pressure) {
        return;
    }
    let reserved_ms = i64::from(live.file_reserved_time_hours()) * 3_600_000;
    let res = shard
        .store
        .borrow_mut()
        .remove_expired(now, reserved_ms, forced, 10);
    match res {
        Ok(out) if out.removed_segments > 0 => {
            shard.forget_files();
            log::info!(
                "shard {}: retention removed {} segment(s), {} bytes (disk {used:.1}% used{})",
                shard.id,
                out.removed_segments,
                out.removed_bytes,
                if forced { ", forced" } else { "" }
            );
        }
        Ok(_) => {}
        Err(e) if e.is_fatal() => crate::fail_stop(&format!("shard {}: retention: {e}", shard.id)),
        Err(e) => log::warn!("shard {}: retention: {e}", shard.id),
    }
}

fn update_counters(shard: &Shard) {
    let store = shard.store.borrow();
    let c = shard.counters();
    let now = std::time::Instant::now();
    let (msgs_in, msgs_out) = (
        c.msgs_in.load(Ordering::Relaxed),
        c.msgs_out.load(Ordering::Relaxed),
    );
    match shard.rate_sample.get() {
        Some((i, o, at)) if now.duration_since(at).as_millis() >= 1000 => {
            let secs = now.duration_since(at).as_secs_f64();
            c.msgs_in_per_s
                .store(((msgs_in - i) as f64 / secs) as u64, Ordering::Relaxed);
            c.msgs_out_per_s
                .store(((msgs_out - o) as f64 / secs) as u64, Ordering::Relaxed);
            shard.rate_sample.set(Some((msgs_in, msgs_out, now)));
        }
        Some(_) => {}
        None => shard.rate_sample.set(Some((msgs_in, msgs_out, now))),
    }
    c.store_bytes
        .store(store.log_disk_bytes(), Ordering::Relaxed);
    c.min_offset.store(store.min_offset(), Ordering::Relaxed);
    c.max_offset.store(store.write_offset(), Ordering::Relaxed);
    c.queues
        .store(store.queues().len() as u32, Ordering::Relaxed);
    let end = store.write_offset();
    if shard.broker.config.broker_role.is_master() {
        let replicas = shard.replicas.borrow();
        c.ha_slaves.store(replicas.len() as u32, Ordering::Relaxed);
        let (bytes, ms) = replicas.lag(end, Broker::now_ms()).unwrap_or((0, 0));
        c.ha_lag_bytes.store(bytes, Ordering::Relaxed);
        c.ha_lag_ms.store(ms as u64, Ordering::Relaxed);
    } else {
        c.ha_lag_bytes.store(
            shard.master_end.get().saturating_sub(end),
            Ordering::Relaxed,
        );
    }
}

/// Graceful stop of one shard: wake parked pulls (they answer now), wait for in-flight work
/// (bounded), then flush, checkpoint, save offsets, close the store.
async fn stop(shard: &Rc<Shard>) {
    shard.wake_all();
    for _ in 0..300 {
        if shard.parked_count.get() == 0 && !shard.flusher.pending() {
            break;
        }
        rt::sleep(Duration::from_millis(10)).await;
    }
    shard.index_pending();
    shard.flush_index();
    let closed = shard.store.borrow_mut().shutdown();
    match closed {
        Ok(()) => shard
            .flusher
            .note_synced(shard.store.borrow().synced_offset()),
        Err(e) => log::error!("shard {}: closing the store: {e}", shard.id),
    }
    if let Err(e) = shard.offsets.borrow_mut().persist() {
        log::error!("shard {}: saving consumer offsets: {e}", shard.id);
    }
    // Give connection writers a moment to send the last acknowledgements.
    rt::sleep(Duration::from_millis(50)).await;
    log::info!("shard {}: stopped", shard.id);
}
