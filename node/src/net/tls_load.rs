//! The node's TLS contexts from its `tls.*` keys: reads [`TlsConfig`] (config) and hands
//! `io::tls` the plain paths and choices it builds the contexts from, so neither of the two
//! imports the other. Logs what the node will do and refuses keys that do not fit together.

use std::sync::Arc;

use crate::config::{ClientAuth, TlsConfig, TlsMode};
use crate::io::tls::{ClientCerts, ClientTlsFiles, NodeTls, ServerTlsFiles, TlsClient, TlsServer};

/// Reads the certificates and keys `cfg` names. `client` = this node makes outgoing
/// connections (a broker); a name server passes false. Logs what it will do.
pub fn node_tls(cfg: &TlsConfig, client: bool, node: &str) -> Result<NodeTls, String> {
    for key in cfg.unused(client) {
        log::warn!("{node}: {key} is set but not used: TLS is off for that side (tls.server.mode=disabled / tls.enable=false)");
    }
    let server = match cfg.server_mode() {
        TlsMode::Disabled => None,
        mode => Some(Arc::new(TlsServer::load(&server_files(cfg, mode)?)?)),
    };
    let client = if client && cfg.client_enable {
        let c = TlsClient::load(&client_files(cfg)?)?;
        if !c.verifies {
            log::warn!("{node}: tls.client.authServer=false: outgoing TLS connections accept any server certificate; this is insecure (anyone on the path can impersonate a name server or master)");
        }
        Some(Arc::new(c))
    } else {
        None
    };
    Ok(NodeTls { server, client })
}

/// The listeners' files and choices (`mode` is not disabled).
fn server_files(cfg: &TlsConfig, mode: TlsMode) -> Result<ServerTlsFiles, String> {
    let (Some(cert_path), Some(key_path)) = (&cfg.server_cert_path, &cfg.server_key_path) else {
        return Err(format!(
            "tls.server.mode={} needs tls.server.certPath and tls.server.keyPath",
            mode.as_str()
        ));
    };
    let client_certs = match (cfg.server_need_client_auth, &cfg.server_trust_cert_path) {
        (ClientAuth::None, _) => ClientCerts::NotAsked,
        (ClientAuth::Optional, Some(path)) => ClientCerts::Optional {
            trust_cert_path: path.clone(),
        },
        (ClientAuth::Require, Some(path)) => ClientCerts::Required {
            trust_cert_path: path.clone(),
        },
        (auth, None) => {
            return Err(format!(
                "tls.server.need.client.auth={} needs tls.server.trustCertPath",
                auth.as_str()
            ))
        }
    };
    Ok(ServerTlsFiles {
        enforcing: mode == TlsMode::Enforcing,
        cert_path: cert_path.clone(),
        key_path: key_path.clone(),
        client_certs,
    })
}

/// The outgoing connections' files (`tls.enable` is set).
fn client_files(cfg: &TlsConfig) -> Result<ClientTlsFiles, String> {
    let trust_cert_path = if cfg.client_auth_server {
        let Some(path) = &cfg.client_trust_cert_path else {
            return Err(
                "tls.enable with tls.client.authServer=true needs tls.client.trustCertPath"
                    .to_owned(),
            );
        };
        Some(path.clone())
    } else {
        None
    };
    let cert_and_key = match (&cfg.client_cert_path, &cfg.client_key_path) {
        (Some(cert), Some(key)) => Some((cert.clone(), key.clone())),
        _ => None,
    };
    Ok(ClientTlsFiles {
        trust_cert_path,
        cert_and_key,
    })
}
