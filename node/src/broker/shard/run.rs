//! A shard's loop: accept connections, serve them, take mail from other shards, run the
//! core's background tasks (flusher, timers) and start the rooms' (`hooks.rs`); and the
//! graceful stop.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::acl::{Acl, Caller};
use crate::broker::shard::hooks::Started;
use crate::broker::shard::route::{hello_target, Origin};
use crate::broker::shard::{timers, Flusher, Shard};
use crate::io::net::{Conn, Listener};
use crate::io::rt;
use crate::limits;
use crate::net::admit::admit;
use crate::net::connection::{self, ReadEnd, Service};
use crate::net::reply::Outcome;
use crate::net::service::ShardView;
use crate::shard::mailbox::Mail;

/// Zeros ahead of the log's appends (`commitLogPrewriteBytes`), written when the loop has
/// nothing else to do (see `CommitLog::prewrite_step`).
fn set_prewrite_as_idle_work(shard: &Rc<Shard>) {
    let pending = Rc::downgrade(shard);
    let step = Rc::downgrade(shard);
    rt::set_idle_work(
        move || {
            pending
                .upgrade()
                .is_some_and(|s| s.store.try_borrow().is_ok_and(|st| st.prewrite_pending()))
        },
        move || {
            let Some(shard) = step.upgrade() else {
                return;
            };
            let Ok(mut store) = shard.store.try_borrow_mut() else {
                return;
            };
            if let Err(e) = store.prewrite_step() {
                log::warn!(
                    "shard {}: writing zeros ahead of the log stopped: {e}",
                    shard.id
                );
            }
        },
    );
}

/// The shard's loop: accept, mailbox, background tasks; returns after a graceful stop.
pub async fn run(
    shard: Rc<Shard>,
    listener: Listener,
    own_listener: Option<Listener>,
    ha_listener: Option<Listener>,
    inbox: flume::Receiver<Mail>,
) {
    rt::spawn(Flusher::run(Rc::clone(&shard)));
    rt::spawn(timers::run(Rc::clone(&shard)));
    set_prewrite_as_idle_work(&shard);
    let last_epoch = shard.store.borrow().last_epoch();
    shard
        .broker
        .store_epoch
        .fetch_max(last_epoch, std::sync::atomic::Ordering::AcqRel);
    // Outside controller mode a master is one from the start; in controller mode the
    // controllers decide (the controller link's room), and until then the shard takes no
    // writes.
    if !shard.broker.config.controller.enable && shard.broker.config.broker_role.is_master() {
        if let Err(e) = shard.become_master() {
            crate::fail_stop(&format!("shard {}: {e}", shard.id));
        }
    }
    let mut started = Started {
        ha_listener,
        keep: Vec::new(),
    };
    for room in shard.broker.hooks.rooms {
        room.start(&shard, &mut started);
    }
    let accept = rt::spawn_joinable(accept_loop(Rc::clone(&shard), listener, false));
    // The shard's own port: its connections see this shard as a broker of its own.
    let own_accept =
        own_listener.map(|l| rt::spawn_joinable(accept_loop(Rc::clone(&shard), l, true)));
    while let Ok(mail) = inbox.recv_async().await {
        match mail {
            Mail::Request { frame, reply } => {
                let origin = Origin {
                    forwarded: true,
                    zero_copy: false,
                    conn: None,
                    encoded_here: false,
                };
                match shard.dispatch(frame, origin, None) {
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
                guard,
            } => match Conn::from_std(stream) {
                Ok(conn) => rt::spawn(serve_adopted(
                    Rc::clone(&shard),
                    conn,
                    hello_frame,
                    pending,
                    guard,
                )),
                Err(e) => log::warn!("shard {}: adopting a connection: {e}", shard.id),
            },
            Mail::Local { stream } => {
                let conn = Conn::Local(crate::io::local::LocalConn::new(stream));
                rt::spawn(serve_conn(Rc::clone(&shard), conn, Vec::new(), false));
            }
            Mail::Room(mail) => {
                let mut mail = Some(mail);
                for room in shard.broker.hooks.rooms {
                    mail = mail.and_then(|m| room.mail(&shard, m));
                }
                if mail.is_some() {
                    log::warn!("shard {}: mail no room took", shard.id);
                }
            }
            Mail::Push { conn, frame } => {
                shard.push_local(conn, frame);
            }
            Mail::Watch { topic, from, on } => shard.watch_mail(topic, from, on),
            Mail::Ready { topic, from } => shard.ready_mail(&topic, from),
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
    drop(own_accept);
    drop(started.keep);
    stop(&shard).await;
}

/// Accepts on `listener`; `own`: the shard's own port (`ports`), whose remoting
/// connections get the shard's view of the broker.
async fn accept_loop(shard: Rc<Shard>, listener: Listener, own: bool) {
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
            if shard.broker.tls.server.is_none() {
                rt::spawn(refuse_connection(conn));
            }
            // With TLS on the port, no plaintext answer (a TLS client would read it as a bad
            // record): the connection is closed as it is dropped.
            continue;
        }
        match shard.broker.tls.server.clone() {
            None => rt::spawn(serve_conn(Rc::clone(&shard), conn, Vec::new(), own)),
            Some(tls) => {
                let shard = Rc::clone(&shard);
                rt::spawn(async move {
                    let listener = if own {
                        format!("shard {} own port", shard.id)
                    } else {
                        format!("shard {} client port", shard.id)
                    };
                    let count = || count_tls_required(&shard);
                    if let Some((conn, pending)) = admit(Some(&tls), conn, &listener, count).await {
                        serve_conn(shard, conn, pending, own).await;
                    }
                });
            }
        }
    }
}

/// Counts a plaintext connection refused by an enforcing listener (with ACL on, among the
/// refusals by reason).
pub fn count_tls_required(shard: &Shard) {
    if let Some(acl) = &shard.broker.acl {
        acl.count(crate::acl::Reason::TlsRequired);
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
///
/// A TLS connection is handed off with its rustls session (`io::net::Handed`): serving it
/// where it was accepted would be simpler for this connection, but then the shard-aware
/// client's requests for the other shard's queues would each be forwarded through a mailbox
/// (and a replication link for another shard has to be served by that shard anyway, see
/// `ha::serve_new`). The session is all the TLS state there is between reads (plaintext
/// read so far travels as `pending`), and nothing is written to the socket while it moves.
async fn serve_conn(shard: Rc<Shard>, conn: Conn, pending: Vec<u8>, own: bool) {
    let svc = Rc::new(ShardService::new(&shard, own));
    match connection::serve(svc, conn.clone(), pending).await {
        ReadEnd::Closed => {}
        ReadEnd::HandOff {
            shard: target,
            hello_frame,
            pending,
            guard,
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
                guard,
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

async fn serve_adopted(
    shard: Rc<Shard>,
    conn: Conn,
    hello_frame: Vec<u8>,
    pending: Vec<u8>,
    guard: Option<crate::acl::GuardState>,
) {
    // The HELLO is answered by the shard that now owns the connection: put it back in front.
    let mut bytes = hello_frame;
    bytes.extend_from_slice(&pending);
    let svc = Rc::new(ShardService::new(&shard, false));
    let _ = connection::serve_resumed(svc, conn, bytes, guard).await;
}

/// The broker's frames on one connection of a shard: the shard, the connection's id, and
/// whether it came in on the shard's own port (its remoting requests name this shard's
/// queues by their ids in the shard's view, `net::remoting::view`).
struct ShardService(Rc<Shard>, u64, bool);

impl ShardService {
    fn new(shard: &Rc<Shard>, own: bool) -> Self {
        let id = shard.broker.next_conn.fetch_add(1, Ordering::Relaxed);
        ShardService(Rc::clone(shard), id, own)
    }

    fn origin(&self, encoded_here: bool) -> Origin {
        Origin {
            forwarded: false,
            // On the shard's own port records come back as bytes: the remoting edge
            // writes the shard's queue ids into them.
            zero_copy: !self.2,
            conn: Some(self.1),
            encoded_here,
        }
    }
}

impl Service for ShardService {
    fn frame_bytes_max(&self) -> usize {
        self.0.broker.rt.frame_bytes_max
    }

    fn send_wait(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.0.broker.config.wait_time_mills_in_send_queue)
    }

    fn handle(&self, frame: Vec<u8>, caller: &Caller) -> Outcome {
        self.0.dispatch(frame, self.origin(false), Some(caller))
    }

    fn handle_encoded_here(&self, frame: Vec<u8>, caller: &Caller) -> Outcome {
        self.0.dispatch(frame, self.origin(true), Some(caller))
    }

    fn acl(&self) -> Option<&Acl> {
        self.0.broker.acl.as_ref()
    }

    fn timing(&self) -> bool {
        self.0.metrics.borrow().is_on()
    }

    fn stage(&self, stage: crate::metrics::shard::Stage, micros: u64) {
        self.0.metrics.borrow_mut().stage(stage, micros);
    }

    fn served(
        &self,
        code: u16,
        status: ringmq_wire::code::Status,
        protocol: crate::metrics::shard::Protocol,
        since: crate::io::clock::Instant,
    ) {
        let micros = crate::broker::shard::ack::micros(since.elapsed());
        self.0
            .metrics
            .borrow_mut()
            .served(code, status, protocol, micros);
    }

    fn cluster_name(&self) -> Option<&str> {
        Some(&self.0.broker.config.broker_cluster_name)
    }

    fn attached(&self, out: &Rc<connection::OutQueue>) {
        self.0.conns.borrow_mut().insert(self.1, Rc::downgrade(out));
    }

    fn subscription(
        &self,
        group: &str,
        topic: &str,
    ) -> Option<(ringmq_wire::command::pull::FilterType, String)> {
        self.0
            .broker
            .lock_groups()
            .subscriptions(group)
            .into_iter()
            .find(|s| s.topic == topic)
            .map(|s| (s.filter_type, s.expression))
    }

    fn broker_name(&self) -> Option<String> {
        let name = &self.0.broker.config.broker_name;
        Some(match self.shard_view() {
            Some(v) => v.broker_name(name),
            None => name.clone(),
        })
    }

    fn shard_view(&self) -> Option<ShardView> {
        (self.2 && self.0.broker.shard_count > 1).then_some(ShardView {
            shard: self.0.id,
            shard_count: self.0.broker.shard_count,
        })
    }

    fn handoff_target(&self, frame: &[u8]) -> Option<u16> {
        let target = hello_target(frame)?;
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
        self.0.conns.borrow_mut().remove(&self.1);
        let channel = crate::broker::groups::Channel {
            shard: self.0.id,
            conn: self.1,
        };
        for room in self.0.broker.hooks.rooms {
            room.connection_closed(&self.0, channel);
        }
        self.0.broker.connections.fetch_sub(1, Ordering::Relaxed);
        self.0
            .counters()
            .connections
            .fetch_sub(1, Ordering::Relaxed);
    }
}
/// Graceful stop of one shard: wake parked pulls (they answer now), wait for in-flight work
/// (bounded), then flush, checkpoint, save offsets, close the store; then what the rooms do
/// once a shard stopped (shard 0 unregisters the broker from every name server).
async fn stop(shard: &Rc<Shard>) {
    shard.wake_all();
    for _ in 0..300 {
        if shard.parked_count.get() == 0 && !shard.flusher.pending() {
            break;
        }
        rt::sleep(Duration::from_millis(10)).await;
    }
    rt::clear_idle_work();
    shard.index_pending();
    shard.flush_index();
    let closed = shard.store.borrow_mut().shutdown();
    match closed {
        Ok(()) => shard
            .flusher
            .note_synced(shard.store.borrow().synced_offset()),
        Err(e) => log::error!("shard {}: closing the store: {e}", shard.id),
    }
    // What rooms save after the offsets is taken before them (the POP watermark: see
    // `Room::offsets_saving`); the log is durable through both now.
    let after = shard.offsets_saving();
    let persisted = shard.offsets.borrow_mut().persist();
    match persisted {
        Ok(()) => {
            for later in after {
                later.await;
            }
        }
        Err(e) => log::error!("shard {}: saving consumer offsets: {e}", shard.id),
    }
    for room in shard.broker.hooks.rooms {
        if let Some(later) = room.stopped(shard) {
            later.await;
        }
    }
    // Give connection writers a moment to send the last acknowledgements.
    rt::sleep(Duration::from_millis(50)).await;
    log::info!("shard {}: stopped", shard.id);
}
