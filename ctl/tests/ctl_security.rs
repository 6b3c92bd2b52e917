//! `ringmq-ctl`'s TLS and credential flags: the secret key never shows (`--help`, errors),
//! missing pieces are usage errors naming the flag, TLS to a listener that does not speak it
//! fails with one line naming the address, and commands work over TLS against a node whose
//! listeners take TLS only.
#![allow(clippy::unwrap_used)]

mod common;

use std::net::TcpListener;
use std::time::Duration;

use common::{ctl, ctl_env};

const SECRET: &str = "S3CRET-never-shown-4711";

#[test]
fn help_never_shows_the_secret_key() {
    let env = [
        ("RINGMQ_ACCESS_KEY", "ak-test"),
        ("RINGMQ_SECRET_KEY", SECRET),
    ];
    for args in [
        &["--help"][..],
        &["-h"],
        &["cluster", "list", "--help"],
        &["send", "--help"],
    ] {
        let out = ctl_env(args, &env);
        out.ok(args);
        assert!(!out.stdout.contains(SECRET), "{args:?}:\n{}", out.stdout);
        assert!(!out.stderr.contains(SECRET), "{args:?}:\n{}", out.stderr);
        for flag in [
            "--tls",
            "--ca",
            "--tls-cert",
            "--tls-key",
            "--access-key",
            "--secret-key",
        ] {
            assert!(out.stdout.contains(flag), "{args:?}: {flag} missing");
        }
    }
    let out = ctl_env(&["--help"], &env);
    assert!(out.stdout.contains("RINGMQ_SECRET_KEY"), "{}", out.stdout);
    assert!(out.stdout.contains("shell's history"), "{}", out.stdout);
}

#[test]
fn missing_pieces_are_usage_errors_naming_the_flag() {
    for (args, env, want) in [
        (&["--tls", "cluster", "list"][..], &[][..], "--ca"),
        (&["cluster", "list"], &[("RINGMQ_TLS", "1")][..], "--ca"),
        (
            &["cluster", "list", "--ca", "ca.pem", "--tls-cert", "c.pem"],
            &[],
            "--tls-key",
        ),
        (
            &["cluster", "list"],
            &[("RINGMQ_SECRET_KEY", SECRET)],
            "--access-key",
        ),
        (
            &["cluster", "list", "--access-key", "ak"],
            &[],
            "--secret-key",
        ),
    ] {
        let out = ctl_env(args, env);
        let line = out.failed_one_line(args);
        assert_eq!(out.code, 2, "{args:?}: {line}");
        assert!(line.contains(want), "{args:?}: {line}");
        assert!(!line.contains(SECRET), "{line}");
    }
    // RINGMQ_TLS=false is off: no CA needed (the unreachable name server is the error).
    let args = ["-n", "127.0.0.1:1", "cluster", "list"];
    let out = ctl_env(&args, &[("RINGMQ_TLS", "false")]);
    assert!(
        out.failed_one_line(&args).contains("unreachable"),
        "{out:?}"
    );
}

#[test]
fn a_missing_ca_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("no-such-ca.pem");
    let args = ["--ca", ca.to_str().unwrap(), "cluster", "list"];
    let out = ctl(&args);
    let line = out.failed_one_line(&args);
    assert!(line.contains("no-such-ca.pem"), "{line}");
    assert_eq!(out.code, 1);
}

#[test]
fn errors_never_show_the_secret_key() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let ns = format!("127.0.0.1:{port}");
    let args = [
        "-n",
        ns.as_str(),
        "--access-key",
        "ak-test",
        "cluster",
        "list",
    ];
    let out = ctl_env(&args, &[("RINGMQ_SECRET_KEY", SECRET)]);
    let line = out.failed_one_line(&args);
    assert!(!line.contains(SECRET), "{line}");
    // On the command line too (discouraged, but it must not be echoed).
    let args = [
        "-n",
        ns.as_str(),
        "--access-key",
        "ak",
        "--secret-key",
        SECRET,
        "topic",
        "list",
    ];
    let out = ctl(&args);
    assert!(!out.stderr.contains(SECRET), "{}", out.stderr);
    assert!(!out.stdout.contains(SECRET), "{}", out.stdout);
    // A bad access key is refused without echoing the secret.
    let args = [
        "-n",
        ns.as_str(),
        "--access-key",
        " ak ",
        "--secret-key",
        SECRET,
        "topic",
        "list",
    ];
    let out = ctl(&args);
    let line = out.failed_one_line(&args);
    assert!(!line.contains(SECRET), "{line}");
}

#[test]
fn tls_to_a_plaintext_listener_is_one_line_naming_it() {
    let pki = ringmq_testkit::certs::TestPki::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // A listener that reads what comes and hangs up, as a plaintext one does with a
    // ClientHello.
    let server = std::thread::spawn(move || {
        use std::io::Read;
        listener.set_nonblocking(false).unwrap();
        if let Ok((mut s, _)) = listener.accept() {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
        }
    });
    let ns = addr.to_string();
    let args = [
        "-n",
        ns.as_str(),
        "--ca",
        pki.ca.to_str().unwrap(),
        "cluster",
        "list",
    ];
    let out = ctl(&args);
    let line = out.failed_one_line(&args);
    assert!(
        line.contains(&format!("TLS handshake with {addr}")),
        "{line}"
    );
    assert!(line.contains("does it speak TLS?"), "{line}");
    server.join().unwrap();
}

#[test]
fn commands_work_over_tls_against_an_enforcing_node() {
    let pki = ringmq_testkit::certs::TestPki::new();
    let sets = [
        "tls.server.mode=enforcing".to_string(),
        format!("tls.server.certPath={}", pki.server_cert.display()),
        format!("tls.server.keyPath={}", pki.server_key.display()),
        "tls.enable=true".to_string(),
        format!("tls.client.trustCertPath={}", pki.ca.display()),
    ];
    let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
    let node = common::Node::start_with(&sets);
    let ca = pki.ca.to_str().unwrap();
    let list = [
        "-n",
        node.namesrv.as_str(),
        "--ca",
        ca,
        "cluster",
        "list",
        "--json",
    ];
    let out = ctl(&list);
    out.ok(&list);
    assert!(out.stdout.contains(&node.broker), "{}", out.stdout);
    // The CA from the environment, a message sent and read back.
    let env = [("RINGMQ_CA", ca)];
    let send = ["-n", node.namesrv.as_str(), "send", "TlsCtl", "over tls"];
    ctl_env(&send, &env).ok(&send);
    let consume = ["-n", node.namesrv.as_str(), "consume", "TlsCtl", "--json"];
    let out = ctl_env(&consume, &env);
    out.ok(&consume);
    assert!(out.stdout.contains("over tls"), "{}", out.stdout);
    // Plaintext: one line naming the refusal.
    let plain = ["-n", node.namesrv.as_str(), "cluster", "list"];
    let out = ctl(&plain);
    let line = out.failed_one_line(&plain);
    assert!(line.contains("TLS only"), "{line}");
}
