//! The probe's own certificate verifier, for `--cacert` and `--insecure`.
//!
//! - `--cacert`: a certificate byte-for-byte equal to one in the file is
//!   trusted as is, as curl and Python trust a self-signed one; anything
//!   else is validated as a chain to the file's certificates by rustls's
//!   WebPKI verifier. (`openssl req -x509` marks its self-signed
//!   certificate as a CA, and WebPKI refuses a CA as a server's own
//!   certificate, CaUsedAsEndEntity; a user who hands the probe that very
//!   certificate means "trust this".)
//! - `--insecure`: any certificate.
//!
//! Either way the handshake's signatures are checked (by the WebPKI
//! verifier when there is one), so the connection is a real TLS one made
//! with the certificate's key.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// Pinned certificates, then chain validation; or (no chain) anything.
#[derive(Debug)]
pub struct Verifier {
    pinned: Vec<CertificateDer<'static>>,
    /// `None`: `--insecure`.
    chain: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
}

impl Verifier {
    /// `--cacert`: `pinned` trusted as is, else a chain `chain` accepts.
    pub fn pinned_or_chain(
        pinned: Vec<CertificateDer<'static>>,
        chain: Arc<WebPkiServerVerifier>,
        provider: Arc<CryptoProvider>,
    ) -> Verifier {
        Verifier {
            pinned,
            chain: Some(chain),
            provider,
        }
    }

    /// `--insecure`: any certificate (signatures still checked).
    pub fn any_certificate(provider: Arc<CryptoProvider>) -> Verifier {
        Verifier {
            pinned: Vec::new(),
            chain: None,
            provider,
        }
    }
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let pinned = self
            .pinned
            .iter()
            .any(|c| c.as_ref() == end_entity.as_ref());
        match &self.chain {
            Some(chain) if !pinned => {
                chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
            }
            _ => Ok(ServerCertVerified::assertion()),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        match &self.chain {
            Some(chain) => chain.verify_tls12_signature(message, cert, dss),
            None => verify_tls12_signature(message, cert, dss, &self.algorithms()),
        }
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        match &self.chain {
            Some(chain) => chain.verify_tls13_signature(message, cert, dss),
            None => verify_tls13_signature(message, cert, dss, &self.algorithms()),
        }
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        match &self.chain {
            Some(chain) => chain.supported_verify_schemes(),
            None => self.algorithms().supported_schemes(),
        }
    }
}

impl Verifier {
    fn algorithms(&self) -> rustls::crypto::WebPkiSupportedAlgorithms {
        self.provider.signature_verification_algorithms
    }
}
