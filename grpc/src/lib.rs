//! RocketMQ 5's gRPC protocol (`apache.rocketmq.v2.MessagingService`) for ringmq, so the
//! RocketMQ 5 SDKs connect unchanged: a proxy over ringmq's native protocol.
//!
//! # Design: an edge that speaks the native protocol
//!
//! The edge runs on a thread of its own with its own single-threaded tokio runtime
//! ([`start`]), never on the broker's io_uring shards, and turns each RPC into the typed
//! requests of ringmq's native client (`ringmq-client`): a [`Producer`] for SendMessage, an
//! `EdgeConsumer` (POP for any group) for ReceiveMessage, AckMessage and
//! ChangeInvisibleDuration, an [`Admin`] for routes. Those clients speak the native protocol
//! to the brokers like any other client, so every request reaches the shard that owns its
//! queue by the native path (HELLO hands each connection to its shard), and the broker
//! keeps one request path for every protocol: what the native path checks, stores and
//! replicates, a gRPC message gets too. RocketMQ's own proxy does the same over remoting.
//! The broker of the edge's own process is reached in process, without a socket
//! ([`GrpcOptions::in_process`]); other brokers and the name servers over TCP.
//!
//! The cost: each gRPC request is decoded twice (protobuf at the edge, the native frame on
//! the shard) and wakes the shard's thread; the edge's work (HTTP/2, protobuf, conversion)
//! uses one core at most. In return the edge holds no broker state and cannot break a
//! shard's invariants, and it can be moved out of the broker process unchanged.
//!
//! # What is served
//!
//! QueryRoute (queues with permissions and accepted message types; every broker's
//! endpoint is this edge), Heartbeat, Telemetry (Settings in, merged Settings out:
//! [`settings`]), SendMessage (normal, FIFO by message group, delayed; the client's message
//! id kept as `UNIQ_KEY`), QueryAssignment, ReceiveMessage (POP, long polling), AckMessage,
//! ChangeInvisibleDuration, NotifyClientTermination, RecallMessage, transactions (the half,
//! EndTransaction, the check-back as RecoverOrphanedTransactionCommand on Telemetry),
//! ForwardMessageToDeadLetterQueue; `auto_renew` receipts renewed by the edge
//! (`renew`); the offset-based PullMessage, UpdateOffset, GetOffset and QueryOffset
//! (`pull`, `offsets`: the group's one offset table, shared with native and remoting
//! consumers). With ACL on, every RPC passes the `gate` (RocketMQ 5's signature checked by
//! the node's [`auth::Authority`], permissions per topic and group); the port serves TLS and
//! plaintext (`tls`); SendMessage and AckMessage entries are counted before decoding
//! (`entries`). See `docs/grpc.md`.
//!
//! [`Producer`]: ringmq_client::Producer
//! [`Admin`]: ringmq_client::Admin
#![forbid(unsafe_code)]

pub mod auth;
mod clients;
mod convert;
mod entries;
mod gate;
mod groups;
mod handle;
mod offsets;
pub mod pb;
mod pull;
mod receive;
mod renew;
mod route;
mod send;
mod server;
mod service;
pub mod settings;
mod status;
mod telemetry;
mod tls;
mod transaction;

pub use ringmq_client::{Credentials, InProcess, TlsOptions};
pub use server::{
    start, GrpcError, GrpcOptions, GrpcServer, REQUEST_BYTES_MAX, STREAMS_PER_CONNECTION_MAX,
};
pub use tls::GrpcTls;
