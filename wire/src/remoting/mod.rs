//! RocketMQ's remoting protocol (the TCP "remoting" frames of RocketMQ 4.x and 5.x, not the
//! 5.x gRPC proxy), so that applications written against RocketMQ's clients reach ringmq
//! unchanged. Pure like the rest of the crate: bytes in, values out.
//!
//! - [`frame`]: the envelope (4-byte length, serialize type and header length, header, body)
//!   and both header serializations (JSON and RocketMQ's binary `RocketMQSerializable`).
//! - [`ext`], [`headers`]: the typed custom headers that travel in `extFields`.
//! - [`body`]: the JSON bodies (heartbeat, route, cluster info, lock sets).
//! - [`batch`]: the body of SEND_BATCH_MESSAGE.
//!
//! A connection's protocol is decided by its first frame ([`Protocol::detect`]): byte 4 of a
//! remoting frame is its serialize type (0 or 1); byte 4 of a native frame is the high byte
//! of its request code, and a native connection always opens with a ringmq request (HELLO
//! or HA_SUBSCRIBE, codes of 1000 and up, so byte 4 is at least 3). `docs/wire.md` states the
//! rule.

pub mod batch;
pub mod body;
pub mod code;
pub mod command;
pub mod ext;
pub mod fields;
pub mod frame;
pub mod headers;
mod json_header;

pub use frame::{Command, Language, SerializeType};

/// The two protocols a ringmq listener speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// ringmq's native frames ([`crate::frame`]).
    Native,
    /// RocketMQ's remoting frames ([`frame`]).
    Remoting,
}

/// Bytes of a connection's first frame needed to tell its protocol.
pub const DETECT_BYTES: usize = 5;

/// Smallest request code a native connection may open with: its high byte is then at least
/// 2, which no remoting serialize type is.
pub const NATIVE_FIRST_CODE_MIN: u16 = 0x0200;

const _: () = assert!(crate::code::RINGMQ_CODE_MIN >= NATIVE_FIRST_CODE_MIN);

impl Protocol {
    /// The protocol of a connection from its first bytes; `None` until [`DETECT_BYTES`] are in.
    pub fn detect(first: &[u8]) -> Option<Protocol> {
        let b = *first.get(DETECT_BYTES - 1)?;
        Some(if b <= SerializeType::RocketMq as u8 {
            Protocol::Remoting
        } else {
            Protocol::Native
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::code::RequestCode;

    #[test]
    fn native_openers_are_never_remoting() {
        for code in [RequestCode::Hello, RequestCode::HaSubscribe] {
            let mut out = Vec::new();
            crate::frame::encode_request(&mut out, code, false, 1, &crate::codec::Empty, &[])
                .expect("encodes");
            assert_eq!(Protocol::detect(&out), Some(Protocol::Native));
        }
        assert_eq!(Protocol::detect(&[0, 0, 0, 9]), None);
    }
}
