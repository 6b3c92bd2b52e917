//! Where the workspace's binaries are.
//!
//! A crate's own binaries come from Cargo (`env!("CARGO_BIN_EXE_<name>")` in the test),
//! never from here. The `ringmq` server belongs to `node`, so the tests of `client`, `ctl`
//! and `perf` look for it beside their own test executable: `<target>/<profile>/ringmq`,
//! which `cargo test --workspace` builds for the node's tests (whatever the target dir:
//! `CARGO_TARGET_DIR`, a config file, the default). When it is missing (e.g.
//! `cargo test -p ringmq-client` on a fresh checkout) it is built once into
//! `<target>/testkit-bins`, a target dir of its own, because the running `cargo test` may
//! hold the lock of the main one. `RINGMQ_BIN` overrides the path.
//!
//! Like before this module, an existing `ringmq` binary is used as it is: `cargo test -p
//! ringmq-client` after changing `node/src` tests the binary of the last build that made
//! one; `cargo test --workspace` always rebuilds it first.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The `ringmq` server binary for tests of crates other than `node`.
pub fn ringmq() -> PathBuf {
    static FOUND: OnceLock<PathBuf> = OnceLock::new();
    FOUND.get_or_init(find_ringmq).clone()
}

fn find_ringmq() -> PathBuf {
    if let Some(p) = std::env::var_os("RINGMQ_BIN") {
        return PathBuf::from(p);
    }
    let profile_dir = profile_dir();
    let bin = profile_dir.join("ringmq");
    // Another cargo may be replacing the binary right now (a parallel build of the same
    // target dir): give it a moment before building one.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !bin.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    if bin.exists() {
        return bin;
    }
    let target = profile_dir.parent().unwrap_or(&profile_dir);
    let own = target.join("testkit-bins");
    let built = own.join("debug").join("ringmq");
    eprintln!(
        "{} is missing: building ringmq into {}",
        bin.display(),
        own.display()
    );
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "-p", "ringmq-node", "--bin", "ringmq"])
        .env("CARGO_TARGET_DIR", &own)
        .current_dir(workspace_root())
        .status();
    assert!(
        built.exists(),
        "the ringmq binary is missing at {} and `cargo build -p ringmq-node --bin ringmq` did \
         not produce one ({status:?}); build the workspace first or set RINGMQ_BIN",
        bin.display()
    );
    built
}

/// `<target>/<profile>`: the directory two levels above the running test executable
/// (`<target>/<profile>/deps/<test>-<hash>`).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    exe.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| panic!("no <target>/<profile> above {}", exe.display()))
}

/// The workspace root (this crate's parent directory).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("testkit lives in the workspace root")
        .to_path_buf()
}
