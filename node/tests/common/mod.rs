//! Shared by the integration tests: a small blocking client for the native protocol over
//! `std::net::TcpStream` (built only on `ringmq_wire`: frame check/parse, typed request
//! headers, `Response<T>` decoding), and [`Node`], a spawned `ringmq` process on the
//! workspace's one process guard (`ringmq_testkit::Proc`: ready line parsed from stdout with
//! a timeout, stderr captured to a file whose tail is printed when a test fails, SIGKILL on
//! drop).
//!
//! Every wait here is bounded: socket reads time out, the ready line has a deadline, `term`
//! gives up after a while. A hung broker fails the test instead of hanging the suite.
#![allow(dead_code)]
// The submodules share this module's imports (`use super::*`).
#![allow(unused_imports)]

mod client;
mod controllers;
mod ha;
mod netns;
mod node;
mod records;
mod remoting;

pub use client::*;
pub use controllers::*;
pub use ha::*;
pub use netns::*;
pub use node::*;
pub use records::*;
pub use remoting::*;
pub use ringmq_testkit::wait_until;

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ringmq_wire::code::{RequestCode, Status, PROTOCOL_VERSION};
use ringmq_wire::codec::{Decode, Empty, Encode};
use ringmq_wire::command::pull::FilterType;
use ringmq_wire::command::route::{perm, ClusterInfo, GetRouteRequest, TopicConfig, TopicRoute};
use ringmq_wire::command::{
    read_remark, Boundary, BrokerRuntimeInfo, CreateTopicRequest, GetOffsetRequest, HelloRequest,
    HelloResponse, OffsetResponse, PullRequest, PullResponse, QueryConsumerOffsetRequest,
    QueryConsumerOffsetResponse, Response, SearchOffsetRequest, SendRequest, SendResponse,
    UpdateConsumerOffsetRequest, ViewMessageRequest,
};
use ringmq_wire::frame;
use ringmq_wire::properties;
use ringmq_wire::record::{self, Message, RecordView};

/// `queue_id` of a send whose records each name their own queue (multi-queue batch).
pub const MULTI_QUEUE: u32 = u32::MAX;
/// 8 MiB CommitLog segments: the 1 GiB default would pre-write GiBs of zeros per test.
pub const SEGMENT_SET: &str = "mappedFileSizeCommitLog=8388608";
/// How long a socket read may block before the test fails.
pub const READ_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a node may take to print its ready line.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// The `ringmq` binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_ringmq")
}

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
