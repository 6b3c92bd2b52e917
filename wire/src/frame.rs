//! The frame envelope of the native protocol, spoken by the broker, the name server,
//! replication and clients. A fixed 20-byte big-endian prefix, then the header, then the body:
//!
//! | offset | field        | bytes | meaning                                                   |
//! |--------|--------------|-------|-----------------------------------------------------------|
//! | 0      | `length`     | 4     | bytes after this field: `16 + header_len + body_len`      |
//! | 4      | `code`       | 2     | [`RequestCode`] in a request, [`Status`] in a response    |
//! | 6      | `flags`      | 2     | bit 0 RESPONSE, bit 1 ONEWAY, bit 2 SIGNED, others zero   |
//! | 8      | `request_id` | 8     | chosen by the requester, echoed by the response (opaque)  |
//! | 16     | `header_len` | 4     | at most [`HEADER_BYTES_MAX`]                              |
//! | 20     | header       | `header_len` | the command's header ([`crate::command`])          |
//! | 20 + header_len | body | rest | records, or a large command payload                     |
//!
//! Invariants: [`check`] validates the length (against the caller's maximum, never above
//! [`FRAME_BYTES_MAX`]) and, once 20 bytes are in, the flags and header length, all before
//! the caller buffers or allocates for the frame. [`parse`] only borrows. A response is never
//! ONEWAY.

use bytes::BufMut;

use crate::code::{RequestCode, Status};
use crate::codec::Encode;
use crate::error::{Result, WireError};

/// Bytes of the `length` field.
pub const LENGTH_FIELD_BYTES: usize = 4;
/// Bytes of the fixed prefix (`length`, `code`, `flags`, `request_id`, `header_len`).
pub const PREFIX_BYTES: usize = 20;
/// Smallest `length` value: the prefix after the length field, with empty header and body.
pub const LENGTH_MIN: usize = PREFIX_BYTES - LENGTH_FIELD_BYTES;
/// Hard ceiling on a whole frame (prefix included); a configured maximum can only be lower.
pub const FRAME_BYTES_MAX: usize = 16 * 1024 * 1024;
/// Ceiling on a frame's header.
pub const HEADER_BYTES_MAX: usize = 64 * 1024;

const _: () = assert!(PREFIX_BYTES == 4 + 2 + 2 + 8 + 4);
const _: () = assert!(LENGTH_MIN == 16);
const _: () = assert!(FRAME_BYTES_MAX <= u32::MAX as usize);
const _: () = assert!(crate::codec::BLOB_BYTES_MAX == FRAME_BYTES_MAX);
const _: () = assert!(HEADER_BYTES_MAX + PREFIX_BYTES < FRAME_BYTES_MAX);
const _: () =
    assert!(crate::record::RECORD_BYTES_MAX + PREFIX_BYTES + HEADER_BYTES_MAX <= FRAME_BYTES_MAX);

/// The `flags` field. Valid values: [`Flags::REQUEST`], [`Flags::RESPONSE`],
/// [`Flags::ONEWAY`], and a request of either kind with [`Flags::SIGNED`] (a signed frame
/// ends with an authentication trailer, [`crate::auth`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Flags(u16);

impl Flags {
    /// A request that expects a response.
    pub const REQUEST: Flags = Flags(0);
    /// A response (bit 0).
    pub const RESPONSE: Flags = Flags(1);
    /// A request that expects no response (bit 1).
    pub const ONEWAY: Flags = Flags(2);
    /// A request whose last bytes are an authentication trailer (bit 2), added to a request
    /// with [`Flags::with_signed`]; never on a response.
    pub const SIGNED: Flags = Flags(4);

    /// Validates raw flag bits: unknown bits, RESPONSE with ONEWAY, and a signed response
    /// are rejected.
    pub fn from_bits(bits: u16) -> Result<Self> {
        match bits {
            0..=2 | 4 | 6 => Ok(Flags(bits)),
            5 => Err(WireError::Invalid {
                what: "frame flags",
                detail: "a response cannot be signed",
            }),
            3 | 7 => Err(WireError::Invalid {
                what: "frame flags",
                detail: "a response cannot be oneway",
            }),
            _ => Err(WireError::Invalid {
                what: "frame flags",
                detail: "reserved bits set",
            }),
        }
    }

    pub fn bits(self) -> u16 {
        self.0
    }

    pub fn is_response(self) -> bool {
        self.0 & Self::RESPONSE.0 != 0
    }

    pub fn is_oneway(self) -> bool {
        self.0 & Self::ONEWAY.0 != 0
    }

    pub fn is_signed(self) -> bool {
        self.0 & Self::SIGNED.0 != 0
    }

    /// These flags with SIGNED set (requests) or cleared.
    pub fn with_signed(self, signed: bool) -> Flags {
        if signed {
            Flags(self.0 | Self::SIGNED.0)
        } else {
            Flags(self.0 & !Self::SIGNED.0)
        }
    }
}

/// The prefix fields as they are on the wire, unvalidated (see [`peek`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    /// Whole frame length, prefix included (`length + 4`).
    pub frame_len: u64,
    pub code: u16,
    pub flags: u16,
    pub request_id: u64,
    pub header_len: u32,
}

/// A whole frame, borrowing its header and body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    pub code: u16,
    pub flags: Flags,
    pub request_id: u64,
    pub header: &'a [u8],
    pub body: &'a [u8],
}

impl Frame<'_> {
    /// Whole frame length, prefix included.
    pub fn len(&self) -> usize {
        PREFIX_BYTES + self.header.len() + self.body.len()
    }

    /// Always false: a frame has at least its prefix.
    pub fn is_empty(&self) -> bool {
        false
    }

    pub fn is_response(&self) -> bool {
        self.flags.is_response()
    }

    pub fn is_oneway(&self) -> bool {
        self.flags.is_oneway()
    }

    /// The request code of a request frame.
    pub fn request_code(&self) -> Result<RequestCode> {
        if self.is_response() {
            return Err(WireError::Invalid {
                what: "frame",
                detail: "a response carries a status, not a request code",
            });
        }
        RequestCode::try_from(self.code)
    }

    /// The status of a response frame.
    pub fn status(&self) -> Result<Status> {
        if !self.is_response() {
            return Err(WireError::Invalid {
                what: "frame",
                detail: "a request carries a request code, not a status",
            });
        }
        Status::try_from(self.code)
    }
}

/// Reads the prefix without validating it, e.g. to answer FRAME_TOO_LARGE to the right
/// request id after [`check`] refused a frame. `None` if fewer than 20 bytes are present.
pub fn peek(buf: &[u8]) -> Option<Prefix> {
    let p: &[u8; PREFIX_BYTES] = buf.get(..PREFIX_BYTES)?.try_into().ok()?;
    let length = u32::from_be_bytes([p[0], p[1], p[2], p[3]]);
    Some(Prefix {
        frame_len: u64::from(length) + LENGTH_FIELD_BYTES as u64,
        code: u16::from_be_bytes([p[4], p[5]]),
        flags: u16::from_be_bytes([p[6], p[7]]),
        request_id: u64::from_be_bytes([p[8], p[9], p[10], p[11], p[12], p[13], p[14], p[15]]),
        header_len: u32::from_be_bytes([p[16], p[17], p[18], p[19]]),
    })
}

/// Is a whole frame at the start of `buf`? `Ok(None)`: read more bytes. `Ok(Some(n))`: the
/// first `n` bytes are one frame (hand them to [`parse`]). `Err`: the stream is not valid;
/// the length (checked against `max_frame`, itself capped at [`FRAME_BYTES_MAX`]) is refused
/// as soon as its 4 bytes arrive, the flags and header length once the prefix is in.
pub fn check(buf: &[u8], max_frame: usize) -> Result<Option<usize>> {
    let max = max_frame.min(FRAME_BYTES_MAX);
    let Some(len_bytes) = buf.get(..LENGTH_FIELD_BYTES) else {
        return Ok(None);
    };
    let length = u32::from_be_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]]);
    let frame_len = check_length(length, max)?;
    if let Some(prefix) = peek(buf) {
        Flags::from_bits(prefix.flags)?;
        check_header_len(prefix.header_len as usize, frame_len)?;
    }
    Ok((buf.len() >= frame_len).then_some(frame_len))
}

/// Parses exactly one frame: `buf` must be the `n` bytes [`check`] reported.
pub fn parse(buf: &[u8]) -> Result<Frame<'_>> {
    let Some(prefix) = peek(buf) else {
        return Err(WireError::Truncated {
            what: "frame prefix",
            need: PREFIX_BYTES,
            have: buf.len(),
        });
    };
    let frame_len = check_length(
        u32::try_from(prefix.frame_len - LENGTH_FIELD_BYTES as u64).unwrap_or(u32::MAX),
        FRAME_BYTES_MAX,
    )?;
    if buf.len() != frame_len {
        return Err(WireError::SizeMismatch {
            declared: frame_len,
            actual: buf.len(),
        });
    }
    let flags = Flags::from_bits(prefix.flags)?;
    let header_len = prefix.header_len as usize;
    check_header_len(header_len, frame_len)?;
    let (header, body) = buf[PREFIX_BYTES..].split_at(header_len);
    Ok(Frame {
        code: prefix.code,
        flags,
        request_id: prefix.request_id,
        header,
        body,
    })
}

/// Writes only the 20-byte prefix, so the caller can write the header and then send the body
/// separately (zero-copy from the log). Returns the whole frame length.
pub fn encode_prefix<B: BufMut>(
    out: &mut B,
    code: impl Into<u16>,
    flags: Flags,
    request_id: u64,
    header_len: usize,
    body_len: usize,
) -> Result<usize> {
    let frame_len = frame_len(header_len, body_len)?;
    if out.remaining_mut() < PREFIX_BYTES {
        return Err(WireError::BufferTooSmall {
            what: "frame prefix",
            need: PREFIX_BYTES,
            have: out.remaining_mut(),
        });
    }
    // Both casts are within range: frame_len() checked them against the u32 maxima.
    out.put_u32((frame_len - LENGTH_FIELD_BYTES) as u32);
    out.put_u16(code.into());
    out.put_u16(flags.bits());
    out.put_u64(request_id);
    out.put_u32(header_len as u32);
    Ok(frame_len)
}

/// Writes a whole frame: prefix, encoded header, body. Nothing is written on error.
pub fn encode_frame<B: BufMut>(
    out: &mut B,
    code: impl Into<u16>,
    flags: Flags,
    request_id: u64,
    header: &(impl Encode + ?Sized),
    body: &[u8],
) -> Result<usize> {
    let header_len = header.encoded_len()?;
    let total = frame_len(header_len, body.len())?;
    if out.remaining_mut() < total {
        return Err(WireError::BufferTooSmall {
            what: "frame",
            need: total,
            have: out.remaining_mut(),
        });
    }
    encode_prefix(out, code, flags, request_id, header_len, body.len())?;
    header.encode(out)?;
    out.put_slice(body);
    Ok(total)
}

/// Writes a request frame (RESPONSE clear; ONEWAY if `oneway`).
pub fn encode_request<B: BufMut>(
    out: &mut B,
    code: RequestCode,
    oneway: bool,
    request_id: u64,
    header: &(impl Encode + ?Sized),
    body: &[u8],
) -> Result<usize> {
    let flags = if oneway {
        Flags::ONEWAY
    } else {
        Flags::REQUEST
    };
    encode_frame(out, code, flags, request_id, header, body)
}

/// Writes a response frame. `header` must start with the remark: use
/// [`crate::command::Response`].
pub fn encode_response<B: BufMut>(
    out: &mut B,
    status: Status,
    request_id: u64,
    header: &(impl Encode + ?Sized),
    body: &[u8],
) -> Result<usize> {
    encode_frame(out, status, Flags::RESPONSE, request_id, header, body)
}

/// The whole frame length for a header and body, checked against the hard limits.
pub fn frame_len(header_len: usize, body_len: usize) -> Result<usize> {
    if header_len > HEADER_BYTES_MAX {
        return Err(WireError::TooLong {
            what: "frame header",
            len: header_len,
            max: HEADER_BYTES_MAX,
        });
    }
    let total = PREFIX_BYTES
        .checked_add(header_len)
        .and_then(|n| n.checked_add(body_len))
        .ok_or(WireError::FrameTooLarge {
            len: usize::MAX,
            max: FRAME_BYTES_MAX,
        })?;
    if total > FRAME_BYTES_MAX {
        return Err(WireError::FrameTooLarge {
            len: total,
            max: FRAME_BYTES_MAX,
        });
    }
    Ok(total)
}

fn check_length(length: u32, max: usize) -> Result<usize> {
    let length = length as usize;
    if length < LENGTH_MIN {
        return Err(WireError::TooShort {
            what: "frame length",
            len: length,
            min: LENGTH_MIN,
        });
    }
    let frame_len = length.saturating_add(LENGTH_FIELD_BYTES);
    if frame_len > max {
        return Err(WireError::FrameTooLarge {
            len: frame_len,
            max,
        });
    }
    Ok(frame_len)
}

fn check_header_len(header_len: usize, frame_len: usize) -> Result<()> {
    if header_len > HEADER_BYTES_MAX {
        return Err(WireError::TooLong {
            what: "frame header",
            len: header_len,
            max: HEADER_BYTES_MAX,
        });
    }
    let room = frame_len - PREFIX_BYTES;
    if header_len > room {
        return Err(WireError::TooLong {
            what: "frame header",
            len: header_len,
            max: room,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::Raw;

    #[test]
    fn prefix_byte_layout() {
        let mut out = Vec::new();
        let n = encode_prefix(
            &mut out,
            0x0102u16,
            Flags::ONEWAY,
            0x0A0B_0C0D_0E0F_1011,
            3,
            5,
        )
        .unwrap();
        assert_eq!(n, 28);
        assert_eq!(
            out,
            [
                0, 0, 0, 24, // length = 16 + 3 + 5
                1, 2, // code
                0, 2, // flags: ONEWAY
                0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0x0F, 0x10, 0x11, // request id
                0, 0, 0, 3, // header_len
            ]
        );
    }

    #[test]
    fn round_trip_and_incremental_check() {
        let mut out = Vec::new();
        let n = encode_request(
            &mut out,
            RequestCode::PullMessage,
            false,
            9,
            &Raw(b"hdr"),
            b"body",
        )
        .unwrap();
        assert_eq!(n, out.len());
        for cut in 0..out.len() {
            assert_eq!(
                check(&out[..cut], FRAME_BYTES_MAX).unwrap(),
                None,
                "cut {cut}"
            );
        }
        out.extend_from_slice(b"next frame");
        assert_eq!(check(&out, FRAME_BYTES_MAX).unwrap(), Some(n));
        let f = parse(&out[..n]).unwrap();
        assert_eq!(f.request_code().unwrap(), RequestCode::PullMessage);
        assert_eq!(
            (f.request_id, f.header, f.body),
            (9, &b"hdr"[..], &b"body"[..])
        );
        assert!(f.status().is_err());
        assert_eq!(f.len(), n);
        assert!(parse(&out).is_err(), "parse takes exactly one frame");
    }

    #[test]
    fn limits_are_checked_from_the_length_alone() {
        let big = ((FRAME_BYTES_MAX - 3) as u32).to_be_bytes();
        assert!(matches!(
            check(&big, usize::MAX),
            Err(WireError::FrameTooLarge { .. })
        ));
        let small_max = 1000;
        assert!(matches!(
            check(&1000u32.to_be_bytes(), small_max),
            Err(WireError::FrameTooLarge {
                len: 1004,
                max: 1000
            })
        ));
        assert!(matches!(
            check(&15u32.to_be_bytes(), small_max),
            Err(WireError::TooShort { .. })
        ));
        assert_eq!(check(&16u32.to_be_bytes(), small_max).unwrap(), None);
    }

    #[test]
    fn bad_flags_and_header_len_are_rejected() {
        let mut out = Vec::new();
        encode_response(&mut out, Status::Success, 1, &Raw(b"ab"), b"").unwrap();
        let mut bad = out.clone();
        bad[7] = 3;
        assert!(check(&bad, FRAME_BYTES_MAX).is_err());
        bad[7] = 0x80;
        assert!(parse(&bad).is_err());
        let mut bad = out.clone();
        bad[19] = 3; // header_len 3 > the 2 bytes present
        assert!(check(&bad, FRAME_BYTES_MAX).is_err());
        assert!(parse(&bad).is_err());
        let f = parse(&out).unwrap();
        assert_eq!(f.status().unwrap(), Status::Success);
        assert!(f.request_code().is_err());
    }

    #[test]
    fn encode_refuses_oversize() {
        let mut out = Vec::new();
        let header = vec![0u8; HEADER_BYTES_MAX + 1];
        assert!(encode_frame(&mut out, 1u16, Flags::REQUEST, 1, &Raw(&header), b"").is_err());
        assert!(encode_prefix(&mut out, 1u16, Flags::REQUEST, 1, 0, FRAME_BYTES_MAX).is_err());
        assert!(out.is_empty());
        assert_eq!(
            frame_len(0, FRAME_BYTES_MAX - PREFIX_BYTES).unwrap(),
            FRAME_BYTES_MAX
        );
    }
}
