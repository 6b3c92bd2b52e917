//! The machine's physical memory (`MemTotal` of `/proc/meminfo`), for
//! `accessMessageInMemoryMaxRatio`. In the simulator: a fixed 16 GiB.

/// Memory assumed where `/proc/meminfo` cannot be read (and in the simulator).
pub const FALLBACK_BYTES: u64 = 16 << 30;

/// Total physical memory in bytes.
pub fn total_bytes() -> u64 {
    if super::sim::current().is_some() {
        return FALLBACK_BYTES;
    }
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| parse_mem_total(&text))
        .unwrap_or(FALLBACK_BYTES)
}

fn parse_mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line
        .trim_start_matches("MemTotal:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_total_parses() {
        let text = "MemTotal:       24576000 kB\nMemFree:  1 kB\n";
        assert_eq!(parse_mem_total(text), Some(24_576_000 * 1024));
        assert_eq!(parse_mem_total("nothing"), None);
        assert!(total_bytes() > 0);
    }
}
