//! Sizes and durations as the command line spells them (`16k`, `1.5s`), for every mode's
//! options (`args.rs`, `failover/args.rs`).

use std::time::Duration;

use crate::payload::HEAD_BYTES;

/// `30s`, `500ms`, `2m`, `1h`, `1.5s`, or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?}: expected a number with an optional unit (ms, s, m, h)"))?;
    let secs = match unit.trim() {
        "ms" => n / 1000.0,
        "" | "s" => n,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        u => return Err(format!("{s:?}: unknown unit {u:?} (ms, s, m, h)")),
    };
    if !secs.is_finite() || !(0.0..=1e9).contains(&secs) {
        return Err(format!("{s:?} is out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Bytes, with an optional k/KiB/m/MiB suffix (binary units).
pub fn parse_size(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: usize = num.parse().map_err(|_| format!("{s:?}: expected bytes"))?;
    let mult = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" | "kb" => 1024,
        "m" | "mib" | "mb" => 1024 * 1024,
        u => return Err(format!("{s:?}: unknown unit {u:?} (k, m)")),
    };
    let bytes = n.checked_mul(mult).ok_or(format!("{s:?} is too large"))?;
    if bytes < HEAD_BYTES {
        return Err(format!(
            "{s:?}: a perf message needs at least {HEAD_BYTES} bytes (its head)"
        ));
    }
    if bytes > ringmq_client::wire::record::BODY_BYTES_MAX {
        return Err(format!(
            "{s:?} is over the largest body ({} bytes)",
            ringmq_client::wire::record::BODY_BYTES_MAX
        ));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1024"), Ok(1024));
        assert_eq!(parse_size("16k"), Ok(16384));
        assert_eq!(parse_size("1KiB"), Ok(1024));
        assert!(parse_size("8").is_err());
        assert!(parse_size("64m").is_err());
    }
}
