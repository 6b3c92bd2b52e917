//! The name server's state as pure, clock-driven data: who is alive (broker leases), where
//! each topic lives (routes with queue-to-shard placement) and a small KV config. No I/O,
//! no threads, no clock: every call that depends on time takes `now_ms`, so the request
//! handlers and the periodic scan (`RouteTable::expire`, every
//! `NamesrvConfig::scan_not_active_broker_interval_ms`) drive it, and tests replay any
//! schedule exactly.
//!
//! Query results are the wire types of `ringmq_wire::command::route` (`TopicRoute`,
//! `ClusterInfo`, `TopicList`), built here and nowhere else.
//!
//! Invariants (checked by `RouteTable::check_invariants` in tests):
//! - every broker name that has queue data for a topic has at least one live replica;
//! - a topic with no queue data left is removed;
//! - the table never holds more than the `limits::NAMESRV_*` maxima; a registration that
//!   would exceed them is refused whole, never applied in part.

mod error;
mod kv;
mod route_table;

pub use error::NamesrvError;
pub use kv::KvStore;
pub use route_table::RouteTable;
