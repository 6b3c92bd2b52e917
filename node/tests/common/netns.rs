//! Network namespaces a test makes for itself (`ip netns add`, veth pairs; root only), and
//! removes when dropped: several hosts on one machine, so a test can cut one link and keep
//! the others.

use super::*;

/// A veth link between two ends, each in a namespace (`None` = the test's own).
pub struct Veth {
    /// The interface name on end `a`, for `set_up` / `set_down`.
    pub a_if: String,
    pub a_ns: Option<String>,
}

/// Namespaces and links, deleted on drop.
pub struct Netns {
    pub names: Vec<String>,
    links: Vec<(String, Option<String>)>,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {args:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn in_ns(ns: &Option<String>, args: &[&str]) -> Result<(), String> {
    match ns {
        None => ip(args),
        Some(n) => {
            let mut all = vec!["netns", "exec", n.as_str(), "ip"];
            all.extend_from_slice(args);
            ip(&all)
        }
    }
}

impl Netns {
    /// Makes namespaces `<tag>-<name>` for each of `names` (loopback up in each).
    pub fn new(tag: &str, names: &[&str]) -> Result<Netns, String> {
        let mut me = Netns {
            names: Vec::new(),
            links: Vec::new(),
        };
        for n in names {
            let full = format!("{tag}-{n}");
            let _ = ip(&["netns", "del", &full]);
            ip(&["netns", "add", &full])?;
            me.names.push(full.clone());
            in_ns(&Some(full), &["link", "set", "lo", "up"])?;
        }
        Ok(me)
    }

    /// The full name of namespace `name`.
    pub fn ns(&self, name: &str) -> String {
        self.names
            .iter()
            .find(|n| n.ends_with(&format!("-{name}")))
            .cloned()
            .unwrap_or_else(|| panic!("no namespace {name}"))
    }

    /// A veth pair `a_if` (in `a_ns`, address `a_cidr`) <-> `b_if` (in `b_ns`, `b_cidr`),
    /// both up.
    pub fn link(
        &mut self,
        (a_if, a_ns, a_cidr): (&str, Option<String>, &str),
        (b_if, b_ns, b_cidr): (&str, Option<String>, &str),
    ) -> Result<Veth, String> {
        ip(&["link", "add", a_if, "type", "veth", "peer", "name", b_if])?;
        self.links.push((a_if.to_string(), None));
        for (ifname, ns) in [(a_if, &a_ns), (b_if, &b_ns)] {
            if let Some(n) = ns {
                ip(&["link", "set", ifname, "netns", n])?;
            }
        }
        self.links.pop();
        self.links.push((a_if.to_string(), a_ns.clone()));
        in_ns(&a_ns, &["addr", "add", a_cidr, "dev", a_if])?;
        in_ns(&b_ns, &["addr", "add", b_cidr, "dev", b_if])?;
        in_ns(&a_ns, &["link", "set", a_if, "up"])?;
        in_ns(&b_ns, &["link", "set", b_if, "up"])?;
        Ok(Veth {
            a_if: a_if.to_string(),
            a_ns,
        })
    }

    /// Takes the link down (both ends lose it; nothing is sent, nothing is reset).
    pub fn cut(&self, v: &Veth) {
        in_ns(&v.a_ns, &["link", "set", &v.a_if, "down"]).expect("cutting a link");
    }

    /// Brings the link back.
    pub fn heal(&self, v: &Veth) {
        in_ns(&v.a_ns, &["link", "set", &v.a_if, "up"]).expect("healing a link");
    }

    /// The launch prefix that runs a program inside namespace `name`.
    pub fn exec_prefix(&self, name: &str) -> Vec<String> {
        vec!["ip".into(), "netns".into(), "exec".into(), self.ns(name)]
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for (ifname, ns) in &self.links {
            let _ = in_ns(ns, &["link", "del", ifname]);
        }
        for n in &self.names {
            let _ = ip(&["netns", "del", n]);
        }
    }
}
