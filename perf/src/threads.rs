//! CPU accounting by thread, from `/proc/self/task/*/stat`: how much CPU the load generator
//! used and how much the embedded node's threads did: those named `ringmq-*` (shards, name
//! server, segment preparer; not the main thread, which is `ringmq-perf`) and the kernel's
//! io_uring workers `iou-*` (only the node uses io_uring; the clients run on tokio/epoll). On a 2-core machine a benchmark that does not count the
//! generator's threads measures the generator as much as the broker.
//!
//! Linux only; elsewhere every figure is zero.

use std::collections::BTreeMap;

/// `/proc` reports CPU time in USER_HZ ticks, 100 per second on every Linux ABI.
const TICKS_PER_S: f64 = 100.0;
/// Prefix of the node's thread names.
const NODE_THREAD_PREFIX: &str = "ringmq-";
/// Prefix of io_uring's worker threads (io-wq, SQPOLL), which run the node's ring work.
const IO_URING_THREAD_PREFIX: &str = "iou-";
/// This process's main thread (its name is the executable's).
const MAIN_THREAD_NAME: &str = "ringmq-perf";

fn is_node_thread(name: &str) -> bool {
    name.starts_with(IO_URING_THREAD_PREFIX)
        || (name.starts_with(NODE_THREAD_PREFIX) && name != MAIN_THREAD_NAME)
}

/// CPU seconds of the process's threads at one moment, by group.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpuSample {
    /// Threads of the embedded node: name -> CPU seconds.
    pub node: BTreeMap<String, f64>,
    /// CPU seconds of the whole process (exited threads included).
    pub process_s: f64,
    /// Live threads that are not the node's.
    pub generator_threads: usize,
}

/// CPU used between two samples.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpuUse {
    pub generator_s: f64,
    pub generator_threads: usize,
    /// The node's CPU seconds: its threads here when embedded, else what
    /// [`crate::node_cpu`] read (0 when `node_source` is `None`).
    pub node_s: f64,
    pub node_threads: usize,
    /// Where `node_s` comes from; `None`: unknown.
    pub node_source: Option<String>,
}

pub fn sample() -> CpuSample {
    let mut s = CpuSample {
        process_s: read_stat("/proc/self/stat").map_or(0.0, |(_, t)| t),
        ..CpuSample::default()
    };
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return s;
    };
    for entry in dir.flatten() {
        let path = entry.path().join("stat");
        let Some((name, secs)) = read_stat(&path.to_string_lossy()) else {
            continue;
        };
        if is_node_thread(&name) {
            let tid = entry.file_name().to_string_lossy().to_string();
            s.node.insert(format!("{name}#{tid}"), secs);
        } else {
            s.generator_threads += 1;
        }
    }
    s
}

/// What ran between `before` and `after`.
pub fn used(before: &CpuSample, after: &CpuSample) -> CpuUse {
    let node_s: f64 = after
        .node
        .iter()
        .map(|(k, v)| v - before.node.get(k).copied().unwrap_or(0.0))
        .sum();
    let process_s = after.process_s - before.process_s;
    CpuUse {
        generator_s: (process_s - node_s).max(0.0),
        generator_threads: after.generator_threads,
        node_s,
        node_threads: after.node.len(),
        node_source: None,
    }
}

/// (thread name, user + system CPU seconds) from a `stat` file.
fn read_stat(path: &str) -> Option<(String, f64)> {
    let text = std::fs::read_to_string(path).ok()?;
    // The name is in parentheses and may hold spaces; fields after it are plain.
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let name = text.get(open + 1..close)?.to_string();
    let fields: Vec<&str> = text.get(close + 2..)?.split_whitespace().collect();
    // After the name: state(0) ppid pgrp session tty tpgid flags minflt cminflt majflt
    // cmajflt utime(11) stime(12).
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((name, (utime + stime) / TICKS_PER_S))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_threads_are_counted() {
        let before = sample();
        let mut x = 0u64;
        let t0 = std::time::Instant::now();
        while t0.elapsed() < std::time::Duration::from_millis(50) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        assert!(x > 0);
        let after = sample();
        let u = used(&before, &after);
        assert!(after.generator_threads >= 1);
        assert_eq!(u.node_threads, 0);
        assert!(u.generator_s >= 0.0);
    }

    #[test]
    fn node_threads_by_name() {
        assert!(is_node_thread("ringmq-shard-0"));
        assert!(is_node_thread("ringmq-namesrv"));
        assert!(is_node_thread("iou-wrk-1234"));
        assert!(!is_node_thread("ringmq-perf"));
        assert!(!is_node_thread("perf-worker"));
    }
}
