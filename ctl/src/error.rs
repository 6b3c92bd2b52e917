//! `CtlError`: why a command failed, printed as one line (`ringmq-ctl: <reason>`) with a
//! non-zero exit: 2 for a bad command line, 1 for anything else.

use std::fmt;
use std::net::SocketAddr;

use ringmq_client::Error as ClientError;

/// A failed command.
#[derive(Debug)]
pub enum CtlError {
    /// The command line is wrong (beyond what clap checks).
    Usage(String),
    /// The operation cannot be done as asked (the cluster's state, not a call failure).
    Refused(String),
    /// A client call failed while doing `doing`.
    Client { doing: String, source: ClientError },
}

pub type Result<T, E = CtlError> = std::result::Result<T, E>;

impl CtlError {
    pub fn exit_code(&self) -> i32 {
        match self {
            CtlError::Usage(_) => 2,
            CtlError::Refused(_) | CtlError::Client { .. } => 1,
        }
    }

    /// The one line printed after `ringmq-ctl: `. A failure to reach one of
    /// `name_servers` says so and names the option that sets them; a failure to reach any
    /// other address (a broker the name servers list, a controller) names it unreachable.
    pub fn line(&self, name_servers: &[SocketAddr]) -> String {
        let text = match self {
            CtlError::Client { doing, source } => match unreachable_addr(source) {
                Some(addr) if name_servers.contains(&addr) => format!(
                    "{doing}: name server {addr} is unreachable ({source}); set -n/--namesrv or RINGMQ_NAMESRV"
                ),
                Some(addr) => format!("{doing}: {addr} is unreachable ({source})"),
                None => self.to_string(),
            },
            _ => self.to_string(),
        };
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    }
}

impl fmt::Display for CtlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CtlError::Usage(s) | CtlError::Refused(s) => f.write_str(s),
            CtlError::Client { doing, source } => write!(f, "{doing}: {source}"),
        }
    }
}

/// The address a connection-level failure concerns (of a send's last attempt too).
fn unreachable_addr(e: &ClientError) -> Option<SocketAddr> {
    match e {
        ClientError::Connect { addr, .. }
        | ClientError::Backoff { addr, .. }
        | ClientError::Timeout { addr, .. }
        | ClientError::ConnectionClosed { addr, .. } => Some(*addr),
        ClientError::RetriesExhausted { last, .. } => unreachable_addr(last),
        _ => None,
    }
}

/// Adds what the command was doing to a client error.
pub trait Context<T> {
    fn doing(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T> Context<T> for std::result::Result<T, ClientError> {
    fn doing(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|source| CtlError::Client {
            doing: what(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_and_namesrv_hint() {
        let ns: SocketAddr = "127.0.0.1:1".parse().unwrap_or_else(|_| unreachable!());
        let e = CtlError::Client {
            doing: "reading the cluster".into(),
            source: ClientError::Connect {
                addr: ns,
                source: std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused\nnow"),
            },
        };
        let line = e.line(&[ns]);
        assert!(line.starts_with("reading the cluster: name server 127.0.0.1:1 is unreachable"));
        assert!(!line.contains('\n'));
        assert_eq!(e.exit_code(), 1);
        assert_eq!(CtlError::Usage("x".into()).exit_code(), 2);
    }
}
