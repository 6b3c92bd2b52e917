//! Typed headers (and large bodies) of every request and response, one file per
//! request/response pair (or family). Each type derives its encoding from one field list
//! ([`crate::wire_struct!`]), so encode and decode cannot disagree.
//!
//! A response header is always a [`Response<T>`]: the remark (u16 length + UTF-8, empty on
//! success) first, then an option tag and the command's fields. A client can therefore read
//! the status (frame `code`) and the remark of any response, whatever the command, with
//! [`read_remark`], before (or instead of) decoding the fields.

use crate::codec::{Decode, Encode, Reader, Writer};
use crate::error::Result;

pub mod route;

/// A response header: the remark, then the command's fields if the responder sent them
/// (success, and statuses that still carry data such as PULL_OFFSET_MOVED or WRONG_SHARD).
///
/// | bytes | field                                   |
/// |-------|-----------------------------------------|
/// | 2 + n | remark (u16 length + UTF-8)             |
/// | 1     | 0 = no fields follow, 1 = fields follow |
/// | ...   | `T`                                     |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response<T> {
    pub remark: String,
    pub fields: Option<T>,
}

impl<T> Response<T> {
    /// A response with fields and an empty remark.
    pub fn ok(fields: T) -> Self {
        Response {
            remark: String::new(),
            fields: Some(fields),
        }
    }

    /// A response with only a remark (any status).
    pub fn remark(remark: impl Into<String>) -> Self {
        Response {
            remark: remark.into(),
            fields: None,
        }
    }
}

impl<T: Encode> Encode for Response<T> {
    fn write(&self, w: &mut Writer<'_>) {
        self.remark.write(w);
        self.fields.write(w);
    }
}

impl<T: Decode> Decode for Response<T> {
    const MIN_BYTES: usize = 2 + 1;
    fn read(r: &mut Reader<'_>, _what: &'static str) -> Result<Self> {
        Ok(Response {
            remark: String::read(r, "remark")?,
            fields: Option::<T>::read(r, "fields")?,
        })
    }
}

impl<T: crate::codec::sample::Sample> crate::codec::sample::Sample for Response<T> {
    fn sample(g: &mut crate::codec::sample::Gen<'_>) -> Self {
        Response {
            remark: String::sample(g),
            fields: Option::<T>::sample(g),
        }
    }
}

/// The remark of any response header, borrowed, and the bytes after it.
pub fn read_remark(header: &[u8]) -> Result<(&str, &[u8])> {
    let mut r = Reader::new(header);
    let remark = r.str("remark")?;
    Ok((remark, r.rest()))
}

crate::wire_struct! {
    /// Fields of a WRONG_SHARD response, for any request: the queue lives on `shard_id`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct WrongShard {
        pub shard_id: u16,
        pub shard_count: u16,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::Empty;

    #[test]
    fn remark_is_readable_whatever_the_fields() {
        let r = Response::ok(WrongShard {
            shard_id: 1,
            shard_count: 2,
        });
        let mut with_remark = r.clone();
        with_remark.remark = "queue 3 is on shard 1".into();
        let bytes = with_remark.to_vec().unwrap();
        assert_eq!(&bytes[..2], &[0, 21]);
        assert_eq!(bytes[23], 1);
        let (remark, rest) = read_remark(&bytes).unwrap();
        assert_eq!(remark, "queue 3 is on shard 1");
        assert_eq!(rest, &[1, 0, 1, 0, 2]);
        assert_eq!(Response::<WrongShard>::decode(&bytes).unwrap(), with_remark);
        let err = Response::<WrongShard>::remark("boom").to_vec().unwrap();
        assert_eq!(err, b"\x00\x04boom\x00");
        assert_eq!(
            Response::<Empty>::ok(Empty).to_vec().unwrap(),
            vec![0, 0, 1]
        );
    }
}
