//! The network side of the broker and the name server: it moves frames. Connections
//! (bounded write queue, frame checks before allocation) and replies (header bytes plus a
//! body that is either bytes or runs of the log file sent zero-copy). Requests are decoded
//! and dispatched by `broker::dispatch`.

pub mod admit;
pub mod call;
pub mod connection;
pub mod frames;
pub mod grpc_acl;
pub mod in_process;
pub mod namesrv;
pub mod out_queue;
pub mod remoting;
pub mod reply;
pub mod service;
pub mod shard_view;
pub mod tls_load;
