//! `ssl_verify`, `ssl_certificate` and `ssl_certificate_key`: TLS towards a deployment's
//! upstream (a private CA, a client certificate for mutual TLS, or no verification), in a
//! deployment's `litellm_params` or for every deployment in `litellm_settings` (LiteLLM's
//! names; its `SSL_VERIFY` / `SSL_CERTIFICATE` environment variables stand in for the latter).
//! A deployment's own key wins over `litellm_settings`', key by key. The files are read here,
//! so a missing or malformed one is a config error naming the key that named it.

use std::path::Path;
use std::sync::Arc;

use sluice_core::settings::{Env, Problems, Scalar};
use sluice_net::tls::{TlsFile, UpstreamTls};

/// The three keys as one place wrote them, each with the path to name in a problem.
#[derive(Debug, Clone, Default)]
pub(super) struct TlsKeys {
    verify: Option<(String, Scalar)>,
    certificate: Option<(String, String)>,
    key: Option<(String, String)>,
}

impl TlsKeys {
    /// The keys of `section` (`litellm_settings`, `model_list[2].litellm_params`).
    pub(super) fn at(
        section: &str,
        verify: Option<Scalar>,
        certificate: Option<Scalar>,
        key: Option<Scalar>,
    ) -> Self {
        let path = |k: &str| format!("{section}.{k}");
        let file = |k: &str, v: Option<Scalar>| {
            v.map(|s| s.text())
                .filter(|s| !s.trim().is_empty())
                .map(|s| (path(k), s))
        };
        Self {
            verify: verify.map(|v| (path("ssl_verify"), v)),
            certificate: file("ssl_certificate", certificate),
            key: file("ssl_certificate_key", key),
        }
    }

    /// `litellm_settings`' keys, with LiteLLM's environment variables where a key is absent.
    pub(super) fn global(
        verify: Option<Scalar>,
        certificate: Option<Scalar>,
        key: Option<Scalar>,
        env: &dyn Env,
    ) -> Self {
        let mut keys = Self::at("litellm_settings", verify, certificate, key);
        let var = |name: &str| env.var(name).filter(|v| !v.trim().is_empty());
        if keys.verify.is_none() {
            keys.verify = var("SSL_VERIFY").map(|v| ("SSL_VERIFY".to_owned(), Scalar::Str(v)));
        }
        if keys.certificate.is_none() {
            keys.certificate = var("SSL_CERTIFICATE").map(|v| ("SSL_CERTIFICATE".to_owned(), v));
        }
        keys
    }

    /// These keys, each absent one taken from `defaults`.
    pub(super) fn over(self, defaults: &Self) -> Self {
        Self {
            verify: self.verify.or_else(|| defaults.verify.clone()),
            certificate: self.certificate.or_else(|| defaults.certificate.clone()),
            key: self.key.or_else(|| defaults.key.clone()),
        }
    }

    /// Read the files. `None` for the platform's defaults, and after a problem (recorded).
    pub(super) fn load(&self, p: &mut Problems) -> Option<Arc<UpstreamTls>> {
        let (off, ca) = match &self.verify {
            None => (false, None),
            Some((path, v)) => match v.boolean() {
                Some(verify) => (!verify, None),
                None => (false, Some((path, v.text()))),
            },
        };
        if let Some((path, _)) = &self.key {
            if self.certificate.is_none() {
                p.error(
                    path.clone(),
                    "needs ssl_certificate (the certificate this key belongs to)",
                );
                return None;
            }
        }
        let loaded = UpstreamTls::load(
            off,
            ca.as_ref().map(|(_, f)| Path::new(f.as_str())),
            self.certificate
                .as_ref()
                .map(|(_, f)| Path::new(f.as_str())),
            self.key.as_ref().map(|(_, f)| Path::new(f.as_str())),
        );
        match loaded {
            Ok(tls) => {
                if let (Some(tls), Some((path, _))) = (&tls, &self.verify) {
                    if tls.verification_off() {
                        p.warn(
                            path.clone(),
                            "false: upstream certificates are not checked (anyone on the path \
                             can read and change this deployment's traffic and keys)",
                        );
                    }
                }
                tls
            }
            Err(e) => {
                let named = match e.file {
                    TlsFile::Ca => self.verify.as_ref().map(|(p, _)| p),
                    TlsFile::Certificate => self.certificate.as_ref().map(|(p, _)| p),
                    TlsFile::Key => self
                        .key
                        .as_ref()
                        .or(self.certificate.as_ref())
                        .map(|(p, _)| p),
                };
                p.error(named.cloned().unwrap_or_default(), e.why);
                None
            }
        }
    }
}
