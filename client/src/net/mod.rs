//! The network layer: pipelined connections ([`connection`]) and the per-client pool that
//! keeps one per broker shard ([`pool`]). Nothing above this module touches a socket.

pub mod connection;
pub mod pool;

pub use connection::{Answer, Connection};
pub use pool::{BrokerHello, Endpoint, Peer, Pool, PoolConfig};
