//! The TLS and credential flags (`ringmq_client::cli`, the same flags and variables as
//! `ringmq-ctl`) and the [`Target`] they make with the name servers: what every client of a
//! run, native or remoting, connects with. The report names the access key and whether TLS
//! was on, never the secret.

use std::sync::Arc;

pub use ringmq_client::cli::SecurityArgs;
use ringmq_client::security::Security;
use ringmq_client::{ClientConfig, Credentials, TlsOptions};
use serde_json::{json, Value};

/// Where a run connects and how: the name servers, TLS and credentials.
#[derive(Debug, Clone)]
pub struct Target {
    /// `h1:9876;h2:9876`.
    pub namesrv: String,
    pub tls: TlsOptions,
    pub credentials: Option<Credentials>,
    /// `tls` and `credentials` with the TLS files read: the remoting driver's connections.
    pub security: Arc<Security>,
}

impl Target {
    /// Checks the flags and reads the TLS files (a bad one is named).
    pub fn new(namesrv: String, args: &SecurityArgs) -> Result<Target, String> {
        let (tls, credentials) = args.client()?;
        let security = Security::load(&tls, credentials.as_ref()).map_err(|e| e.to_string())?;
        Ok(Target {
            namesrv,
            tls,
            credentials,
            security,
        })
    }

    /// The name servers, one per entry.
    pub fn name_servers(&self) -> Vec<String> {
        self.namesrv
            .split(';')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect()
    }

    /// Client settings with these name servers, TLS and credentials (the rest default).
    pub fn client_config(&self) -> ClientConfig {
        ClientConfig {
            name_servers: self.name_servers(),
            tls: self.tls.clone(),
            credentials: self.credentials.clone(),
            ..ClientConfig::default()
        }
    }

    /// What the report says of it: whether TLS was on and the access key (never the
    /// secret).
    pub fn report(&self) -> Value {
        json!({
            "tls": self.tls.enabled,
            "access_key": self.credentials.as_ref().map(Credentials::access_key),
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser, Debug)]
    struct T {
        #[command(flatten)]
        s: SecurityArgs,
    }

    fn parse(args: &[&str]) -> SecurityArgs {
        let mut all = vec!["t"];
        all.extend_from_slice(args);
        T::try_parse_from(all).expect("parses").s
    }

    #[test]
    fn the_report_never_shows_the_secret() {
        let s = parse(&["--access-key", "ak", "--secret-key", "TOPSECRET"]);
        let t = Target::new("127.0.0.1:9876".into(), &s).expect("valid");
        let shown = format!("{t:?} {}", t.report());
        assert!(!shown.contains("TOPSECRET"), "{shown}");
        assert_eq!(t.report(), json!({"tls": false, "access_key": "ak"}));
        let cfg = t.client_config();
        assert_eq!(cfg.credentials.expect("set").access_key(), "ak");
    }
}
