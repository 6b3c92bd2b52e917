//! Value parsers for the command line (clap `value_parser`s): durations, permissions and
//! points in time. Each returns `Err(text)` that clap prints after the flag's name, so the
//! text says what was wrong and what is accepted.

use std::time::Duration;

/// `5s`, `500ms`, `2m`, `1h`, `3d`, or a bare number of seconds (fractions allowed:
/// `1.5s`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (e.g. 5s, 500ms)"))?;
    let secs = match unit.trim() {
        "" | "s" => n,
        "ms" => n / 1000.0,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        "d" => n * 86_400.0,
        other => return Err(format!("unknown duration unit {other:?} (ms, s, m, h, d)")),
    };
    Duration::try_from_secs_f64(secs).map_err(|e| format!("{s:?}: {e}"))
}

/// `rw`/`6`, `r`/`4`, `w`/`2`.
pub fn parse_perm(s: &str) -> Result<u8, String> {
    match s {
        "rw" | "wr" | "6" => Ok(6),
        "r" | "4" => Ok(4),
        "w" | "2" => Ok(2),
        _ => Err(format!("{s:?}: use rw (6), r (4) or w (2)")),
    }
}

/// A point in time as ms since the epoch: all digits are ms since the epoch
/// (`1764842400000`); anything else must be RFC 3339 with its offset
/// (`2026-12-04T10:00:00Z`, `2026-12-04T11:00:00+01:00`, fractions of a second allowed).
/// A time without an offset is refused: it would depend on this machine's zone.
pub fn parse_time_ms(s: &str) -> Result<i64, String> {
    let s = s.trim();
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s
            .parse::<i64>()
            .map_err(|e| format!("{s:?}: ms since the epoch out of range ({e})"));
    }
    s.parse::<jiff::Timestamp>()
        .map(jiff::Timestamp::as_millisecond)
        .map_err(|e| {
            format!(
                "{s:?} is neither ms since the epoch nor an RFC 3339 time with offset \
                 (e.g. 2026-12-04T10:00:00Z, 2026-12-04T11:00:00+01:00): {e}"
            )
        })
}

/// A delay as RocketMQ's `messageDelayLevel` writes it: `1s`, `2m`, `1h`, `1d`, or ms
/// (`250ms`) when it is not a whole number of seconds.
pub fn format_delay_ms(ms: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "m"),
        (1_000, "s"),
    ];
    if ms == 0 {
        return "0s".to_string();
    }
    for (unit_ms, name) in UNITS {
        if ms % unit_ms == 0 {
            return format!("{}{name}", ms / unit_ms);
        }
    }
    format!("{ms}ms")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("2min"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("4d"), Ok(Duration::from_secs(4 * 86_400)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration(" 10s "), Ok(Duration::from_secs(10)));
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("1e400s").is_err(), "too large");
    }

    #[test]
    fn perms() {
        assert_eq!(parse_perm("r"), Ok(4));
        assert_eq!(parse_perm("rw"), Ok(6));
        assert!(parse_perm("x").is_err());
    }

    #[test]
    fn times_as_epoch_ms_or_rfc3339() {
        assert_eq!(parse_time_ms("1700000000000"), Ok(1_700_000_000_000));
        assert_eq!(parse_time_ms("0"), Ok(0));
        assert_eq!(parse_time_ms("2023-11-14T22:13:20Z"), Ok(1_700_000_000_000));
        assert_eq!(
            parse_time_ms("2023-11-14T23:13:20+01:00"),
            Ok(1_700_000_000_000)
        );
        assert_eq!(
            parse_time_ms("2023-11-14T17:13:20-05:00"),
            Ok(1_700_000_000_000)
        );
        assert_eq!(
            parse_time_ms("2023-11-14T22:13:20.250Z"),
            Ok(1_700_000_000_250)
        );
        assert_eq!(parse_time_ms("2026-12-04T10:00:00Z"), Ok(1_796_378_400_000));
        let no_offset = parse_time_ms("2026-12-04T10:00:00");
        assert!(no_offset.is_err(), "{no_offset:?}");
        assert!(parse_time_ms("").is_err());
        assert!(parse_time_ms("tomorrow").is_err());
        assert!(parse_time_ms("99999999999999999999999").is_err());
        assert!(parse_time_ms("2026-13-04T10:00:00Z").is_err());
    }

    #[test]
    fn delays_print_like_message_delay_level() {
        let levels = [
            1_000, 5_000, 60_000, 120_000, 3_600_000, 7_200_000, 86_400_000,
        ];
        let text: Vec<String> = levels.iter().map(|&ms| format_delay_ms(ms)).collect();
        assert_eq!(text, ["1s", "5s", "1m", "2m", "1h", "2h", "1d"]);
        assert_eq!(format_delay_ms(90_000), "90s");
        assert_eq!(format_delay_ms(250), "250ms");
        assert_eq!(format_delay_ms(0), "0s");
    }
}
