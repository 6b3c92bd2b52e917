//! Compressed bodies. RocketMQ producers (Java, Go, rocketmq-client-rust) compress a body
//! over `compressMsgBodyOverHowmuch` (4 KiB) and mark its record: SYSFLAG
//! [`COMPRESSED`](sys_flag::COMPRESSED) plus the compression type in bits 8..10
//! ([`record::compression`]). The broker stores and serves those bytes as sent; consumers
//! inflate them here before the application sees the message, as RocketMQ's
//! `MessageDecoder` does, and clear COMPRESSED from the sys_flag they show (the type bits
//! stay, as in RocketMQ).
//!
//! | type | SYSFLAG bits            | format                  | RocketMQ's compressor         |
//! |------|-------------------------|-------------------------|-------------------------------|
//! | zlib | `0x301`, or `0x1` (4.x) | zlib stream (RFC 1950)  | `java.util.zip.Deflater`      |
//! | LZ4  | `0x101`                 | LZ4 frames              | lz4-java `LZ4FrameOutputStream` |
//! | ZSTD | `0x201`                 | Zstandard frames        | zstd-jni `ZstdOutputStream`   |
//!
//! Invariants: an uncompressed record costs one bit test and no allocation (its body stays a
//! slice of the pulled bytes). An inflated body is at most [`INFLATED_BODY_BYTES_MAX`]: the
//! decoder's output is read through `take(max + 1)`, so no input, whatever sizes it claims,
//! makes more than `max + 1` bytes of output; a Zstandard frame's window is capped at
//! [`ZSTD_WINDOW_BYTES_MAX`] before it is reserved, an LZ4 frame's block buffers at the
//! format's 4 MiB block. A consumer's worst case (messages held × the largest body) is thus
//! the one uncompressed bodies of the maximum size already give; only a pull's bytes, which
//! `pull_bytes_max` counts as stored, may grow when inflated.
//!
//! A body that cannot be inflated (corrupt, over the limit, a type RocketMQ does not define)
//! is delivered as stored, and the message keeps COMPRESSED in its sys_flag
//! ([`ReceivedMessage::body_compressed`](crate::ReceivedMessage::body_compressed),
//! [`MessageView::body_compressed`](crate::MessageView::body_compressed)); the consumer logs
//! a warning and [`inflate_body`] tells why. It is not treated as a failed message: the same
//! bytes fail the same way on every delivery, so retries could only walk it to the
//! dead-letter topic hours later, and a pull consumer would stop at it. The application
//! decides (set it aside, or return `Retry` to send it on to `%DLQ%`), and the queue goes on.

use std::io::Read;

use bytes::Bytes;
use ringmq_wire::record::{self, sys_flag, Compression, RecordView};
use ringmq_wire::WireError;
use thiserror::Error;

/// Largest inflated body: the largest body a record carries uncompressed
/// ([`record::BODY_BYTES_MAX`], RocketMQ's default `maxMessageSize`, which a RocketMQ
/// producer checks the body against before compressing it).
pub const INFLATED_BODY_BYTES_MAX: usize = record::BODY_BYTES_MAX;

/// Largest Zstandard window a frame may declare: libzstd's default decoder limit
/// (`ZSTD_WINDOWLOG_LIMIT_DEFAULT`, 2^27), which zstd-jni's `ZstdInputStream` applies too.
/// The window is reserved, not written: pages are touched only by output, which stops at
/// [`INFLATED_BODY_BYTES_MAX`].
pub const ZSTD_WINDOW_BYTES_MAX: u64 = 1 << 27;

const _: () = assert!(INFLATED_BODY_BYTES_MAX >= record::BODY_BYTES_MAX);

/// Why a compressed body could not be inflated.
#[derive(Debug, Error)]
pub enum InflateError {
    /// The record's compression type bits name no type RocketMQ defines.
    #[error("sys_flag {sys_flag:#x}: {source}")]
    UnknownType {
        sys_flag: u32,
        #[source]
        source: WireError,
    },
    /// The stored bytes are not a valid stream of their format.
    #[error("{compression:?} body of {stored_bytes} bytes does not inflate: {source}")]
    Corrupt {
        compression: Compression,
        stored_bytes: usize,
        #[source]
        source: std::io::Error,
    },
    /// The body inflates to more than the limit.
    #[error("{compression:?} body of {stored_bytes} bytes inflates to over {max} bytes")]
    TooLarge {
        compression: Compression,
        stored_bytes: usize,
        max: usize,
    },
}

/// The original body of a record with `sys_flag` whose stored body is `stored`: `Ok(None)`
/// for a body that is not compressed, the inflated bytes (at most
/// [`INFLATED_BODY_BYTES_MAX`]) for one that is.
pub fn inflate_body(sys_flag: u32, stored: &[u8]) -> Result<Option<Vec<u8>>, InflateError> {
    let compression = record::compression(sys_flag)
        .map_err(|source| InflateError::UnknownType { sys_flag, source })?;
    match compression {
        None => Ok(None),
        Some(c) => inflate_bounded(c, stored, INFLATED_BODY_BYTES_MAX).map(Some),
    }
}

/// The body a consumer shows for `r` when it is not the stored one: `Some` (inflated) for a
/// compressed record, `None` for an uncompressed one (no allocation) and for one that could
/// not be inflated (logged; the application gets the stored bytes with COMPRESSED set).
#[inline]
pub(crate) fn received_body(r: &RecordView<'_>, broker_name: &str) -> Option<Bytes> {
    if r.sys_flag & sys_flag::COMPRESSED == 0 {
        return None;
    }
    inflate_received(r, broker_name)
}

/// The sys_flag a consumer shows: without COMPRESSED once the body is inflated.
pub(crate) fn shown_sys_flag(stored: u32, inflated: bool) -> u32 {
    if inflated {
        stored & !sys_flag::COMPRESSED
    } else {
        stored
    }
}

#[cold]
fn inflate_received(r: &RecordView<'_>, broker_name: &str) -> Option<Bytes> {
    match inflate_body(r.sys_flag, r.body) {
        Ok(body) => body.map(Bytes::from),
        Err(e) => {
            log::warn!(
                "{}@{broker_name} queue {} offset {}: delivering the stored body, still \
                 compressed: {e}",
                r.topic,
                r.queue_id,
                r.queue_offset
            );
            None
        }
    }
}

/// Inflates `stored`, failing past `max` bytes of output.
fn inflate_bounded(
    compression: Compression,
    stored: &[u8],
    max: usize,
) -> Result<Vec<u8>, InflateError> {
    let corrupt = |source| InflateError::Corrupt {
        compression,
        stored_bytes: stored.len(),
        source,
    };
    let mut out = Vec::new();
    let limit = max as u64 + 1;
    let read = match compression {
        Compression::Zlib => flate2::read::ZlibDecoder::new(stored)
            .take(limit)
            .read_to_end(&mut out),
        Compression::Lz4 => lz4_flex::frame::FrameDecoder::new(stored)
            .take(limit)
            .read_to_end(&mut out),
        Compression::Zstd => {
            let decoder = ruzstd::decoding::StreamingDecoder::new_with_max_window_size(
                stored,
                ZSTD_WINDOW_BYTES_MAX,
            )
            .map_err(|e| corrupt(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?;
            decoder.take(limit).read_to_end(&mut out)
        }
    };
    read.map_err(corrupt)?;
    if out.len() > max {
        return Err(InflateError::TooLarge {
            compression,
            stored_bytes: stored.len(),
            max,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use sys_flag::{COMPRESSED, COMPRESSION_LZ4, COMPRESSION_ZLIB, COMPRESSION_ZSTD};

    /// 16 KiB that compresses well but not to nothing.
    fn original() -> Vec<u8> {
        (0..16 * 1024u32)
            .map(|i| b"ringmq body "[(i % 12) as usize] ^ (i / 1024) as u8)
            .collect()
    }

    fn zlib(body: &[u8]) -> Vec<u8> {
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(5));
        z.write_all(body).unwrap();
        z.finish().unwrap()
    }

    fn lz4(body: &[u8]) -> Vec<u8> {
        let mut f = lz4_flex::frame::FrameEncoder::new(Vec::new());
        f.write_all(body).unwrap();
        f.finish().unwrap()
    }

    fn zstd(body: &[u8]) -> Vec<u8> {
        ruzstd::encoding::compress_to_vec(body, ruzstd::encoding::CompressionLevel::Fastest)
    }

    #[test]
    fn each_type_inflates_to_the_original() {
        let body = original();
        for (flag, stored) in [
            (COMPRESSED | COMPRESSION_ZLIB, zlib(&body)),
            (COMPRESSED, zlib(&body)),
            (COMPRESSED | COMPRESSION_LZ4, lz4(&body)),
            (COMPRESSED | COMPRESSION_ZSTD, zstd(&body)),
        ] {
            assert!(stored.len() < body.len() / 4, "{flag:#x}: compressed");
            assert_eq!(
                inflate_body(flag, &stored).unwrap().as_deref(),
                Some(&body[..]),
                "{flag:#x}"
            );
        }
        assert_eq!(inflate_body(COMPRESSION_ZLIB, b"plain").unwrap(), None);
    }

    /// Made by the reference implementations of the formats RocketMQ's compressors write,
    /// from a pipe as the Java streams write (no content size):
    /// `printf 'ringmq compressed body %.0s' $(seq 200)` (4,600 bytes) piped to
    /// `zstd -5 --no-check` (zstd-jni is libzstd at RocketMQ's default level 5: a window
    /// descriptor, no checksum) and to `lz4 -B7 --no-frame-crc` (lz4-java's
    /// `LZ4FrameOutputStream` defaults: 4 MiB independent blocks, no checksums).
    #[test]
    fn frames_from_the_reference_tools_inflate() {
        let body = "ringmq compressed body ".repeat(200).into_bytes();
        let zstd_cli: &[u8] = &[
            0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x58, 0xfd, 0x00, 0x00, 0xb8, 0x72, 0x69, 0x6e, 0x67,
            0x6d, 0x71, 0x20, 0x63, 0x6f, 0x6d, 0x70, 0x72, 0x65, 0x73, 0x73, 0x65, 0x64, 0x20,
            0x62, 0x6f, 0x64, 0x79, 0x20, 0x01, 0x00, 0xbd, 0x43, 0xfb, 0xd9, 0x04,
        ];
        let lz4_cli: &[u8] = &[
            0x04, 0x22, 0x4d, 0x18, 0x60, 0x40, 0x82, 0x33, 0x00, 0x00, 0x00, 0xff, 0x08, 0x72,
            0x69, 0x6e, 0x67, 0x6d, 0x71, 0x20, 0x63, 0x6f, 0x6d, 0x70, 0x72, 0x65, 0x73, 0x73,
            0x65, 0x64, 0x20, 0x62, 0x6f, 0x64, 0x79, 0x20, 0x17, 0x00, 0xff, 0xff, 0xff, 0xff,
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xda,
            0x50, 0x62, 0x6f, 0x64, 0x79, 0x20, 0x00, 0x00, 0x00, 0x00,
        ];
        for (flag, stored) in [
            (COMPRESSED | COMPRESSION_ZSTD, zstd_cli),
            (COMPRESSED | COMPRESSION_LZ4, lz4_cli),
        ] {
            assert_eq!(
                inflate_body(flag, stored).unwrap().as_deref(),
                Some(&body[..]),
                "{flag:#x}"
            );
        }
    }

    #[test]
    fn corrupt_bodies_are_errors() {
        let body = original();
        for (flag, mut stored) in [
            (COMPRESSED | COMPRESSION_ZLIB, zlib(&body)),
            (COMPRESSED | COMPRESSION_LZ4, lz4(&body)),
            (COMPRESSED | COMPRESSION_ZSTD, zstd(&body)),
        ] {
            let truncated = &stored[..stored.len() / 2];
            assert!(
                matches!(
                    inflate_body(flag, truncated),
                    Err(InflateError::Corrupt { .. })
                ),
                "{flag:#x} truncated: {:?}",
                inflate_body(flag, truncated)
            );
            stored[..4].copy_from_slice(b"junk");
            assert!(
                matches!(
                    inflate_body(flag, &stored),
                    Err(InflateError::Corrupt { .. })
                ),
                "{flag:#x} bad header"
            );
        }
        let err = inflate_body(COMPRESSED | 0x500, b"whatever").unwrap_err();
        assert!(matches!(err, InflateError::UnknownType { .. }), "{err}");
        assert!(err.to_string().contains("unknown compression type code 5"));
    }

    #[test]
    fn over_the_limit_is_an_error_before_more_is_made() {
        let body = original();
        for (c, stored) in [
            (Compression::Zlib, zlib(&body)),
            (Compression::Lz4, lz4(&body)),
            (Compression::Zstd, zstd(&body)),
        ] {
            assert_eq!(inflate_bounded(c, &stored, body.len()).unwrap(), body);
            let err = inflate_bounded(c, &stored, body.len() - 1).unwrap_err();
            assert!(
                matches!(err, InflateError::TooLarge { max, .. } if max == body.len() - 1),
                "{c:?}: {err}"
            );
        }
        // A bomb: 64 MiB of zeros is 64 KiB of zlib, and stops at the real limit.
        let zeros = vec![0u8; 64 << 20];
        let bomb = zlib(&zeros);
        assert!(bomb.len() < 128 << 10);
        drop(zeros);
        let err = inflate_body(COMPRESSED | COMPRESSION_ZLIB, &bomb).unwrap_err();
        assert!(
            matches!(
                err,
                InflateError::TooLarge {
                    max: INFLATED_BODY_BYTES_MAX,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn a_zstd_frame_over_the_window_limit_is_refused_before_it_is_reserved() {
        // Frame header: magic, descriptor 0x00 (no single segment, no checksum), window
        // descriptor 0x88 (exponent 17: 2^27 bytes, mantissa 0) then 0x90 (2^28).
        let ok: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x88, 0x01, 0x00, 0x00];
        let over: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x90, 0x01, 0x00, 0x00];
        let flag = COMPRESSED | COMPRESSION_ZSTD;
        assert_eq!(inflate_body(flag, ok).unwrap(), Some(Vec::new()));
        let err = inflate_body(flag, over).unwrap_err();
        assert!(matches!(err, InflateError::Corrupt { .. }), "{err}");
    }

    #[test]
    fn the_shown_sys_flag_drops_compressed_only_when_inflated() {
        assert_eq!(shown_sys_flag(0x301, true), 0x300);
        assert_eq!(shown_sys_flag(0x301, false), 0x301);
        assert_eq!(shown_sys_flag(0x2, false), 0x2);
    }
}
