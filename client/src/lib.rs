//! Native Rust client for ringmq (guide below is filled in later).
#![forbid(unsafe_code)]

pub use ringmq_wire as wire;

pub mod admin;
mod background;
pub mod consumer;
pub mod error;
mod instance;
pub mod message;
mod net;
pub mod producer;
pub mod route;

pub use admin::Admin;
pub use consumer::{
    ConsumeContext, ConsumeResult, MessageListener, MessageModel, PullConsumer, PullResult,
    PullStatus, PushConsumer, StartPosition,
};
pub use error::{Error, Outcome, Result};
pub use instance::ClientConfig;
pub use message::{Message, ReceivedMessage};
pub use producer::{Producer, ProducerBuilder, QueueSelector, SendHandle, SendResult, SendStatus};
pub use route::MessageQueue;
