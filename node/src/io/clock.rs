//! Wall-clock facts that need libc: the local hour (RocketMQ's `deleteWhen` is local time).

/// The hour of the day (0..=23) in the local time zone.
pub fn local_hour(now_ms: i64) -> u8 {
    let secs = (now_ms / 1000) as libc::time_t;
    // SAFETY: `tm` is a plain C struct for which all-zero bytes are valid; localtime_r only
    // writes into it and reads `secs`, both alive for the call.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid for the duration of the call (see above).
    let ok = unsafe { !libc::localtime_r(&secs, &mut tm).is_null() };
    if ok {
        tm.tm_hour.clamp(0, 23) as u8
    } else {
        ((now_ms / 3_600_000) % 24) as u8
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn hour_in_range() {
        assert!(super::local_hour(0) < 24);
        assert!(super::local_hour(1_700_000_000_000) < 24);
    }
}
