//! What a client proves and protects with: [`TlsOptions`] (TLS on every connection it
//! opens, to name servers and brokers alike) and [`Credentials`] (the access key and secret
//! key it signs requests with). Both are part of [`ClientConfig`](crate::ClientConfig).
//!
//! Invariants:
//! - The secret key is never formatted: `Debug` and `Display` of [`Credentials`] show the
//!   access key and `<redacted>`, and no error message of this crate carries it.
//! - TLS needs a CA bundle ([`TlsOptions::ca_path`], in `tls.rs`): this client does not read the
//!   system's trust store, so which CAs it trusts is always written down by the caller.
//! - A setting that cannot take effect is refused, not ignored: a CA, certificate or server
//!   name with TLS off, a certificate without its key.
//! - The files are read once, when the client starts ([`Security::load`]); a bad file fails
//!   the start with its path in the message.

use std::fmt;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::tls::{TlsConnector, TlsOptions};

/// An access key and its secret key (RocketMQ's `accessKey` / `secretKey`).
///
/// The secret is never printed:
///
/// ```
/// use ringmq_client::Credentials;
/// let c = Credentials::new("app-orders", "s3cret-value");
/// assert_eq!(format!("{c:?}"), r#"Credentials { access_key: "app-orders", secret_key: <redacted> }"#);
/// assert!(!c.to_string().contains("s3cret"));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    access_key: String,
    secret_key: String,
}

impl Credentials {
    pub fn new(access_key: impl Into<String>, secret_key: impl Into<String>) -> Self {
        Credentials {
            access_key: access_key.into(),
            secret_key: secret_key.into(),
        }
    }

    pub fn access_key(&self) -> &str {
        &self.access_key
    }

    /// The secret key: for computing signatures only; never log or show it.
    pub fn secret_key(&self) -> &str {
        &self.secret_key
    }

    /// Both keys are non-empty, and neither has control characters or surrounding blanks
    /// (a copied key with a trailing newline would fail every signature); the access key
    /// fits the native trailer (1 to 255 bytes).
    pub fn validate(&self) -> Result<()> {
        self.to_wire().map(|_| ())
    }

    /// The credentials as the signers take them ([`ringmq_wire::auth`]).
    pub fn to_wire(&self) -> Result<ringmq_wire::auth::Credentials> {
        let bad = |k: &str| k.is_empty() || k.trim() != k || k.chars().any(char::is_control);
        if bad(&self.access_key) {
            return Err(Error::Config(format!(
                "access key {:?} is empty or has blanks or control characters",
                self.access_key
            )));
        }
        if bad(&self.secret_key) {
            return Err(Error::Config(format!(
                "the secret key of access key {:?} is empty or has blanks or control characters",
                self.access_key
            )));
        }
        ringmq_wire::auth::Credentials::new(&self.access_key, &self.secret_key)
            .map_err(|e| Error::Config(format!("access key {:?}: {e}", self.access_key)))
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct Redacted;
        impl fmt::Debug for Redacted {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("<redacted>")
            }
        }
        f.debug_struct("Credentials")
            .field("access_key", &self.access_key)
            .field("secret_key", &Redacted)
            .finish()
    }
}

impl fmt::Display for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "access_key: {}, secret_key: <redacted>", self.access_key)
    }
}

/// TLS and credentials as the connections use them: the files read and checked, shared by
/// every connection of one client.
#[derive(Debug, Clone, Default)]
pub struct Security {
    /// `None`: plaintext.
    pub tls: Option<TlsConnector>,
    /// `None`: requests are not signed. (The wire crate's type: what the signers take.)
    pub credentials: Option<ringmq_wire::auth::Credentials>,
}

impl Security {
    /// Checks the settings and reads the TLS files.
    pub fn load(tls: &TlsOptions, credentials: Option<&Credentials>) -> Result<Arc<Security>> {
        tls.validate()?;
        let credentials = credentials.map(Credentials::to_wire).transpose()?;
        let tls = if tls.enabled {
            Some(TlsConnector::load(tls)?)
        } else {
            None
        };
        Ok(Arc::new(Security { tls, credentials }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_never_show_the_secret() {
        let c = Credentials::new("ak-orders", "TOPSECRET-123");
        for shown in [
            format!("{c:?}"),
            format!("{c:#?}"),
            c.to_string(),
            format!("{:?}", Some(&c)),
            format!(
                "{:?}",
                Security::load(&TlsOptions::default(), Some(&c)).expect("valid")
            ),
        ] {
            assert!(!shown.contains("TOPSECRET"), "{shown}");
            assert!(shown.contains("ak-orders"), "{shown}");
            assert!(shown.contains("<redacted>"), "{shown}");
        }
        assert_eq!(c.secret_key(), "TOPSECRET-123");
    }

    #[test]
    fn bad_credentials_are_refused_without_the_secret() {
        assert!(Credentials::new("", "x").validate().is_err());
        let e = Credentials::new("ak", "secret-with-newline\n")
            .validate()
            .expect_err("a trailing newline is refused");
        assert!(!e.to_string().contains("secret-with"), "{e}");
        assert!(e.to_string().contains("\"ak\""), "{e}");
        assert!(Credentials::new("ak", "s").validate().is_ok());
    }

    #[test]
    fn tls_settings_must_fit_together() {
        assert!(TlsOptions::default().validate().is_ok());
        let e = TlsOptions {
            enabled: true,
            ..TlsOptions::default()
        }
        .validate()
        .expect_err("no CA");
        assert!(e.to_string().contains("CA bundle"), "{e}");
        let off_with_ca = TlsOptions {
            enabled: false,
            ..TlsOptions::with_ca("ca.pem")
        };
        let e = off_with_ca.validate().expect_err("CA with TLS off");
        assert!(e.to_string().contains("TLS is off"), "{e}");
        let half = TlsOptions {
            cert_path: Some("c.pem".into()),
            ..TlsOptions::with_ca("ca.pem")
        };
        assert!(half.validate().is_err());
        let full = TlsOptions::with_ca("ca.pem").client_cert("c.pem", "k.pem");
        assert!(full.validate().is_ok());
    }

    #[test]
    fn a_missing_ca_file_is_named() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("no-such-ca.pem");
        let e = Security::load(&TlsOptions::with_ca(&path), None).expect_err("no file");
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    }
}
