//! The frame envelope on arbitrary bytes: whatever `check` accepts, `parse` accepts, and a
//! parsed frame re-encodes to the same bytes. The first two bytes pick the caller's maximum.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringmq_wire::codec::Raw;
use ringmq_wire::frame;

fuzz_target!(|data: &[u8]| {
    let (max, buf) = match data {
        [a, b, rest @ ..] => (usize::from(u16::from_be_bytes([*a, *b])) * 16, rest),
        _ => (frame::FRAME_BYTES_MAX, data),
    };
    let _ = frame::peek(buf);
    let _ = frame::parse(buf);
    let Ok(Some(n)) = frame::check(buf, max) else {
        return;
    };
    let f = frame::parse(&buf[..n]).expect("check accepted the frame");
    let _ = f.request_code();
    let _ = f.status();
    let mut again = Vec::new();
    frame::encode_frame(
        &mut again,
        f.code,
        f.flags,
        f.request_id,
        &Raw(f.header),
        f.body,
    )
    .expect("a parsed frame re-encodes");
    assert_eq!(again, &buf[..n]);
});
