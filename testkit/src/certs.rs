//! Throwaway certificates for TLS tests, made in the test with rcgen (ECDSA P-256) and
//! written as PEM files to a temp dir that goes with the [`TestPki`]: a CA, a server
//! certificate it signs (for `127.0.0.1`, `::1` and `localhost` unless told otherwise), a
//! client certificate it signs (mutual TLS), and a second CA that signed nothing here (to
//! see a client refuse a server it does not trust).

use std::path::PathBuf;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// The PEM files of one test PKI; removed when dropped.
pub struct TestPki {
    pub dir: tempfile::TempDir,
    /// The CA that signed the server and client certificates.
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    /// A CA unrelated to the others.
    pub other_ca: PathBuf,
}

impl TestPki {
    /// A PKI whose server certificate names 127.0.0.1, ::1 and localhost.
    pub fn new() -> TestPki {
        Self::for_names(&["127.0.0.1", "::1", "localhost"])
    }

    /// A PKI whose server certificate names `server_names` (IP addresses or DNS names).
    pub fn for_names(server_names: &[&str]) -> TestPki {
        let dir = crate::tempdir("pki");
        let write = |name: &str, pem: String| {
            let p = dir.path().join(name);
            std::fs::write(&p, pem).expect("writing a PEM file");
            p
        };
        let (ca_pem, issuer) = ca("ringmq test CA");
        let (other_pem, _) = ca("ringmq other CA");
        let names: Vec<String> = server_names.iter().map(|s| s.to_string()).collect();
        let (server_pem, server_key) = leaf(
            names,
            "ringmq test server",
            ExtendedKeyUsagePurpose::ServerAuth,
            &issuer,
        );
        let (client_pem, client_key) = leaf(
            Vec::new(),
            "ringmq test client",
            ExtendedKeyUsagePurpose::ClientAuth,
            &issuer,
        );
        TestPki {
            ca: write("ca.pem", ca_pem),
            server_cert: write("server.pem", server_pem),
            server_key: write("server.key", server_key),
            client_cert: write("client.pem", client_pem),
            client_key: write("client.key", client_key),
            other_ca: write("other-ca.pem", other_pem),
            dir,
        }
    }
}

impl Default for TestPki {
    fn default() -> Self {
        Self::new()
    }
}

/// A self-signed CA: its certificate (PEM) and an issuer to sign with.
fn ca(name: &str) -> (String, Issuer<'static, KeyPair>) {
    let key = KeyPair::generate().expect("generating a key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let cert = params.self_signed(&key).expect("self-signing the CA");
    (cert.pem(), Issuer::new(params, key))
}

/// A certificate signed by `issuer`: (certificate PEM, private key PEM).
fn leaf(
    names: Vec<String>,
    common_name: &str,
    usage: ExtendedKeyUsagePurpose,
    issuer: &Issuer<'static, KeyPair>,
) -> (String, String) {
    let key = KeyPair::generate().expect("generating a key");
    let mut params = CertificateParams::new(names).expect("certificate params");
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.extended_key_usages = vec![usage];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let cert = params
        .signed_by(&key, issuer)
        .expect("signing a certificate");
    (cert.pem(), key.serialize_pem())
}
