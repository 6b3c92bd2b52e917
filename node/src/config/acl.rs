//! ACL keys (`aclEnable`, `aclFilePath`, `aclReplayWindowMs`; on brokers `innerAccessKey` and
//! `innerSecretKey`), shared by broker and name server configs. What they do: `crate::acl`.

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
}

impl Default for AclConfig {
    fn default() -> Self {
        AclConfig {
            enable: false,
            file_path: None,
            replay_window_ms: crate::acl::REPLAY_WINDOW_MS_DEFAULT,
            inner_access_key: None,
            inner_secret_key: None,
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

    /// The inner credentials, when both halves are set.
    pub fn inner_credentials(&self) -> Result<Option<Credentials>, ConfigError> {
        match (&self.inner_access_key, &self.inner_secret_key) {
            (None, None) => Ok(None),
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
        self.inner_credentials().map(|_| ())
    }
}
