//! Three name servers with embedded controllers (`enableControllerInNamesrv=true`), and
//! queries of their Raft group and broker sets.

use super::*;
use ringmq_wire::command::{
    ControllerMetadata, GetReplicaInfoRequest, ReplicaSet, ReplicaSets, TopicConfigTable,
};

/// Free loopback ports (bound, then released, so the controllers can be told each other's
/// addresses before they start).
pub fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("binding a free port"))
        .collect();
    held.iter()
        .map(|l| l.local_addr().expect("a bound port").port())
        .collect()
}

/// A group of controllers on fixed ports, data under `dir/controllers`.
pub struct Controllers {
    pub dir: PathBuf,
    pub ports: Vec<u16>,
    pub nodes: Vec<Option<Node>>,
    /// Where they listen (`--host`), the address the others and clients reach them at, and
    /// the launch prefix (e.g. to run them in a network namespace).
    pub bind: String,
    pub ip: std::net::IpAddr,
    pub prefix: Vec<String>,
}

impl Controllers {
    /// `n` controllers on loopback.
    pub fn start(dir: &Path, n: usize) -> Controllers {
        Self::start_at(dir, n, "127.0.0.1", [127, 0, 0, 1].into(), Vec::new())
    }

    /// `n` controllers listening on `bind`, reached at `ip`, launched through `prefix`.
    pub fn start_at(
        dir: &Path,
        n: usize,
        bind: &str,
        ip: std::net::IpAddr,
        prefix: Vec<String>,
    ) -> Controllers {
        let mut c = Controllers {
            dir: dir.to_path_buf(),
            ports: free_ports(n),
            nodes: Vec::new(),
            bind: bind.to_string(),
            ip,
            prefix,
        };
        for i in 0..n {
            let node = c.launch(i);
            c.nodes.push(Some(node));
        }
        c
    }

    /// `controllerDLegerPeers`.
    pub fn peers(&self) -> String {
        self.ports
            .iter()
            .enumerate()
            .map(|(i, p)| format!("n{i}-{}:{p}", self.ip))
            .collect::<Vec<_>>()
            .join(";")
    }

    /// `controllerAddr` of the brokers.
    pub fn addr_list(&self) -> String {
        self.addrs()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(";")
    }

    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.ports
            .iter()
            .map(|p| SocketAddr::new(self.ip, *p))
            .collect()
    }

    /// Starts controller `i` (again).
    pub fn launch(&self, i: usize) -> Node {
        let args = vec![
            "namesrv".to_string(),
            "--host".into(),
            self.bind.clone(),
            "--port".into(),
            self.ports[i].to_string(),
            "--set".into(),
            "enableControllerInNamesrv=true".into(),
            "--set".into(),
            format!("controllerDLegerPeers={}", self.peers()),
            "--set".into(),
            format!("controllerDLegerSelfId=n{i}"),
            "--set".into(),
            format!(
                "controllerStorePath={}",
                self.dir.join("controllers").display()
            ),
        ];
        Node::start(
            "controller",
            &self.dir,
            Launch {
                args,
                prefix: self.prefix.clone(),
                ..Launch::default()
            },
        )
    }

    pub fn restart(&mut self, i: usize) {
        self.nodes[i] = Some(self.launch(i));
    }

    pub fn kill9(&mut self, i: usize) {
        if let Some(mut n) = self.nodes[i].take() {
            n.kill9();
        }
    }

    /// Polls until every live controller names the same leader (other than `not`).
    pub fn agreed_leader(&self, not: Option<u64>, within: Duration) -> (u64, u64) {
        let addrs: Vec<SocketAddr> = self
            .addrs()
            .into_iter()
            .enumerate()
            .filter(|(i, _)| self.nodes[*i].is_some())
            .map(|(_, a)| a)
            .collect();
        agreed_leader(&addrs, not, within)
    }

    /// Polls the leader's view of broker set `name` until `ok` holds; returns it (panics with
    /// the last view after `within`).
    pub fn wait_set(
        &self,
        name: &str,
        within: Duration,
        ok: impl Fn(&ReplicaSet) -> bool,
    ) -> ReplicaSet {
        let deadline = Instant::now() + within;
        let mut last = None;
        while Instant::now() < deadline {
            if let Some(s) = self.replica_set(name) {
                if ok(&s) {
                    return s;
                }
                last = Some(s);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("{name} did not reach the state within {within:?}; last: {last:#?}");
    }

    /// The leader's view of broker set `name` (`None` if no leader answers or the set is
    /// unknown).
    pub fn replica_set(&self, name: &str) -> Option<ReplicaSet> {
        for a in self.addrs() {
            let Some(m) = metadata(a) else { continue };
            let Some(leader) = m.leader_addr else {
                continue;
            };
            let mut c = Client::try_connect(leader).ok()?;
            c.set_read_timeout(Duration::from_secs(2));
            let r = c
                .try_call(
                    RequestCode::ControllerGetReplicaInfo,
                    &GetReplicaInfoRequest {
                        broker_name: name.to_string(),
                    },
                    &[],
                )
                .ok()?;
            if r.status() != Status::Success {
                return None;
            }
            let sets = ReplicaSets::decode(&r.body).ok()?;
            return sets.sets.into_iter().next();
        }
        None
    }
}

/// One controller's view of the group.
pub fn metadata(addr: SocketAddr) -> Option<ControllerMetadata> {
    let mut c = Client::try_connect(addr).ok()?;
    c.set_read_timeout(Duration::from_secs(2));
    let r = c
        .try_call(RequestCode::ControllerGetMetadataInfo, &Empty, &[])
        .ok()?;
    r.fields::<ControllerMetadata>()
}

/// Polls until every listed controller names the same leader (other than `not`); returns it
/// and the term.
pub fn agreed_leader(addrs: &[SocketAddr], not: Option<u64>, within: Duration) -> (u64, u64) {
    let deadline = Instant::now() + within;
    loop {
        let views: Vec<Option<ControllerMetadata>> = addrs.iter().map(|a| metadata(*a)).collect();
        if let Some(Some(first)) = views.first() {
            if let Some(l) = first.leader_id.filter(|l| Some(*l) != not) {
                if views
                    .iter()
                    .all(|v| v.as_ref().is_some_and(|m| m.leader_id == Some(l)))
                {
                    return (l, first.term);
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "no agreed leader within {within:?}: {views:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether the broker at `addr` has `topic` in its topic table.
pub fn has_topic(addr: SocketAddr, topic: &str) -> bool {
    let Ok(mut c) = Client::try_connect(addr) else {
        return false;
    };
    let r = c.call(RequestCode::GetAllTopicConfig, &Empty, &[]);
    r.status() == Status::Success
        && TopicConfigTable::decode(&r.body)
            .is_ok_and(|t| t.topics.iter().any(|c| c.topic == topic))
}
