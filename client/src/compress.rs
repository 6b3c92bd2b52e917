//! Compressing bodies on the producer, as RocketMQ's producers do: a body over
//! [`ProducerBuilder::compress_over`](crate::ProducerBuilder::compress_over) (RocketMQ's
//! `compressMsgBodyOverHowmuch`, 4 KiB by default) is compressed with the producer's
//! [`Compression`] (RocketMQ 5's `compressType`, zlib by default, at its default level 5)
//! and its record marked with SYSFLAG [`COMPRESSED`](sys_flag::COMPRESSED) and the type bits,
//! the layout [`crate::inflate`] reads back. A body that does not get smaller is sent as it
//! is. The broker stores and serves the compressed bytes; every consumer of this crate (and
//! RocketMQ's) inflates them.

use std::io::Write;

use ringmq_wire::record::{sys_flag, Compression};

/// RocketMQ's `compressMsgBodyOverHowmuch` default: bodies over 4 KiB are compressed.
pub const COMPRESS_OVER_BYTES_DEFAULT: usize = 4 * 1024;

/// RocketMQ's default zlib level (`compressLevel`).
const ZLIB_LEVEL: u32 = 5;

/// SYSFLAG bits of a body compressed with `kind`.
pub fn sys_flag_bits(kind: Compression) -> u32 {
    sys_flag::COMPRESSED
        | match kind {
            Compression::Zlib => sys_flag::COMPRESSION_ZLIB,
            Compression::Lz4 => sys_flag::COMPRESSION_LZ4,
            Compression::Zstd => sys_flag::COMPRESSION_ZSTD,
        }
}

/// `body` compressed with `kind`, if that is smaller than `body`.
pub fn compress(kind: Compression, body: &[u8]) -> Option<Vec<u8>> {
    let out = match kind {
        Compression::Zlib => {
            let mut z = flate2::write::ZlibEncoder::new(
                Vec::with_capacity(body.len() / 2),
                flate2::Compression::new(ZLIB_LEVEL),
            );
            z.write_all(body).ok()?;
            z.finish().ok()?
        }
        Compression::Lz4 => {
            let mut f = lz4_flex::frame::FrameEncoder::new(Vec::with_capacity(body.len() / 2));
            f.write_all(body).ok()?;
            f.finish().ok()?
        }
        Compression::Zstd => {
            ruzstd::encoding::compress_to_vec(body, ruzstd::encoding::CompressionLevel::Fastest)
        }
    };
    (out.len() < body.len()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringmq_wire::record;

    fn compressible() -> Vec<u8> {
        b"a body a producer compresses ".repeat(600)
    }

    #[test]
    fn every_kind_inflates_back_and_is_marked() {
        let body = compressible();
        for kind in [Compression::Zlib, Compression::Lz4, Compression::Zstd] {
            let packed = compress(kind, &body).expect("compressible");
            assert!(packed.len() < body.len() / 4, "{kind:?}: {}", packed.len());
            let flag = sys_flag_bits(kind);
            assert_eq!(record::compression(flag).unwrap(), Some(kind));
            let back = crate::inflate::inflate_body(flag, &packed).unwrap();
            assert_eq!(back.as_deref(), Some(&body[..]), "{kind:?}");
        }
    }

    #[test]
    fn incompressible_bodies_stay_as_they_are() {
        let noise = ringmq_testkit::noise(8192);
        for kind in [Compression::Zlib, Compression::Lz4, Compression::Zstd] {
            assert_eq!(compress(kind, &noise), None, "{kind:?}");
        }
    }
}
