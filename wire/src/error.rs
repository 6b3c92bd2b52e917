//! `WireError`: everything a decoder or encoder can reject, with the context needed to find
//! the bad byte (`offset`, `need`, `have`, the limit that was hit).

use thiserror::Error;

/// A codec failure. Decoders return it for any input that is not a valid encoding; encoders
/// return it for values that cannot be encoded within the format's limits.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireError {
    /// The buffer ends before the item does.
    #[error("truncated {what}: need {need} bytes, have {have}")]
    Truncated {
        what: &'static str,
        need: usize,
        have: usize,
    },
    /// A length field is outside what the format allows.
    #[error("{what} is {len} bytes, over the maximum of {max}")]
    TooLong {
        what: &'static str,
        len: usize,
        max: usize,
    },
    /// A length field is smaller than the fixed part it must contain.
    #[error("{what} is {len} bytes, under the minimum of {min}")]
    TooShort {
        what: &'static str,
        len: usize,
        min: usize,
    },
    /// The magic code is not one this crate knows.
    #[error("bad magic code {magic:#010x} at offset {offset}")]
    BadMagic { magic: u32, offset: usize },
    /// The stored body CRC does not match the body.
    #[error("body CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    BadCrc { stored: u32, computed: u32 },
    /// The sum of the field lengths disagrees with the record's TOTALSIZE.
    #[error("record size mismatch: TOTALSIZE says {declared}, fields add up to {actual}")]
    SizeMismatch { declared: usize, actual: usize },
    /// A string field is not valid UTF-8.
    #[error("{what} is not valid UTF-8")]
    NotUtf8 { what: &'static str },
    /// A field holds a value the format reserves or cannot represent.
    #[error("invalid {what}: {detail}")]
    Invalid {
        what: &'static str,
        detail: &'static str,
    },
    /// A numeric code that no enum variant names.
    #[error("unknown {what} code {code}")]
    UnknownCode { what: &'static str, code: u32 },
    /// A frame's length is over the receiver's (or the hard) maximum; answer FRAME_TOO_LARGE.
    #[error("frame is {len} bytes, over the maximum of {max}")]
    FrameTooLarge { len: usize, max: usize },
    /// A required remoting `extFields` key is absent.
    #[error("remoting header lacks the required field `{field}`")]
    MissingField { field: &'static str },
    /// A remoting `extFields` value does not parse as the field's type (`value` is cut to
    /// [`BAD_VALUE_CHARS_MAX`] characters).
    #[error("remoting header field `{field}` is {value:?}, not {expected}")]
    BadField {
        field: &'static str,
        value: String,
        expected: &'static str,
    },
    /// A remoting JSON body does not decode (`detail` is serde_json's message, with the line
    /// and column) or breaks one of the body's limits.
    #[error("bad {what} JSON: {detail}")]
    BadJson { what: &'static str, detail: String },
    /// The caller's output buffer is too small for the encoding.
    #[error("output buffer too small for {what}: need {need} bytes, have {have}")]
    BufferTooSmall {
        what: &'static str,
        need: usize,
        have: usize,
    },
}

/// Longest peer value quoted in a [`WireError::BadField`], in characters.
pub const BAD_VALUE_CHARS_MAX: usize = 64;

/// Shorthand used throughout the crate.
pub type Result<T> = std::result::Result<T, WireError>;
