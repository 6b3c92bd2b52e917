//! The only code that names the io_uring runtime, the real clock, real files and sockets, or
//! uses `unsafe`. Everything else reaches the operating system through the types here:
//! [`rt`] for tasks and timers, [`clock`] for time, [`node_disk::NodeDisk`] for store files,
//! [`net`] for sockets. Each of them routes to the simulated world ([`sim`]) when one is
//! installed on the thread, so the simulator runs the same node code on virtual time.
#![allow(unsafe_code)]

pub mod background;
pub mod clock;
pub mod dir_lock;
pub mod direct;
pub mod disk;
pub mod local;
pub mod memory;
pub mod net;
pub mod node_disk;
pub mod release;
pub mod rt;
pub mod signal;
pub mod sim;
pub mod tls;
