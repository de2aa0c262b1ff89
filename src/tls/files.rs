//! The certificate chain and private key that `--tls-cert` and `--tls-key`
//! name: read from PEM, checked to belong together, and every mistake a
//! user makes with them said in words with its fix (an encrypted key, a
//! key of another certificate, a chain that does not start with the
//! server's own certificate, the two files swapped). Startup only: none
//! of this runs per connection.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use rustls::{Error, InconsistentKeys};

use super::{LoadError, TlsFile};

/// Reads every certificate in a PEM file; at least one.
pub(super) fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = read(path, "certificate")?;
    let chain = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: not a PEM certificate: {e}", path.display()))?;
    if chain.is_empty() {
        if holds(&pem, b"PRIVATE KEY-----") {
            return Err(format!(
                "{}: holds a private key, not a certificate: are the certificate and \
                 key files swapped?",
                path.display()
            ));
        }
        return Err(format!(
            "{}: no certificate in it (expected -----BEGIN CERTIFICATE-----)",
            path.display()
        ));
    }
    Ok(chain)
}

/// Reads the first private key in a PEM file (PKCS#8, PKCS#1 or SEC1).
pub(super) fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let pem = read(path, "private key")?;
    // PKCS#8 `ENCRYPTED PRIVATE KEY`, or OpenSSL's traditional format
    // with a `Proc-Type: 4,ENCRYPTED` header inside an RSA or EC block.
    if holds(&pem, b"ENCRYPTED PRIVATE KEY-----") || holds(&pem, b"Proc-Type: 4,ENCRYPTED") {
        return Err(format!(
            "{path}: the private key is encrypted (it needs a passphrase, which the \
             server cannot ask for): write a decrypted copy with `openssl pkey -in {path} \
             -out key-plain.pem` and give that, readable by the server's user alone \
             (chmod 600)",
            path = path.display()
        ));
    }
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        if holds(&pem, b"-----BEGIN CERTIFICATE-----") {
            format!(
                "{}: holds a certificate, not a private key: are the certificate and \
                 key files swapped?",
                path.display()
            )
        } else {
            format!(
                "{}: no usable PEM private key in it (PKCS#8, PKCS#1 or SEC1): {e}",
                path.display()
            )
        }
    })
}

/// Checks that the key belongs to the chain's first certificate, the
/// server's own (the leaf), as rustls requires. When it belongs to a
/// later one, the chain is in the wrong order; when to none, it is the
/// key of another certificate. Each is said with what to do.
pub(super) fn check_pair(
    provider: &CryptoProvider,
    chain: &[CertificateDer<'static>],
    key: &PrivateKeyDer<'static>,
    (cert_path, key_path): (&Path, &Path),
) -> Result<(), LoadError> {
    let signing = provider
        .key_provider
        .load_private_key(key.clone_key())
        .map_err(|e| LoadError {
            file: TlsFile::Key,
            message: format!(
                "{}: a private key the server cannot use: {e}",
                key_path.display()
            ),
        })?;
    let keys_match = |cert: &CertificateDer<'static>| {
        CertifiedKey::new(vec![cert.clone()], Arc::clone(&signing)).keys_match()
    };
    match keys_match(&chain[0]) {
        // A key that cannot tell its public key is left to rustls.
        Ok(()) | Err(Error::InconsistentKeys(InconsistentKeys::Unknown)) => return Ok(()),
        Err(Error::InconsistentKeys(InconsistentKeys::KeyMismatch)) => {}
        Err(e) => {
            // webpki's reason travels as an opaque error: its name is all
            // there is to match on.
            let fix = if format!("{e:?}").contains("UnsupportedCertVersion") {
                ": it is an X.509 version 1 certificate (as `openssl x509 -req` makes \
                 without extensions); sign it again with `-extfile` giving it a \
                 subjectAltName, which makes version 3"
                    .to_owned()
            } else {
                format!(": {e}")
            };
            return Err(LoadError {
                file: TlsFile::Cert,
                message: format!(
                    "{}: the first certificate, the server's own, cannot be used{fix}",
                    cert_path.display()
                ),
            });
        }
    }
    let belongs_to = |cert: &CertificateDer<'static>| keys_match(cert).is_ok();
    if let Some(at) = chain.iter().position(belongs_to) {
        return Err(LoadError {
            file: TlsFile::Cert,
            message: format!(
                "{cert}: the first certificate is not the server's own: the key in {key} \
                 belongs to certificate {n} of {of}. Put the server's (leaf) certificate \
                 first, then the intermediates that sign it, in order \
                 (`cat leaf.pem intermediate.pem > {cert}`)",
                cert = cert_path.display(),
                key = key_path.display(),
                n = at + 1,
                of = chain.len(),
            ),
        });
    }
    Err(LoadError {
        file: TlsFile::Key,
        message: format!(
            "{key} is not the private key of the certificate in {cert} (their public keys \
             differ): give the key that was made with this certificate (for a matching pair \
             `openssl x509 -noout -pubkey -in {cert}` and `openssl pkey -pubout -in {key}` \
             print the same key)",
            cert = cert_path.display(),
            key = key_path.display(),
        ),
    })
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>, String> {
    fs::read(path).map_err(|e| format!("cannot read {what} {}: {e}", path.display()))
}

/// Whether the PEM text holds `marker` anywhere.
fn holds(pem: &[u8], marker: &[u8]) -> bool {
    pem.windows(marker.len()).any(|w| w == marker)
}
