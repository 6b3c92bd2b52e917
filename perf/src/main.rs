//! `ringmq-perf`: benchmark and verification harness. Produce/consume modes arrive with the
//! ctl/perf issue; the store benchmark lives in `cargo bench -p ringmq-node --bench store`.
#![forbid(unsafe_code)]

use clap::Parser;

/// Benchmark and verification harness for ringmq.
///
/// No modes exist yet. The store benchmark runs with `cargo bench -p ringmq-node --bench store`.
#[derive(Parser, Debug)]
#[command(name = "ringmq-perf", version, about, long_about = None)]
struct Args {}

fn main() {
    let _args = Args::parse();
    eprintln!("ringmq-perf: no modes yet (see `ringmq-perf --help`)");
    std::process::exit(2);
}
