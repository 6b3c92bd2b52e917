//! A small W3C WebDriver client for the dashboard's browser test: Debian's `chromedriver`
//! driving headless `chromium` (both from the system's packages; `scripts/test.sh` installs
//! them). HTTP/1.1 over a std `TcpStream`, one request per connection, JSON bodies.
//!
//! [`Browser`] is a guard: dropping it ends the WebDriver session (chromedriver closes
//! Chromium), kills every process whose command line names this browser's own
//! `--user-data-dir` (Chromium and its helpers, by pid), then chromedriver itself.
#![allow(dead_code, clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ringmq_testkit::{Proc, Spawn};
use serde_json::{json, Value};

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// The W3C key of an element reference.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Panics with what to install when the browser is missing (the test must not pass
/// silently without it).
pub fn require_chromium() {
    for (path, pkg) in [(CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")] {
        assert!(
            Path::new(path).exists(),
            "{path} is missing: this test drives the dashboard in headless Chromium; install \
             it with `apt-get install -y chromium chromium-driver` (scripts/test.sh does)"
        );
        let _ = pkg;
    }
}

/// A headless Chromium session through chromedriver.
pub struct Browser {
    driver: Option<Proc>,
    addr: SocketAddr,
    session: Option<String>,
    profile: tempfile::TempDir,
}

impl Browser {
    pub fn start() -> Browser {
        require_chromium();
        let profile = tempfile::tempdir().unwrap();
        // chromedriver takes a port, not 0: take a free one from the OS.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut driver = Spawn::new("chromedriver", CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .log(profile.path().join("chromedriver.log"))
            .start();
        driver.wait_line(Duration::from_secs(20), "its start line", |l| {
            l.contains("started successfully") || l.contains("was started")
        });
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let mut b = Browser {
            driver: Some(driver),
            addr,
            session: None,
            profile,
        };
        let data_dir = b.profile.path().join("chromium-profile");
        let caps = json!({
            "capabilities": { "alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {
                    "binary": CHROMIUM,
                    "args": [
                        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                        "--no-first-run", "--disable-background-networking",
                        "--disable-component-update", "--disable-sync",
                        "--disable-dev-shm-usage", "--window-size=1400,2600",
                        format!("--user-data-dir={}", data_dir.display()),
                    ],
                },
            }},
        });
        let v = b.call("POST", "/session", Some(&caps));
        let id = v["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session from chromedriver: {v}"))
            .to_string();
        b.session = Some(id);
        b
    }

    fn sid(&self) -> String {
        self.session.clone().unwrap()
    }

    /// One WebDriver command; its `value` (panics on a WebDriver error).
    pub fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let (status, v) = self.try_call(method, path, body);
        assert!(status == 200, "WebDriver {method} {path}: {status} {v}");
        v["value"].clone()
    }

    fn try_call(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let body = body.map(Value::to_string).unwrap_or_default();
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.addr,
            body.len()
        );
        let (status, _, text) = http_raw(self.addr, req.as_bytes(), Duration::from_secs(60));
        let v = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, v)
    }

    pub fn goto(&self, url: &str) {
        self.call(
            "POST",
            &format!("/session/{}/url", self.sid()),
            Some(&json!({ "url": url })),
        );
    }

    /// Runs `script` (a function body; `arguments` are `args`) in the page; its result.
    pub fn js(&self, script: &str, args: Value) -> Value {
        self.call(
            "POST",
            &format!("/session/{}/execute/sync", self.sid()),
            Some(&json!({ "script": script, "args": args })),
        )
    }

    /// The text a person sees in the element `css` ("" when absent or hidden).
    pub fn text(&self, css: &str) -> String {
        let v = self.js(
            "const e = document.querySelector(arguments[0]); return e ? e.innerText : '';",
            json!([css]),
        );
        v.as_str().unwrap_or_default().to_string()
    }

    /// Waits until `probe` returns `Some`; panics with `what` and the page text after
    /// `limit`.
    pub fn wait_for<T>(
        &self,
        limit: Duration,
        what: &str,
        mut probe: impl FnMut(&Browser) -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(t) = probe(self) {
                return t;
            }
            if Instant::now() > deadline {
                let _ = self.screenshot_to(&screenshot_dir().join("failure.png"));
                panic!(
                    "{what}: not seen within {limit:?}; the page shows:\n{}",
                    self.text("body")
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Waits until the text of `css` contains `want`.
    pub fn wait_text(&self, css: &str, want: &str) -> String {
        self.wait_for(
            Duration::from_secs(30),
            &format!("{css} containing {want:?}"),
            |b| {
                let t = b.text(css);
                t.contains(want).then_some(t)
            },
        )
    }

    fn element(&self, css: &str) -> String {
        let v = self.call(
            "POST",
            &format!("/session/{}/element", self.sid()),
            Some(&json!({ "using": "css selector", "value": css })),
        );
        v[ELEMENT_KEY].as_str().unwrap().to_string()
    }

    /// Types `text` into the element `css` (after clearing it), as a person would.
    pub fn type_into(&self, css: &str, text: &str) {
        let e = self.element(css);
        self.call(
            "POST",
            &format!("/session/{}/element/{e}/clear", self.sid()),
            Some(&json!({})),
        );
        self.call(
            "POST",
            &format!("/session/{}/element/{e}/value", self.sid()),
            Some(&json!({ "text": text })),
        );
    }

    /// Accepts an open `alert`/`confirm` dialog; false when none is open.
    pub fn accept_alert(&self) -> bool {
        let path = format!("/session/{}/alert/accept", self.sid());
        self.try_call("POST", &path, Some(&json!({}))).0 == 200
    }

    pub fn click(&self, css: &str) {
        let e = self.element(css);
        self.call(
            "POST",
            &format!("/session/{}/element/{e}/click", self.sid()),
            Some(&json!({})),
        );
    }

    /// Saves a PNG of the window to `path`.
    pub fn screenshot_to(&self, path: &Path) -> std::io::Result<()> {
        let (status, v) =
            self.try_call("GET", &format!("/session/{}/screenshot", self.sid()), None);
        if status != 200 {
            return Err(std::io::Error::other(format!("screenshot: {status} {v}")));
        }
        let png = base64_decode(v["value"].as_str().unwrap_or_default());
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, png)
    }

    /// Saves `name` in [`screenshot_dir`] and says where.
    pub fn screenshot(&self, name: &str) -> PathBuf {
        let path = screenshot_dir().join(name);
        self.screenshot_to(&path).unwrap();
        eprintln!("screenshot: {}", path.display());
        path
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(id) = self.session.take() {
            let _ = self.try_call("DELETE", &format!("/session/{id}"), None);
        }
        kill_named(&self.profile.path().display().to_string());
        drop(self.driver.take());
    }
}

/// Where the screenshots go: `<workspace>/target/dashboard-screenshots/`.
pub fn screenshot_dir() -> PathBuf {
    ringmq_testkit::bin::workspace_root()
        .join("target")
        .join("dashboard-screenshots")
}

/// SIGKILLs every process whose command line contains `marker` (this test's own temp
/// path), by pid.
fn kill_named(marker: &str) {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return;
    };
    let me = std::process::id();
    for e in dir.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if pid as u32 == me {
            continue;
        }
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        if String::from_utf8_lossy(&cmd).contains(marker) {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

/// Sends `raw` to `addr` and reads the answer: its `Content-Length` body, or until the
/// server closes; (status, head, body).
pub fn http_raw(addr: SocketAddr, raw: &[u8], limit: Duration) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connecting to {addr}: {e}"));
    s.set_read_timeout(Some(limit)).unwrap();
    s.set_write_timeout(Some(limit)).unwrap();
    // A server may answer (and close) before taking all of a refused request.
    let _ = s.write_all(raw);
    let mut out = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        if let Some(end) = out.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&out[..end]).to_ascii_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok());
            if len.is_some_and(|n| out.len() >= end + 4 + n) {
                break;
            }
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&chunk[..n]),
        }
    }
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP status in {text:?}"));
    (status, head.to_string(), body.to_string())
}

fn base64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for v in s.bytes().filter_map(val) {
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}
