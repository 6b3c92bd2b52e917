//! `cargo bench -p ringmq-node --bench store`: append throughput and latency of the real store
//! (`Store` over the io_uring `RealDisk`) for 1 KiB-body records, next to plain sequential
//! writes of the same number of bytes to the same disk.
//!
//! Cases (each run `RINGMQ_BENCH_RUNS` times, round-robin; medians are printed):
//! - ASYNC_FLUSH, batches of 1, 32, 256 records: acked when `append` returns (page cache).
//!   Every 500 ms (RocketMQ's `flushIntervalCommitLog`) a timer flush runs as the broker's
//!   does: the log's fdatasyncs (`Store::sync_plan`) on another thread while appends go on,
//!   then `note_synced` and `checkpoint_synced` (ConsumeQueue fdatasyncs and the checkpoint
//!   write) inline. A final `checkpoint` makes everything durable; all of it is timed.
//! - SYNC_FLUSH, batches of 1, 32, 256: acked after the `sync` that follows the batch.
//! - Group commit: k = 1, 4, 16, 64 appenders, each with a 1-record batch, simulated as k
//!   `append`s then ONE `sync`; every ack's latency runs from the start of its group (all k
//!   requests arrived together) to the end of the sync.
//! - Baselines: plain `write_all` of the same bytes in 1 MiB chunks plus one final fdatasync,
//!   into a new file and into a pre-written (and synced) file; and 1-record-sized writes into
//!   a pre-written file (the per-syscall floor for batch 1).
//!
//! Under SYNC_FLUSH the store also checkpoints every second, inline, as the broker does (the
//! ConsumeQueues still need their flush). Segments are 256 MiB so the default volume rolls
//! the log twice.
//! Each store case opens a fresh store and appends one untimed warm-up batch first, which
//! waits for the first segment to be prepared (allocated, zero-filled, written back): a
//! one-time cost printed separately. Later segments are prepared by the disk's background
//! thread (from when the active one is half full) during the timed region, as in a broker.
//!
//! Environment: `RINGMQ_BENCH_BYTES` (record bytes per case, default 512 MiB),
//! `RINGMQ_BENCH_SYNCS` (most fdatasyncs per SYNC_FLUSH case, default 5000: at ~0.2-0.5 ms each a
//! 1-record-per-sync case would otherwise take a minute), `RINGMQ_BENCH_RUNS` (default 3),
//! `RINGMQ_BENCH_DIR` (default: cargo's target tmp dir, on the same disk as the build),
//! `RINGMQ_BENCH_ONLY` (run only cases whose name contains this), `RINGMQ_IO=fallback`
//! (pwrite/fdatasync instead of io_uring).

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

mod common;

use common::{env_u64, now_ms, BODY_BYTES};
use hdrhistogram::Histogram;
use ringmq_node::io::disk::RealDisk;
use ringmq_node::store::{Store, StoreConfig};

const SEGMENT_BYTES: u64 = 256 << 20;
const FLUSH_INTERVAL: Duration = Duration::from_millis(500);
/// The broker checkpoints every second under SYNC_FLUSH (`shard/run.rs`).
const SYNC_CHECKPOINT_INTERVAL: Duration = Duration::from_secs(1);
const PLAIN_CHUNK_BYTES: usize = 1 << 20;
const QUEUES: u32 = 4;
const TOPIC: &str = "BenchTopic";
const MB: f64 = 1e6;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    /// Acked after `append`; checkpoint every FLUSH_INTERVAL.
    Async { batch: usize },
    /// `group` batches of `batch` records, then one `sync`; acked after it.
    Sync { batch: usize, group: usize },
    /// Plain `write_all` of `chunk` bytes at a time, one fdatasync at the end.
    Plain { chunk: Chunk, prewritten: bool },
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Chunk {
    Mib,
    Record,
}

#[derive(Debug, Clone)]
struct Case {
    name: String,
    kind: Kind,
}

impl Case {
    fn durability(&self) -> &'static str {
        match self.kind {
            Kind::Async { .. } => "acked from page cache",
            Kind::Sync { .. } => "acked after fdatasync",
            Kind::Plain { .. } => "page cache, 1 fdatasync at end",
        }
    }
}

/// One run of one case.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    records: u64,
    bytes: u64,
    secs: f64,
    p50_us: f64,
    p99_us: f64,
    p999_us: f64,
    max_us: f64,
    syncs: u64,
    checkpoints: u64,
    checkpoint_max_ms: f64,
    checkpoint_total_ms: f64,
    log_flush_max_ms: f64,
    final_flush_ms: f64,
    warmup_ms: f64,
}

impl Sample {
    fn records_per_s(&self) -> f64 {
        self.records as f64 / self.secs
    }
    fn mb_per_s(&self) -> f64 {
        self.bytes as f64 / MB / self.secs
    }
}

struct Params {
    bytes: u64,
    syncs_max: u64,
    runs: usize,
    record_len: usize,
    /// One single-record batch per queue.
    templates: Vec<Vec<u8>>,
    fallback: bool,
}

fn main() {
    let bytes = env_u64("RINGMQ_BENCH_BYTES", 512 << 20);
    let syncs_max = env_u64("RINGMQ_BENCH_SYNCS", 5_000).max(1);
    let runs = env_u64("RINGMQ_BENCH_RUNS", 3).max(1) as usize;
    let only = std::env::var("RINGMQ_BENCH_ONLY").ok();
    let fallback = std::env::var("RINGMQ_IO").is_ok_and(|v| v == "fallback");
    let base = std::env::var_os("RINGMQ_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")));
    std::fs::create_dir_all(&base).expect("creating the bench directory");
    let dir = tempfile::Builder::new()
        .prefix("ringmq-bench-store-")
        .tempdir_in(&base)
        .expect("creating a temp dir under the bench directory");

    let templates: Vec<Vec<u8>> = (0..QUEUES)
        .map(|q| common::encode_record(TOPIC, q, &[("TAGS", "TagA"), ("KEYS", "order-00000001")]))
        .collect();
    let record_len = templates[0].len();
    let params = Params {
        bytes,
        syncs_max,
        runs,
        record_len,
        templates,
        fallback,
    };
    let driver = make_disk(fallback).driver().to_string();
    print_header(&params, dir.path(), &driver);

    let cases: Vec<Case> = all_cases()
        .into_iter()
        .filter(|c| only.as_ref().is_none_or(|o| c.name.contains(o.as_str())))
        .collect();
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); cases.len()];
    for run in 0..runs {
        for (i, case) in cases.iter().enumerate() {
            let case_dir = dir.path().join(format!("run{run}-{i}"));
            let s = run_case(case, &params, &case_dir);
            print_progress(run, runs, case, &s);
            samples[i].push(s);
            std::fs::remove_dir_all(&case_dir).expect("removing the case directory");
            // Let the deletes (ext4 may discard freed blocks) and writeback finish before
            // the next case, so cases do not pay for each other's I/O.
            nix::unistd::sync();
        }
    }
    print_tables(&params, &cases, &samples, &driver);
    println!();
    println!("load average at the end: {}", loadavg());
}

fn all_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    let case = |name: String, kind| Case { name, kind };
    cases.push(case(
        "plain new file, 1 MiB writes".into(),
        Kind::Plain {
            chunk: Chunk::Mib,
            prewritten: false,
        },
    ));
    cases.push(case(
        "plain pre-written, 1 MiB writes".into(),
        Kind::Plain {
            chunk: Chunk::Mib,
            prewritten: true,
        },
    ));
    cases.push(case(
        "plain pre-written, 1-record writes".into(),
        Kind::Plain {
            chunk: Chunk::Record,
            prewritten: true,
        },
    ));
    for batch in [1, 32, 256] {
        cases.push(case(
            format!("ASYNC_FLUSH b={batch}"),
            Kind::Async { batch },
        ));
    }
    for batch in [1, 32, 256] {
        cases.push(case(
            format!("SYNC_FLUSH b={batch}"),
            Kind::Sync { batch, group: 1 },
        ));
    }
    // k = 1 is "SYNC_FLUSH b=1"; the group table reuses that row.
    for group in [4, 16, 64] {
        cases.push(case(
            format!("SYNC_FLUSH group k={group}"),
            Kind::Sync { batch: 1, group },
        ));
    }
    cases
}

fn run_case(case: &Case, p: &Params, dir: &Path) -> Sample {
    std::fs::create_dir_all(dir).expect("creating the case directory");
    match case.kind {
        Kind::Plain { chunk, prewritten } => {
            let chunk = match chunk {
                Chunk::Mib => PLAIN_CHUNK_BYTES,
                Chunk::Record => p.record_len,
            };
            run_plain(p, &dir.join("plain"), chunk, prewritten)
        }
        Kind::Async { batch } => run_store(p, dir, batch, 1, false),
        Kind::Sync { batch, group } => run_store(p, dir, batch, group, true),
    }
}

/// Appends `group` batches of `batch` records per step; under `sync_each` one `sync` per
/// step and the ack waits for it, otherwise the ack is the append.
fn run_store(p: &Params, dir: &Path, batch: usize, group: usize, sync_each: bool) -> Sample {
    let per_step = (batch * group) as u64;
    let mut steps = (p.bytes / p.record_len as u64 / per_step).max(1);
    if sync_each {
        steps = steps.min(p.syncs_max);
    }
    // Batches per queue, built once; each append copies one into `work` as a receive would.
    let batches: Vec<Vec<u8>> = p.templates.iter().map(|t| t.repeat(batch)).collect();
    let mut work = batches[0].clone();

    let warm = Instant::now();
    let mut cfg = StoreConfig::new(dir, 0, "127.0.0.1:10911".parse().expect("literal"));
    cfg.segment_bytes = SEGMENT_BYTES;
    let mut store = Store::open(make_disk(p.fallback), cfg).expect("opening the store");
    store.append(&mut work, now_ms()).expect("warm-up append");
    store.sync().expect("warm-up sync");
    let warmup_ms = warm.elapsed().as_secs_f64() * 1e3;

    let mut hist = new_hist();
    let mut s = Sample {
        warmup_ms,
        ..Sample::default()
    };
    let start = Instant::now();
    let interval = if sync_each {
        SYNC_CHECKPOINT_INTERVAL
    } else {
        FLUSH_INTERVAL
    };
    let mut next_flush = start + interval;
    let mut flusher = BackgroundSync::start();
    let mut n = 0usize;
    for _ in 0..steps {
        let t0 = Instant::now();
        for _ in 0..group {
            work.copy_from_slice(&batches[n % batches.len()]);
            n += 1;
            let a0 = Instant::now();
            store.append(&mut work, now_ms()).expect("append");
            if !sync_each {
                hist.saturating_record(nanos(a0.elapsed()));
            }
        }
        if sync_each {
            store.sync().expect("sync");
            s.syncs += 1;
            hist.saturating_record_n(nanos(t0.elapsed()), group as u64);
            if Instant::now() >= next_flush {
                // The log is synced already: this syncs the ConsumeQueues, writes the checkpoint.
                inline(&mut s, || store.checkpoint().expect("checkpoint"));
                next_flush = Instant::now() + interval;
            }
            continue;
        }
        if let Some(done) = flusher.poll(false) {
            finish_flush(&mut store, &mut s, done);
        }
        let now = Instant::now();
        if !flusher.in_flight && now >= next_flush {
            flusher.submit(&store);
            next_flush = now + interval;
        }
    }
    if let Some(done) = flusher.poll(true) {
        finish_flush(&mut store, &mut s, done);
    }
    let t = Instant::now();
    store.checkpoint().expect("final checkpoint");
    s.final_flush_ms = t.elapsed().as_secs_f64() * 1e3;
    s.secs = start.elapsed().as_secs_f64();
    store.close().expect("closing the store");
    s.records = steps * per_step;
    s.bytes = s.records * p.record_len as u64;
    fill_latency(&mut s, &hist);
    s
}

/// A timer flush whose log fdatasyncs finished: record it, then the part that runs inline
/// on the appending thread (ConsumeQueue fdatasyncs and the checkpoint write).
fn finish_flush(store: &mut Store<RealDisk>, s: &mut Sample, (target, took): (u64, Duration)) {
    s.log_flush_max_ms = s.log_flush_max_ms.max(took.as_secs_f64() * 1e3);
    store.note_synced(target);
    inline(s, || store.checkpoint_synced(target).expect("checkpoint"));
}

/// Runs flush work on the appending thread, where it delays every append behind it.
fn inline(s: &mut Sample, f: impl FnOnce()) {
    let t = Instant::now();
    f();
    let ms = t.elapsed().as_secs_f64() * 1e3;
    s.checkpoints += 1;
    s.checkpoint_max_ms = s.checkpoint_max_ms.max(ms);
    s.checkpoint_total_ms += ms;
}

/// The ASYNC_FLUSH timer as the broker runs it (`shard/flusher.rs`): the fdatasyncs of
/// `Store::sync_plan` run off the appending thread (the broker submits them to its io_uring,
/// which runs fsync on a kernel worker) while appends continue; then `note_synced`.
struct BackgroundSync {
    jobs: Option<mpsc::Sender<(u64, Vec<File>)>>,
    done: mpsc::Receiver<std::io::Result<(u64, Duration)>>,
    thread: Option<std::thread::JoinHandle<()>>,
    in_flight: bool,
}

impl BackgroundSync {
    fn start() -> Self {
        let (jobs, job_rx) = mpsc::channel::<(u64, Vec<File>)>();
        let (done_tx, done) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("bench-flush".into())
            .spawn(move || {
                for (target, files) in job_rx {
                    let t = Instant::now();
                    let res = files
                        .iter()
                        .try_for_each(File::sync_data)
                        .map(|()| (target, t.elapsed()));
                    if done_tx.send(res).is_err() {
                        return;
                    }
                }
            })
            .expect("spawning the flush thread");
        BackgroundSync {
            jobs: Some(jobs),
            done,
            thread: Some(thread),
            in_flight: false,
        }
    }

    fn submit(&mut self, store: &Store<RealDisk>) {
        let plan = store.sync_plan();
        let files = plan
            .segments
            .iter()
            .map(|&seg| {
                let (file, _) = store.locate(seg).expect("a segment of the sync plan");
                file.std().try_clone().expect("dup of a segment descriptor")
            })
            .collect();
        self.jobs
            .as_ref()
            .expect("set until drop")
            .send((plan.target, files))
            .expect("the flush thread is running");
        self.in_flight = true;
    }

    fn poll(&mut self, wait: bool) -> Option<(u64, Duration)> {
        if !self.in_flight {
            return None;
        }
        let res = if wait {
            self.done.recv().ok()
        } else {
            self.done.try_recv().ok()
        };
        res.map(|r| {
            self.in_flight = false;
            r.expect("fdatasync of a segment (fatal in the broker)")
        })
    }
}

impl Drop for BackgroundSync {
    fn drop(&mut self) {
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Sequential `write_all` of the case's volume in `chunk`-byte writes, then one fdatasync.
fn run_plain(p: &Params, path: &Path, chunk: usize, prewritten: bool) -> Sample {
    let records = (p.bytes / p.record_len as u64).max(1);
    let total = records * p.record_len as u64;
    let warm = Instant::now();
    if prewritten {
        let f = create(path);
        let zeros = vec![0u8; PLAIN_CHUNK_BYTES];
        let mut at = 0;
        while at < total {
            let n = (total - at).min(PLAIN_CHUNK_BYTES as u64) as usize;
            f.write_all_at(&zeros[..n], at).expect("pre-writing");
            at += n as u64;
        }
        f.sync_data().expect("fdatasync of the pre-written file");
    }
    let warmup_ms = warm.elapsed().as_secs_f64() * 1e3;
    let data = vec![0xA5u8; chunk];
    let mut hist = new_hist();
    let start = Instant::now();
    let mut f = create(path);
    let mut left = total;
    while left > 0 {
        let n = left.min(chunk as u64) as usize;
        let t0 = Instant::now();
        f.write_all(&data[..n]).expect("write_all");
        hist.saturating_record(nanos(t0.elapsed()));
        left -= n as u64;
    }
    f.sync_data().expect("final fdatasync");
    let secs = start.elapsed().as_secs_f64();
    let mut s = Sample {
        records,
        bytes: total,
        secs,
        syncs: 1,
        warmup_ms,
        ..Sample::default()
    };
    fill_latency(&mut s, &hist);
    s
}

fn create(path: &Path) -> File {
    OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(false)
        .open(path)
        .expect("opening the baseline file")
}

fn make_disk(fallback: bool) -> RealDisk {
    if fallback {
        RealDisk::fallback("RINGMQ_IO=fallback")
    } else {
        RealDisk::new()
    }
}

fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds")
}

fn fill_latency(s: &mut Sample, h: &Histogram<u64>) {
    let us = |q: f64| h.value_at_quantile(q) as f64 / 1e3;
    s.p50_us = us(0.5);
    s.p99_us = us(0.99);
    s.p999_us = us(0.999);
    s.max_us = h.max() as f64 / 1e3;
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1)
}

fn fs_name(dir: &Path) -> String {
    use nix::sys::statfs as sf;
    let Ok(st) = sf::statfs(dir) else {
        return "unknown".into();
    };
    let t = st.filesystem_type();
    let name = if t == sf::TMPFS_MAGIC {
        "tmpfs (NOT a disk: numbers are memory speed)"
    } else if t == sf::EXT4_SUPER_MAGIC {
        "ext4"
    } else if t == sf::XFS_SUPER_MAGIC {
        "xfs"
    } else if t == sf::BTRFS_SUPER_MAGIC {
        "btrfs"
    } else {
        "other"
    };
    let free = nix::sys::statvfs::statvfs(dir)
        .map(|v| v.blocks_available() * v.fragment_size())
        .unwrap_or(0);
    format!("{name}, {:.0} GiB free", free as f64 / (1u64 << 30) as f64)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn print_header(p: &Params, dir: &Path, driver: &str) {
    println!("ringmq store bench");
    println!("  I/O driver:      {driver}");
    println!("  directory:       {} ({})", dir.display(), fs_name(dir));
    println!(
        "  record:          {} bytes ({BODY_BYTES} B body, topic {TOPIC}, TAGS+KEYS), {QUEUES} queues",
        p.record_len
    );
    println!(
        "  volume per case: {:.0} MB of records (SYNC_FLUSH cases: at most {} fdatasyncs)",
        p.bytes as f64 / MB,
        p.syncs_max
    );
    println!(
        "  load average:    {} (other work on these cores skews every figure)",
        loadavg()
    );
    println!(
        "  segments:        {} MiB; flush timer {} ms; runs: {}; cores: {}",
        SEGMENT_BYTES >> 20,
        FLUSH_INTERVAL.as_millis(),
        p.runs,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!();
}

fn print_progress(run: usize, runs: usize, case: &Case, s: &Sample) {
    let extra = match case.kind {
        Kind::Plain { .. } => format!("prewrite {:.0} ms", s.warmup_ms),
        _ => format!(
            "syncs {}, flushes {} (log fdatasync max {:.0} ms off-thread; inline total {:.0} ms, max {:.0} ms), final flush {:.0} ms, open+warm-up {:.0} ms",
            s.syncs,
            s.checkpoints,
            s.log_flush_max_ms,
            s.checkpoint_total_ms,
            s.checkpoint_max_ms,
            s.final_flush_ms,
            s.warmup_ms
        ),
    };
    println!(
        "[run {}/{}] {:<36} {:>10.0} rec/s {:>8.1} MB/s  p50 {:>8.1} p99 {:>8.1} p99.9 {:>9.1} max {:>9.1} µs  {:.2} s  {}",
        run + 1,
        runs,
        case.name,
        s.records_per_s(),
        s.mb_per_s(),
        s.p50_us,
        s.p99_us,
        s.p999_us,
        s.max_us,
        s.secs,
        extra
    );
}

fn median(samples: &[Sample], f: impl Fn(&Sample) -> f64) -> f64 {
    let mut v: Vec<f64> = samples.iter().map(f).collect();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn print_tables(p: &Params, cases: &[Case], samples: &[Vec<Sample>], driver: &str) {
    let med = |name: &str, f: &dyn Fn(&Sample) -> f64| {
        cases
            .iter()
            .position(|c| c.name == name)
            .map(|i| median(&samples[i], f))
    };
    let plain_pre = med("plain pre-written, 1 MiB writes", &|s| s.mb_per_s());
    let plain_new = med("plain new file, 1 MiB writes", &|s| s.mb_per_s());
    let ratio =
        |mbs: f64, base: Option<f64>| base.map_or("-".into(), |b| format!("{:.2}", mbs / b));

    println!();
    println!(
        "Medians of {} runs; I/O driver: {driver}; {} B records (1 KiB body); MB = 10^6 bytes.",
        p.runs, p.record_len
    );
    println!("Latency: ASYNC = the append call; SYNC = append + the fdatasync that covers it; plain = one write_all call.");
    println!();
    println!("| case | durability | records/s | MB/s | p50 µs | p99 µs | p99.9 µs | vs plain pre-written | vs plain new file |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for (i, c) in cases.iter().enumerate() {
        if matches!(c.kind, Kind::Sync { group, .. } if group > 1) {
            continue;
        }
        let s = &samples[i];
        let mbs = median(s, |x| x.mb_per_s());
        println!(
            "| {} | {} | {:.0} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {} |",
            c.name,
            c.durability(),
            median(s, |x| x.records_per_s()),
            mbs,
            median(s, |x| x.p50_us),
            median(s, |x| x.p99_us),
            median(s, |x| x.p999_us),
            ratio(mbs, plain_pre),
            ratio(mbs, plain_new),
        );
    }
    println!();
    println!("Group commit, SYNC_FLUSH (acked after fdatasync): k appenders with 1-record batches, k appends then one fdatasync; latency per ack from the group's start.");
    println!();
    println!("| k | records/s | fdatasyncs/s | MB/s | ack p50 µs | ack p99 µs | ack p99.9 µs |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for (i, c) in cases.iter().enumerate() {
        let Kind::Sync { batch: 1, group } = c.kind else {
            continue;
        };
        let s = &samples[i];
        println!(
            "| {group} | {:.0} | {:.0} | {:.1} | {:.1} | {:.1} | {:.1} |",
            median(s, |x| x.records_per_s()),
            median(s, |x| x.syncs as f64 / x.secs),
            median(s, |x| x.mb_per_s()),
            median(s, |x| x.p50_us),
            median(s, |x| x.p99_us),
            median(s, |x| x.p999_us),
        );
    }
}
