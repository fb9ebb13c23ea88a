//! The listener's certificate: the operator's files, or one generated into
//! `state_dir/tls` on first start (signed by a throwaway CA whose key is discarded, so
//! clients can trust `ca.pem` and nothing can mint more certificates).
//! Certificates are loaded and checked here, so pingora never panics on a bad file.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;

use pingora::listeners::tls::TlsSettings;
use pingora::tls::sign::CertifiedKey;
use pingora::tls::{ClientHello, CryptoProvider, ResolvesServerCert};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use crate::secrets;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {cert} / {key}: {reason}")]
    Read {
        cert: PathBuf,
        key: PathBuf,
        reason: String,
    },
    #[error("{cert} holds no PEM certificate, or {key} no PEM private key")]
    Missing { cert: PathBuf, key: PathBuf },
    #[error("{key} does not belong to the certificate in {cert}: {reason}")]
    Mismatch {
        cert: PathBuf,
        key: PathBuf,
        reason: String,
    },
    #[error("cannot generate a certificate: {0}")]
    Generate(String),
    #[error("cannot read the certificate's validity: {0}")]
    Validity(String),
    #[error(transparent)]
    Write(#[from] secrets::SecretError),
}

/// Where a generated certificate lives.
pub struct GeneratedPaths {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl GeneratedPaths {
    pub fn in_state_dir(state_dir: &Path) -> Self {
        let dir = state_dir.join("tls");
        GeneratedPaths {
            ca: dir.join("ca.pem"),
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
        }
    }
}

/// Loads a PEM chain and its private key, refusing a key that does not match.
pub fn load_certified_key(cert: &Path, key: &Path) -> Result<Arc<CertifiedKey>, TlsError> {
    pingora::tls::install_default_crypto_provider();
    let (chain, private) =
        pingora::tls::load_certs_and_key_files(&cert.to_string_lossy(), &key.to_string_lossy())
            .map_err(|e| TlsError::Read {
                cert: cert.to_path_buf(),
                key: key.to_path_buf(),
                reason: e.to_string(),
            })?
            .ok_or_else(|| TlsError::Missing {
                cert: cert.to_path_buf(),
                key: key.to_path_buf(),
            })?;
    let provider = CryptoProvider::get_default().ok_or_else(|| TlsError::Mismatch {
        cert: cert.to_path_buf(),
        key: key.to_path_buf(),
        reason: "no TLS crypto provider installed".into(),
    })?;
    let chain = chain.into_iter().map(|c| c.into_owned()).collect();
    CertifiedKey::from_der(chain, private.clone_key(), provider)
        .map(Arc::new)
        .map_err(|e| TlsError::Mismatch {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            reason: e.to_string(),
        })
}

/// When the leaf certificate of `certified` expires: its `notAfter`, in Unix seconds.
pub fn not_after(certified: &CertifiedKey) -> Result<i64, TlsError> {
    let leaf = certified
        .cert
        .first()
        .ok_or_else(|| TlsError::Validity("the chain is empty".into()))?;
    let (_, parsed) = x509_parser::parse_x509_certificate(leaf.as_ref())
        .map_err(|e| TlsError::Validity(e.to_string()))?;
    Ok(parsed.validity().not_after.timestamp())
}

/// Reads the CA certificates (DER) of a PEM file, checking each parses.
pub fn read_ca_file(path: &Path) -> Result<Vec<Vec<u8>>, TlsError> {
    let read_error = |reason: String| TlsError::Read {
        cert: path.to_path_buf(),
        key: path.to_path_buf(),
        reason,
    };
    let mut store = pingora::tls::RootCertStore::empty();
    pingora::tls::load_ca_file_into_store(path, &mut store)
        .map_err(|e| read_error(e.to_string()))?;
    let text = std::fs::read(path).map_err(|e| read_error(e.to_string()))?;
    let certificates: Vec<Vec<u8>> = pem_certificates(&text);
    if certificates.is_empty() {
        return Err(read_error("no PEM certificate in the file".into()));
    }
    Ok(certificates)
}

/// The DER bytes of each `CERTIFICATE` block of a PEM text.
fn pem_certificates(text: &[u8]) -> Vec<Vec<u8>> {
    use base64::Engine;
    let text = String::from_utf8_lossy(text);
    text.split("-----BEGIN CERTIFICATE-----")
        .skip(1)
        .filter_map(|block| block.split("-----END CERTIFICATE-----").next())
        .filter_map(|b64| {
            let compact: String = b64.chars().filter(|c| !c.is_whitespace()).collect();
            base64::engine::general_purpose::STANDARD
                .decode(compact)
                .ok()
        })
        .collect()
}

/// Returns the generated certificate's paths, generating it first when absent.
pub fn ensure_generated(state_dir: &Path) -> Result<GeneratedPaths, TlsError> {
    let paths = GeneratedPaths::in_state_dir(state_dir);
    if paths.cert.exists() && paths.key.exists() {
        return Ok(paths);
    }
    let gen = |e: rcgen::Error| TlsError::Generate(e.to_string());
    let ca_key = KeyPair::generate().map_err(gen)?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(gen)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "clustergate generated CA");
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca_params.self_signed(&ca_key).map_err(gen)?;

    let leaf_key = KeyPair::generate().map_err(gen)?;
    let mut leaf = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
        .map_err(gen)?;
    leaf.distinguished_name
        .push(DnType::CommonName, "clustergate");
    leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf_cert = leaf.signed_by(&leaf_key, &issuer).map_err(gen)?;

    secrets::write_private(&paths.ca, ca_cert.pem().as_bytes())?;
    let chain = format!("{}{}", leaf_cert.pem(), ca_cert.pem());
    secrets::write_private(&paths.cert, chain.as_bytes())?;
    secrets::write_private(&paths.key, leaf_key.serialize_pem().as_bytes())?;
    Ok(paths)
}

/// Listener settings serving `certified` with ALPN h2 and http/1.1.
pub fn listener_settings(certificate: Arc<ServingCert>) -> Result<TlsSettings, TlsError> {
    let mut settings =
        TlsSettings::intermediate("", "").map_err(|e| TlsError::Generate(e.to_string()))?;
    settings.set_cert_resolver(certificate);
    settings.enable_h2();
    Ok(settings)
}

/// The one certificate served for every name. A resolver (rather than file paths handed
/// to pingora, which panics on bad files) lets a reload replace it: each handshake reads
/// the current one, and connections already up keep theirs.
pub struct ServingCert(ArcSwap<CertifiedKey>);

impl ServingCert {
    pub fn new(certified: Arc<CertifiedKey>) -> Arc<ServingCert> {
        Arc::new(ServingCert(ArcSwap::new(certified)))
    }

    pub fn replace(&self, certified: Arc<CertifiedKey>) {
        self.0.store(certified);
    }
}

impl fmt::Debug for ServingCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ServingCert")
    }
}

impl ResolvesServerCert for ServingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.load_full())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_certificate_loads_and_is_reused() {
        let dir = tempfile::tempdir().unwrap();
        let paths = ensure_generated(dir.path()).unwrap();
        let first = std::fs::read(&paths.cert).unwrap();
        assert!(load_certified_key(&paths.cert, &paths.key).is_ok());
        ensure_generated(dir.path()).unwrap();
        assert_eq!(std::fs::read(&paths.cert).unwrap(), first);
        assert!(paths.ca.exists());
    }

    #[test]
    fn a_key_from_another_certificate_is_refused() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let pa = ensure_generated(a.path()).unwrap();
        let pb = ensure_generated(b.path()).unwrap();
        assert!(matches!(
            load_certified_key(&pa.cert, &pb.key),
            Err(TlsError::Mismatch { .. })
        ));
    }

    #[test]
    fn not_after_is_the_leaf_certificates() {
        let dir = tempfile::tempdir().unwrap();
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params.not_after = rcgen::date_time_ymd(2031, 5, 17);
        let cert = params.self_signed(&key).unwrap();
        let (cert_path, key_path) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        let certified = load_certified_key(&cert_path, &key_path).unwrap();
        assert_eq!(not_after(&certified).unwrap(), 1_936_742_400);
    }

    #[test]
    fn missing_files_are_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let err = load_certified_key(&dir.path().join("c.pem"), &dir.path().join("k.pem"));
        assert!(matches!(err, Err(TlsError::Read { .. })));
    }
}
