//! A certificate authority and a server certificate made at test time.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::Context as _;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// One CA and one server certificate (for `127.0.0.1` and `localhost`) per
/// test process, shared by every TLS server, so a client that trusts
/// [`test_ca_pem`] reaches all of them.
struct TestCa {
    ca_pem: String,
    cert_pem: String,
    key_pem: String,
}

/// Paths of the PEM files a TLS server was started with.
#[derive(Debug, Clone)]
pub(crate) struct TlsFiles {
    pub(crate) ca: PathBuf,
    pub(crate) cert: PathBuf,
    pub(crate) key: PathBuf,
}

/// The PEM certificate of the certificate authority that signed every TLS
/// server's certificate in this test process. Clients trust it to talk to
/// `rediss://` servers.
///
/// # Errors
///
/// Fails when the certificates cannot be generated.
///
/// # Examples
///
/// ```
/// let pem = redlock_tests::harness::test_ca_pem().unwrap();
/// assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"));
/// ```
pub fn test_ca_pem() -> anyhow::Result<&'static str> {
    Ok(&test_ca()?.ca_pem)
}

fn test_ca() -> anyhow::Result<&'static TestCa> {
    static CA: OnceLock<Result<TestCa, String>> = OnceLock::new();
    CA.get_or_init(|| generate().map_err(|e| format!("{e:#}")))
        .as_ref()
        .map_err(|e| anyhow::anyhow!("generating the test certificates: {e}"))
}

fn generate() -> anyhow::Result<TestCa> {
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "redlock test CA");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])?;
    params
        .distinguished_name
        .push(DnType::CommonName, "redlock test server");
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let cert = params.signed_by(&key, &issuer)?;
    Ok(TestCa {
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// Writes the CA, the server certificate and its key into `dir`.
pub(crate) fn write_files(dir: &Path) -> anyhow::Result<TlsFiles> {
    let ca = test_ca()?;
    let files = TlsFiles {
        ca: dir.join("ca.pem"),
        cert: dir.join("server.pem"),
        key: dir.join("server.key"),
    };
    for (path, pem) in [
        (&files.ca, &ca.ca_pem),
        (&files.cert, &ca.cert_pem),
        (&files.key, &ca.key_pem),
    ] {
        std::fs::write(path, pem).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(files)
}
