//! The ready lines `ringmq` prints on stdout once it serves, and the addresses in them:
//!
//! ```text
//! ringmq standalone ready: namesrv 127.0.0.1:P broker 127.0.0.1:Q (N shards)
//! ringmq namesrv ready: 127.0.0.1:P
//! ringmq broker ready: 127.0.0.1:Q (N shards)
//! ```

use std::net::SocketAddr;

/// Addresses a node printed on its ready line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ready {
    pub namesrv: Option<SocketAddr>,
    pub broker: Option<SocketAddr>,
    pub shards: u16,
}

impl Ready {
    pub fn broker_addr(&self) -> SocketAddr {
        self.broker.expect("this node runs a broker")
    }

    pub fn namesrv_addr(&self) -> SocketAddr {
        self.namesrv.expect("this node runs a name server")
    }
}

/// Parses one of the three ready lines; `None` for any other line.
pub fn parse_ready(line: &str) -> Option<Ready> {
    let addr = |s: &str| s.parse::<SocketAddr>().ok();
    let shards = |s: &str| s.trim_start_matches('(').parse::<u16>().ok();
    if let Some(rest) = line.strip_prefix("ringmq standalone ready: ") {
        let w: Vec<&str> = rest.split_whitespace().collect();
        if w.len() >= 5 && w[0] == "namesrv" && w[2] == "broker" {
            return Some(Ready {
                namesrv: addr(w[1]),
                broker: addr(w[3]),
                shards: shards(w[4])?,
            });
        }
    } else if let Some(rest) = line.strip_prefix("ringmq namesrv ready: ") {
        return Some(Ready {
            namesrv: addr(rest.trim()),
            broker: None,
            shards: 0,
        });
    } else if let Some(rest) = line.strip_prefix("ringmq broker ready: ") {
        let w: Vec<&str> = rest.split_whitespace().collect();
        if w.len() >= 2 {
            return Some(Ready {
                namesrv: None,
                broker: addr(w[0]),
                shards: shards(w[1])?,
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_three_ready_lines() {
        let r = parse_ready(
            "ringmq standalone ready: namesrv 127.0.0.1:1 broker 127.0.0.1:2 (3 shards)",
        );
        assert_eq!(r.map(|r| r.shards), Some(3));
        assert_eq!(r.and_then(|r| r.broker).map(|a| a.port()), Some(2));
        let r = parse_ready("ringmq namesrv ready: 127.0.0.1:9");
        assert_eq!(r.and_then(|r| r.namesrv).map(|a| a.port()), Some(9));
        let r = parse_ready("ringmq broker ready: 127.0.0.1:7 (2 shards)");
        assert_eq!(r.and_then(|r| r.broker).map(|a| a.port()), Some(7));
        assert_eq!(parse_ready("ringmq broker starting"), None);
    }
}
