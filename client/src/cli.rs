//! Command-line flags for TLS and credentials (feature `cli`), shared by `ringmq-ctl` and
//! `ringmq-perf`: global (before or after the command), each also read from an environment
//! variable, and what they become: [`TlsOptions`] and [`Credentials`]. The secret key is held
//! as [`SecretArg`], whose `Debug` is redacted, so printing the parsed command line cannot
//! show it; `--help` hides its environment value.

use std::path::PathBuf;

use crate::{Credentials, TlsOptions};
use clap::builder::FalseyValueParser;
use clap::Args;

/// `--tls`, `--ca`, `--tls-cert`, `--tls-key`, `--tls-server-name`, `--access-key`,
/// `--secret-key`.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "TLS and credentials")]
pub struct SecurityArgs {
    /// Speak TLS to the name servers and brokers (needs --ca).
    #[arg(long, global = true, env = "RINGMQ_TLS", value_parser = FalseyValueParser::new())]
    pub tls: bool,

    /// The CAs that sign the servers' certificates (PEM); implies --tls. The system's trust
    /// store is not used.
    #[arg(long, global = true, env = "RINGMQ_CA", value_name = "FILE")]
    pub ca: Option<PathBuf>,

    /// Client certificate chain (PEM) for servers that ask for one (mutual TLS); needs
    /// --tls-key; implies --tls.
    #[arg(long, global = true, env = "RINGMQ_TLS_CERT", value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,

    /// Private key (PEM) of --tls-cert.
    #[arg(long, global = true, env = "RINGMQ_TLS_KEY", value_name = "FILE")]
    pub tls_key: Option<PathBuf>,

    /// The name the servers' certificates must carry (default: the IP address connected
    /// to); implies --tls.
    #[arg(long, global = true, value_name = "NAME")]
    pub tls_server_name: Option<String>,

    /// Access key requests are signed with (needs --secret-key).
    #[arg(long, global = true, env = "RINGMQ_ACCESS_KEY", value_name = "KEY")]
    pub access_key: Option<String>,

    /// Secret key of --access-key. Prefer the environment variable RINGMQ_SECRET_KEY: a
    /// value on the command line stays in the shell's history and shows in `ps`.
    #[arg(
        long,
        global = true,
        env = "RINGMQ_SECRET_KEY",
        hide_env_values = true,
        value_name = "KEY"
    )]
    pub secret_key: Option<SecretArg>,
}

impl SecurityArgs {
    /// The client's TLS settings (TLS is on with --tls, --ca, --tls-cert or
    /// --tls-server-name) and credentials; `Err` says which flag is missing.
    pub fn client(&self) -> Result<(TlsOptions, Option<Credentials>), String> {
        let enabled = self.tls
            || self.ca.is_some()
            || self.tls_cert.is_some()
            || self.tls_key.is_some()
            || self.tls_server_name.is_some();
        if enabled && self.ca.is_none() {
            return Err(
                "TLS needs --ca FILE (or RINGMQ_CA): the CA bundle that signs the \
                        servers' certificates (the system's trust store is not used)"
                    .into(),
            );
        }
        match (&self.tls_cert, &self.tls_key) {
            (Some(_), None) => return Err("--tls-cert needs --tls-key (or RINGMQ_TLS_KEY)".into()),
            (None, Some(_)) => return Err("--tls-key needs --tls-cert (or RINGMQ_TLS_CERT)".into()),
            _ => {}
        }
        let tls = TlsOptions {
            enabled,
            ca_path: self.ca.clone(),
            cert_path: self.tls_cert.clone(),
            key_path: self.tls_key.clone(),
            server_name: self.tls_server_name.clone(),
        };
        let credentials =
            match (&self.access_key, &self.secret_key) {
                (Some(a), Some(s)) => Some(Credentials::new(a.clone(), s.0.clone())),
                (None, None) => None,
                (Some(_), None) => {
                    return Err("--access-key needs --secret-key (prefer RINGMQ_SECRET_KEY)".into())
                }
                (None, Some(_)) => return Err(
                    "--secret-key (or RINGMQ_SECRET_KEY) needs --access-key (or RINGMQ_ACCESS_KEY)"
                        .into(),
                ),
            };
        Ok((tls, credentials))
    }
}

/// A secret key from the command line or the environment; never shown.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretArg(String);

impl std::str::FromStr for SecretArg {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(SecretArg(s.to_string()))
    }
}

impl std::fmt::Debug for SecretArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
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
    fn ca_implies_tls_and_tls_needs_a_ca() {
        let (tls, creds) = parse(&["--ca", "ca.pem"]).client().expect("valid");
        assert!(tls.enabled);
        assert!(creds.is_none());
        let e = parse(&["--tls"]).client().expect_err("no CA");
        assert!(e.contains("--ca"), "{e}");
        let e = parse(&["--ca", "ca.pem", "--tls-cert", "c.pem"])
            .client()
            .expect_err("no key");
        assert!(e.contains("--tls-key"), "{e}");
        let (tls, _) = parse(&[]).client().expect("plaintext");
        assert_eq!(tls, TlsOptions::default());
    }

    #[test]
    fn the_secret_never_shows() {
        let s = parse(&["--access-key", "ak", "--secret-key", "TOPSECRET"]);
        assert!(!format!("{s:?}").contains("TOPSECRET"));
        let (_, creds) = s.client().expect("valid");
        let creds = creds.expect("credentials");
        assert_eq!(creds.secret_key(), "TOPSECRET");
        assert!(!format!("{creds:?} {creds}").contains("TOPSECRET"));
        let e = parse(&["--secret-key", "TOPSECRET"])
            .client()
            .expect_err("no access key");
        assert!(!e.contains("TOPSECRET"), "{e}");
    }
}
