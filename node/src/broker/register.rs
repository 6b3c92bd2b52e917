//! Registration with the name servers: shard 0 sends REGISTER_BROKER (topics with queue
//! counts, permissions and shard placement; role, shard count, address) to every name server
//! every `registerNameServerPeriod` and at once after a topic change. Also the small async
//! request/response call used for it, and reading the shard a HELLO asks for.

use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::{Decode, Empty, Encode};
use ringmq_wire::command::route::{perm, BrokerRegistration};
use ringmq_wire::command::{RegisterBrokerResponse, Response};

use crate::broker::shard::Shard;
use crate::io::rt;

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
        shard_addresses: b.shard_addrs.iter().map(|a| a.to_string()).collect(),
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
        match crate::net::call::call(
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
            crate::net::call::call(
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

/// Registration's hooks: shard 0 registers the broker with every name server while it runs,
/// and unregisters it once stopped (flushed and checkpointed).
#[derive(Debug)]
pub struct RegisterRoom;

/// The room, for the broker's list.
pub static ROOM: RegisterRoom = RegisterRoom;

impl crate::broker::shard::hooks::Room for RegisterRoom {
    fn name(&self) -> &'static str {
        "name server registration"
    }

    fn start(&self, shard: &Rc<Shard>, _started: &mut crate::broker::shard::hooks::Started) {
        if shard.id == 0 {
            rt::spawn(run(Rc::clone(shard)));
        }
    }

    fn stopped(&self, shard: &Rc<Shard>) -> Option<crate::broker::shard::hooks::Later> {
        if shard.id != 0 {
            return None;
        }
        let shard = Rc::clone(shard);
        Some(Box::pin(async move { unregister_all(&shard).await }))
    }
}
