//! TLS towards upstreams when the platform's defaults are not what the operator wants: a
//! private certificate authority (`ssl_verify: /path/ca.pem`, LiteLLM's key), a client
//! certificate for mutual TLS (`ssl_certificate`, with its key in the same file or in
//! `ssl_certificate_key`), or no verification at all (`ssl_verify: false`, for a self-signed
//! vLLM on a private network; the config loader warns). Loaded at config time, so a missing
//! or malformed file is a config error naming the key; built into a rustls client config once
//! per distinct value by the client registry.

use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// How an upstream's certificate is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verify {
    /// Against the platform's roots (the WebPKI roots where it has none): the default.
    Platform,
    /// Against these certificate authorities only (`ssl_verify: <file>`).
    Roots(Vec<CertificateDer<'static>>),
    /// Not at all (`ssl_verify: false`): encryption without authentication.
    Off,
}

/// Which of an upstream TLS setting's files a problem is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsFile {
    /// The certificate authorities (`ssl_verify: <file>`).
    Ca,
    /// The client certificate chain (`ssl_certificate`).
    Certificate,
    /// The client's private key (`ssl_certificate_key`, or the certificate file).
    Key,
}

/// Why an upstream TLS setting cannot be used; `file` tells the config loader which key to
/// name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{why}")]
pub struct UpstreamTlsError {
    /// The setting the problem is in.
    pub file: TlsFile,
    /// What is wrong, naming the file.
    pub why: String,
}

impl UpstreamTlsError {
    fn new(file: TlsFile, why: impl Into<String>) -> Self {
        Self {
            file,
            why: why.into(),
        }
    }
}

/// The TLS an upstream is called with, when it is not the default. Equal settings (by
/// content, not by path) share connection pools; a reload with the same files keeps them.
pub struct UpstreamTls {
    verify: Verify,
    identity: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
    /// SHA-256 over everything above: what equality and the registry's key compare.
    fingerprint: [u8; 32],
    /// The client config, built once for connections that are not the pooled HTTP ones
    /// (Realtime WebSockets).
    shared: OnceLock<Arc<rustls::ClientConfig>>,
}

impl std::fmt::Debug for UpstreamTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let verify = match &self.verify {
            Verify::Platform => "platform roots".to_owned(),
            Verify::Roots(r) => format!("{} configured root(s)", r.len()),
            Verify::Off => "off".to_owned(),
        };
        f.debug_struct("UpstreamTls")
            .field("verify", &verify)
            .field("client_certificate", &self.identity.is_some())
            .finish()
    }
}

impl PartialEq for UpstreamTls {
    fn eq(&self, other: &Self) -> bool {
        self.fingerprint == other.fingerprint
    }
}

impl Eq for UpstreamTls {}

impl Hash for UpstreamTls {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.fingerprint.hash(state);
    }
}

fn read(file: TlsFile, path: &Path) -> Result<Vec<u8>, UpstreamTlsError> {
    std::fs::read(path)
        .map_err(|e| UpstreamTlsError::new(file, format!("cannot read {}: {e}", path.display())))
}

fn certificates(
    file: TlsFile,
    path: &Path,
    pem: &[u8],
) -> Result<Vec<CertificateDer<'static>>, UpstreamTlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            UpstreamTlsError::new(
                file,
                format!("{}: not a PEM certificate: {e}", path.display()),
            )
        })?;
    if certs.is_empty() {
        return Err(UpstreamTlsError::new(
            file,
            format!("{}: no PEM certificate in it", path.display()),
        ));
    }
    Ok(certs)
}

impl UpstreamTls {
    /// Read the files: `ca` replaces the platform's roots (`verify_off` drops verification);
    /// `cert` is a PEM chain presented to the upstream, its key in `key` or, when `key` is
    /// `None`, in the same file (httpx's and so LiteLLM's convention). `None` when all of it
    /// is the default.
    pub fn load(
        verify_off: bool,
        ca: Option<&Path>,
        cert: Option<&Path>,
        key: Option<&Path>,
    ) -> Result<Option<Arc<Self>>, UpstreamTlsError> {
        let verify = match (verify_off, ca) {
            (true, _) => Verify::Off,
            (false, Some(ca)) => {
                Verify::Roots(certificates(TlsFile::Ca, ca, &read(TlsFile::Ca, ca)?)?)
            }
            (false, None) => Verify::Platform,
        };
        let identity = match cert {
            None => None,
            Some(cert) => {
                let cert_pem = read(TlsFile::Certificate, cert)?;
                let chain = certificates(TlsFile::Certificate, cert, &cert_pem)?;
                let (file, key_path, key_pem) = match key {
                    Some(k) => (TlsFile::Key, k, read(TlsFile::Key, k)?),
                    None => (TlsFile::Certificate, cert, cert_pem),
                };
                let private = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|_| {
                    UpstreamTlsError::new(
                        file,
                        format!(
                            "{}: no PEM private key (PKCS#8, PKCS#1 or SEC1) in it",
                            key_path.display()
                        ),
                    )
                })?;
                Some((chain, private))
            }
        };
        if verify == Verify::Platform && identity.is_none() {
            return Ok(None);
        }
        let tls = Self::new(verify, identity);
        // A key that does not match its certificate is found now, not at the first request.
        tls.client_config()?;
        Ok(Some(Arc::new(tls)))
    }

    fn new(
        verify: Verify,
        identity: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
    ) -> Self {
        let mut h = ring::digest::Context::new(&ring::digest::SHA256);
        match &verify {
            Verify::Platform => h.update(b"platform"),
            Verify::Off => h.update(b"off"),
            Verify::Roots(roots) => {
                h.update(b"roots");
                for r in roots {
                    h.update(&u64::try_from(r.len()).unwrap_or(u64::MAX).to_le_bytes());
                    h.update(r);
                }
            }
        }
        if let Some((chain, key)) = &identity {
            h.update(b"identity");
            for c in chain {
                h.update(&u64::try_from(c.len()).unwrap_or(u64::MAX).to_le_bytes());
                h.update(c);
            }
            h.update(key.secret_der());
        }
        let mut fingerprint = [0u8; 32];
        fingerprint.copy_from_slice(h.finish().as_ref());
        Self {
            verify,
            identity,
            fingerprint,
            shared: OnceLock::new(),
        }
    }

    /// Whether the upstream's certificate goes unchecked (`ssl_verify: false`).
    pub fn verification_off(&self) -> bool {
        self.verify == Verify::Off
    }

    /// Whether a client certificate is presented (mutual TLS).
    pub fn presents_certificate(&self) -> bool {
        self.identity.is_some()
    }

    /// The client config, built on first use and shared (no ALPN: for WebSockets).
    pub fn shared_config(&self) -> Result<Arc<rustls::ClientConfig>, UpstreamTlsError> {
        if let Some(c) = self.shared.get() {
            return Ok(c.clone());
        }
        let built = Arc::new(self.client_config()?);
        Ok(self.shared.get_or_init(|| built).clone())
    }

    /// The rustls client config (ALPN is set by the connector that uses it).
    pub fn client_config(&self) -> Result<rustls::ClientConfig, UpstreamTlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| UpstreamTlsError::new(TlsFile::Ca, e.to_string()))?;
        let builder = match &self.verify {
            Verify::Platform => builder.with_root_certificates(platform_roots()),
            Verify::Roots(roots) => {
                let mut store = rustls::RootCertStore::empty();
                let (_, unusable) = store.add_parsable_certificates(roots.iter().cloned());
                if store.is_empty() {
                    return Err(UpstreamTlsError::new(
                        TlsFile::Ca,
                        format!("{unusable} certificate(s), none usable as a root"),
                    ));
                }
                builder.with_root_certificates(store)
            }
            Verify::Off => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(NoVerification(provider))),
        };
        match &self.identity {
            None => Ok(builder.with_no_client_auth()),
            Some((chain, key)) => builder
                .with_client_auth_cert(chain.clone(), key.clone_key())
                .map_err(|e| {
                    UpstreamTlsError::new(
                        TlsFile::Key,
                        format!("the client certificate and key cannot be used together: {e}"),
                    )
                }),
        }
    }
}

/// The platform's root certificates, else the bundled WebPKI roots (as the default connector).
fn platform_roots() -> rustls::RootCertStore {
    let mut store = rustls::RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    store.add_parsable_certificates(found.certs);
    if store.is_empty() {
        tracing::warn!("no platform root certificates; using the bundled webpki roots");
        store.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    }
    store
}

/// `ssl_verify: false`: any certificate is taken, signatures are still checked (so the
/// handshake is not trivially forgeable by a passive party).
#[derive(Debug)]
struct NoVerification(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn dir() -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!(
            "sluice-upstream-tls-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn defaults_need_no_config_and_files_are_read_and_checked() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        assert!(UpstreamTls::load(false, None, None, None)
            .unwrap()
            .is_none());
        let d = dir();
        let ca = rcgen::generate_simple_self_signed(vec!["ca.test".into()]).unwrap();
        let client = rcgen::generate_simple_self_signed(vec!["client.test".into()]).unwrap();
        let ca_pem = write(&d, "ca.pem", &ca.cert.pem());
        let both = write(
            &d,
            "both.pem",
            &format!("{}{}", client.cert.pem(), client.key_pair.serialize_pem()),
        );
        let cert_only = write(&d, "cert.pem", &client.cert.pem());
        let key_only = write(&d, "key.pem", &client.key_pair.serialize_pem());

        let tls = UpstreamTls::load(false, Some(&ca_pem), Some(&both), None)
            .unwrap()
            .unwrap();
        assert!(tls.presents_certificate() && !tls.verification_off());
        let split = UpstreamTls::load(false, Some(&ca_pem), Some(&cert_only), Some(&key_only))
            .unwrap()
            .unwrap();
        assert_eq!(tls, split, "the same content is the same setting");
        let off = UpstreamTls::load(true, None, None, None).unwrap().unwrap();
        assert!(off.verification_off());
        assert_ne!(*off, *tls);
        assert!(!format!("{tls:?}").contains("BEGIN"), "{tls:?}");

        let missing = d.join("nope.pem");
        let e = UpstreamTls::load(false, Some(&missing), None, None).unwrap_err();
        assert_eq!(e.file, TlsFile::Ca);
        assert!(e.why.starts_with("cannot read "), "{e}");
        let e = UpstreamTls::load(false, Some(&key_only), None, None).unwrap_err();
        assert_eq!(e.file, TlsFile::Ca);
        assert!(e.to_string().contains("no PEM certificate"), "{e}");
        let e = UpstreamTls::load(false, None, Some(&cert_only), None).unwrap_err();
        assert_eq!(e.file, TlsFile::Certificate);
        assert!(e.to_string().contains("no PEM private key"), "{e}");
        let other = rcgen::generate_simple_self_signed(vec!["x".into()]).unwrap();
        let wrong_key = write(&d, "wrong.pem", &other.key_pair.serialize_pem());
        let e = UpstreamTls::load(false, None, Some(&cert_only), Some(&wrong_key)).unwrap_err();
        assert_eq!(e.file, TlsFile::Key);
        assert!(e.to_string().contains("cannot be used together"), "{e}");
        std::fs::remove_dir_all(d).unwrap();
    }
}
