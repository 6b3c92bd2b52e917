//! Registration with the name servers: shard 0 sends REGISTER_BROKER (topics with queue
//! counts, permissions and shard placement; role, shard count, address) to every name server
//! every `registerNameServerPeriod` and at once after a topic change. Also the small async
//! request/response call used for it, and reading the shard a HELLO asks for.

use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::{Decode, Empty, Encode};
use ringmq_wire::command::route::{perm, BrokerRegistration, TopicConfigTable};
use ringmq_wire::command::HelloRequest;
use ringmq_wire::command::{RegisterBrokerResponse, Response};
use ringmq_wire::frame;

use crate::broker::shard::Shard;
use crate::io::net::Conn;
use crate::io::rt;

/// How long one name server call may take.
pub const CALL_TIMEOUT_MS: u64 = 3_000;

/// The shard a HELLO frame asks for, if the frame is a HELLO with a preference.
pub fn hello_target(frame_bytes: &[u8]) -> Option<u16> {
    let f = frame::parse(frame_bytes).ok()?;
    if f.request_code().ok()? != RequestCode::Hello {
        return None;
    }
    HelloRequest::decode(f.header).ok()?.preferred_shard
}

/// Shard 0's registration loop.
pub async fn run(shard: Rc<Shard>) {
    let period = Duration::from_millis(shard.broker.config.register_name_server_period_ms.max(100));
    loop {
        if shard.broker.is_shutting_down() {
            return;
        }
        // Listen before registering: a topic change notified while the registration is in
        // flight must start another one at once, not wait for the period.
        let changed = shard.broker.topics_changed.listen();
        register_all(&shard).await;
        // A slave that has not learned its master yet asks again soon.
        let wait = if shard.broker.master_broker_addr().is_none() && !shard.broker.is_master() {
            period.min(Duration::from_millis(1_000))
        } else {
            period
        };
        rt::timeout(wait, changed).await;
    }
}

/// RocketMQ's default topic `TBW102`, registered (not stored) while topics are created on
/// first send: a RocketMQ producer with no route for its topic takes this route's brokers,
/// as it does with RocketMQ's brokers, and sends with `defaultTopic=TBW102`.
fn auto_create_marker(shard: &Shard) -> Option<ringmq_wire::command::route::TopicConfig> {
    let b = &shard.broker;
    if !b.live.auto_create_topic() || !b.is_master() {
        return None;
    }
    let queues = b.config.default_topic_queue_nums;
    Some(crate::broker::topics::make_config(
        AUTO_CREATE_TOPIC,
        queues,
        queues,
        perm::READ_WRITE | perm::INHERIT,
        Default::default(),
        b.shard_count,
    ))
}

/// RocketMQ's `TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC`.
pub const AUTO_CREATE_TOPIC: &str = "TBW102";

/// Registers with every configured name server once.
pub async fn register_all(shard: &Shard) {
    let b = &shard.broker;
    if b.config.namesrv_addr.is_empty() {
        return;
    }
    let table = b.topics.snapshot();
    let reg = BrokerRegistration {
        cluster: b.config.broker_cluster_name.clone(),
        broker_name: b.config.broker_name.clone(),
        broker_id: b.registered_id(),
        address: b.addr.to_string(),
        ha_address: b.ha_addr.map(|a| a.to_string()).unwrap_or_default(),
        role: b.effective_role(),
        shard_count: b.shard_count,
        version: crate::VERSION.to_string(),
        heartbeat_timeout_ms: 120_000,
        data_version: table.version,
        // The broker's own permission limits every topic's (read-only broker: no writes).
        topics: table
            .topics
            .values()
            .map(|t| {
                let mut t = t.clone();
                t.perm &= b.live.permission() | !(perm::READ | perm::WRITE);
                t
            })
            .chain(auto_create_marker(shard))
            .collect(),
    };
    let body = match reg.to_vec() {
        Ok(b) => b,
        Err(e) => {
            log::error!("encoding the broker registration: {e}");
            return;
        }
    };
    for ns in &b.config.namesrv_addr {
        let Ok(addr) = ns.parse::<SocketAddr>() else {
            log::warn!("name server address {ns} is not host:port");
            continue;
        };
        match call(
            addr,
            RequestCode::RegisterBroker,
            &Empty,
            &body,
            b.inner_credentials.as_ref(),
            b.tls.client.as_deref(),
        )
        .await
        {
            Ok((Status::Success, header, _)) => {
                log::debug!("registered with name server {ns}");
                b.registered
                    .store(true, std::sync::atomic::Ordering::SeqCst);
                if !b.is_master() && !b.config.controller.enable {
                    learn_master(b, &header);
                }
            }
            Ok((status, header, _)) => {
                let remark = ringmq_wire::command::read_remark(&header)
                    .map(|(r, _)| r.to_string())
                    .unwrap_or_default();
                let refusal = format!(
                    "name server {ns} refused the registration: {} {remark}",
                    status.name()
                );
                log::warn!("{refusal}");
                *b.registration_refused
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()) = Some(refusal);
            }
            Err(e) => log::warn!("registering with name server {ns}: {e}"),
        }
    }
}

/// How long a stopping broker waits for each name server to take its unregistration.
pub const UNREGISTER_TIMEOUT_MS: u64 = 1_000;

/// Tells every name server this broker is going (UNREGISTER_BROKER), so clients stop
/// routing to it at their next route refresh instead of after the 120 s expiry. A name
/// server that does not answer within `UNREGISTER_TIMEOUT_MS` expires the broker as usual.
pub async fn unregister_all(shard: &Shard) {
    let b = &shard.broker;
    let h = ringmq_wire::command::UnregisterBrokerRequest {
        cluster: b.config.broker_cluster_name.clone(),
        broker_name: b.config.broker_name.clone(),
        broker_id: b.config.broker_id,
        address: b.addr.to_string(),
    };
    for ns in &b.config.namesrv_addr {
        let Ok(addr) = ns.parse::<SocketAddr>() else {
            continue;
        };
        let answered = rt::timeout(
            Duration::from_millis(UNREGISTER_TIMEOUT_MS),
            call(
                addr,
                RequestCode::UnregisterBroker,
                &h,
                &[],
                b.inner_credentials.as_ref(),
                b.tls.client.as_deref(),
            ),
        )
        .await;
        match answered {
            Some(Ok((Status::Success, _, _))) => {
                log::info!("unregistered from name server {ns}")
            }
            Some(Ok((status, _, _))) => log::warn!(
                "name server {ns} refused the unregistration: {}",
                status.name()
            ),
            Some(Err(e)) => log::warn!("unregistering from name server {ns}: {e}"),
            None => log::warn!(
                "name server {ns} did not take the unregistration within                  {UNREGISTER_TIMEOUT_MS} ms; it expires this broker later"
            ),
        }
    }
}

/// A slave learns its master's addresses from the registration answer (unless
/// `haMasterAddress` pins the HA address).
fn learn_master(b: &crate::broker::Broker, header: &[u8]) {
    let Ok(resp) = Response::<RegisterBrokerResponse>::decode(header) else {
        return;
    };
    let Some(f) = resp.fields else {
        return;
    };
    let mut m = b.master.lock().unwrap_or_else(|p| p.into_inner());
    if let Ok(addr) = f.master_address.parse::<SocketAddr>() {
        if m.broker != Some(addr) {
            log::info!("master broker is {addr}");
            m.broker = Some(addr);
        }
    }
    if b.config.ha_master_address.is_none() {
        if let Ok(addr) = f.ha_master_address.parse::<SocketAddr>() {
            if m.ha != Some(addr) {
                log::info!("master HA address is {addr}");
                m.ha = Some(addr);
            }
        }
    }
}

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
            match call(
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

/// How often a slave copies its master's topic table.
pub const TOPIC_SYNC_MS: u64 = 3_000;

/// One request/response exchange on a fresh connection, bounded by `CALL_TIMEOUT_MS`,
/// signed with `inner` (the broker's `innerAccessKey`) when given, over TLS when `tls` is
/// given (`tls.enable`).
pub async fn call(
    addr: SocketAddr,
    code: RequestCode,
    header: &impl Encode,
    body: &[u8],
    inner: Option<&ringmq_wire::auth::Credentials>,
    tls: Option<&crate::io::tls::TlsClient>,
) -> Result<(Status, Vec<u8>, Vec<u8>), String> {
    let mut out = ringmq_wire::command::opener_frame("ringmq-broker");
    let mut request = Vec::new();
    frame::encode_request(&mut request, code, false, 1, header, body).map_err(|e| e.to_string())?;
    if let Some(creds) = inner {
        let mut signer = crate::acl::signer(creds);
        let now = u64::try_from(crate::io::clock::now_ms()).unwrap_or(0);
        signer.sign(&mut out, now).map_err(|e| e.to_string())?;
        signer.sign(&mut request, now).map_err(|e| e.to_string())?;
    }
    out.extend_from_slice(&request);
    let exchange = async {
        let conn = Conn::connect_with(addr, tls)
            .await
            .map_err(|e| e.to_string())?;
        let (res, _) = conn.write_all(out).await;
        res.map_err(|e| e.to_string())?;
        let mut buf = Vec::with_capacity(4096);
        loop {
            if let Some(n) =
                frame::check(&buf, frame::FRAME_BYTES_MAX).map_err(|e| e.to_string())?
            {
                let f = frame::parse(&buf[..n]).map_err(|e| e.to_string())?;
                if f.request_id == ringmq_wire::command::OPENER_REQUEST_ID {
                    buf.drain(..n);
                    continue;
                }
                let status = f.status().map_err(|e| e.to_string())?;
                let header = f.header.to_vec();
                let body = f.body.to_vec();
                return Ok((status, header, body));
            }
            buf.reserve(4096);
            let (res, b) = conn.read_append(buf).await;
            buf = b;
            match res {
                Ok(0) => return Err("connection closed before the reply".to_string()),
                Ok(_) => {}
                Err(e) => return Err(e.to_string()),
            }
        }
    };
    rt::timeout(Duration::from_millis(CALL_TIMEOUT_MS), exchange)
        .await
        .unwrap_or_else(|| Err(format!("no reply within {CALL_TIMEOUT_MS} ms")))
}
