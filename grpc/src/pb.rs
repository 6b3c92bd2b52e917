//! The types and the server trait generated from the vendored protocol files
//! (`proto/apache/rocketmq/v2/`, apache/rocketmq-apis v2.1.2) by `build.rs`.
#![allow(clippy::all, missing_docs, unreachable_pub)]

tonic::include_proto!("apache.rocketmq.v2");
