//! Who a gRPC client is and what it may do: RocketMQ 5's request signature read from the
//! headers ([`Signature`]) and the [`Authority`] the node passes in (its ACL) that judges it.
//!
//! The signature: `authorization: MQv2-HMAC-SHA1 Credential=<access key>,
//! SignedHeaders=x-mq-date-time, Signature=<hex>`, the hex being HMAC-SHA1 keyed with the
//! account's secret key over the raw `x-mq-date-time` value. The released clients differ in
//! that value and the hex case, so the MAC is checked over the raw string, the hex in either
//! case, and the date read in both forms they send:
//!
//! - `yyyyMMddTHHmmssZ` (the Java, Python and Node.js clients), read as UTC. The Java and
//!   Python clients format their local time with a literal `Z`: on a host whose zone is not
//!   UTC their stamps are off by the zone's offset;
//! - RFC 3339 with an offset and optional fraction (the Rust client's local time).
//!
//! The stamp gives the edge a bounded clock skew (the node's replay window): a signature is
//! only good near the time it names. The signature covers no nonce, so within the window a
//! captured header signs any request; TLS keeps headers from being captured.
//!
//! An `authorization` header whose `Credential` is empty (the Python client sends one when it
//! has no credentials) is no signature: the caller is anonymous, which the node's global white
//! list may admit.

use std::net::IpAddr;
use std::sync::Arc;

use hmac::{KeyInit, Mac};

/// The signature's header.
pub const AUTHORIZATION_HEADER: &str = "authorization";
/// The signed header: the client's clock when it signed.
pub const DATE_TIME_HEADER: &str = "x-mq-date-time";
/// The only algorithm RocketMQ 5's clients sign with.
pub const ALGORITHM: &str = "MQv2-HMAC-SHA1";
/// Longest `authorization` or `x-mq-date-time` value read (a real one is under 200 bytes).
pub const HEADER_BYTES_MAX: usize = 1024;

type HmacSha1 = hmac::Hmac<sha1::Sha1>;

/// A signed request's credential, as the headers carry it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    access_key: String,
    date_time: String,
    mac: Vec<u8>,
}

impl Signature {
    /// The signature of a request with these header values: `Ok(None)` without one (no
    /// `authorization`, or an empty `Credential`), `Err` with why for a header that does not
    /// read as RocketMQ 5's signature.
    pub fn from_headers(
        authorization: Option<&str>,
        date_time: Option<&str>,
    ) -> Result<Option<Signature>, String> {
        let Some(auth) = authorization else {
            return Ok(None);
        };
        if auth.len() > HEADER_BYTES_MAX {
            return Err(format!("authorization is over {HEADER_BYTES_MAX} bytes"));
        }
        let rest = auth
            .trim()
            .strip_prefix(ALGORITHM)
            .filter(|r| r.starts_with(' '))
            .ok_or_else(|| format!("authorization: only {ALGORITHM} is accepted"))?;
        let (mut key, mut signed, mut sig) = (None, None, None);
        for part in rest.split(',') {
            let (k, v) = part
                .trim()
                .split_once('=')
                .ok_or_else(|| format!("authorization: `{}` is not NAME=VALUE", part.trim()))?;
            match k.trim() {
                "Credential" => key = Some(v.trim()),
                "SignedHeaders" => signed = Some(v.trim()),
                "Signature" => sig = Some(v.trim()),
                _ => {}
            }
        }
        let key = key.unwrap_or("");
        if key.is_empty() {
            return Ok(None);
        }
        let signs_date = signed.is_some_and(|s| {
            s.split(';')
                .any(|h| h.trim().eq_ignore_ascii_case(DATE_TIME_HEADER))
        });
        if !signs_date {
            return Err(format!(
                "authorization: SignedHeaders must name {DATE_TIME_HEADER}"
            ));
        }
        let mac = sig
            .and_then(hex_decode)
            .ok_or("authorization: Signature is not hex")?;
        let date_time = date_time
            .filter(|d| !d.is_empty())
            .ok_or_else(|| format!("a signed request needs {DATE_TIME_HEADER}"))?;
        if date_time.len() > HEADER_BYTES_MAX {
            return Err(format!(
                "{DATE_TIME_HEADER} is over {HEADER_BYTES_MAX} bytes"
            ));
        }
        Ok(Some(Signature {
            access_key: key.to_owned(),
            date_time: date_time.to_owned(),
            mac,
        }))
    }

    /// The account that signed.
    pub fn access_key(&self) -> &str {
        &self.access_key
    }

    /// The raw `x-mq-date-time` value.
    pub fn date_time(&self) -> &str {
        &self.date_time
    }

    /// When the client says it signed (ms since the epoch), if the value reads as a date.
    pub fn signed_at_ms(&self) -> Option<u64> {
        parse_date_time(&self.date_time)
    }

    /// Does the signature match `secret` (HMAC-SHA1 over the raw date value; constant time)?
    pub fn verify(&self, secret: &[u8]) -> bool {
        let Ok(mut mac) = <HmacSha1 as KeyInit>::new_from_slice(secret) else {
            return false;
        };
        mac.update(self.date_time.as_bytes());
        mac.verify_slice(&self.mac).is_ok()
    }
}

/// Who a gRPC request comes from, once authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// No signature, admitted by the node (its global white list).
    Anonymous,
    /// A request signed with this account's secret.
    Account(Arc<str>),
    /// A request signed with this user's password, from `peer`: the user's policies may
    /// allow or deny by source address (RocketMQ 5's ACL 2.0).
    User { name: Arc<str>, peer: IpAddr },
}

/// A resource a request touches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resource {
    Topic(String),
    Group(String),
}

/// What a request does to a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Perm {
    Pub,
    Sub,
}

/// What a request needs from its caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    /// Any caller the node let in.
    Authenticated,
    /// Each of these permissions.
    Access(Vec<(Resource, Perm)>),
}

/// Judges gRPC callers with the node's accounts (its ACL). Implemented by the node: this
/// crate knows the protocol, the node knows the accounts.
pub trait Authority: Send + Sync + 'static {
    /// Who sent a request from `peer` with `signature` (`None`: unsigned). The node checks
    /// the account, the address rules, the MAC ([`Signature::verify`]) and the stamp's
    /// distance from its clock. `Err` is the reason the client reads.
    fn authenticate(&self, peer: IpAddr, signature: Option<&Signature>) -> Result<Caller, String>;
    /// May `caller` do `rpc`, which needs `need`? `Err` is the reason the client reads.
    fn authorize(&self, caller: &Caller, rpc: &str, need: Need) -> Result<(), String>;
}

fn hex_decode(s: &str) -> Option<Vec<u8>> {
    if s.is_empty() || s.len() % 2 != 0 || s.len() > 2 * 64 {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    s.as_bytes()
        .chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

/// `yyyyMMddTHHmmssZ` (UTC) or RFC 3339 (`yyyy-MM-ddTHH:mm:ss[.frac](Z|±HH:mm)`), as ms
/// since the epoch.
pub fn parse_date_time(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let part = b.get(from..from + len)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(part).ok()?.parse().ok()
    };
    if b.len() == 16 && b[8] == b'T' && b[15] == b'Z' {
        let (y, mo, d) = (num(0, 4)?, num(4, 2)?, num(6, 2)?);
        let (h, mi, se) = (num(9, 2)?, num(11, 2)?, num(13, 2)?);
        return epoch_ms(y, mo, d, h, mi, se, 0, 0);
    }
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (y, mo, d) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (h, mi, se) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    let mut i = 19;
    let mut ms = 0i64;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return None;
        }
        let frac = &s[start..i.min(start + 3)];
        ms = frac.parse::<i64>().ok()? * 10i64.pow(3 - frac.len() as u32);
    }
    let offset_min = match b.get(i..)? {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let m = num(i + 1, 2)? * 60 + num(i + 4, 2)?;
            if *sign == b'-' {
                -m
            } else {
                m
            }
        }
        _ => return None,
    };
    epoch_ms(y, mo, d, h, mi, se, ms, offset_min)
}

#[allow(clippy::too_many_arguments)]
fn epoch_ms(
    y: i64,
    mo: i64,
    d: i64,
    h: i64,
    mi: i64,
    s: i64,
    ms: i64,
    offset_min: i64,
) -> Option<u64> {
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    // Days from 1970-01-01 to y-mo-d in the proleptic Gregorian calendar.
    let (yy, m) = if mo <= 2 {
        (y - 1, mo + 9)
    } else {
        (y, mo - 3)
    };
    let era = yy.div_euclid(400);
    let yoe = yy - era * 400;
    let doy = (153 * m + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + s - offset_min * 60;
    u64::try_from(secs.checked_mul(1000)?.checked_add(ms)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sign(secret: &str, date: &str) -> String {
        let mut mac = <HmacSha1 as KeyInit>::new_from_slice(secret.as_bytes()).expect("any key");
        mac.update(date.as_bytes());
        mac.finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    fn header(ak: &str, sig: &str) -> String {
        format!("{ALGORITHM} Credential={ak}, SignedHeaders={DATE_TIME_HEADER}, Signature={sig}")
    }

    #[test]
    fn every_clients_date_form_reads() {
        // 2024-03-05T06:07:08Z = 1709618828 s.
        assert_eq!(parse_date_time("20240305T060708Z"), Some(1_709_618_828_000));
        assert_eq!(
            parse_date_time("2024-03-05T06:07:08Z"),
            Some(1_709_618_828_000)
        );
        assert_eq!(
            parse_date_time("2024-03-05T08:07:08.25+02:00"),
            Some(1_709_618_828_250)
        );
        assert_eq!(
            parse_date_time("2024-03-05T01:07:08.123456789-05:00"),
            Some(1_709_618_828_123)
        );
        assert_eq!(parse_date_time("1970-01-01T00:00:00Z"), Some(0));
        for bad in [
            "",
            "yesterday",
            "20241305T060708Z",
            "2024-03-05T06:07:08",
            "2024-03-05",
        ] {
            assert_eq!(parse_date_time(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_mac_is_checked_over_the_raw_date_in_either_hex_case() {
        let date = "20240305T060708Z";
        let lower = sign("secret-1", date);
        for hex in [lower.clone(), lower.to_uppercase()] {
            let s = Signature::from_headers(Some(&header("ak1", &hex)), Some(date))
                .expect("reads")
                .expect("signed");
            assert_eq!(s.access_key(), "ak1");
            assert!(s.verify(b"secret-1"));
            assert!(!s.verify(b"secret-2"));
        }
        // The same MAC over another spelling of the same instant does not match.
        let other =
            Signature::from_headers(Some(&header("ak1", &lower)), Some("2024-03-05T06:07:08Z"))
                .expect("reads")
                .expect("signed");
        assert!(!other.verify(b"secret-1"));
    }

    #[test]
    fn headers_that_are_not_a_signature() {
        assert_eq!(Signature::from_headers(None, Some("x")), Ok(None));
        // The Python client without credentials.
        assert_eq!(
            Signature::from_headers(Some(&header("", "")), Some("20240305T060708Z")),
            Ok(None)
        );
        for bad in [
            "Basic abc",
            "MQv2-HMAC-SHA1Credential=a",
            "MQv2-HMAC-SHA1 Credential=a, SignedHeaders=host, Signature=00",
            "MQv2-HMAC-SHA1 Credential=a, SignedHeaders=x-mq-date-time, Signature=xyz",
            "MQv2-HMAC-SHA1 Credential=a, SignedHeaders=x-mq-date-time",
            "MQv2-HMAC-SHA1 Credential",
        ] {
            assert!(
                Signature::from_headers(Some(bad), Some("20240305T060708Z")).is_err(),
                "{bad}"
            );
        }
        assert!(Signature::from_headers(Some(&header("a", "00")), None).is_err());
    }
}
