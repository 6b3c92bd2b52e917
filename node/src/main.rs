//! `ringmq`: args -> config -> start. Nothing else.

fn main() {
    eprintln!("ringmq: the broker arrives with the broker issue; for now run `cargo bench -p ringmq-node --bench store`");
    std::process::exit(2);
}
