//! The header codec every command uses: a checked [`Reader`], a length-counting [`Writer`],
//! the [`Encode`]/[`Decode`] traits, and the [`wire_struct!`](crate::wire_struct) and
//! [`wire_enum!`](crate::wire_enum) macros that derive both from one field list, so a field
//! can never be encoded in one order and decoded in another.
//!
//! Encoding rules (all integers big-endian):
//!
//! | type                 | bytes                                                       |
//! |----------------------|-------------------------------------------------------------|
//! | `u8`/`u16`/`u32`/`u64`, `i32`/`i64` | fixed width                                  |
//! | `bool`               | 1 byte, 0 or 1 (anything else is rejected)                  |
//! | `String`             | u16 length + UTF-8 bytes                                    |
//! | [`Blob`]             | u32 length (at most [`BLOB_BYTES_MAX`]) + bytes             |
//! | `Option<T>`          | u8 tag 0 (absent) or 1 (present) + `T`                      |
//! | [`Appended<T>`]      | `T`; nothing (read as `T::default()`) from an older peer    |
//! | `Vec<T>`             | u32 count (at most [`LIST_ITEMS_MAX`]) + items              |
//! | `BTreeMap<K, V>`     | u32 count (at most [`LIST_ITEMS_MAX`]) + (key, value) pairs, keys unique |
//! | `SocketAddr`         | u8 family (4 or 6) + 4 or 16 address bytes + u16 port       |
//! | struct               | its fields in declaration order, no padding, no tags        |
//! | enum                 | its `u8`/`u16` code                                         |
//!
//! Invariants: every count and length a peer sends is checked against a named maximum and
//! against the bytes actually left *before* anything is allocated; a list's preallocation is
//! capped at [`PREALLOC_ITEMS_MAX`], so memory grows only with bytes really decoded.
//! [`Decode::decode`] ignores bytes after the last known field: new fields are only ever
//! appended at the end of a top-level header or body, so an older peer still reads a newer
//! one's messages; declared [`Appended`], they also let a newer peer read an older one's.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use bytes::BufMut;

use crate::error::{Result, WireError};

pub mod sample;

/// Longest string: its length is a u16.
pub const STRING_BYTES_MAX: usize = u16::MAX as usize;
/// Most items in one list or map.
pub const LIST_ITEMS_MAX: usize = 1 << 20;
/// Longest byte blob: the largest frame (`frame::FRAME_BYTES_MAX`, asserted equal there; a
/// blob never outgrows its frame).
pub const BLOB_BYTES_MAX: usize = 16 * 1024 * 1024;
/// Most items a decoder reserves room for up front; beyond this a list grows as items decode.
pub const PREALLOC_ITEMS_MAX: usize = 1024;

const _: () = assert!(LIST_ITEMS_MAX <= u32::MAX as usize);
const _: () = assert!(BLOB_BYTES_MAX <= u32::MAX as usize);

/// A value that can be written to the wire.
pub trait Encode {
    /// Writes the fields in wire order. Errors (a string over its maximum, ...) are recorded
    /// in the writer and reported by [`Encode::encoded_len`] and [`Encode::encode`].
    fn write(&self, w: &mut Writer<'_>);

    /// Bytes [`Encode::encode`] will append, after checking every field against its limit.
    fn encoded_len(&self) -> Result<usize> {
        let mut w = Writer::counter();
        self.write(&mut w);
        w.finish()
    }

    /// Appends the encoding to `out` and returns its length. Nothing is written if a field
    /// is over its limit or `out` has too little room.
    fn encode<B: BufMut>(&self, out: &mut B) -> Result<usize> {
        let len = self.encoded_len()?;
        if out.remaining_mut() < len {
            return Err(WireError::BufferTooSmall {
                what: "encoding",
                need: len,
                have: out.remaining_mut(),
            });
        }
        let mut w = Writer::to(out);
        self.write(&mut w);
        w.finish()
    }

    /// The encoding as a new vector.
    fn to_vec(&self) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(self.encoded_len()?);
        self.encode(&mut out)?;
        Ok(out)
    }
}

/// A value that can be read from the wire.
pub trait Decode: Sized {
    /// The fewest bytes an encoding can take; list decoding checks `count * MIN_BYTES`
    /// against the bytes left before it allocates.
    const MIN_BYTES: usize;

    /// Reads one value; `what` names the field for error messages.
    fn read(r: &mut Reader<'_>, what: &'static str) -> Result<Self>;

    /// Decodes a whole header or body. Bytes after the known fields are ignored (see the
    /// module docs on extensibility).
    fn decode(buf: &[u8]) -> Result<Self> {
        Self::read(&mut Reader::new(buf), "header")
    }
}

/// A checked cursor over received bytes. Every read checks the bytes left first.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The unconsumed bytes.
    pub fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    /// Takes the next `len` bytes.
    pub fn take(&mut self, len: usize, what: &'static str) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(len).ok_or(WireError::TooLong {
            what,
            len,
            max: self.remaining(),
        })?;
        let bytes = self.buf.get(self.pos..end).ok_or(WireError::Truncated {
            what,
            need: end,
            have: self.buf.len(),
        })?;
        self.pos = end;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, what)?);
        Ok(a)
    }

    pub fn u8(&mut self, what: &'static str) -> Result<u8> {
        self.array::<1>(what).map(|a| a[0])
    }

    pub fn u16(&mut self, what: &'static str) -> Result<u16> {
        self.array(what).map(u16::from_be_bytes)
    }

    pub fn u32(&mut self, what: &'static str) -> Result<u32> {
        self.array(what).map(u32::from_be_bytes)
    }

    pub fn u64(&mut self, what: &'static str) -> Result<u64> {
        self.array(what).map(u64::from_be_bytes)
    }

    pub fn i32(&mut self, what: &'static str) -> Result<i32> {
        self.array(what).map(i32::from_be_bytes)
    }

    pub fn i64(&mut self, what: &'static str) -> Result<i64> {
        self.array(what).map(i64::from_be_bytes)
    }

    /// A u16-length UTF-8 string, borrowed.
    pub fn str(&mut self, what: &'static str) -> Result<&'a str> {
        let len = usize::from(self.u16(what)?);
        let bytes = self.take(len, what)?;
        std::str::from_utf8(bytes).map_err(|_| WireError::NotUtf8 { what })
    }

    /// A u32-length byte blob, borrowed; the length is checked against [`BLOB_BYTES_MAX`].
    pub fn blob(&mut self, what: &'static str) -> Result<&'a [u8]> {
        let len = self.u32(what)? as usize;
        if len > BLOB_BYTES_MAX {
            return Err(WireError::TooLong {
                what,
                len,
                max: BLOB_BYTES_MAX,
            });
        }
        self.take(len, what)
    }

    /// A u32 item count, checked against [`LIST_ITEMS_MAX`] and against the bytes left
    /// (`count * item_min_bytes`) before the caller allocates anything.
    pub fn count(&mut self, what: &'static str, item_min_bytes: usize) -> Result<usize> {
        let count = self.u32(what)? as usize;
        if count > LIST_ITEMS_MAX {
            return Err(WireError::TooLong {
                what,
                len: count,
                max: LIST_ITEMS_MAX,
            });
        }
        let need = count
            .checked_mul(item_min_bytes)
            .ok_or(WireError::TooLong {
                what,
                len: count,
                max: LIST_ITEMS_MAX,
            })?;
        if need > self.remaining() {
            return Err(WireError::Truncated {
                what,
                need: self.pos.saturating_add(need),
                have: self.buf.len(),
            });
        }
        Ok(count)
    }
}

enum Sink<'a> {
    Count,
    Buf(&'a mut dyn BufMut),
}

/// Writes fields to a `BufMut`, or only counts them. Limit violations are recorded (the first
/// one wins) and returned by [`Writer::finish`]; [`Encode::encode`] counts first, so a value
/// that breaks a limit is never partly written.
pub struct Writer<'a> {
    sink: Sink<'a>,
    len: usize,
    error: Option<WireError>,
}

impl std::fmt::Debug for Writer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("len", &self.len)
            .field("error", &self.error)
            .finish()
    }
}

impl<'a> Writer<'a> {
    /// A writer that only counts bytes and checks limits.
    pub fn counter() -> Writer<'static> {
        Writer {
            sink: Sink::Count,
            len: 0,
            error: None,
        }
    }

    /// A writer appending to `out`.
    pub fn to(out: &'a mut dyn BufMut) -> Self {
        Writer {
            sink: Sink::Buf(out),
            len: 0,
            error: None,
        }
    }

    /// Bytes written (or counted), or the first limit violation.
    pub fn finish(self) -> Result<usize> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.len),
        }
    }

    /// Records a limit violation; the first one is kept.
    pub fn fail(&mut self, error: WireError) {
        if self.error.is_none() {
            self.error = Some(error);
        }
    }

    /// Raw bytes, no length prefix.
    pub fn bytes(&mut self, bytes: &[u8]) {
        self.len = self.len.saturating_add(bytes.len());
        if let Sink::Buf(out) = &mut self.sink {
            out.put_slice(bytes);
        }
    }

    pub fn u8(&mut self, v: u8) {
        self.bytes(&[v]);
    }

    pub fn u16(&mut self, v: u16) {
        self.bytes(&v.to_be_bytes());
    }

    pub fn u32(&mut self, v: u32) {
        self.bytes(&v.to_be_bytes());
    }

    pub fn u64(&mut self, v: u64) {
        self.bytes(&v.to_be_bytes());
    }

    pub fn i32(&mut self, v: i32) {
        self.bytes(&v.to_be_bytes());
    }

    pub fn i64(&mut self, v: i64) {
        self.bytes(&v.to_be_bytes());
    }

    /// A u16-length string; longer than [`STRING_BYTES_MAX`] is an error.
    pub fn str(&mut self, s: &str) {
        match u16::try_from(s.len()) {
            Ok(len) => {
                self.u16(len);
                self.bytes(s.as_bytes());
            }
            Err(_) => self.fail(WireError::TooLong {
                what: "string",
                len: s.len(),
                max: STRING_BYTES_MAX,
            }),
        }
    }

    /// A u32-length blob; longer than [`BLOB_BYTES_MAX`] is an error.
    pub fn blob(&mut self, b: &[u8]) {
        if b.len() > BLOB_BYTES_MAX {
            return self.fail(WireError::TooLong {
                what: "blob",
                len: b.len(),
                max: BLOB_BYTES_MAX,
            });
        }
        self.u32(b.len() as u32);
        self.bytes(b);
    }

    /// A u32 list count; more than [`LIST_ITEMS_MAX`] is an error.
    pub fn count(&mut self, count: usize) {
        if count > LIST_ITEMS_MAX {
            return self.fail(WireError::TooLong {
                what: "list",
                len: count,
                max: LIST_ITEMS_MAX,
            });
        }
        self.u32(count as u32);
    }
}

/// An empty header (requests and responses with no fields of their own).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Empty;

impl Encode for Empty {
    fn write(&self, _w: &mut Writer<'_>) {}
}

impl Decode for Empty {
    const MIN_BYTES: usize = 0;
    fn read(_r: &mut Reader<'_>, _what: &'static str) -> Result<Self> {
        Ok(Empty)
    }
}

/// An opaque byte string with a u32 length.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Blob(pub Vec<u8>);

impl Encode for Blob {
    fn write(&self, w: &mut Writer<'_>) {
        w.blob(&self.0);
    }
}

impl Decode for Blob {
    const MIN_BYTES: usize = 4;
    fn read(r: &mut Reader<'_>, what: &'static str) -> Result<Self> {
        r.blob(what).map(|b| Blob(b.to_vec()))
    }
}

/// Bytes written as they are, with no length (for an already encoded body).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Raw<'a>(pub &'a [u8]);

impl Encode for Raw<'_> {
    fn write(&self, w: &mut Writer<'_>) {
        w.bytes(self.0);
    }
}

macro_rules! int_codec {
    ($($t:ident),*) => {$(
        impl Encode for $t {
            fn write(&self, w: &mut Writer<'_>) {
                w.$t(*self);
            }
        }
        impl Decode for $t {
            const MIN_BYTES: usize = std::mem::size_of::<$t>();
            fn read(r: &mut Reader<'_>, what: &'static str) -> Result<Self> {
                r.$t(what)
            }
        }
    )*};
}

int_codec!(u8, u16, u32, u64, i32, i64);

impl Encode for bool {
    fn write(&self, w: &mut Writer<'_>) {
        w.u8(u8::from(*self));
    }
}

impl Decode for bool {
    const MIN_BYTES: usize = 1;
    fn read(r: &mut Reader<'_>, what: &'static str) -> Result<Self> {
        match r.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(WireError::Invalid {
                what,
                detail: "boolean is not 0 or 1",
            }),
        }
    }
}

impl Encode for str {
    fn write(&self, w: &mut Writer<'_>) {
        w.str(self);
    }
}

impl Encode for String {
    fn write(&self, w: &mut Writer<'_>) {
        w.str(self);
    }
}

impl Decode for String {
    const MIN_BYTES: usize = 2;
    fn read(r: &mut Reader<'_>, what: &'static str) -> Result<Self> {
        r.str(what).map(str::to_owned)
    }
}

impl<T: Encode> Encode for Option<T> {
    fn write(&self, w: &mut Writer<'_>) {
        match self {
            None => w.u8(0),
            Some(v) => {
                w.u8(1);
                v.write(w);
            }
        }
    }
}

impl<T: Decode> Decode for Option<T> {
    const MIN_BYTES: usize = 1;
    fn read(r: &mut Reader<'_>, what: &'static str) -> Result<Self> {
        match r.u8(what)? {
            0 => Ok(None),
            1 => T::read(r, what).map(Some),
            _ => Err(WireError::Invalid {
                what,
                detail: "option tag is not 0 or 1",
            }),
        }
    }
}

/// A field appended to a top-level struct after peers without it were released: written as
/// `T`, and read as `T::default()` when the struct ends before it (an older peer's message).
/// Only the last fields of a top-level header or body may be `Appended`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Appended<T>(pub T);

impl<T: Encode> Encode for Appended<T> {
    fn write(&self, w: &mut Writer<'_>) {
        self.0.write(w);
    }
}

impl<T: Decode + Default> Decode for Appended<T> {
    const MIN_BYTES: usize = 0;
    fn read(r: &mut Reader<'_>, what: &'static str) -> Result<Self> {
        if r.remaining() == 0 {
            return Ok(Appended(T::default()));
        }
        T::read(r, what).map(Appended)
    }
}

impl<T: Encode> Encode for [T] {
    fn write(&self, w: &mut Writer<'_>) {
        w.count(self.len());
        for item in self {
            item.write(w);
        }
    }
}

impl<T: Encode> Encode for Vec<T> {
    fn write(&self, w: &mut Writer<'_>) {
        self.as_slice().write(w);
    }
}

impl<T: Decode> Decode for Vec<T> {
    const MIN_BYTES: usize = 4;
    fn read(r: &mut Reader<'_>, what: &'static str) -> Result<Self> {
        let count = r.count(what, T::MIN_BYTES)?;
        let mut items = Vec::with_capacity(count.min(PREALLOC_ITEMS_MAX));
        for _ in 0..count {
            items.push(T::read(r, what)?);
        }
        Ok(items)
    }
}

impl<K: Encode, V: Encode> Encode for BTreeMap<K, V> {
    fn write(&self, w: &mut Writer<'_>) {
        w.count(self.len());
        for (k, v) in self {
            k.write(w);
            v.write(w);
        }
    }
}

impl<K: Decode + Ord, V: Decode> Decode for BTreeMap<K, V> {
    const MIN_BYTES: usize = 4;
    fn read(r: &mut Reader<'_>, what: &'static str) -> Result<Self> {
        let count = r.count(what, K::MIN_BYTES.saturating_add(V::MIN_BYTES))?;
        let mut map = BTreeMap::new();
        for _ in 0..count {
            let k = K::read(r, what)?;
            let v = V::read(r, what)?;
            if map.insert(k, v).is_some() {
                return Err(WireError::Invalid {
                    what,
                    detail: "duplicate key",
                });
            }
        }
        Ok(map)
    }
}

impl Encode for SocketAddr {
    fn write(&self, w: &mut Writer<'_>) {
        match self.ip() {
            IpAddr::V4(ip) => {
                w.u8(4);
                w.bytes(&ip.octets());
            }
            IpAddr::V6(ip) => {
                w.u8(6);
                w.bytes(&ip.octets());
            }
        }
        w.u16(self.port());
    }
}

impl Decode for SocketAddr {
    const MIN_BYTES: usize = 1 + 4 + 2;
    fn read(r: &mut Reader<'_>, what: &'static str) -> Result<Self> {
        let ip = match r.u8(what)? {
            4 => {
                let mut o = [0u8; 4];
                o.copy_from_slice(r.take(4, what)?);
                IpAddr::V4(Ipv4Addr::from(o))
            }
            6 => {
                let mut o = [0u8; 16];
                o.copy_from_slice(r.take(16, what)?);
                IpAddr::V6(Ipv6Addr::from(o))
            }
            _ => {
                return Err(WireError::Invalid {
                    what,
                    detail: "address family is not 4 or 6",
                })
            }
        };
        Ok(SocketAddr::new(ip, r.u16(what)?))
    }
}

impl<T: Encode + ?Sized> Encode for &T {
    fn write(&self, w: &mut Writer<'_>) {
        (**self).write(w);
    }
}

/// Declares a struct whose [`Encode`] and [`Decode`] (and [`Sample`](crate::codec::sample::Sample))
/// impls write and read its fields in declaration order.
#[macro_export]
macro_rules! wire_struct {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl $crate::codec::Encode for $name {
            fn write(&self, _w: &mut $crate::codec::Writer<'_>) {
                $( $crate::codec::Encode::write(&self.$field, _w); )*
            }
        }

        impl $crate::codec::Decode for $name {
            const MIN_BYTES: usize = 0 $( + <$ty as $crate::codec::Decode>::MIN_BYTES )*;
            fn read(
                _r: &mut $crate::codec::Reader<'_>,
                _what: &'static str,
            ) -> $crate::error::Result<Self> {
                Ok($name {
                    $( $field: <$ty as $crate::codec::Decode>::read(_r, stringify!($field))?, )*
                })
            }
        }

        impl $crate::codec::sample::Sample for $name {
            fn sample(_g: &mut $crate::codec::sample::Gen<'_>) -> Self {
                $name {
                    $( $field: <$ty as $crate::codec::sample::Sample>::sample(_g), )*
                }
            }
        }
    };
}

/// Declares a fieldless enum with a fixed-width integer code: `TryFrom<int>` (unknown codes
/// are [`WireError::UnknownCode`]), `From<enum> for int`, `name()` (the constant's name),
/// `ALL`, and the codec impls.
#[macro_export]
macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident : $int:ident ($what:literal) {
            $( $(#[$vmeta:meta])* $variant:ident = $code:literal => $text:literal ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr($int)]
        pub enum $name {
            $( $(#[$vmeta])* $variant = $code, )*
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$name] = &[ $( $name::$variant, )* ];

            /// The constant's name as RocketMQ (or ringmq's docs) spell it.
            pub fn name(self) -> &'static str {
                match self {
                    $( $name::$variant => $text, )*
                }
            }
        }

        impl TryFrom<$int> for $name {
            type Error = $crate::error::WireError;
            fn try_from(code: $int) -> $crate::error::Result<Self> {
                match code {
                    $( $code => Ok($name::$variant), )*
                    other => Err($crate::error::WireError::UnknownCode {
                        what: $what,
                        code: u32::from(other),
                    }),
                }
            }
        }

        impl From<$name> for $int {
            fn from(v: $name) -> $int {
                v as $int
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl $crate::codec::Encode for $name {
            fn write(&self, w: &mut $crate::codec::Writer<'_>) {
                $crate::codec::Encode::write(&$int::from(*self), w);
            }
        }

        impl $crate::codec::Decode for $name {
            const MIN_BYTES: usize = std::mem::size_of::<$int>();
            fn read(
                r: &mut $crate::codec::Reader<'_>,
                what: &'static str,
            ) -> $crate::error::Result<Self> {
                let code = <$int as $crate::codec::Decode>::read(r, what)?;
                $name::try_from(code)
            }
        }

        impl $crate::codec::sample::Sample for $name {
            fn sample(g: &mut $crate::codec::sample::Gen<'_>) -> Self {
                g.pick($name::ALL)
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::wire_struct! {
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct Demo {
            pub name: String,
            pub id: u64,
            pub flags: Vec<u16>,
            pub opt: Option<bool>,
            pub map: BTreeMap<u64, String>,
            pub addr: SocketAddr,
        }
    }

    fn demo() -> Demo {
        Demo {
            name: "ab".into(),
            id: 7,
            flags: vec![1, 2],
            opt: Some(true),
            map: BTreeMap::from([(1, "x".to_string())]),
            addr: "10.0.0.1:10911".parse().unwrap(),
        }
    }

    #[test]
    fn exact_bytes() {
        let bytes = demo().to_vec().unwrap();
        let want: Vec<u8> = [
            &[0, 2, b'a', b'b'][..],
            &7u64.to_be_bytes(),
            &[0, 0, 0, 2, 0, 1, 0, 2],
            &[1, 1],
            &[0, 0, 0, 1],
            &1u64.to_be_bytes(),
            &[0, 1, b'x'],
            &[4, 10, 0, 0, 1, 0x2A, 0x9F],
        ]
        .concat();
        assert_eq!(bytes, want);
        assert_eq!(demo().encoded_len().unwrap(), want.len());
        assert_eq!(Demo::decode(&bytes).unwrap(), demo());
        assert_eq!(Demo::MIN_BYTES, 2 + 8 + 4 + 1 + 4 + SocketAddr::MIN_BYTES);
    }

    #[test]
    fn every_truncation_is_an_error() {
        let bytes = demo().to_vec().unwrap();
        for n in 0..bytes.len() {
            assert!(Demo::decode(&bytes[..n]).is_err(), "prefix of {n} bytes");
        }
        let mut longer = bytes.clone();
        longer.extend_from_slice(b"future field");
        assert_eq!(Demo::decode(&longer).unwrap(), demo());
    }

    #[test]
    fn counts_are_checked_before_allocating() {
        let mut bytes = vec![0, 0];
        bytes.extend_from_slice(&0u64.to_be_bytes());
        bytes.extend_from_slice(&u32::MAX.to_be_bytes());
        assert!(matches!(
            Demo::decode(&bytes),
            Err(WireError::TooLong { what: "flags", .. })
        ));
        let at = bytes.len() - 4;
        bytes[at..].copy_from_slice(&1000u32.to_be_bytes());
        assert!(matches!(
            Demo::decode(&bytes),
            Err(WireError::Truncated { what: "flags", .. })
        ));
    }

    #[test]
    fn rejects_bad_tags_and_duplicates() {
        assert!(bool::decode(&[2]).is_err());
        assert!(Option::<u8>::decode(&[2, 0]).is_err());
        let dup = [&[0, 0, 0, 2][..], &[5, 0, 5, 1]].concat();
        assert!(BTreeMap::<u8, u8>::decode(&dup).is_err());
        assert!(SocketAddr::decode(&[5, 0, 0, 0, 0, 0, 0]).is_err());
        assert!(String::decode(&[0, 1, 0xFF]).is_err());
    }

    #[test]
    fn over_limit_values_are_not_written() {
        let long = "x".repeat(STRING_BYTES_MAX + 1);
        let mut out = Vec::new();
        assert!(matches!(
            long.encode(&mut out),
            Err(WireError::TooLong { .. })
        ));
        assert!(out.is_empty());
        let mut small = [0u8; 3];
        assert!(matches!(
            "abcd".encode(&mut &mut small[..]),
            Err(WireError::BufferTooSmall { .. })
        ));
    }
}
