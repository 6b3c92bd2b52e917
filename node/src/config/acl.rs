//! ACL keys (`aclEnable`, `aclFilePath`, `aclReplayWindowMs`; on brokers `innerAccessKey` and
//! `innerSecretKey`), shared by broker and name server configs; and on brokers ACL 2.0's
//! (`authenticationEnabled`, `authorizationEnabled`, `authenticationWhitelist`,
//! `initAuthenticationUser`, `innerClientAuthenticationCredentials`,
//! `migrateAuthFromV1Enabled`). What they do: `crate::acl`, `crate::acl::v2`.

use std::path::{Path, PathBuf};

use ringmq_wire::auth::{Credentials, Secret};

use super::ConfigError;

/// File name of the ACL when `aclFilePath` is not given (beside the config file).
pub const ACL_FILE_NAME: &str = "plain_acl.yml";

/// ACL settings of a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclConfig {
    /// `aclEnable`, default false.
    pub enable: bool,
    /// `aclFilePath`; default `plain_acl.yml` beside the config file (or in the working
    /// directory when there is none), see [`AclConfig::file_path`].
    pub file_path: Option<PathBuf>,
    /// `aclReplayWindowMs`, default 300,000: signed native requests whose timestamp is further
    /// than this from the node's clock are refused.
    pub replay_window_ms: u64,
    /// `innerAccessKey` / `innerSecretKey`: what the broker signs its own requests with (to
    /// name servers and, as a slave, to its master). Must be an admin account there.
    pub inner_access_key: Option<String>,
    pub inner_secret_key: Option<Secret>,
    /// ACL 2.0 (brokers): `authenticationEnabled`, default false.
    pub authentication_enabled: bool,
    /// `authorizationEnabled`, default false.
    pub authorization_enabled: bool,
    /// `authenticationWhitelist`: request codes served without credentials.
    pub authentication_whitelist: Vec<u16>,
    /// `initAuthenticationUser` (`{"username":..,"password":..}`): the first super user.
    pub init_user: Option<(String, Secret)>,
    /// `innerClientAuthenticationCredentials` (`{"accessKey":..,"secretKey":..}`): a super
    /// user created at start, and what this broker signs its own requests with (unless
    /// `innerAccessKey` is set).
    pub inner_client: Option<(String, Secret)>,
    /// `migrateAuthFromV1Enabled`, default false: import `plain_acl.yml` at start.
    pub migrate_from_v1: bool,
}

impl Default for AclConfig {
    fn default() -> Self {
        AclConfig {
            enable: false,
            file_path: None,
            replay_window_ms: crate::acl::REPLAY_WINDOW_MS_DEFAULT,
            inner_access_key: None,
            inner_secret_key: None,
            authentication_enabled: false,
            authorization_enabled: false,
            authentication_whitelist: Vec::new(),
            init_user: None,
            inner_client: None,
            migrate_from_v1: false,
        }
    }
}

impl AclConfig {
    /// The ACL file: `aclFilePath`, else `plain_acl.yml` in `config_dir` (the directory of
    /// the config file; the working directory when started without one).
    pub fn file_path(&self, config_dir: Option<&Path>) -> PathBuf {
        match &self.file_path {
            Some(p) => p.clone(),
            None => config_dir
                .unwrap_or_else(|| Path::new("."))
                .join(ACL_FILE_NAME),
        }
    }

    /// Is ACL 2.0 on (either of its keys)?
    pub fn v2(&self) -> bool {
        self.authentication_enabled || self.authorization_enabled
    }

    /// The inner credentials: `innerAccessKey`/`innerSecretKey` when both halves are set,
    /// else `innerClientAuthenticationCredentials`.
    pub fn inner_credentials(&self) -> Result<Option<Credentials>, ConfigError> {
        match (&self.inner_access_key, &self.inner_secret_key) {
            (None, None) => match &self.inner_client {
                None => Ok(None),
                Some((k, s)) => Credentials::new(k.clone(), s.expose())
                    .map(Some)
                    .map_err(|e| ConfigError::Invalid {
                        key: "innerClientAuthenticationCredentials",
                        detail: e.to_string(),
                    }),
            },
            (Some(k), Some(s)) => Credentials::new(k.clone(), s.expose())
                .map(Some)
                .map_err(|e| ConfigError::Invalid {
                    key: "innerAccessKey",
                    detail: e.to_string(),
                }),
            (Some(_), None) => Err(ConfigError::Invalid {
                key: "innerSecretKey",
                detail: "innerAccessKey is set without innerSecretKey".to_owned(),
            }),
            (None, Some(_)) => Err(ConfigError::Invalid {
                key: "innerAccessKey",
                detail: "innerSecretKey is set without innerAccessKey".to_owned(),
            }),
        }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.enable && self.v2() {
            return Err(ConfigError::Invalid {
                key: "aclEnable",
                detail: "ACL 1.0 (aclEnable) and ACL 2.0 (authenticationEnabled / \
                         authorizationEnabled) cannot both be on; to bring plain_acl.yml's \
                         accounts to ACL 2.0 set migrateAuthFromV1Enabled=true instead"
                    .to_owned(),
            });
        }
        self.inner_credentials().map(|_| ())
    }
}

/// `initAuthenticationUser`: RocketMQ's JSON `{"username":"..","password":".."}`.
pub fn init_user(v: &str) -> Result<(String, Secret), String> {
    json_pair(v, "username", "password")
}

/// `innerClientAuthenticationCredentials`: `{"accessKey":"..","secretKey":".."}`.
pub fn inner_client(v: &str) -> Result<(String, Secret), String> {
    json_pair(v, "accessKey", "secretKey")
}

fn json_pair(v: &str, name: &str, secret: &str) -> Result<(String, Secret), String> {
    let bad = || format!("expected JSON {{\"{name}\":\"..\",\"{secret}\":\"..\"}}");
    let j: serde_json::Value = serde_json::from_str(v).map_err(|_| bad())?;
    let field = |k: &str| {
        j.get(k)
            .and_then(serde_json::Value::as_str)
            .filter(|s| !s.trim().is_empty())
            .map(str::to_owned)
    };
    match (field(name), field(secret)) {
        (Some(n), Some(s)) if !n.contains(':') => Ok((n, Secret::new(s))),
        (Some(_), Some(_)) => Err(format!("{name} may not hold `:`")),
        _ => Err(bad()),
    }
}

/// `authenticationWhitelist`: request codes separated by commas (RocketMQ's form).
pub fn whitelist(v: &str) -> Result<Vec<u16>, String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<u16>()
                .map_err(|_| format!("request code {s:?} is not a number in 0..=65535"))
        })
        .collect()
}

#[cfg(test)]
mod v2_tests {
    use super::*;

    #[test]
    fn acl_2_values_are_checked() {
        let (n, s) = init_user(r#"{"username":"root","password":"pw"}"#).unwrap();
        assert_eq!((n.as_str(), s.expose()), ("root", "pw"));
        assert!(init_user(r#"{"username":"root"}"#).is_err());
        assert!(init_user("root:pw").is_err());
        assert!(inner_client(r#"{"accessKey":"in","secretKey":"s"}"#).is_ok());
        assert_eq!(whitelist("10, 11,34").unwrap(), vec![10, 11, 34]);
        assert!(whitelist("10,POP").is_err());
        let mut c = AclConfig {
            enable: true,
            authentication_enabled: true,
            ..AclConfig::default()
        };
        assert!(c.validate().is_err());
        c.enable = false;
        c.inner_client = Some(("in".into(), Secret::new("s")));
        assert_eq!(c.inner_credentials().unwrap().unwrap().access_key(), "in");
    }
}
