//! The remoting frame and its two header serializations (RocketMQ's `RemotingCommand`,
//! `NettyEncoder`/`NettyDecoder`, `RocketMQSerializable`).
//!
//! | offset | field | bytes | meaning |
//! |---|---|---|---|
//! | 0 | `length` | 4 | bytes after this field: `4 + header_len + body_len` |
//! | 4 | `serialize_type` | 1 | 0 JSON, 1 ROCKETMQ (binary) |
//! | 5 | `header_len` | 3 | bytes of the header |
//! | 8 | header | `header_len` | JSON object, or the binary layout below |
//! | 8 + header_len | body | rest | |
//!
//! Binary header (`RocketMQSerializable`), big-endian:
//!
//! | field | bytes |
//! |---|---|
//! | `code` | 2 (signed) |
//! | `language` | 1 ([`Language`]) |
//! | `version` | 2 (signed) |
//! | `opaque` | 4 (signed) |
//! | `flag` | 4 (signed) |
//! | `remark_len`, `remark` | 4, then UTF-8 (length 0: no remark) |
//! | `ext_len`, ext fields | 4, then `{ key_len:2, key, val_len:4, val }*` |
//!
//! JSON header: `{"code":10,"language":"JAVA","version":473,"opaque":42,"flag":0,
//! "remark":null,"extFields":{...},"serializeTypeCurrentRPC":"JSON"}`. `extFields` values
//! may be any JSON scalar (Java, Go and Rust clients send strings, others numbers and
//! booleans); they are kept as their text. `null` values are dropped; arrays and objects are
//! refused.
//!
//! Invariants: [`check`] validates the length against the caller's maximum (never above
//! [`FRAME_BYTES_MAX`], RocketMQ's `frameMaxLength`) as soon as 4 bytes are in, and the
//! serialize type and header length once 8 are, all before the caller buffers the frame.
//! [`parse`] checks every length inside the header against the bytes present before it
//! slices or allocates.

pub use super::command::{Command, Language, EXT_FIELDS_MAX, FLAG_ONEWAY, FLAG_RESPONSE, VERSION};
use super::ext::ExtFields;
use crate::error::{Result, WireError};

/// Bytes of the `length` field.
pub const LENGTH_FIELD_BYTES: usize = 4;
/// Bytes before the header: `length` and the serialize-type/header-length word.
pub const PREFIX_BYTES: usize = 8;
/// RocketMQ's `frameMaxLength`: the largest whole frame, length field included.
pub const FRAME_BYTES_MAX: usize = 16 * 1024 * 1024;
/// The header length is a 24-bit field.
pub const HEADER_BYTES_MAX: usize = (1 << 24) - 1;
/// Bytes of a binary header with no remark and no ext fields.
pub const BINARY_HEADER_FIXED_BYTES: usize = 2 + 1 + 2 + 4 + 4 + 4 + 4;

const _: () = assert!(PREFIX_BYTES == LENGTH_FIELD_BYTES + 4);
const _: () = assert!(FRAME_BYTES_MAX <= u32::MAX as usize);
const _: () = assert!(BINARY_HEADER_FIXED_BYTES == 21);

/// How the header is serialized (the frame's byte 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SerializeType {
    Json = 0,
    RocketMq = 1,
}

impl SerializeType {
    pub fn from_byte(b: u8) -> Result<Self> {
        match b {
            0 => Ok(SerializeType::Json),
            1 => Ok(SerializeType::RocketMq),
            _ => Err(WireError::UnknownCode {
                what: "remoting serialize type",
                code: u32::from(b),
            }),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SerializeType::Json => "JSON",
            SerializeType::RocketMq => "ROCKETMQ",
        }
    }
}

/// The prefix fields, unvalidated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    /// Whole frame length, length field included.
    pub frame_len: u64,
    pub serialize_type: u8,
    pub header_len: usize,
}

/// Reads the prefix without validating it; `None` before 8 bytes.
pub fn peek(buf: &[u8]) -> Option<Prefix> {
    let p: &[u8; PREFIX_BYTES] = buf.get(..PREFIX_BYTES)?.try_into().ok()?;
    let length = u32::from_be_bytes([p[0], p[1], p[2], p[3]]);
    Some(Prefix {
        frame_len: u64::from(length) + LENGTH_FIELD_BYTES as u64,
        serialize_type: p[4],
        header_len: (usize::from(p[5]) << 16) | (usize::from(p[6]) << 8) | usize::from(p[7]),
    })
}

/// Is a whole frame at the start of `buf`? `Ok(None)`: read more. `Ok(Some(n))`: the first
/// `n` bytes are one frame. `Err`: the stream is not a remoting stream, or the frame is over
/// `max_frame` ([`WireError::FrameTooLarge`]).
pub fn check(buf: &[u8], max_frame: usize) -> Result<Option<usize>> {
    let max = max_frame.min(FRAME_BYTES_MAX);
    let Some(len_bytes) = buf.get(..LENGTH_FIELD_BYTES) else {
        return Ok(None);
    };
    let length = u32::from_be_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]]);
    let frame_len = length as usize + LENGTH_FIELD_BYTES;
    if frame_len > max {
        return Err(WireError::FrameTooLarge {
            len: frame_len,
            max,
        });
    }
    if frame_len < PREFIX_BYTES {
        return Err(WireError::TooShort {
            what: "remoting frame",
            len: frame_len,
            min: PREFIX_BYTES,
        });
    }
    if let Some(p) = peek(buf) {
        SerializeType::from_byte(p.serialize_type)?;
        check_header_len(p.header_len, frame_len)?;
    }
    Ok((buf.len() >= frame_len).then_some(frame_len))
}

fn check_header_len(header_len: usize, frame_len: usize) -> Result<()> {
    if header_len > frame_len - PREFIX_BYTES {
        return Err(WireError::TooLong {
            what: "remoting header",
            len: header_len,
            max: frame_len - PREFIX_BYTES,
        });
    }
    Ok(())
}

/// A parsed frame: the command, how its header was serialized, and the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed<'a> {
    pub command: Command,
    pub serialize_type: SerializeType,
    pub body: &'a [u8],
}

/// Parses exactly one frame: `buf` must be the `n` bytes [`check`] reported.
pub fn parse(buf: &[u8]) -> Result<Parsed<'_>> {
    let Some(p) = peek(buf) else {
        return Err(WireError::Truncated {
            what: "remoting frame prefix",
            need: PREFIX_BYTES,
            have: buf.len(),
        });
    };
    if p.frame_len != buf.len() as u64 {
        return Err(WireError::SizeMismatch {
            declared: usize::try_from(p.frame_len).unwrap_or(usize::MAX),
            actual: buf.len(),
        });
    }
    let st = SerializeType::from_byte(p.serialize_type)?;
    check_header_len(p.header_len, buf.len())?;
    let header = &buf[PREFIX_BYTES..PREFIX_BYTES + p.header_len];
    let body = &buf[PREFIX_BYTES + p.header_len..];
    let command = match st {
        SerializeType::Json => decode_json_header(header)?,
        SerializeType::RocketMq => decode_binary_header(header)?,
    };
    Ok(Parsed {
        command,
        serialize_type: st,
        body,
    })
}

/// Appends the frame prefix and header of `cmd` for a body of `body_len` bytes; the caller
/// appends the body.
pub fn encode_head(
    out: &mut Vec<u8>,
    cmd: &Command,
    st: SerializeType,
    body_len: usize,
) -> Result<()> {
    let start = out.len();
    out.extend_from_slice(&[0; PREFIX_BYTES]);
    match st {
        SerializeType::Json => encode_json_header(out, cmd)?,
        SerializeType::RocketMq => encode_binary_header(out, cmd)?,
    }
    let header_len = out.len() - start - PREFIX_BYTES;
    let frame_len = PREFIX_BYTES + header_len + body_len;
    if header_len > HEADER_BYTES_MAX || frame_len > FRAME_BYTES_MAX {
        out.truncate(start);
        return Err(WireError::FrameTooLarge {
            len: frame_len,
            max: FRAME_BYTES_MAX,
        });
    }
    let length =
        u32::try_from(frame_len - LENGTH_FIELD_BYTES).map_err(|_| WireError::FrameTooLarge {
            len: frame_len,
            max: FRAME_BYTES_MAX,
        })?;
    out[start..start + 4].copy_from_slice(&length.to_be_bytes());
    let word = ((st as u32) << 24) | (header_len as u32 & 0x00FF_FFFF);
    out[start + 4..start + 8].copy_from_slice(&word.to_be_bytes());
    Ok(())
}

/// A whole frame: prefix, header and `body`.
pub fn encode(cmd: &Command, st: SerializeType, body: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(256 + body.len());
    encode_head(&mut out, cmd, st, body.len())?;
    out.extend_from_slice(body);
    Ok(out)
}

// ---- JSON header ----

/// Writes `s` as a JSON string: as it is when no byte needs escaping (ids, numbers, names;
/// the check has no branch per byte, where serde_json's escaping writer made a batch's
/// 1 KB of message ids 1.3 % of the remoting send path's CPU), else escaped by serde_json.
/// serde_json escapes exactly the bytes below 0x20, `"` and `\`, so both write the same.
fn push_json_str(out: &mut Vec<u8>, s: &str) -> serde_json::Result<()> {
    let plain = s.bytes().fold(true, |plain, b| {
        plain & (b >= 0x20 && b != b'"' && b != b'\\')
    });
    if plain {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
        Ok(())
    } else {
        serde_json::to_writer(&mut *out, s)
    }
}

fn decode_json_header(header: &[u8]) -> Result<Command> {
    super::json_header::decode(header)
}

/// Writes the JSON header directly (keys in Java's alphabetical order, as fastjson writes
/// them); strings are escaped by serde_json, with no intermediate document.
fn encode_json_header(out: &mut Vec<u8>, cmd: &Command) -> Result<()> {
    let bad = |_| WireError::Invalid {
        what: "remoting JSON header",
        detail: "could not be serialized",
    };
    let mut int = itoa::Buffer::new();
    out.extend_from_slice(b"{\"code\":");
    out.extend_from_slice(int.format(cmd.code).as_bytes());
    out.extend_from_slice(b",\"extFields\":{");
    for (i, (k, v)) in cmd.ext_fields.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        push_json_str(out, k).map_err(bad)?;
        out.push(b':');
        push_json_str(out, v).map_err(bad)?;
    }
    out.extend_from_slice(b"},\"flag\":");
    out.extend_from_slice(int.format(cmd.flag).as_bytes());
    out.extend_from_slice(b",\"language\":\"");
    out.extend_from_slice(cmd.language.name().as_bytes());
    out.extend_from_slice(b"\",\"opaque\":");
    out.extend_from_slice(int.format(cmd.opaque).as_bytes());
    if let Some(r) = &cmd.remark {
        out.extend_from_slice(b",\"remark\":");
        push_json_str(out, r).map_err(bad)?;
    }
    out.extend_from_slice(b",\"serializeTypeCurrentRPC\":\"");
    out.extend_from_slice(SerializeType::Json.name().as_bytes());
    out.extend_from_slice(b"\",\"version\":");
    out.extend_from_slice(int.format(cmd.version).as_bytes());
    out.push(b'}');
    Ok(())
}

// ---- binary header ----

struct Cursor<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8]> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or(WireError::Truncated {
                what,
                need: n,
                have: self.buf.len() - self.at,
            })?;
        let s = &self.buf[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N]> {
        let s = self.take(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn text(&mut self, n: usize, what: &'static str) -> Result<&'a str> {
        let s = self.take(n, what)?;
        std::str::from_utf8(s).map_err(|_| WireError::NotUtf8 { what })
    }
}

fn decode_binary_header(header: &[u8]) -> Result<Command> {
    let mut c = Cursor { buf: header, at: 0 };
    let code = i16::from_be_bytes(c.array("remoting header code")?);
    let [language] = c.array::<1>("remoting header language")?;
    let version = i16::from_be_bytes(c.array("remoting header version")?);
    let opaque = i32::from_be_bytes(c.array("remoting header opaque")?);
    let flag = i32::from_be_bytes(c.array("remoting header flag")?);
    let remark_len = u32::from_be_bytes(c.array("remoting header remark length")?) as usize;
    let remark = if remark_len > 0 {
        Some(c.text(remark_len, "remoting header remark")?.to_owned())
    } else {
        None
    };
    let ext_len = u32::from_be_bytes(c.array("remoting header extFields length")?) as usize;
    let ext = c.take(ext_len, "remoting header extFields")?;
    if c.at != header.len() {
        return Err(WireError::SizeMismatch {
            declared: header.len(),
            actual: c.at,
        });
    }
    let mut e = Cursor { buf: ext, at: 0 };
    let mut ext_fields = ExtFields::with_capacity(ext.len(), 16);
    while e.at < ext.len() {
        if ext_fields.len() >= EXT_FIELDS_MAX {
            return Err(WireError::TooLong {
                what: "remoting extFields",
                len: ext_fields.len() + 1,
                max: EXT_FIELDS_MAX,
            });
        }
        let klen = u16::from_be_bytes(e.array("extFields key length")?) as usize;
        let key = e.text(klen, "extFields key")?;
        let vlen = u32::from_be_bytes(e.array("extFields value length")?) as usize;
        let val = e.text(vlen, "extFields value")?;
        ext_fields.insert(key, val);
    }
    Ok(Command {
        code: i32::from(code),
        language: Language::from_code(language),
        version: i32::from(version),
        opaque,
        flag,
        remark,
        ext_fields,
    })
}

fn encode_binary_header(out: &mut Vec<u8>, cmd: &Command) -> Result<()> {
    let narrow = |v: i32, what: &'static str| {
        i16::try_from(v).map_err(|_| WireError::Invalid {
            what,
            detail: "does not fit the binary header's 16 bits",
        })
    };
    out.extend_from_slice(&narrow(cmd.code, "remoting code")?.to_be_bytes());
    out.push(cmd.language.code());
    out.extend_from_slice(&narrow(cmd.version, "remoting version")?.to_be_bytes());
    out.extend_from_slice(&cmd.opaque.to_be_bytes());
    out.extend_from_slice(&cmd.flag.to_be_bytes());
    let remark = cmd.remark.as_deref().unwrap_or("").as_bytes();
    out.extend_from_slice(&len_u32(remark.len(), "remoting remark")?.to_be_bytes());
    out.extend_from_slice(remark);
    let len_at = out.len();
    out.extend_from_slice(&[0; 4]);
    for (k, v) in &cmd.ext_fields {
        let klen = u16::try_from(k.len()).map_err(|_| WireError::TooLong {
            what: "extFields key",
            len: k.len(),
            max: u16::MAX as usize,
        })?;
        out.extend_from_slice(&klen.to_be_bytes());
        out.extend_from_slice(k.as_bytes());
        out.extend_from_slice(&len_u32(v.len(), "extFields value")?.to_be_bytes());
        out.extend_from_slice(v.as_bytes());
    }
    let ext_len = len_u32(out.len() - len_at - 4, "remoting extFields")?;
    out[len_at..len_at + 4].copy_from_slice(&ext_len.to_be_bytes());
    Ok(())
}

fn len_u32(n: usize, what: &'static str) -> Result<u32> {
    u32::try_from(n).map_err(|_| WireError::TooLong {
        what,
        len: n,
        max: u32::MAX as usize,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn sample() -> Command {
        let ext = ExtFields::from([("topic", "Orders"), ("queueId", "3")]);
        Command {
            code: 310,
            language: Language::Cpp,
            version: 399,
            opaque: -7,
            flag: FLAG_ONEWAY,
            remark: Some("é remark".into()),
            ext_fields: ext,
        }
    }

    #[test]
    fn both_serializations_round_trip() {
        for st in [SerializeType::Json, SerializeType::RocketMq] {
            let f = encode(&sample(), st, b"body").expect("encodes");
            assert_eq!(f[4], st as u8);
            let n = check(&f, FRAME_BYTES_MAX).expect("valid").expect("whole");
            assert_eq!(n, f.len());
            assert_eq!(check(&f[..n - 1], FRAME_BYTES_MAX), Ok(None));
            let p = parse(&f).expect("parses");
            assert_eq!(p.command, sample());
            assert_eq!(p.serialize_type, st);
            assert_eq!(p.body, b"body");
            if st == SerializeType::Json {
                // What clients' decoders require: string ext values, numeric scalars,
                // `language` by name and `serializeTypeCurrentRPC`.
                let header_len = f.len() - PREFIX_BYTES - 4;
                let v: Value = serde_json::from_slice(&f[PREFIX_BYTES..PREFIX_BYTES + header_len])
                    .expect("standard JSON");
                assert_eq!(v["extFields"]["queueId"], "3");
                assert_eq!(v["code"], 310);
                assert_eq!(v["language"], "CPP");
                assert_eq!(v["serializeTypeCurrentRPC"], "JSON");
                assert_eq!(v["remark"], "é remark");
            }
        }
    }

    #[test]
    fn json_strings_written_as_serde_json_writes_them() {
        for s in [
            "",
            "plain 0A00000700002A9F,0A00",
            "quote \" and backslash \\ inside",
            "tab\tnewline\ncontrol\u{1}\u{1f} end",
            "DEL \u{7f}, é, 😀",
        ] {
            let mut out = Vec::new();
            push_json_str(&mut out, s).expect("writes");
            assert_eq!(out, serde_json::to_vec(s).expect("serde_json"), "{s:?}");
        }
    }

    #[test]
    fn json_scalars_of_every_kind_and_unknown_keys() {
        let h = br#"{"code":"11","language":13,"opaque":5,"flag":2,"remark":null,
            "extFields":{"queueId":3,"unitMode":false,"bname":"b","n":null,"big":12345678901},
            "serializeTypeCurrentRPC":"JSON","somethingNew":[1,2]}"#;
        let mut f = Vec::new();
        f.extend_from_slice(&((4 + h.len()) as u32).to_be_bytes());
        f.extend_from_slice(&(h.len() as u32).to_be_bytes());
        f.extend_from_slice(h);
        let p = parse(&f).expect("parses");
        let c = p.command;
        assert_eq!(
            (c.code, c.language, c.opaque, c.version),
            (11, Language::NodeJs, 5, 0)
        );
        assert!(c.is_oneway());
        assert_eq!(c.ext("queueId"), Some("3"));
        assert_eq!(c.ext("unitMode"), Some("false"));
        assert_eq!(c.ext("big"), Some("12345678901"));
        assert_eq!(c.ext("n"), None);
    }

    #[test]
    fn bad_frames_are_errors() {
        // length past the maximum, refused from 4 bytes
        assert!(matches!(
            check(&[0x10, 0, 0, 0], 1 << 20),
            Err(WireError::FrameTooLarge { .. })
        ));
        // wrong serialize type
        assert!(check(&[0, 0, 0, 4, 2, 0, 0, 0], 1 << 20).is_err());
        // header length past the frame
        assert!(check(&[0, 0, 0, 4, 0, 0, 0, 1], 1 << 20).is_err());
        // length under the prefix
        assert!(check(&[0, 0, 0, 3], 1 << 20).is_err());
        // invalid JSON, JSON that is no object, no code, non-scalar ext value
        for h in [
            &b"{nope"[..],
            b"[1]",
            b"{\"opaque\":1}",
            b"{\"code\":1,\"extFields\":{\"a\":[1]}}",
        ] {
            let mut f = Vec::new();
            f.extend_from_slice(&((4 + h.len()) as u32).to_be_bytes());
            f.extend_from_slice(&(h.len() as u32).to_be_bytes());
            f.extend_from_slice(h);
            assert!(parse(&f).is_err(), "{}", String::from_utf8_lossy(h));
        }
        // binary header whose ext length claims more than is there
        let mut good = encode(&sample(), SerializeType::RocketMq, b"").expect("encodes");
        let ext_len_at = PREFIX_BYTES + BINARY_HEADER_FIXED_BYTES - 4 + "é remark".len();
        good[ext_len_at..ext_len_at + 4].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(parse(&good).is_err());
    }
}
