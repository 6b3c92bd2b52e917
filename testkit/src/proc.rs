//! [`Proc`]: one spawned process as a guard.
//!
//! Its stdout is read line by line by a thread of its own (so the process never blocks on
//! a full pipe) and kept; its stderr is appended to a log file (in a temp dir of the
//! guard's own unless the test names one). Dropping the guard kills (SIGKILL) and reaps the
//! process; when the dropping thread is panicking, the tail of the stderr log is printed.

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::ready::{parse_ready, Ready};

/// What a finished process did.
#[derive(Debug, Clone)]
pub struct Output {
    pub status: ExitStatus,
    /// The exit code; -1 when a signal ended the process.
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    /// From the spawn to the exit (never asserted on: speed is not tested).
    pub elapsed: Duration,
}

/// Stderr lines a failing test prints of each of its processes.
const TAIL_LINES: usize = 80;

/// Keys set on every `ringmq standalone` and `ringmq broker` a test starts, before the
/// test's own args (a later `--set` of the same key wins). The disk-space guards read the
/// whole file system's fill, which on a shared CI disk is other tenants' business: at 90 %
/// a broker refuses writes and above 85 % it deletes old segments early, so a test's
/// outcome would hang on how full the machine happens to be. At 100 % neither fires; a
/// disk that really fills still fails writes with ENOSPC, which the store reports.
pub const TEST_BROKER_SETS: [&str; 3] = [
    "diskSpaceWarningLevelRatio=100",
    "diskSpaceCleanForciblyRatio=100",
    "diskMaxUsedSpaceRatio=100",
];

/// How to start a process (a builder; [`Spawn::start`] runs it).
#[derive(Debug, Clone)]
pub struct Spawn {
    name: String,
    program: OsString,
    prefix: Vec<OsString>,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    env_remove: Vec<OsString>,
    log: Option<PathBuf>,
}

impl Spawn {
    /// `program` (named `name` in messages), no args, the test's environment.
    pub fn new(name: &str, program: impl AsRef<OsStr>) -> Spawn {
        Spawn {
            name: name.to_string(),
            program: program.as_ref().to_owned(),
            prefix: Vec::new(),
            args: Vec::new(),
            env: Vec::new(),
            env_remove: Vec::new(),
            log: None,
        }
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Spawn {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Spawn
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Spawn {
        self.env
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Sets `key` unless the test's own environment has it (e.g. `RUST_LOG`).
    pub fn env_default(self, key: &str, value: &str) -> Spawn {
        if std::env::var_os(key).is_some() {
            self
        } else {
            self.env(key, value)
        }
    }

    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Spawn {
        self.env_remove.push(key.as_ref().to_owned());
        self
    }

    /// Programs the binary is run through (e.g. `prlimit ... setpriv ...`); each must exec,
    /// so the child's pid stays the program's pid.
    pub fn prefix<I, S>(mut self, programs: I) -> Spawn
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.prefix = programs
            .into_iter()
            .map(|a| a.as_ref().to_owned())
            .collect();
        self
    }

    /// Appends stderr to this file (created with its directory if missing) instead of a
    /// file in a temp dir of the guard's own.
    pub fn log(mut self, path: impl AsRef<Path>) -> Spawn {
        self.log = Some(path.as_ref().to_path_buf());
        self
    }

    /// Spawns the process (panics if it cannot be spawned).
    pub fn start(self) -> Proc {
        let (own_dir, log_path) = match &self.log {
            Some(p) => (None, p.clone()),
            None => {
                let dir = crate::tempdir("log");
                let path = dir.path().join(format!("{}.stderr.log", self.name));
                (Some(dir), path)
            }
        };
        if let Some(parent) = log_path.parent() {
            std::fs::create_dir_all(parent).expect("creating the log dir");
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .unwrap_or_else(|e| panic!("opening {}: {e}", log_path.display()));
        let mut child = self.spawn(&log);
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel::<String>();
        std::thread::spawn(move || {
            // Keep draining stdout so the process never blocks on a full pipe.
            let mut r = BufReader::new(stdout);
            loop {
                let mut line = Vec::new();
                match r.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let _ = tx.send(String::from_utf8_lossy(&line).into_owned());
                    }
                }
            }
        });
        Proc {
            name: self.name,
            child: Some(child),
            started: Instant::now(),
            log_path,
            _log_dir: own_dir,
            lines: rx,
            stdout: Vec::new(),
            stdout_closed: false,
            exit: None,
        }
    }

    /// The args, with [`TEST_BROKER_SETS`] after the subcommand when the program is the
    /// `ringmq` server starting a broker.
    fn effective_args(&self) -> Vec<OsString> {
        let is_server = Path::new(&self.program)
            .file_name()
            .is_some_and(|n| n == "ringmq");
        let starts_broker = self
            .args
            .first()
            .is_some_and(|a| a == "standalone" || a == "broker");
        let mut args = self.args.clone();
        if is_server && starts_broker {
            let sets = TEST_BROKER_SETS
                .iter()
                .flat_map(|kv| [OsString::from("--set"), OsString::from(kv)]);
            args.splice(1..1, sets);
        }
        args
    }

    fn spawn(&self, log: &std::fs::File) -> Child {
        let mut tries = 0;
        loop {
            let mut cmd = match self.prefix.split_first() {
                Some((first, rest)) => {
                    let mut c = Command::new(first);
                    c.args(rest).arg(&self.program);
                    c
                }
                None => Command::new(&self.program),
            };
            cmd.args(self.effective_args())
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::from(log.try_clone().expect("cloning the log file")));
            for k in &self.env_remove {
                cmd.env_remove(k);
            }
            for (k, v) in &self.env {
                cmd.env(k, v);
            }
            match cmd.spawn() {
                Ok(c) => return c,
                // A concurrent cargo build may be swapping the binary right now.
                Err(e) if tries < 50 && e.kind() == std::io::ErrorKind::NotFound => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => panic!(
                    "spawning {} ({:?} {:?}): {e}",
                    self.name, self.program, self.args
                ),
            }
        }
    }
}

/// A running (or exited, not yet dropped) process; see the module comment.
#[derive(Debug)]
pub struct Proc {
    pub name: String,
    child: Option<Child>,
    started: Instant,
    log_path: PathBuf,
    _log_dir: Option<tempfile::TempDir>,
    lines: mpsc::Receiver<String>,
    /// Stdout lines read so far, each with its line end.
    stdout: Vec<String>,
    stdout_closed: bool,
    exit: Option<ExitStatus>,
}

impl Proc {
    /// Waits (at most `timeout`) for a stdout line that `pred` accepts and returns it
    /// (without its line end). Panics if the process exits first or the time is up, with
    /// the stdout so far and the tail of stderr.
    pub fn wait_line(
        &mut self,
        timeout: Duration,
        what: &str,
        pred: impl FnMut(&str) -> bool,
    ) -> String {
        self.try_wait_line(timeout, what, pred)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Proc::wait_line`] that returns the failure (with stdout and stderr tail) instead
    /// of panicking; the process is left as it is.
    pub fn try_wait_line(
        &mut self,
        timeout: Duration,
        what: &str,
        mut pred: impl FnMut(&str) -> bool,
    ) -> Result<String, String> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self
                .lines
                .recv_timeout(left.min(Duration::from_millis(100)))
            {
                Ok(line) => {
                    self.stdout.push(line.clone());
                    let line = line.trim_end_matches(['\n', '\r']);
                    if pred(line) {
                        return Ok(line.to_string());
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    self.stdout_closed = true;
                    // Stdout closed: the process is exiting; give it a moment to be reaped.
                    let status = self.wait(Duration::from_secs(2));
                    return Err(self.failure(&format!(
                        "closed its stdout (exit {status:?}) before {what}"
                    )));
                }
            }
            if let Some(status) = self.try_exit() {
                // Lines it printed before exiting may still be in the channel.
                while let Ok(line) = self.lines.try_recv() {
                    self.stdout.push(line.clone());
                    let line = line.trim_end_matches(['\n', '\r']);
                    if pred(line) {
                        return Ok(line.to_string());
                    }
                }
                return Err(self.failure(&format!("exited ({status}) before {what}")));
            }
            if Instant::now() >= deadline {
                return Err(self.failure(&format!("did not print {what} within {timeout:?}")));
            }
        }
    }

    /// Waits for one of `ringmq`'s ready lines and returns its addresses.
    pub fn wait_ready(&mut self, timeout: Duration) -> Ready {
        let mut ready = None;
        self.wait_line(timeout, "its ready line", |l| {
            ready = parse_ready(l);
            ready.is_some()
        });
        ready.expect("the accepted line parsed")
    }

    /// Waits (at most `limit`) for the process to exit on its own and returns what it did;
    /// kills it and panics (with its output) if it does not.
    pub fn finish(mut self, limit: Duration) -> Output {
        let Some(status) = self.wait(limit) else {
            self.kill9();
            panic!(
                "{}",
                self.failure(&format!("did not exit within {limit:?}"))
            );
        };
        // The reader thread ends at EOF; a grandchild holding stdout is not waited for long.
        let deadline = Instant::now() + Duration::from_secs(5);
        while !self.stdout_closed {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.stdout.push(line),
                Err(_) => break,
            }
        }
        Output {
            status,
            code: status.code().unwrap_or(-1),
            stdout: self.stdout.concat(),
            stderr: self.log(),
            elapsed: self.started.elapsed(),
        }
    }

    /// The stdout lines read so far (taking in whatever has arrived).
    pub fn stdout_lines(&mut self) -> &[String] {
        while let Ok(line) = self.lines.try_recv() {
            self.stdout.push(line);
        }
        &self.stdout
    }

    /// The process id, while the process has not been reaped.
    pub fn pid(&self) -> Option<u32> {
        match (&self.child, self.exit) {
            (Some(c), None) => Some(c.id()),
            _ => None,
        }
    }

    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// The stderr log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// The last `n` lines of the stderr log.
    pub fn log_tail(&self, n: usize) -> String {
        crate::tail(&self.log(), n)
    }

    /// Sends `sig` unless the process has been reaped (panics if that fails).
    pub fn signal(&self, sig: Signal) {
        if let Some(pid) = self.pid() {
            let pid = nix::unistd::Pid::from_raw(pid as i32);
            nix::sys::signal::kill(pid, sig)
                .unwrap_or_else(|e| panic!("sending {sig} to {}: {e}", self.name));
        }
    }

    /// SIGTERM, then waits (at most `limit`) for the exit; panics if it does not come.
    pub fn term(&mut self, limit: Duration) -> ExitStatus {
        self.signal(Signal::SIGTERM);
        match self.wait(limit) {
            Some(s) => s,
            None => panic!(
                "{}",
                self.failure(&format!("did not exit within {limit:?} of SIGTERM"))
            ),
        }
    }

    /// SIGTERM, then SIGKILL if the process has not exited within `limit`; None then.
    pub fn term_or_kill(&mut self, limit: Duration) -> Option<ExitStatus> {
        self.signal(Signal::SIGTERM);
        let status = self.wait(limit);
        if status.is_none() {
            self.kill9();
        }
        status
    }

    /// SIGKILL (no clean shutdown), then waits for the process to be gone.
    pub fn kill9(&mut self) -> ExitStatus {
        if let Some(s) = self.exit {
            return s;
        }
        let child = self.child.as_mut().expect("a child until dropped");
        let _ = child.kill();
        let status = child.wait().expect("reaping a killed child");
        self.exit = Some(status);
        status
    }

    /// The exit status if the process has exited (reaping it), without waiting.
    pub fn try_exit(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            let child = self.child.as_mut()?;
            if let Ok(Some(s)) = child.try_wait() {
                self.exit = Some(s);
            }
        }
        self.exit
    }

    /// Waits up to `timeout` for the process to exit.
    pub fn wait(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.try_exit() {
                return Some(s);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// "NAME HOW; stdout: ...; stderr (last lines): ..." for a panic message.
    pub fn failure(&self, how: &str) -> String {
        format!(
            "{} {how}\n----- {} stdout -----\n{}----- {} stderr, last {TAIL_LINES} lines ({}) \
             -----\n{}\n-----",
            self.name,
            self.name,
            self.stdout.concat(),
            self.name,
            self.log_path.display(),
            self.log_tail(TAIL_LINES),
        )
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            if self.exit.is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        if std::thread::panicking() {
            eprintln!(
                "----- {} stderr, last {TAIL_LINES} lines ({}) -----\n{}\n-----",
                self.name,
                self.log_path.display(),
                self.log_tail(TAIL_LINES)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_starts_get_the_test_sets_before_their_own_args() {
        let args = Spawn::new("ringmq", "/x/target/debug/ringmq")
            .args(["standalone", "--set", "diskSpaceWarningLevelRatio=50"])
            .effective_args();
        let want: Vec<&str> = [
            "standalone",
            "--set",
            "diskSpaceWarningLevelRatio=100",
            "--set",
            "diskSpaceCleanForciblyRatio=100",
            "--set",
            "diskMaxUsedSpaceRatio=100",
            "--set",
            "diskSpaceWarningLevelRatio=50",
        ]
        .to_vec();
        assert_eq!(args, want.iter().map(OsString::from).collect::<Vec<_>>());
        let ns = Spawn::new("ns", "/x/ringmq")
            .args(["namesrv"])
            .effective_args();
        assert_eq!(ns, vec![OsString::from("namesrv")]);
        let other = Spawn::new("perf", "/x/ringmq-perf")
            .args(["broker"])
            .effective_args();
        assert_eq!(other, vec![OsString::from("broker")]);
    }
}
