//! The C++ RocketMQ client that PyPI's `rocketmq` 0.4.4 wheel ships (librocketmq.so, built
//! from rocketmq-client-cpp 1.2.3, driven through the wheel's Python ctypes bindings)
//! against a real `ringmq standalone` speaking RocketMQ's remoting protocol.
//!
//! Each test starts its own node (temp data dir, ports picked by the node, 2 shards) and
//! runs one scenario script from `interop/python/` with `python3 <script> <namesrv>` under
//! a deadline. A script prints an `ok:` line per check and exits non-zero with a `FAIL:`
//! line; the test fails with the script's output, the tail of the C++ client's own log and
//! the tail of the node's log.
//!
//! Requirements: `python3` with `pip install rocketmq==0.4.4` (x86_64 Linux wheel). A
//! missing package FAILS the tests (never a silent skip). `ringmq-ctl` (for topic
//! creation, dead letters and mixed traffic) is taken from `RINGMQ_CTL_BIN`, else beside
//! this test's executable (`<target>/<profile>/ringmq-ctl`), else built once into
//! `<target>/testkit-bins`. `PYTHON` overrides the interpreter.
//!
//! Node settings every scenario relies on: `messageDelayLevel` with level 2 = 3 s and every
//! other level 1 s (delay and retry scenarios stay short), `maxReconsumeTimes=2` (a failing
//! message is dead-lettered after 1 + 2 deliveries), `transactionTimeOut` and
//! `transactionCheckInterval` 1 s (check-backs come quickly), `enablePropertyFilter=true`.
//! `HOME` is a temp dir per scenario: the C++ client writes its log and name-server
//! snapshot under `$HOME/logs/rocketmq-cpp` (its SetXxxLogPath calls are no-ops).
//!
//! `cpp_acl` runs its node with `aclEnable=true` and the accounts of [`ACL`]; the script's
//! ringmq-ctl signs as the admin account (`RINGMQ_ACCESS_KEY`, `RINGMQ_SECRET_KEY`).
//!
//! Not covered with this client, because rocketmq-client-cpp 1.2.3 cannot express them:
//! SQL92 subscriptions (it sends no expressionType: every expression is a tag expression)
//! and full transactions (no transaction producer in its C API); `cpp_txn_checkback.py`
//! covers the wire half it can reach.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use ringmq_testkit::{bin, run, tail, Proc, Spawn};

/// How long the node may take to print its ready line.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// A scenario script's own watchdog ends it at 55 s; this is the outer bound.
const SCRIPT_LIMIT: Duration = Duration::from_secs(75);
/// Level 2 is the delay scenarios' level; levels 3 and up are the retries'.
const DELAY_LEVELS: &str = "1s 3s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s";
const DELAY_LEVEL_2_S: &str = "3";
const MAX_RECONSUME: &str = "2";

#[test]
fn cpp_send_modes() {
    scenario("cpp_send_modes.py");
}

#[test]
fn cpp_rebalance() {
    scenario("cpp_rebalance.py");
}

#[test]
fn cpp_broadcast() {
    scenario("cpp_broadcast.py");
}

#[test]
fn cpp_orderly() {
    scenario("cpp_orderly.py");
}

#[test]
fn cpp_delay() {
    scenario("cpp_delay.py");
}

#[test]
fn cpp_retry_dlq() {
    scenario("cpp_retry_dlq.py");
}

#[test]
fn cpp_pull() {
    scenario("cpp_pull.py");
}

#[test]
fn cpp_mixed() {
    scenario("cpp_mixed.py");
}

#[test]
fn cpp_txn_checkback() {
    scenario("cpp_txn_checkback.py");
}

/// The ACL file of `cpp_acl`; `cpp_acl.py` names the same accounts.
const ACL: &str = "\
accounts:
  - accessKey: root
    secretKey: rootsecret1
    admin: true
  - accessKey: producer
    secretKey: producersecret1
    admin: false
    topicPerms:
      - orders=PUB
  - accessKey: consumer
    secretKey: consumersecret1
    admin: false
    topicPerms:
      - orders=SUB
    groupPerms:
      - g1=SUB
";

#[test]
fn cpp_acl() {
    scenario_with("cpp_acl.py", Some(ACL));
}

/// Starts a node, runs `script` against it, fails with everything useful if it fails.
fn scenario(script: &str) {
    scenario_with(script, None);
}

/// [`scenario`]; with `acl`, the node checks every request against that ACL file (`root`
/// is its admin account and the broker's own) and the script's ringmq-ctl signs as `root`.
fn scenario_with(script: &str, acl: Option<&str>) {
    require_rocketmq_package();
    let ctl = ringmq_ctl();
    let dir = ringmq_testkit::tempdir("cpp");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).expect("creating the client's HOME");
    let acl_file = acl.map(|text| {
        let file = dir.path().join("plain_acl.yml");
        std::fs::write(&file, text).expect("writing the ACL file");
        file
    });
    let node = start_node(dir.path(), acl_file.as_deref());
    let namesrv = node.1.to_string();

    let path = scripts_dir().join(script);
    let mut spawn = Spawn::new(script, python());
    if acl.is_some() {
        spawn = spawn
            .env("RINGMQ_ACCESS_KEY", "root")
            .env("RINGMQ_SECRET_KEY", "rootsecret1");
    }
    let out = run(
        spawn
            .arg(&path)
            .arg(&namesrv)
            .env("HOME", &home)
            .env("RINGMQ_CTL", &ctl)
            .env("DELAY_LEVEL_2_S", DELAY_LEVEL_2_S)
            .env("MAX_RECONSUME", MAX_RECONSUME)
            .env("PYTHONUNBUFFERED", "1")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .log(dir.path().join(format!("{script}.stderr.log"))),
        SCRIPT_LIMIT,
    );
    if out.code != 0 {
        panic!(
            "{script} failed (exit {}, {:.1?}) against {namesrv}\n----- stdout -----\n{}\
             ----- stderr -----\n{}\n----- C++ client log (last 60 lines) -----\n{}\n\
             ----- ringmq node log (last 60 lines) -----\n{}\n-----",
            out.code,
            out.elapsed,
            out.stdout,
            out.stderr,
            client_log_tail(&home, 60),
            node.0.log_tail(60),
        );
    }
    print!("{}", out.stdout);
}

/// A `ringmq standalone` on ports of its own choosing, with `aclEnable=true` and the file
/// `acl` if given; the guard and the name server address.
fn start_node(dir: &Path, acl: Option<&Path>) -> (Proc, std::net::SocketAddr) {
    let data = dir.join("data");
    let mut spawn = Spawn::new("ringmq", bin::ringmq())
        .args(["standalone", "--data"])
        .arg(&data)
        .args(["--namesrv-port", "0", "--broker-port", "0", "--shards", "2"])
        // 8 MiB CommitLog segments: the 1 GiB default reserves GiBs of disk per test.
        .args(["--set", "mappedFileSizeCommitLog=8388608"])
        .args(["--set", "enablePropertyFilter=true"])
        .arg("--set")
        .arg(format!("messageDelayLevel={DELAY_LEVELS}"))
        .args(["--set", &format!("maxReconsumeTimes={MAX_RECONSUME}")])
        .args(["--set", "transactionTimeOut=1000"])
        .args(["--set", "transactionCheckInterval=1000"])
        .env_default("RUST_LOG", "info")
        .log(dir.join("ringmq.log"));
    if let Some(acl) = acl {
        spawn = spawn
            .args(["--set", "aclEnable=true"])
            .arg("--set")
            .arg(format!("aclFilePath={}", acl.display()))
            .args(["--set", "innerAccessKey=root"])
            .args(["--set", "innerSecretKey=rootsecret1"]);
    }
    let mut proc = spawn.start();
    let ready = proc.wait_ready(START_TIMEOUT);
    let namesrv = ready.namesrv_addr();
    (proc, namesrv)
}

/// Fails the test (with the command to fix it) unless `import rocketmq.client` works.
fn require_rocketmq_package() {
    static CHECKED: OnceLock<Result<(), String>> = OnceLock::new();
    let checked = CHECKED.get_or_init(|| {
        let out = run(
            Spawn::new("python-import", python()).args([
                "-c",
                "import rocketmq.client, rocketmq.ffi; print(rocketmq.ffi._DYLIB_PATH)",
            ]),
            Duration::from_secs(30),
        );
        if out.code == 0 {
            Ok(())
        } else {
            Err(format!(
                "`{} -c 'import rocketmq.client'` failed (exit {}): {}\nThe C++ client tests \
                 need the rocketmq Python package: run `pip install rocketmq==0.4.4`",
                python(),
                out.code,
                tail(&out.stderr, 5)
            ))
        }
    });
    if let Err(e) = checked {
        panic!("{e}");
    }
}

fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_string())
}

fn scripts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("python")
}

/// The last `n` lines of the C++ client's log files under `home` (it names them
/// `<pid>_rocketmq-cpp.log.<N>` in `$HOME/logs/rocketmq-cpp`).
fn client_log_tail(home: &Path, n: usize) -> String {
    let dir = home.join("logs").join("rocketmq-cpp");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return format!("(no {})", dir.display());
    };
    let mut text = String::new();
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    for p in paths {
        let body = std::fs::read_to_string(&p).unwrap_or_default();
        text.push_str(&format!("== {}\n{}\n", p.display(), tail(&body, n)));
    }
    text
}

/// `ringmq-ctl`: `RINGMQ_CTL_BIN`, else beside this test's executable, else built once
/// into `<target>/testkit-bins` (the running `cargo test` holds the main target's lock).
fn ringmq_ctl() -> PathBuf {
    static FOUND: OnceLock<PathBuf> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            if let Some(p) = std::env::var_os("RINGMQ_CTL_BIN") {
                return PathBuf::from(p);
            }
            let exe = std::env::current_exe().expect("the test executable's path");
            let profile_dir = exe
                .parent()
                .and_then(Path::parent)
                .expect("<target>/<profile> above the test executable")
                .to_path_buf();
            let beside = profile_dir.join("ringmq-ctl");
            if beside.exists() {
                return beside;
            }
            let target = profile_dir.parent().unwrap_or(&profile_dir);
            let own = target.join("testkit-bins");
            let built = own.join("debug").join("ringmq-ctl");
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let status = Command::new(cargo)
                .args(["build", "-p", "ringmq-ctl", "--bin", "ringmq-ctl"])
                .env("CARGO_TARGET_DIR", &own)
                .current_dir(bin::workspace_root())
                .status();
            assert!(
                built.exists(),
                "ringmq-ctl is missing at {} and `cargo build -p ringmq-ctl` did not produce \
                 one ({status:?}); build it first or set RINGMQ_CTL_BIN",
                beside.display()
            );
            built
        })
        .clone()
}
