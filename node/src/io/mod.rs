//! The only code that names the io_uring runtime or uses `unsafe`. Everything else reaches the
//! operating system through the types here: [`disk::RealDisk`] for store files.
#![allow(unsafe_code)]

pub mod clock;
pub mod disk;
pub mod net;
pub mod rt;
pub mod signal;
