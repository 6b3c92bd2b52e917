//! A `ringmq namesrv` and a `ringmq broker` as separate processes on loopback, so the broker
//! can be killed while the name server still lists it (until its lease runs out, 120 s): what
//! a tool meets when a broker dies under it.

use std::time::Duration;

use crate::{Proc, Spawn};

/// How long each process may take to print its ready line.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// The two processes (killed on drop) and their addresses.
pub struct Split {
    pub namesrv_proc: Proc,
    pub broker_proc: Proc,
    pub dir: tempfile::TempDir,
    pub namesrv: String,
    pub broker: String,
}

impl Split {
    /// A name server and a 2-shard broker (8 MiB segments) registered with it.
    pub fn start() -> Split {
        let dir = crate::tempdir("split");
        let mut namesrv_proc = Spawn::new("namesrv", crate::bin::ringmq())
            .args(["namesrv", "--host", "127.0.0.1", "--port", "0"])
            .log(dir.path().join("namesrv.log"))
            .start();
        let namesrv = namesrv_proc
            .wait_ready(START_TIMEOUT)
            .namesrv_addr()
            .to_string();
        let conf = dir.path().join("broker.properties");
        std::fs::write(
            &conf,
            format!(
                "brokerClusterName=DefaultCluster\nbrokerName=broker-a\nbrokerId=0\n\
                 listenPort=0\nstorePathRootDir={}\nhaListenPort=0\n\
                 mappedFileSizeCommitLog=8388608\n",
                dir.path().join("store").display()
            ),
        )
        .expect("writing broker.properties");
        let mut broker_proc = Spawn::new("broker", crate::bin::ringmq())
            .arg("broker")
            .arg("-c")
            .arg(&conf)
            .args([
                "--namesrv",
                &namesrv,
                "--host",
                "127.0.0.1",
                "--shards",
                "2",
            ])
            .log(dir.path().join("broker.log"))
            .start();
        let broker = broker_proc
            .wait_ready(START_TIMEOUT)
            .broker_addr()
            .to_string();
        Split {
            namesrv_proc,
            broker_proc,
            dir,
            namesrv,
            broker,
        }
    }

    /// SIGKILL of the broker; the name server keeps its route until the lease runs out.
    pub fn kill_broker(&mut self) {
        self.broker_proc.kill9();
    }
}
