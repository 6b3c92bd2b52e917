//! The process guard against real (shell) processes: ready lines, failures that name the
//! stderr tail, exit codes and output, kill on drop.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use ringmq_testkit::{run, Spawn};

const LIMIT: Duration = Duration::from_secs(30);

fn sh(script: &str) -> Spawn {
    Spawn::new("sh", "sh").args(["-c", script])
}

#[test]
fn waits_for_the_ready_line_and_kills_on_drop() {
    let mut p =
        sh("echo starting; echo 'ringmq broker ready: 127.0.0.1:7 (2 shards)'; exec sleep 600")
            .start();
    let ready = p.wait_ready(LIMIT);
    assert_eq!(ready.broker_addr().port(), 7);
    assert_eq!(ready.shards, 2);
    assert_eq!(p.stdout_lines()[0], "starting\n");
    let pid = p.pid().unwrap();
    drop(p);
    // Reaped: no such process any more (not even a zombie).
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
}

#[test]
fn an_early_exit_names_the_status_and_the_stderr_tail() {
    let mut p = sh("echo 'bad config: no such key' >&2; exit 3").start();
    let err = p
        .try_wait_line(LIMIT, "its ready line", |l| l.contains("ready"))
        .unwrap_err();
    assert!(err.contains("its ready line"), "{err}");
    assert!(err.contains("bad config: no such key"), "{err}");
    assert_eq!(p.try_exit().and_then(|s| s.code()), Some(3));
}

#[test]
fn a_missing_ready_line_times_out_with_the_output_so_far() {
    let mut p = sh("echo hello; echo oops >&2; exec sleep 600").start();
    let err = p
        .try_wait_line(Duration::from_millis(300), "its ready line", |l| {
            l == "ready"
        })
        .unwrap_err();
    assert!(err.contains("did not print its ready line within"), "{err}");
    assert!(err.contains("hello") && err.contains("oops"), "{err}");
}

#[test]
fn run_returns_code_stdout_and_stderr() {
    let out = run(
        sh("printf 'a\\nb'; echo e >&2; exit 2").env("X", "1"),
        LIMIT,
    );
    assert_eq!(out.code, 2);
    assert_eq!(out.stdout, "a\nb");
    assert_eq!(out.stderr, "e\n");
}

#[test]
fn term_and_kill9() {
    let mut p = sh("exec sleep 600").start();
    let s = p.term(LIMIT);
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&s), Some(15));
    let mut p = sh("trap '' TERM; echo up; while true; do sleep 1; done").start();
    p.wait_line(LIMIT, "up", |l| l == "up");
    assert!(
        p.term_or_kill(Duration::from_millis(200)).is_none(),
        "TERM is ignored"
    );
    assert!(p.pid().is_none(), "killed and reaped");
}

#[test]
#[should_panic(expected = "did not exit within")]
fn finish_kills_a_process_that_does_not_exit() {
    sh("exec sleep 600")
        .start()
        .finish(Duration::from_millis(200));
}
