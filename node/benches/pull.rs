//! `cargo bench -p ringmq-node --bench pull`: what a catch-up pull costs the store on the
//! shard's thread when the records are in memory: `Store::get` of a pull batch (the
//! ConsumeQueue units read and walked) and the copy of the records it names into a
//! response buffer (`Store::read_append`, the path pull responses under 1 MiB take), over a
//! backlog of 1 KiB records on the real disk (`RealDisk`, io_uring), read back from its
//! start. Printed: ns per message for the lookup alone and for lookup plus copy, medians of
//! the runs, per pull batch.
//!
//! Environment: `RINGMQ_BENCH_MESSAGES` (records in the backlog, default 400,000, in one
//! queue), `RINGMQ_BENCH_RUNS` (default 5), `RINGMQ_BENCH_DIR` (default: cargo's target tmp
//! dir).

use std::path::PathBuf;
use std::time::Instant;

mod common;

use common::{env_u64, now_ms, BODY_BYTES};
use ringmq_node::io::disk::RealDisk;
use ringmq_node::store::{Store, StoreConfig};

const TOPIC: &str = "BenchTopic";
const BATCH: usize = 100;

fn main() {
    let messages = env_u64("RINGMQ_BENCH_MESSAGES", 400_000);
    let runs = env_u64("RINGMQ_BENCH_RUNS", 5);
    let root = std::env::var_os("RINGMQ_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")));
    let dir = root.join(format!("ringmq-bench-pull-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut cfg = StoreConfig::new(&dir, 0, "127.0.0.1:10911".parse().expect("literal"));
    cfg.cache_keep_bytes = 0;
    let mut store = Store::open(RealDisk::new(), cfg).expect("opening the store");
    let one = common::encode_record(TOPIC, 0, &[("TAGS", "TagA")]);
    let mut batch = one.repeat(BATCH);
    let mut written = 0;
    while written < messages {
        batch.copy_from_slice(&one.repeat(BATCH));
        store.append(&mut batch, now_ms()).expect("append");
        written += BATCH as u64;
    }
    store.sync().expect("sync");
    store.checkpoint().expect("checkpoint");
    println!(
        "pull bench: {written} records of {} bytes in one queue, {runs} runs, {}",
        one.len(),
        dir.display()
    );
    println!("| pull batch | lookup ns/msg | lookup + copy ns/msg |");
    println!("|---|---|---|");
    for pull in [32u32, 100, 1000] {
        let mut lookup = Vec::new();
        let mut both = Vec::new();
        for _ in 0..runs {
            lookup.push(read_all(&store, pull, false, written));
            both.push(read_all(&store, pull, true, written));
        }
        println!("| {pull} | {:.1} | {:.1} |", median(lookup), median(both));
    }
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Reads the whole queue in pulls of `pull`; ns per message.
fn read_all(store: &Store<RealDisk>, pull: u32, copy: bool, total: u64) -> f64 {
    let mut out = Vec::with_capacity(pull as usize * (BODY_BYTES + 200));
    let (mut offset, mut got) = (0u64, 0u64);
    let t = Instant::now();
    while offset < total {
        let r = store
            .get(TOPIC, 0, offset, pull, u64::MAX, |_| true)
            .expect("get");
        if copy {
            out.clear();
            for run in &r.runs {
                store
                    .read_append(run.physical_offset, run.len as usize, &mut out)
                    .expect("read");
            }
            std::hint::black_box(&out);
        }
        got += u64::from(r.messages);
        offset = r.next_offset;
    }
    assert_eq!(got, total, "every record read once");
    t.elapsed().as_nanos() as f64 / got as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
