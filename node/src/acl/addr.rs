//! RocketMQ's remote address patterns (`whiteRemoteAddress`, `globalWhiteRemoteAddresses`):
//! `*` (anywhere), an exact IPv4 or IPv6 address, IPv4 with `*` for trailing segments
//! (`192.168.0.*`, `10.*`), a range in a segment (`192.168.1.1-100`), a set in the last
//! segment (`192.168.1.{1,2,3}`), and several patterns separated by commas.

use std::net::{IpAddr, Ipv6Addr};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddrPattern {
    text: String,
    alternatives: Vec<Alt>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Alt {
    Any,
    V4([Seg; 4]),
    V6(Ipv6Addr),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    Any,
    Range(u8, u8),
    Set(Vec<u8>),
}

impl Seg {
    fn matches(&self, b: u8) -> bool {
        match self {
            Seg::Any => true,
            Seg::Range(lo, hi) => (*lo..=*hi).contains(&b),
            Seg::Set(v) => v.contains(&b),
        }
    }
}

impl AddrPattern {
    pub fn parse(text: &str) -> Result<AddrPattern, String> {
        let text = text.trim();
        let mut alternatives = Vec::new();
        for part in split_outside_braces(text) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            alternatives.push(parse_one(part).map_err(|e| format!("address `{part}`: {e}"))?);
        }
        if alternatives.is_empty() {
            return Err("empty address pattern".to_owned());
        }
        Ok(AddrPattern {
            text: text.to_owned(),
            alternatives,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn matches(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        self.alternatives.iter().any(|a| match (a, ip) {
            (Alt::Any, _) => true,
            (Alt::V4(segs), IpAddr::V4(v4)) => {
                segs.iter().zip(v4.octets()).all(|(s, b)| s.matches(b))
            }
            (Alt::V6(want), IpAddr::V6(v6)) => *want == v6,
            _ => false,
        })
    }
}

fn split_outside_braces(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn parse_one(p: &str) -> Result<Alt, String> {
    if p == "*" || p == "*.*.*.*" {
        return Ok(Alt::Any);
    }
    if p.contains(':') {
        return p
            .parse::<Ipv6Addr>()
            .map(Alt::V6)
            .map_err(|_| "not an IPv6 address".to_owned());
    }
    let parts: Vec<&str> = p.split('.').collect();
    if parts.len() > 4 {
        return Err("more than four segments".to_owned());
    }
    let mut segs = [Seg::Any, Seg::Any, Seg::Any, Seg::Any];
    let mut wildcard = false;
    for (i, part) in parts.iter().enumerate() {
        let seg = if *part == "*" {
            wildcard = true;
            Seg::Any
        } else if wildcard {
            return Err("a segment after `*`".to_owned());
        } else if let Some(inner) = part.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            let set = inner
                .split(',')
                .map(|n| octet(n.trim()))
                .collect::<Result<Vec<u8>, String>>()?;
            Seg::Set(set)
        } else if let Some((lo, hi)) = part.split_once('-') {
            let (lo, hi) = (octet(lo.trim())?, octet(hi.trim())?);
            if lo > hi {
                return Err(format!("range {lo}-{hi} is empty"));
            }
            Seg::Range(lo, hi)
        } else {
            let b = octet(part)?;
            Seg::Range(b, b)
        };
        segs[i] = seg;
    }
    if parts.len() < 4 && !wildcard {
        return Err("fewer than four segments and no `*`".to_owned());
    }
    Ok(Alt::V4(segs))
}

fn octet(s: &str) -> Result<u8, String> {
    s.parse::<u8>()
        .map_err(|_| format!("`{s}` is not a number from 0 to 255"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, ip: &str) -> bool {
        AddrPattern::parse(p)
            .expect(p)
            .matches(ip.parse().expect(ip))
    }

    #[test]
    fn rocketmq_pattern_forms_match_what_they_say() {
        assert!(m("*", "8.8.8.8"));
        assert!(m("192.168.0.*", "192.168.0.77"));
        assert!(!m("192.168.0.*", "192.168.1.77"));
        assert!(m("10.*", "10.1.2.3"));
        assert!(m("192.168.1.1-100", "192.168.1.100"));
        assert!(!m("192.168.1.1-100", "192.168.1.101"));
        assert!(m("192.168.1.{1,2,3}", "192.168.1.2"));
        assert!(!m("192.168.1.{1,2,3}", "192.168.1.4"));
        assert!(m("127.0.0.1", "127.0.0.1"));
        assert!(m("127.0.0.1", "::ffff:127.0.0.1"));
        assert!(m("127.0.0.1,10.0.0.{1,2}", "10.0.0.2"));
        assert!(m("::1", "::1"));
        assert!(!m("::1", "127.0.0.1"));
    }

    #[test]
    fn malformed_patterns_are_refused() {
        for p in [
            "",
            "1.2.3",
            "1.2.3.4.5",
            "1.*.3.4",
            "1.2.3.300",
            "1.2.3.9-2",
            "x",
        ] {
            assert!(AddrPattern::parse(p).is_err(), "{p}");
        }
    }
}
