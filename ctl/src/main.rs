//! `ringmq-ctl`: cluster operations. The commands arrive with the ctl/perf issue.
#![forbid(unsafe_code)]

use clap::Parser;

/// Cluster operations for ringmq (the mqadmin of this project).
///
/// No commands exist yet: they arrive once the broker and the client do.
#[derive(Parser, Debug)]
#[command(name = "ringmq-ctl", version, about, long_about = None)]
struct Args {}

fn main() {
    let _args = Args::parse();
    eprintln!("ringmq-ctl: no commands yet (see `ringmq-ctl --help`)");
    std::process::exit(2);
}
