//! The network layer: pipelined connections ([`connection`]), the per-client pool that
//! keeps one per broker shard ([`pool`]), and where requests from brokers go ([`inbox`]).
//! Nothing above this module touches a socket.

pub mod connection;
pub mod in_process;
pub mod inbox;
pub mod pool;

pub use connection::{Answer, Connection};
pub use in_process::InProcess;
pub use pool::{BrokerHello, Endpoint, Peer, Pool, PoolConfig};
