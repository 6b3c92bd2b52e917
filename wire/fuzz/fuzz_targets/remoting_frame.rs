//! The remoting frame on arbitrary bytes: `check`, `peek` and `parse` never panic; whatever
//! `check` accepts, `parse` either reads or refuses with an error (the header is checked
//! only by `parse`); a parsed command re-encodes and parses back to the same command. The
//! first two bytes pick the caller's maximum.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringmq_wire::remoting::frame;

fuzz_target!(|data: &[u8]| {
    let (max, buf) = match data {
        [a, b, rest @ ..] => (usize::from(u16::from_be_bytes([*a, *b])) * 256, rest),
        _ => (frame::FRAME_BYTES_MAX, data),
    };
    let _ = frame::peek(buf);
    let _ = frame::parse(buf);
    let Ok(Some(n)) = frame::check(buf, max) else {
        return;
    };
    let Ok(p) = frame::parse(&buf[..n]) else {
        return;
    };
    let Ok(again) = frame::encode(&p.command, p.serialize_type, p.body) else {
        // A JSON header's code, version or flag may not fit the binary header's 16 bits;
        // the JSON encoding always fits what was read.
        return;
    };
    let q = frame::parse(&again).expect("an encoded frame parses");
    assert_eq!(q.command, p.command);
    assert_eq!(q.body, p.body);
});
