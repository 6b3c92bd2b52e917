//! A few administrative calls a client application needs (the rest are `ringmq-ctl`'s):
//! create a topic on every master of the cluster, read a topic's route, the cluster.

use std::sync::Arc;
use std::time::Duration;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::command::route::{perm, MASTER_ID};
use ringmq_wire::command::{ClusterInfo, CreateTopicRequest};
use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::instance::{ClientConfig, Instance};
use crate::route::TopicRouteInfo;

/// How often `create_topic` asks the name servers whether the route is published yet.
pub const ROUTE_POLL_PAUSE: Duration = Duration::from_millis(50);

/// Administrative calls.
#[derive(Debug, Clone)]
pub struct Admin {
    inst: Arc<Instance>,
}

impl Admin {
    /// An admin client with default settings for these name servers (`host:port;...`).
    pub async fn connect(name_servers: &str) -> Result<Admin> {
        let cfg = ClientConfig {
            name_servers: name_servers
                .split(';')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect(),
            ..ClientConfig::default()
        };
        Self::with_config(cfg).await
    }

    pub async fn with_config(cfg: ClientConfig) -> Result<Admin> {
        Ok(Admin {
            inst: Instance::new(cfg).await?,
        })
    }

    /// Every broker the name servers know.
    pub async fn cluster_info(&self) -> Result<ClusterInfo> {
        self.inst.cluster_info().await
    }

    /// A topic's route as the name servers have it now.
    pub async fn topic_route(&self, topic: &str) -> Result<TopicRouteInfo> {
        Ok((*self.inst.fetch_route(topic).await?).clone())
    }

    /// Creates (or updates) `topic` with `queues` read and write queues on every master
    /// the name servers know (waiting for at least one to register), then waits until the
    /// name servers publish a route with that many writable queues per master. All within
    /// `wait`.
    pub async fn create_topic(&self, topic: &str, queues: u32, wait: Duration) -> Result<()> {
        let deadline = Instant::now() + wait;
        let masters = loop {
            let masters = self.masters().await?;
            if !masters.is_empty() {
                break masters;
            }
            if Instant::now() >= deadline {
                return Err(Error::NoRoute {
                    topic: topic.to_string(),
                    detail: "the name servers know no master broker".into(),
                });
            }
            tokio::time::sleep(ROUTE_POLL_PAUSE).await;
        };
        let req = CreateTopicRequest {
            topic: topic.to_string(),
            read_queue_count: queues,
            write_queue_count: queues,
            perm: perm::READ_WRITE,
            attributes: Default::default(),
        };
        for addr in &masters {
            self.inst
                .broker_call(
                    *addr,
                    None,
                    RequestCode::UpdateAndCreateTopic,
                    &req,
                    &[],
                    self.inst.cfg.request_timeout,
                )
                .await?
                .expect(&[Status::Success])?;
        }
        let want = masters.len() * queues as usize;
        loop {
            match self.inst.fetch_route(topic).await {
                Ok(r) if r.write_queues.len() >= want => return Ok(()),
                Ok(_) | Err(Error::NoRoute { .. }) => {}
                Err(e) => return Err(e),
            }
            if Instant::now() >= deadline {
                return Err(Error::NoRoute {
                    topic: topic.to_string(),
                    detail: format!("created, but no route with {want} queues within {wait:?}"),
                });
            }
            tokio::time::sleep(ROUTE_POLL_PAUSE).await;
        }
    }

    async fn masters(&self) -> Result<Vec<std::net::SocketAddr>> {
        let info = self.inst.cluster_info().await?;
        let mut masters = Vec::new();
        for b in &info.brokers {
            if let Some(m) = b.replicas.get(&MASTER_ID) {
                let addr = m.address.parse().map_err(|_| {
                    Error::Config(format!("broker address {:?} is not ip:port", m.address))
                })?;
                masters.push(addr);
            }
        }
        Ok(masters)
    }
}
