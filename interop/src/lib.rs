//! Interoperability tests live in `tests/`: RocketMQ clients written by others (the
//! `rocketmq-client-rust` crate, and the C++ client inside PyPI's `rocketmq` wheel, driven by
//! the Python scripts in `python/`) against a real `ringmq standalone` process on loopback.
//! This library is empty on purpose.
#![forbid(unsafe_code)]
