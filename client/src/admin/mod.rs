//! Administrative calls: everything `ringmq-ctl` does, as a library, so programs can do it
//! too. An [`Admin`] talks to the name servers (cluster, routes, topic list) and to brokers
//! (topics, offsets, groups, messages, runtime info and configuration), and combines them
//! into the views an operator asks for: [`Admin::cluster_status`], [`Admin::topic_status`],
//! [`Admin::group_progress`], [`Admin::reset_offset`].
//!
//! | area | calls | requests |
//! |---|---|---|
//! | name servers | [`Admin::cluster_info`], [`Admin::brokers`], [`Admin::topic_list`], [`Admin::topic_route`], [`Admin::topic_route_data`] | GET_BROKER_CLUSTER_INFO, GET_ALL_TOPIC_LIST_FROM_NAMESERVER, GET_ROUTEINFO_BY_TOPIC |
//! | topics | [`Admin::create_topic`], [`Admin::put_topic`], [`Admin::delete_topic`], [`Admin::topic_configs`], [`Admin::topic_status`] | UPDATE_AND_CREATE_TOPIC, DELETE_TOPIC_IN_BROKER, DELETE_TOPIC_IN_NAMESRV, GET_ALL_TOPIC_CONFIG, GET_MIN/MAX_OFFSET, PULL_MESSAGE |
//! | queues | [`Admin::min_offset`], [`Admin::max_offset`], [`Admin::offset_at`], [`Admin::committed_offset`], [`Admin::commit_offset`], [`Admin::pull`] | GET_MIN/MAX_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP, QUERY/UPDATE_CONSUMER_OFFSET, PULL_MESSAGE |
//! | groups | [`Admin::group_list`], [`Admin::group_members`], [`Admin::group_progress`], [`Admin::reset_offset`] | GET_ALL_SUBSCRIPTIONGROUP_CONFIG, GET_ALL_CONSUMER_OFFSET, GET_CONSUMER_LIST_BY_GROUP |
//! | messages | [`Admin::view_message`], [`Admin::query_by_key`], [`Admin::read_messages`] | VIEW_MESSAGE_BY_ID, QUERY_MESSAGE, PULL_MESSAGE |
//! | ACL | [`Admin::acl_list`], [`Admin::acl_write`], [`Admin::acl_delete`], [`Admin::whoami`] | GET_BROKER_CLUSTER_ACL_CONFIG, UPDATE_AND_CREATE_ACL_CONFIG, DELETE_ACL_CONFIG, WHOAMI |
//! | ACL 2.0 | [`Admin::user_write`], [`Admin::user_delete`], [`Admin::user_get`], [`Admin::user_list`], [`Admin::policy_write`], [`Admin::policy_delete`], [`Admin::policy_get`], [`Admin::policy_list`] | AUTH_CREATE_USER ... AUTH_LIST_ACL (3001-3010) |
//! | controllers | [`Admin::controller_metadata`], [`Admin::replica_info`], [`Admin::elect_master`] | CONTROLLER_GET_METADATA_INFO, CONTROLLER_GET_REPLICA_INFO, CONTROLLER_ELECT_MASTER |
//! | brokers | [`Admin::runtime_info`], [`Admin::cluster_status`], [`Admin::broker_config`], [`Admin::update_broker_config`], [`Admin::set_read_only`], [`Admin::schedule_status`], [`Admin::schedule_statuses`] | GET_BROKER_RUNTIME_INFO, GET/UPDATE_BROKER_CONFIG, GET_SCHEDULE_STATUS |
//!
//! Calls about one queue go straight to the shard that owns it (the topic's route is fetched
//! when needed). Nothing here retries: an operator's tool reports the first failure.
//!
//! Resetting a group's offsets while its consumers run does not stop them: they commit
//! their own positions over the reset at their next commit. Stop the group first (RocketMQ
//! tells live consumers to reset; ringmq has no such request yet).
//!
//! Each area's calls (and its types, re-exported here) live in their own file: `topics`,
//! `queues`, `groups`, `messages`, `brokers`, `controller`. This file holds the [`Admin`] handle, the
//! shared limits and [`BrokerRef`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ringmq_wire::code::RequestCode;
use ringmq_wire::codec::Encode;
use ringmq_wire::command::route::{perm, BrokerRole, MASTER_ID};

use crate::error::Result;
use crate::instance::{ClientConfig, Instance};
use crate::net::Answer;

mod acl;
mod auth;
mod brokers;
mod controller;
mod groups;
mod messages;
mod queues;
mod topics;

pub use brokers::{
    published_rates, sampled_rates, shard_max, BrokerSchedule, BrokerStatus, BrokerTransactions,
    TopicTarget,
};
pub use controller::{replica_lag_bytes, resolve_controllers, CONTROLLER_HOPS_MAX};
pub use groups::{GroupProgress, GroupSummary, OffsetReset, QueueProgress, ResetTo};
pub use topics::{QueueStatus, TopicSpec};

/// How often `create_topic` asks the name servers whether the route is published yet.
pub const ROUTE_POLL_PAUSE: Duration = Duration::from_millis(50);

/// The consumer group named in the admin's own pulls (RocketMQ's tools use the same name).
/// Pulls from it never commit an offset.
pub const TOOLS_GROUP: &str = "TOOLS_CONSUMER";

/// Most messages one pull of [`Admin::read_messages`] asks for.
pub const READ_BATCH_MAX: u32 = 32;

/// Bytes one admin pull may return: the broker's pull limit, enough for the largest record.
pub const PULL_BYTES_MAX: u32 = 8 * 1024 * 1024;

/// `brokerPermission` of a broker that refuses writes ([`Admin::set_read_only`]).
pub const BROKER_PERMISSION_READ_ONLY: u8 = perm::READ;
/// `brokerPermission` of a broker that takes reads and writes.
pub const BROKER_PERMISSION_READ_WRITE: u8 = perm::READ_WRITE;

/// Administrative calls.
#[derive(Debug, Clone)]
pub struct Admin {
    inst: Arc<Instance>,
}

/// One broker process (a master or a slave) as the name servers list it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerRef {
    pub cluster: String,
    /// Broker name (shared by a master and its slaves).
    pub name: String,
    /// [`MASTER_ID`] (0) for a master, 1.. for slaves.
    pub id: u64,
    pub addr: SocketAddr,
    pub role: BrokerRole,
    pub shard_count: u16,
    pub version: String,
}

impl BrokerRef {
    pub fn is_master(&self) -> bool {
        self.id == MASTER_ID
    }
}

impl Admin {
    /// An admin client with default settings for these name servers (`host:port;...`).
    pub async fn connect(name_servers: &str) -> Result<Admin> {
        let cfg = ClientConfig {
            name_servers: split_name_servers(name_servers),
            ..ClientConfig::default()
        };
        Self::with_config(cfg).await
    }

    /// An admin client with these settings (timeouts, instance name, ...).
    pub async fn with_config(cfg: ClientConfig) -> Result<Admin> {
        Ok(Admin {
            inst: Instance::new(cfg).await?,
        })
    }

    /// The settings in use.
    pub fn config(&self) -> &ClientConfig {
        &self.inst.cfg
    }

    /// Closes every connection (calls after this reconnect).
    pub fn close(&self) {
        self.inst.pool.close_all();
    }

    // ---- helpers ------------------------------------------------------------------------

    /// One request to a broker, with the configured request timeout.
    async fn call(
        &self,
        addr: SocketAddr,
        code: RequestCode,
        header: &(impl Encode + ?Sized),
        body: &[u8],
    ) -> Result<Answer> {
        self.inst
            .broker_call(
                addr,
                None,
                code,
                header,
                body,
                self.inst.cfg.request_timeout,
            )
            .await
    }
}

/// `host:port;host:port` as a list (blanks and empty entries dropped).
pub fn split_name_servers(name_servers: &str) -> Vec<String> {
    name_servers
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_server_list() {
        assert_eq!(split_name_servers(" a:1; ;b:2 "), vec!["a:1", "b:2"]);
    }
}
