//! The machine's physical memory (`MemTotal` of `/proc/meminfo`), for
//! `accessMessageInMemoryMaxRatio`, and whether the machine hands freed memory back to its
//! host (free page reporting), for `commitLogCacheKeepBytes`'s default. In the simulator: a
//! fixed 16 GiB, and no reporting.

use std::sync::OnceLock;

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

/// VIRTIO_BALLOON_F_REPORTING: the balloon device takes reports of free memory.
const BALLOON_F_REPORTING: usize = 5;
/// The virtio device id of a memory balloon.
const BALLOON_DEVICE_ID: &str = "0x0005";

/// Whether this machine hands memory its kernel freed back to the host: a virtio balloon
/// that negotiated free page reporting, with `page_reporting_order` no larger than the
/// largest free block (above it no block qualifies and nothing is reported). On such a VM
/// the first write to a page after it was reported faults in the host, so a page cache that
/// keeps growing costs every append (docs/perf.md, "Memory the host backs"). Read once.
pub fn freed_memory_goes_to_host() -> bool {
    if super::sim::current().is_some() {
        return false;
    }
    static ANSWER: OnceLock<bool> = OnceLock::new();
    *ANSWER.get_or_init(|| {
        let read = |path: &str| std::fs::read_to_string(path).ok();
        let order = read("/sys/module/page_reporting/parameters/page_reporting_order")
            .and_then(|t| t.trim().parse::<u32>().ok());
        let largest = read("/proc/buddyinfo").and_then(|t| largest_order(&t));
        let balloon = std::fs::read_dir("/sys/bus/virtio/devices")
            .into_iter()
            .flatten()
            .flatten()
            .any(|dev| {
                let file = |name: &str| std::fs::read_to_string(dev.path().join(name)).ok();
                match (file("device"), file("features")) {
                    (Some(id), Some(features)) => balloon_reports(&id, &features),
                    _ => false,
                }
            });
        reporting_on(balloon, order, largest)
    })
}

/// A balloon reports free memory when it exists and `page_reporting_order` lets some
/// block qualify; unknown orders count as reporting (the kernel's default order does).
fn reporting_on(balloon: bool, order: Option<u32>, largest: Option<u32>) -> bool {
    match (order, largest) {
        (Some(order), Some(largest)) => balloon && order <= largest,
        _ => balloon,
    }
}

/// Whether a virtio device (`device` and `features` of its sysfs directory: the id, and
/// one `0`/`1` per negotiated feature bit, bit 0 first) is a balloon reporting free pages.
fn balloon_reports(device: &str, features: &str) -> bool {
    device.trim() == BALLOON_DEVICE_ID
        && features.trim().as_bytes().get(BALLOON_F_REPORTING) == Some(&b'1')
}

/// The largest free block order the kernel has (`/proc/buddyinfo`: one count per order
/// after the zone's name).
fn largest_order(buddyinfo: &str) -> Option<u32> {
    buddyinfo
        .lines()
        .filter_map(|line| {
            let counts = line
                .split_once("zone")?
                .1
                .split_whitespace()
                .skip(1)
                .count();
            u32::try_from(counts).ok()?.checked_sub(1)
        })
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_page_reporting_is_read_from_the_balloon_and_the_order() {
        let buddy = "Node 0, zone      DMA      0      0      0      0      0      0      0      0      1      1      3 \n\
                     Node 0, zone   Normal  61937  19165   7622   2692   1596    917    556    392    307    230   2812 \n";
        assert_eq!(largest_order(buddy), Some(10));
        assert_eq!(largest_order(""), None);
        let features = "0110010100000000000000000000000010000000\n";
        assert!(balloon_reports("0x0005\n", features));
        assert!(!balloon_reports("0x0005", "0110000000"), "no reporting bit");
        assert!(!balloon_reports("0x0001", features), "a block device");
        assert!(reporting_on(true, Some(9), Some(10)));
        assert!(
            !reporting_on(true, Some(11), Some(10)),
            "no block qualifies"
        );
        assert!(!reporting_on(false, Some(9), Some(10)));
        assert!(reporting_on(true, None, None));
        // Whatever this machine says, asking twice gives the same answer.
        assert_eq!(freed_memory_goes_to_host(), freed_memory_goes_to_host());
    }

    #[test]
    fn mem_total_parses() {
        let text = "MemTotal:       24576000 kB\nMemFree:  1 kB\n";
        assert_eq!(parse_mem_total(text), Some(24_576_000 * 1024));
        assert_eq!(parse_mem_total("nothing"), None);
        assert!(total_bytes() > 0);
    }
}
