//! Replication links of a shard (the I/O around `crate::ha`).
//!
//! Master: every shard accepts on the HA port (SO_REUSEPORT); an HA_SUBSCRIBE for another
//! shard is handed to that shard. The shard answers where streaming starts, then pushes whole
//! log entries (HA_TRANSFER, spliced from the segment file; on a TLS link read from it and
//! encrypted) as they are appended, a heartbeat every `haSendHeartbeatInterval` when idle,
//! and reads HA_ACKs that wake SYNC_MASTER sends. On a master with `tls.server.mode` set,
//! a link is admitted by `net::admit` first (TLS, or plaintext refused when enforcing).
//!
//! Slave: every shard follows the same shard of its master: subscribe with its log end and
//! epochs, truncate if the master says it is ahead or past the point where their epochs
//! agree, then append each transfer verbatim (recording the epoch a transfer starts) and
//! acknowledge it (heartbeats too), taking the master's confirmOffset as its own read cap.
//! Links are re-established with a backoff.
//!
//! Epochs (controller mode; empty lists otherwise, and then nothing here changes): a
//! transfer never crosses an epoch boundary of the master's log and names its epoch.
//!
//! Either end closes a link it has heard nothing on for `haHousekeepingInterval` (as
//! RocketMQ does): a half-open connection (peer host gone, middlebox state dropped) would
//! otherwise hold a slave away from its master forever, and keep a dead slave counted.

use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::{Decode, Empty, Encode};
use ringmq_wire::command::route::TopicConfigTable;
use ringmq_wire::command::{
    ConsumerOffsetTable, GetAllConsumerOffsetRequest, HaAck, HaEpochEntry, HaSubscribeRequest,
    HaSubscribeResponse, HaTransfer, Response, CONFIRM_NONE,
};
use ringmq_wire::frame::{self, Flags};

use crate::broker::shard::hooks::{Room, RoomMail, Started};
use crate::broker::shard::Shard;
use crate::broker::Broker;
use crate::ha::master::{join_by_epochs, transfer_span, Join};
use crate::ha::slave::{on_push, OnPush, Push};
use crate::io::net::{Conn, FileRun, Listener, SplicePipe};
use crate::io::rt;
use crate::limits;
use crate::net::admit::admit;
use crate::net::frames::FrameReader;
use crate::net::reply::Reply;
use crate::shard::mailbox::Mail;
use crate::store::commitlog::shard_base;
use crate::store::epoch::EpochEntry;

/// A replication link whose HA_SUBSCRIBE names another shard, handed to it (`Mail::Room`).
struct AdoptHa {
    stream: crate::io::net::Handed,
    subscribe: Vec<u8>,
    pending: Vec<u8>,
}

/// Replication's hooks: a master's shards serve the HA port, a slave's (and every shard in
/// controller mode, which may follow) follow their master and copy its offsets and topics.
#[derive(Debug)]
pub struct HaRoom;

/// The room, for the broker's list.
pub static ROOM: HaRoom = HaRoom;

impl Room for HaRoom {
    fn name(&self) -> &'static str {
        "replication"
    }

    fn start(&self, shard: &Rc<Shard>, started: &mut Started) {
        if let Some(l) = started.ha_listener.take() {
            started
                .keep
                .push(rt::spawn_joinable(accept_loop(Rc::clone(shard), l)));
        }
        let b = &shard.broker;
        if b.config.controller.enable || !b.config.broker_role.is_master() {
            rt::spawn(follow_loop(Rc::clone(shard)));
            rt::spawn(sync_offsets_loop(Rc::clone(shard)));
            if shard.id == 0 {
                rt::spawn(sync_from_master(Rc::clone(shard)));
            }
        }
    }

    fn mail(&self, shard: &Rc<Shard>, mail: RoomMail) -> Option<RoomMail> {
        let adopt = match mail.downcast::<AdoptHa>() {
            Ok(adopt) => adopt,
            Err(other) => return Some(other),
        };
        let AdoptHa {
            stream,
            subscribe,
            pending,
        } = *adopt;
        match Conn::from_std(stream) {
            Ok(conn) => rt::spawn(serve_adopted(Rc::clone(shard), conn, subscribe, pending)),
            Err(e) => log::warn!("shard {}: adopting a replication link: {e}", shard.id),
        }
        None
    }
}

/// Wait between attempts to reach the master.
pub const RECONNECT_MS: u64 = 1_000;

/// Accepts replication links on this shard's HA listener.
pub async fn accept_loop(shard: Rc<Shard>, listener: Listener) {
    loop {
        match listener.accept().await {
            Ok((conn, peer)) => {
                if shard.broker.is_shutting_down() {
                    continue;
                }
                rt::spawn(serve_new(Rc::clone(&shard), conn, peer));
            }
            Err(e) => {
                log::warn!("shard {}: HA accept: {e}", shard.id);
                rt::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

async fn serve_new(shard: Rc<Shard>, conn: Conn, peer: SocketAddr) {
    let (conn, pending) = match shard.broker.tls.server.clone() {
        None => (conn, Vec::new()),
        Some(tls) => {
            let listener = format!("shard {} HA port", shard.id);
            let count = || crate::broker::shard::run::count_tls_required(&shard);
            match admit(Some(&tls), conn, &listener, count).await {
                Some(admitted) => admitted,
                None => return,
            }
        }
    };
    let mut rd = FrameReader::new(limits::FRAME_BYTES_MAX, pending);
    let Ok(Some(mut first)) = rd.next(&conn).await else {
        return;
    };
    if shard.broker.acl.is_none() && ringmq_wire::auth::strip(&mut first).is_err() {
        log::warn!("replication link from {peer}: its HA_SUBSCRIBE has a bad trailer");
        return;
    }
    if let Some(acl) = &shard.broker.acl {
        // Replication needs an admin account (the slave's innerAccessKey); the link is
        // authenticated once, by its HA_SUBSCRIBE.
        let now = u64::try_from(crate::io::clock::now_ms()).unwrap_or(0);
        let verdict = acl
            .guard(peer.ip())
            .native(&mut first, now)
            .and_then(|caller| {
                let request = frame::parse(&first).ok().and_then(|f| {
                    ringmq_wire::command::Request::from_frame(&f)
                        .ok()
                        .map(|r| (r, f.body))
                });
                match request {
                    Some((r, body)) => acl.authorize(&caller, &r, body),
                    // Not a request at all: serve_slave answers it as malformed.
                    None => Ok(()),
                }
            });
        if let Err(refusal) = verdict {
            log::warn!("replication link from {peer} refused: {}", refusal.remark);
            let id = frame::peek(&first).map_or(0, |p| p.request_id);
            refuse(&conn, id, Status::NoPermission, refusal.remark).await;
            return;
        }
    }
    let target = frame::parse(&first)
        .ok()
        .and_then(|f| HaSubscribeRequest::decode(f.header).ok())
        .map(|r| r.shard_id);
    match target {
        Some(t) if t != shard.id && t < shard.broker.shard_count => {
            let Ok(stream) = conn.to_std() else {
                return;
            };
            drop(conn);
            let mail = Mail::Room(Box::new(AdoptHa {
                stream,
                subscribe: first,
                pending: rd.into_pending(),
            }));
            if shard.broker.mailboxes[usize::from(t)]
                .try_send(mail)
                .is_err()
            {
                log::warn!(
                    "shard {}: shard {t} did not take a replication link",
                    shard.id
                );
            }
        }
        _ => serve_slave(shard, conn, first, rd, peer).await,
    }
}

/// Adopts a link handed over by another shard.
pub async fn serve_adopted(shard: Rc<Shard>, conn: Conn, subscribe: Vec<u8>, pending: Vec<u8>) {
    let peer = conn
        .peer_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    let rd = FrameReader::new(limits::FRAME_BYTES_MAX, pending);
    serve_slave(shard, conn, subscribe, rd, peer).await;
}

async fn serve_slave(
    shard: Rc<Shard>,
    conn: Conn,
    first: Vec<u8>,
    mut rd: FrameReader,
    peer: SocketAddr,
) {
    let (request_id, req) = match frame::parse(&first) {
        Ok(f) if f.request_code().ok() == Some(RequestCode::HaSubscribe) => {
            match HaSubscribeRequest::decode(f.header) {
                Ok(r) => (f.request_id, r),
                Err(e) => {
                    return refuse(&conn, f.request_id, Status::MalformedRequest, e.to_string())
                        .await
                }
            }
        }
        Ok(f) => {
            return refuse(
                &conn,
                f.request_id,
                Status::RequestCodeNotSupported,
                "the HA port takes HA_SUBSCRIBE only".into(),
            )
            .await
        }
        Err(_) => return,
    };
    let b = &shard.broker;
    if !b.is_master() {
        return refuse(
            &conn,
            request_id,
            Status::ServiceNotAvailable,
            "this broker is a slave".into(),
        )
        .await;
    }
    if req.shard_count != b.shard_count {
        let why = format!(
            "shard count mismatch: this master has {} shards, slave {} has {}; master and slave must run the same --shards",
            b.shard_count, req.broker_name, req.shard_count
        );
        log::error!("shard {}: refused slave {peer}: {why}", shard.id);
        return refuse(&conn, request_id, Status::MessageIllegal, why).await;
    }
    let (master_min, master_end, master_epochs) = {
        let s = shard.store.borrow();
        (s.min_offset(), s.write_offset(), s.epochs().to_vec())
    };
    let base = shard_base(shard.id);
    let slave_end = req.max_physical_offset.max(base);
    let slave_epochs: Vec<EpochEntry> = req
        .epochs
        .iter()
        .map(|e| EpochEntry {
            epoch: e.epoch,
            start_offset: e.start_offset,
        })
        .collect();
    let joined = join_by_epochs(
        base,
        slave_end,
        &slave_epochs,
        master_min,
        master_end,
        &master_epochs,
    );
    let start = match joined {
        Join::StartAt { start } => start,
        Join::TruncateTo { to } => to,
        Join::Refuse { reason } => {
            log::error!("shard {}: refused slave {peer}: {reason}", shard.id);
            return refuse(&conn, request_id, Status::MessageIllegal, reason).await;
        }
    };
    let resp = Reply::ok(HaSubscribeResponse {
        master_max_physical_offset: master_end,
        start_physical_offset: start,
    });
    if send_reply(&conn, request_id, resp).await.is_err() {
        return;
    }
    log::info!(
        "shard {}: slave {} (id {}) at {peer} subscribed at {slave_end}, streaming from {start} (log end {master_end})",
        shard.id,
        req.broker_name,
        req.broker_id
    );
    let id = shard
        .replicas
        .borrow_mut()
        .add(req.broker_id, start, master_end, Broker::now_ms());
    let closed = Rc::new(Cell::new(false));
    let housekeeping_ms = b.config.ha_housekeeping_interval_ms;
    let acks = {
        let shard = Rc::clone(&shard);
        let conn = conn.clone();
        let closed = Rc::clone(&closed);
        rt::spawn_joinable(async move {
            loop {
                let f = match rt::timeout(Duration::from_millis(housekeeping_ms), rd.next(&conn))
                    .await
                {
                    Some(Ok(Some(f))) => f,
                    Some(_) => break,
                    None => {
                        log::warn!(
                            "shard {}: nothing from the slave at {peer} for {housekeeping_ms} ms (haHousekeepingInterval): closing the link",
                            shard.id
                        );
                        // Also fails a push blocked on a full socket buffer.
                        conn.shutdown().await;
                        break;
                    }
                };
                let Ok(parsed) = frame::parse(&f) else { break };
                if parsed.request_code().ok() != Some(RequestCode::HaAck) {
                    continue;
                }
                if let Ok(ack) = HaAck::decode(parsed.header) {
                    let end = shard.store.borrow().write_offset();
                    shard.replicas.borrow_mut().ack(
                        id,
                        ack.ack_physical_offset,
                        end,
                        Broker::now_ms(),
                    );
                    shard.ha_acked.notify(usize::MAX);
                    crate::broker::shard::ack::update_confirm(&shard);
                }
            }
            closed.set(true);
            shard.log_appended.notify(usize::MAX);
        })
    };
    let result = push_loop(&shard, &conn, start, &closed).await;
    closed.set(true);
    shard.replicas.borrow_mut().remove(id);
    shard.ha_acked.notify(usize::MAX);
    drop(acks);
    match result {
        Ok(()) => log::info!("shard {}: slave at {peer} disconnected", shard.id),
        Err(e) => log::warn!("shard {}: replication to {peer} stopped: {e}", shard.id),
    }
}

async fn push_loop(
    shard: &Rc<Shard>,
    conn: &Conn,
    mut cursor: u64,
    closed: &Cell<bool>,
) -> Result<(), String> {
    // No splicing on the epoll fallback loop (see `Shard::splice_ok`): copy instead. Nor
    // through TLS: `send_transfer` reads the log runs and encrypts them.
    let pipe = if shard.splice_ok && !conn.is_tls() {
        SplicePipe::new().await.ok()
    } else {
        None
    };
    let mut request_id = 0u64;
    // `haTransferBatchSize` (validated to fit a frame; a record larger than it goes alone).
    let batch_bytes = (shard.broker.config.ha_transfer_batch_size_bytes as u64)
        .clamp(1, limits::HA_TRANSFER_BATCH_BYTES_MAX as u64);
    // The confirmOffset the slave last heard (it hears a change at once, in a heartbeat
    // when there is nothing to ship).
    let mut sent_confirm = None;
    while !closed.get() && !shard.broker.is_shutting_down() {
        let listener = shard.log_appended.listen();
        let (end, span, stop) = {
            let store = shard.store.borrow();
            let end = store.write_offset();
            let (span, stop) = transfer_span(store.epochs(), cursor, end);
            (end, span, stop)
        };
        request_id += 1;
        let confirm = shard.confirm.get();
        let header = HaTransfer {
            shard_id: shard.id,
            physical_offset: cursor,
            master_max_physical_offset: end,
            epoch: span.epoch,
            epoch_start_offset: span.start_offset,
            confirm_offset: confirm.unwrap_or(CONFIRM_NONE),
        };
        if cursor >= end {
            let heartbeat_ms = shard.broker.config.ha_send_heartbeat_interval_ms;
            let idle = confirm == sent_confirm
                && rt::timeout(Duration::from_millis(heartbeat_ms), listener)
                    .await
                    .is_none();
            if idle || confirm != sent_confirm {
                // Sent the confirmOffset of when the heartbeat was built: a later change
                // wakes this loop again (`Shard::set_confirm`).
                send_transfer(shard, conn, request_id, &header, cursor, 0, pipe.as_ref()).await?;
                sent_confirm = confirm;
            }
            continue;
        }
        let range = shard
            .store
            .borrow()
            .ship_range(cursor, stop, batch_bytes)
            .map_err(|e| e.to_string())?;
        sent_confirm = confirm;
        send_transfer(
            shard,
            conn,
            request_id,
            &header,
            cursor,
            range.send_len as usize,
            pipe.as_ref(),
        )
        .await?;
        cursor = range.end;
    }
    Ok(())
}

/// Sends one HA_TRANSFER: prefix and header, then `len` log bytes from `at`, spliced from
/// the segment file when a pipe is available, copied otherwise.
async fn send_transfer(
    shard: &Shard,
    conn: &Conn,
    request_id: u64,
    header: &HaTransfer,
    at: u64,
    len: usize,
    pipe: Option<&SplicePipe>,
) -> Result<(), String> {
    let hdr = header.to_vec().map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(frame::PREFIX_BYTES + hdr.len());
    frame::encode_prefix(
        &mut out,
        RequestCode::HaTransfer,
        Flags::ONEWAY,
        request_id,
        hdr.len(),
        len,
    )
    .map_err(|e| e.to_string())?;
    out.extend_from_slice(&hdr);
    if len == 0 {
        let (res, _) = conn.write_all(out).await;
        return res.map_err(|e| e.to_string());
    }
    // Small transfers are copied from the mapping like small pulls: splicing costs two
    // io_uring operations that the kernel hands to worker threads, more than the copy. A
    // transfer with a page not in memory (a slave catching up on old bytes) is spliced, or
    // read with io_uring on TLS, whatever its size: its wait for the disk then falls on a
    // worker, not on the shard's thread.
    let splice = len >= crate::broker::shard::HA_SPLICE_MIN_BYTES
        || !shard.store.borrow().resident(at, len as u64);
    match pipe {
        _ if conn.is_tls() && shard.splice_ok && splice => {
            let (file, off) = shard.segment_file(at).map_err(|e| e.to_string())?;
            let (res, _) = conn.write_all(out).await;
            res.map_err(|e| e.to_string())?;
            conn.write_file(&file, off, len)
                .await
                .map_err(|e| e.to_string())
        }
        Some(p) if splice => {
            // The prefix and header ride in the pipe ahead of the bytes: one socket send.
            let (file, offset) = shard.segment_file(at).map_err(|e| e.to_string())?;
            let run = FileRun {
                file: &file,
                offset,
                len,
            };
            p.send(out, &[run], conn).await.0.map_err(|e| e.to_string())
        }
        _ => {
            let start = out.len();
            out.resize(start + len, 0);
            shard
                .store
                .borrow()
                .read(at, &mut out[start..])
                .map_err(|e| e.to_string())?;
            let (res, _) = conn.write_all(out).await;
            res.map_err(|e| e.to_string())
        }
    }
}

async fn refuse(conn: &Conn, request_id: u64, status: Status, remark: String) {
    let _ = send_reply(conn, request_id, Reply::error(status, remark)).await;
}

async fn send_reply(conn: &Conn, request_id: u64, reply: Reply) -> std::io::Result<()> {
    let mut out = Vec::new();
    let body = match &reply.body {
        crate::net::reply::Body::Bytes(b) => b.as_slice(),
        _ => &[],
    };
    frame::encode_prefix(
        &mut out,
        reply.status,
        Flags::RESPONSE,
        request_id,
        reply.header.len(),
        body.len(),
    )
    .map_err(|e| std::io::Error::other(e.to_string()))?;
    out.extend_from_slice(&reply.header);
    out.extend_from_slice(body);
    let (res, _) = conn.write_all(out).await;
    res
}

/// The slave shard's loop: follow the master's same shard, forever (until shutdown).
pub async fn follow_loop(shard: Rc<Shard>) {
    let mut last_error = String::new();
    let controller_mode = shard.broker.config.controller.enable;
    while !shard.broker.is_shutting_down() {
        let changed = shard.broker.role.changed.listen();
        let addr = match shard.broker.master_ha_addr() {
            Some(_) if shard.broker.is_master() => None,
            Some(a) if controller_mode && Some(a) == shard.broker.ha_addr => None,
            other => other,
        };
        let Some(addr) = addr else {
            // Controller mode: wait for a role change rather than a fixed pause.
            let _ = rt::timeout(Duration::from_millis(RECONNECT_MS), changed).await;
            continue;
        };
        // A role or master change ends the link: the shard stops appending at once and
        // follows (or leads) again.
        let outcome = if controller_mode {
            let follow = std::pin::pin!(follow(&shard, addr));
            let changed = std::pin::pin!(changed);
            match rt::first_of(follow, changed).await {
                Some(r) => r,
                None => Err("the master changed".to_string()),
            }
        } else {
            follow(&shard, addr).await
        };
        match outcome {
            Ok(()) => last_error.clear(),
            Err(e) => {
                if e != last_error {
                    log::warn!(
                        "shard {}: replication from {addr}: {e}; retrying every {RECONNECT_MS} ms",
                        shard.id
                    );
                    last_error = e;
                }
            }
        }
        if controller_mode {
            // Failover: the next master may already be named; try again soon, or at once
            // when the controllers' answer changes.
            let changed = shard.broker.role.changed.listen();
            let _ = rt::timeout(Duration::from_millis(CONTROLLER_RECONNECT_MS), changed).await;
        } else {
            rt::sleep(Duration::from_millis(RECONNECT_MS)).await;
        }
    }
}

/// Controller mode: pause between attempts to reach the master.
pub const CONTROLLER_RECONNECT_MS: u64 = 100;

async fn follow(shard: &Rc<Shard>, addr: SocketAddr) -> Result<(), String> {
    let conn = Conn::connect_with(addr, shard.broker.tls.client.as_deref())
        .await
        .map_err(|e| format!("connecting: {e}"))?;
    let b = &shard.broker;
    let (local_end, epochs) = {
        let store = shard.store.borrow();
        let epochs = store
            .epochs()
            .iter()
            .map(|e| HaEpochEntry {
                epoch: e.epoch,
                start_offset: e.start_offset,
            })
            .collect();
        (store.write_offset(), epochs)
    };
    let sub = HaSubscribeRequest {
        broker_name: b.config.broker_name.clone(),
        broker_id: b.config.broker_id,
        shard_id: shard.id,
        shard_count: b.shard_count,
        max_physical_offset: local_end,
        epochs,
    };
    let mut out = Vec::new();
    frame::encode_request(&mut out, RequestCode::HaSubscribe, false, 1, &sub, &[])
        .map_err(|e| e.to_string())?;
    if let Some(creds) = &b.inner_credentials {
        let now = u64::try_from(crate::io::clock::now_ms()).unwrap_or(0);
        crate::acl::signer(creds)
            .sign(&mut out, now)
            .map_err(|e| e.to_string())?;
    }
    let (res, _) = conn.write_all(out).await;
    res.map_err(|e| e.to_string())?;
    let mut rd = FrameReader::new(limits::FRAME_BYTES_MAX, Vec::new());
    let housekeeping_ms = b.config.ha_housekeeping_interval_ms;
    let first = next_from_master(&conn, &mut rd, housekeeping_ms).await?;
    let f = frame::parse(&first).map_err(|e| e.to_string())?;
    let status = f.status().map_err(|e| e.to_string())?;
    let resp = Response::<HaSubscribeResponse>::decode(f.header).map_err(|e| e.to_string())?;
    let Some(fields) = resp.fields.filter(|_| status == Status::Success) else {
        return Err(format!("master refused: {} {}", status.name(), resp.remark));
    };
    let start = fields.start_physical_offset;
    if start < local_end {
        if local_end > fields.master_max_physical_offset {
            log::warn!(
                "shard {}: this slave is ahead of its master ({local_end} > {start}, an unclean master restart): truncating {} bytes",
                shard.id,
                local_end - start
            );
        } else {
            log::warn!(
                "shard {}: this slave's log leaves its master's at {start} (their epochs agree up to there; its log ends at {local_end}): truncating {} bytes",
                shard.id,
                local_end - start
            );
        }
        shard.truncate_log(start).map_err(|e| {
            if e.is_fatal() {
                crate::fail_stop(&format!("shard {}: truncating: {e}", shard.id));
            }
            e.to_string()
        })?;
    } else if start > local_end {
        shard
            .store
            .borrow_mut()
            .start_empty_at(start)
            .map_err(|e| e.to_string())?;
    }
    log::info!(
        "shard {}: following master {addr} from {start} (master log end {})",
        shard.id,
        fields.master_max_physical_offset
    );
    let mut request_id = 1u64;
    loop {
        let bytes = next_from_master(&conn, &mut rd, housekeeping_ms).await?;
        let f = frame::parse(&bytes).map_err(|e| e.to_string())?;
        if f.request_code().ok() != Some(RequestCode::HaTransfer) {
            continue;
        }
        let t = HaTransfer::decode(f.header).map_err(|e| e.to_string())?;
        let (end, last) = {
            let store = shard.store.borrow();
            (store.write_offset(), store.epochs().last().copied())
        };
        let push = Push {
            offset: t.physical_offset,
            end: t.master_max_physical_offset,
            master_end: t.master_max_physical_offset,
            epoch: t.epoch,
            epoch_start: t.epoch_start_offset,
        };
        shard.master_end.set(t.master_max_physical_offset);
        let confirm = Some(t.confirm_offset).filter(|&c| c != CONFIRM_NONE);
        match on_push(&push, f.body.len(), end, last) {
            OnPush::Append { new_epoch } => {
                if b.is_master() {
                    // Promoted: not one more byte of the old master's stream.
                    return Err("this broker became master".to_string());
                }
                let mut store = shard.store.borrow_mut();
                let mut res = Ok(0);
                if new_epoch {
                    res = store
                        .record_epoch_at(t.epoch, t.epoch_start_offset)
                        .map(|()| 0);
                }
                if res.is_ok() {
                    res = store.append_replicated(t.physical_offset, f.body, Broker::now_ms());
                }
                drop(store);
                if let Err(e) = res {
                    if e.is_fatal() {
                        crate::fail_stop(&format!("shard {}: replicated append: {e}", shard.id));
                    }
                    return Err(format!("appending replicated bytes: {e}"));
                }
                shard.confirm.set(confirm);
                shard.wake_all();
            }
            OnPush::Heartbeat => shard.set_confirm(confirm),
            OnPush::Resync { reason } => return Err(reason),
        }
        request_id += 1;
        let ack = HaAck {
            shard_id: shard.id,
            ack_physical_offset: shard.store.borrow().write_offset(),
        };
        let mut out = Vec::new();
        frame::encode_request(&mut out, RequestCode::HaAck, true, request_id, &ack, &[])
            .map_err(|e| e.to_string())?;
        let (res, _) = conn.write_all(out).await;
        res.map_err(|e| e.to_string())?;
    }
}

/// The next frame from the master; an error when the link closed or stayed silent for
/// `housekeeping_ms` (the master heartbeats an idle link well within that).
async fn next_from_master(
    conn: &Conn,
    rd: &mut FrameReader,
    housekeeping_ms: u64,
) -> Result<Vec<u8>, String> {
    rt::timeout(Duration::from_millis(housekeeping_ms), rd.next(conn))
        .await
        .ok_or_else(|| {
            format!("nothing from the master for {housekeeping_ms} ms (haHousekeepingInterval)")
        })?
        .map_err(|e| e.to_string())?
        .ok_or_else(|| "the master closed the link".to_string())
}

/// How often a slave's shard copies its master's consumer offsets.
pub const OFFSET_SYNC_MS: u64 = 5_000;

/// Slave role: copy the master's committed consumer offsets for this shard's queues, so a
/// consumer that moves to the slave (master down) continues where the group was.
pub async fn sync_offsets_loop(shard: Rc<Shard>) {
    while !shard.broker.is_shutting_down() {
        rt::sleep(Duration::from_millis(OFFSET_SYNC_MS)).await;
        if shard.broker.is_master() {
            continue;
        }
        let Some(addr) = shard.broker.master_broker_addr() else {
            continue;
        };
        let req = GetAllConsumerOffsetRequest { shard_id: shard.id };
        let Ok((Status::Success, _, body)) = crate::net::call::call(
            addr,
            RequestCode::GetAllConsumerOffset,
            &req,
            &[],
            shard.broker.inner_credentials.as_ref(),
            shard.broker.tls.client.as_deref(),
        )
        .await
        else {
            continue;
        };
        let Ok(table) = ConsumerOffsetTable::decode(&body) else {
            continue;
        };
        let mut offsets = shard.offsets.borrow_mut();
        for e in table.entries {
            offsets.set(&e.consumer_group, &e.topic, e.queue_id, e.offset);
        }
    }
}

/// How often a slave copies its master's topic table.
pub const TOPIC_SYNC_MS: u64 = 3_000;

/// Slave role, shard 0: copy the master's topic table every `TOPIC_SYNC_MS`, so the slave
/// can serve pulls for the master's topics.
pub async fn sync_from_master(shard: Rc<Shard>) {
    let mut last_error = String::new();
    while !shard.broker.is_shutting_down() {
        let addr = match shard.broker.master_broker_addr() {
            // A master (controller mode) keeps its own table.
            Some(_) if shard.broker.is_master() => None,
            other => other,
        };
        if let Some(addr) = addr {
            match crate::net::call::call(
                addr,
                RequestCode::GetAllTopicConfig,
                &Empty,
                &[],
                shard.broker.inner_credentials.as_ref(),
                shard.broker.tls.client.as_deref(),
            )
            .await
            {
                Ok((Status::Success, _, body)) => match TopicConfigTable::decode(&body) {
                    Ok(t) => {
                        last_error.clear();
                        match shard.broker.topics.replace_all(t.topics, t.data_version) {
                            Ok(true) => log::info!("topic table synced from master {addr}"),
                            Ok(false) => {}
                            Err(e) => log::warn!("saving the synced topic table: {e}"),
                        }
                    }
                    Err(e) => log::warn!("topic table from {addr}: {e}"),
                },
                Ok((status, _, _)) => log::warn!("topic table from {addr}: {}", status.name()),
                Err(e) => {
                    if e != last_error {
                        log::warn!("topic table from master {addr}: {e}");
                        last_error = e;
                    }
                }
            }
        }
        rt::sleep(Duration::from_millis(TOPIC_SYNC_MS)).await;
    }
}
