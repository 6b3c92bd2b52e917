//! The network side of the broker and the name server: connections (bounded write queue,
//! frame checks before allocation), dispatch (request code -> handler, error -> status, in
//! one place) and replies (header bytes plus a body that is either bytes or runs of the log
//! file sent zero-copy).

pub mod connection;
pub mod dispatch;
pub mod frames;
pub mod namesrv;
pub mod reply;
