//! TLS settings of a node, RocketMQ's key names: how its listeners accept connections
//! (`tls.server.*`) and whether its own outgoing connections (broker -> name server
//! registration, slave -> master replication and calls) use TLS (`tls.enable`, alias
//! `useTLS`, and `tls.client.*`).
//!
//! Invariants (checked by [`TlsConfig::validate_server`] / [`TlsConfig::validate_client`]):
//! - a listener mode other than `disabled` has a certificate and a key;
//! - every path given can take effect: a trust bundle for client certificates needs
//!   `tls.server.need.client.auth` optional or require (and require needs one), a client
//!   certificate needs its key, a CA for the server needs `tls.client.authServer=true`.
//!   Keys left unused by an explicit off switch (`tls.server.mode=disabled`,
//!   `tls.enable=false`) are allowed and named by [`TlsConfig::unused`] for the start log.
//!
//! The files are read when the node starts (`crate::io::tls`), not here.

use std::path::PathBuf;

use super::ConfigError;

/// `tls.server.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    /// Plaintext only.
    Disabled,
    /// TLS and plaintext on the same port (a connection starting with a TLS record is TLS).
    Permissive,
    /// TLS only: a plaintext connection gets one NO_PERMISSION answer and is closed.
    Enforcing,
}

impl TlsMode {
    /// RocketMQ's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TlsMode::Disabled => "disabled",
            TlsMode::Permissive => "permissive",
            TlsMode::Enforcing => "enforcing",
        }
    }
}

/// `tls.server.need.client.auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// Client certificates are not asked for.
    None,
    /// Asked for; a client without one is served, one with an untrusted one is refused.
    Optional,
    /// Mutual TLS: a client without a certificate trusted by `tls.server.trustCertPath` is
    /// refused.
    Require,
}

impl ClientAuth {
    /// RocketMQ's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ClientAuth::None => "none",
            ClientAuth::Optional => "optional",
            ClientAuth::Require => "require",
        }
    }
}

/// TLS settings of a broker or name server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfig {
    /// `tls.server.mode`; `None` (not set) = `permissive` when a certificate and key are
    /// configured, else `disabled` (see [`TlsConfig::server_mode`]).
    pub server_mode: Option<TlsMode>,
    /// `tls.server.certPath`: the listeners' certificate chain (PEM).
    pub server_cert_path: Option<PathBuf>,
    /// `tls.server.keyPath`: its private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub server_key_path: Option<PathBuf>,
    /// `tls.server.trustCertPath`: CA certificates (PEM) that client certificates must chain
    /// to.
    pub server_trust_cert_path: Option<PathBuf>,
    /// `tls.server.need.client.auth`, default `none`.
    pub server_need_client_auth: ClientAuth,
    /// `tls.enable` (alias `useTLS`): the node's own outgoing connections use TLS. Brokers
    /// only; default false.
    pub client_enable: bool,
    /// `tls.client.trustCertPath`: CA certificates (PEM) the servers' certificates must chain
    /// to.
    pub client_trust_cert_path: Option<PathBuf>,
    /// `tls.client.certPath`: the certificate chain shown to servers asking for one (PEM).
    pub client_cert_path: Option<PathBuf>,
    /// `tls.client.keyPath`: its private key (PEM).
    pub client_key_path: Option<PathBuf>,
    /// `tls.client.authServer`, default true; false accepts any server certificate
    /// (insecure, logged at start).
    pub client_auth_server: bool,
}

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig {
            server_mode: None,
            server_cert_path: None,
            server_key_path: None,
            server_trust_cert_path: None,
            server_need_client_auth: ClientAuth::None,
            client_enable: false,
            client_trust_cert_path: None,
            client_cert_path: None,
            client_key_path: None,
            client_auth_server: true,
        }
    }
}

impl TlsConfig {
    /// The listeners' mode: as set, else `permissive` when a certificate and key are
    /// configured, else `disabled`.
    pub fn server_mode(&self) -> TlsMode {
        match self.server_mode {
            Some(m) => m,
            None if self.server_cert_path.is_some() && self.server_key_path.is_some() => {
                TlsMode::Permissive
            }
            None => TlsMode::Disabled,
        }
    }

    /// The listener keys fit together (see the module invariants).
    pub fn validate_server(&self) -> Result<(), ConfigError> {
        let invalid = |key: &'static str, detail: String| Err(ConfigError::Invalid { key, detail });
        let mode = self.server_mode();
        if mode == TlsMode::Disabled {
            return Ok(());
        }
        if self.server_cert_path.is_none() || self.server_key_path.is_none() {
            let missing = match (&self.server_cert_path, &self.server_key_path) {
                (None, None) => "tls.server.certPath and tls.server.keyPath are",
                (None, Some(_)) => "tls.server.certPath is",
                _ => "tls.server.keyPath is",
            };
            return invalid(
                "tls.server.mode",
                format!(
                    "{} needs a certificate and its key, and {missing} not set",
                    mode.as_str()
                ),
            );
        }
        match (self.server_need_client_auth, &self.server_trust_cert_path) {
            (ClientAuth::None, Some(p)) => invalid(
                "tls.server.trustCertPath",
                format!(
                    "{} is set but tls.server.need.client.auth is none, so no client certificate is asked for: set optional or require, or remove the path",
                    p.display()
                ),
            ),
            (ClientAuth::Optional | ClientAuth::Require, None) => invalid(
                "tls.server.need.client.auth",
                format!(
                    "{} needs tls.server.trustCertPath (the CA bundle client certificates must chain to)",
                    self.server_need_client_auth.as_str()
                ),
            ),
            _ => Ok(()),
        }
    }

    /// The outgoing-connection keys fit together (see the module invariants).
    pub fn validate_client(&self) -> Result<(), ConfigError> {
        let invalid = |key: &'static str, detail: String| Err(ConfigError::Invalid { key, detail });
        if !self.client_enable {
            return Ok(());
        }
        match (&self.client_cert_path, &self.client_key_path) {
            (Some(_), None) => {
                return invalid(
                    "tls.client.keyPath",
                    "tls.client.certPath is set without its key".to_owned(),
                )
            }
            (None, Some(_)) => {
                return invalid(
                    "tls.client.certPath",
                    "tls.client.keyPath is set without a certificate".to_owned(),
                )
            }
            _ => {}
        }
        match (&self.client_trust_cert_path, self.client_auth_server) {
            (Some(p), false) => invalid(
                "tls.client.trustCertPath",
                format!(
                    "{} is set but tls.client.authServer=false verifies no server: remove one of them",
                    p.display()
                ),
            ),
            (None, true) => invalid(
                "tls.client.trustCertPath",
                "tls.enable=true verifies the servers' certificates (tls.client.authServer=true) and needs the CA bundle they chain to".to_owned(),
            ),
            _ => Ok(()),
        }
    }

    /// Keys that are set but left unused by an explicit off switch, for a warning at start.
    /// `client` = whether this node has outgoing connections (brokers).
    pub fn unused(&self, client: bool) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.server_mode() == TlsMode::Disabled {
            let server = [
                ("tls.server.certPath", self.server_cert_path.is_some()),
                ("tls.server.keyPath", self.server_key_path.is_some()),
                (
                    "tls.server.trustCertPath",
                    self.server_trust_cert_path.is_some(),
                ),
                (
                    "tls.server.need.client.auth",
                    self.server_need_client_auth != ClientAuth::None,
                ),
            ];
            out.extend(server.iter().filter(|(_, set)| *set).map(|(k, _)| *k));
        }
        if client && !self.client_enable {
            let client_keys = [
                (
                    "tls.client.trustCertPath",
                    self.client_trust_cert_path.is_some(),
                ),
                ("tls.client.certPath", self.client_cert_path.is_some()),
                ("tls.client.keyPath", self.client_key_path.is_some()),
                ("tls.client.authServer", !self.client_auth_server),
            ];
            out.extend(client_keys.iter().filter(|(_, set)| *set).map(|(k, _)| *k));
        }
        out
    }
}

/// `tls.server.mode`'s values.
pub(super) fn mode(v: &str) -> Result<TlsMode, String> {
    match v.to_ascii_lowercase().as_str() {
        "disabled" => Ok(TlsMode::Disabled),
        "permissive" => Ok(TlsMode::Permissive),
        "enforcing" => Ok(TlsMode::Enforcing),
        _ => Err(format!(
            "expected disabled, permissive or enforcing, got {v:?}"
        )),
    }
}

/// `tls.server.need.client.auth`'s values.
pub(super) fn client_auth(v: &str) -> Result<ClientAuth, String> {
    match v.to_ascii_lowercase().as_str() {
        "none" => Ok(ClientAuth::None),
        "optional" => Ok(ClientAuth::Optional),
        "require" => Ok(ClientAuth::Require),
        _ => Err(format!("expected none, optional or require, got {v:?}")),
    }
}

/// The setter of a key for the broker's own outgoing connections on a name server, which
/// makes none (`tls.enable`, `useTLS`, `tls.client.*`; `tls.server.*` configure its
/// listener).
pub(super) fn refuse_on_namesrv<C>(_: &mut C, _: &str) -> Result<(), String> {
    Err("a broker key: it configures the broker's own outgoing connections, and the name server makes none".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_cert() -> TlsConfig {
        TlsConfig {
            server_cert_path: Some("c.pem".into()),
            server_key_path: Some("k.pem".into()),
            ..TlsConfig::default()
        }
    }

    #[test]
    fn mode_defaults_by_certificate() {
        assert_eq!(TlsConfig::default().server_mode(), TlsMode::Disabled);
        assert_eq!(with_cert().server_mode(), TlsMode::Permissive);
        let explicit = TlsConfig {
            server_mode: Some(TlsMode::Enforcing),
            ..with_cert()
        };
        assert_eq!(explicit.server_mode(), TlsMode::Enforcing);
    }

    #[test]
    fn a_mode_without_certificate_is_refused() {
        let c = TlsConfig {
            server_mode: Some(TlsMode::Permissive),
            ..TlsConfig::default()
        };
        let e = c.validate_server().unwrap_err().to_string();
        assert!(
            e.contains("tls.server.certPath and tls.server.keyPath"),
            "{e}"
        );
        let c = TlsConfig {
            server_mode: Some(TlsMode::Enforcing),
            server_cert_path: Some("c.pem".into()),
            ..TlsConfig::default()
        };
        let e = c.validate_server().unwrap_err().to_string();
        assert!(e.contains("tls.server.keyPath is not set"), "{e}");
        assert!(with_cert().validate_server().is_ok());
    }

    #[test]
    fn client_auth_needs_a_trust_bundle_and_a_bundle_needs_client_auth() {
        let c = TlsConfig {
            server_need_client_auth: ClientAuth::Require,
            ..with_cert()
        };
        assert!(c.validate_server().is_err());
        let c = TlsConfig {
            server_trust_cert_path: Some("ca.pem".into()),
            ..with_cert()
        };
        assert!(c.validate_server().is_err());
        let c = TlsConfig {
            server_need_client_auth: ClientAuth::Require,
            server_trust_cert_path: Some("ca.pem".into()),
            ..with_cert()
        };
        assert!(c.validate_server().is_ok());
    }

    #[test]
    fn client_keys_fit_together() {
        let on = TlsConfig {
            client_enable: true,
            ..TlsConfig::default()
        };
        assert!(on.validate_client().is_err(), "verifying needs a CA");
        let trusting = TlsConfig {
            client_trust_cert_path: Some("ca.pem".into()),
            ..on.clone()
        };
        assert!(trusting.validate_client().is_ok());
        let insecure = TlsConfig {
            client_auth_server: false,
            ..on.clone()
        };
        assert!(insecure.validate_client().is_ok());
        let both = TlsConfig {
            client_auth_server: false,
            ..trusting.clone()
        };
        assert!(both.validate_client().is_err());
        let half = TlsConfig {
            client_cert_path: Some("c.pem".into()),
            ..trusting
        };
        assert!(half.validate_client().is_err());
    }

    #[test]
    fn off_switches_name_the_keys_they_leave_unused() {
        let c = TlsConfig {
            server_mode: Some(TlsMode::Disabled),
            client_trust_cert_path: Some("ca.pem".into()),
            ..with_cert()
        };
        assert!(c.validate_server().is_ok());
        assert!(c.validate_client().is_ok());
        assert_eq!(
            c.unused(true),
            vec![
                "tls.server.certPath",
                "tls.server.keyPath",
                "tls.client.trustCertPath"
            ]
        );
        assert_eq!(
            c.unused(false),
            vec!["tls.server.certPath", "tls.server.keyPath"]
        );
    }

    #[test]
    fn keys_in_files_and_overrides() {
        use crate::config::{BrokerConfig, NamesrvConfig};
        let ns = NamesrvConfig::from_properties_str(
            "tls.server.mode=enforcing\ntls.server.certPath=/c.pem\ntls.server.keyPath=/k.pem\n",
            "ns.properties",
        )
        .unwrap()
        .config;
        assert_eq!(ns.tls.server_mode(), TlsMode::Enforcing);
        let e = NamesrvConfig::from_properties_str("tls.server.mode=enforcing\n", "ns")
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs a certificate"), "{e}");
        let e = NamesrvConfig::from_properties_str("tls.enable=true\n", "ns")
            .unwrap_err()
            .to_string();
        assert!(e.contains("tls.enable") && e.contains("broker key"), "{e}");
        let b = BrokerConfig::from_properties_str(
            "brokerName=b\nuseTLS=true\ntls.client.trustCertPath=/ca.pem\n",
            "b.properties",
        )
        .unwrap()
        .config;
        assert!(b.tls.client_enable);
        assert_eq!(b.tls.server_mode(), TlsMode::Disabled);
        let mut b = b;
        b.set("tls.server.need.client.auth", "require", "--set")
            .unwrap();
        assert!(b.validate().is_ok(), "mode disabled: client auth unused");
        b.set("tls.server.certPath", "/c.pem", "--set").unwrap();
        b.set("tls.server.keyPath", "/k.pem", "--set").unwrap();
        let e = b.validate().unwrap_err().to_string();
        assert!(e.contains("tls.server.trustCertPath"), "{e}");
        assert!(b.set("tls.server.mode", "strict", "--set").is_err());
    }

    #[test]
    fn values() {
        assert_eq!(mode("ENFORCING"), Ok(TlsMode::Enforcing));
        assert!(mode("strict").is_err());
        assert_eq!(client_auth("require"), Ok(ClientAuth::Require));
        assert!(client_auth("yes").is_err());
    }
}
