//! What a failed TLS exchange means, in words a user can act on: rustls's
//! errors (certificate refused, alert received, not TLS at all) turned into
//! a sentence that says what happened and what to do: `--cacert FILE` or
//! `--insecure` for an untrusted certificate, `http://` for a server that
//! answers a TLS hello in plain HTTP.

use rustls::{AlertDescription, CertificateError, Error, InvalidMessage};

use super::Trust;

/// The fix for a certificate the probe could not verify.
fn trust_fix() -> &'static str {
    "give --cacert FILE with the server's certificate or the CA that issued it, or --insecure \
     to skip verification (a test server)"
}

/// Who vouches for a certificate under `trust`.
fn vouchers(trust: &Trust) -> String {
    match trust {
        Trust::System => "any root certificate this system trusts".to_owned(),
        Trust::File(path) => format!("a certificate in --cacert {}", path.display()),
        Trust::Insecure => "anyone (--insecure)".to_owned(),
    }
}

/// The trusted certificate taken as the issuer under `trust`.
fn issuer(trust: &Trust) -> String {
    match trust {
        Trust::File(path) => format!(
            "the certificate in --cacert {} that bears its issuer's name",
            path.display()
        ),
        _ => "the trusted root that bears its issuer's name".to_owned(),
    }
}

/// `error`, met speaking TLS to a server under `trust`, as a sentence.
pub fn explain(error: &Error, trust: &Trust) -> String {
    match error {
        Error::InvalidCertificate(cert) => certificate(cert, trust),
        Error::InvalidMessage(InvalidMessage::InvalidContentType) => plain_http().to_owned(),
        Error::AlertReceived(alert) => alert_words(*alert),
        Error::PeerIncompatible(why) => format!(
            "the server and the probe share no TLS version or cipher suite the probe accepts \
             (TLS 1.2 and 1.3): {why:?}"
        ),
        Error::NoApplicationProtocol => {
            "the server speaks none of the application protocols offered (ALPN http/1.1)".to_owned()
        }
        other => format!("the TLS exchange failed: {other}"),
    }
}

/// A TLS hello answered in plain text.
pub fn plain_http() -> &'static str {
    "the server answered the TLS hello in plain text: it speaks plain HTTP on this port, not \
     TLS; use http:// in place of https://"
}

fn certificate(error: &CertificateError, trust: &Trust) -> String {
    use CertificateError as E;
    let refused = "the server's certificate was refused";
    match error {
        E::UnknownIssuer => format!(
            "the server's certificate is not signed by {} (self-signed, or from a private CA): {}",
            vouchers(trust),
            trust_fix()
        ),
        E::Other(other) if format!("{other:?}").contains("CaUsedAsEndEntity") => {
            "the server presents a CA certificate as its own (as `openssl req -x509` makes by \
             default): give that very certificate with --cacert FILE (it is then trusted as is), \
             or --insecure"
                .to_owned()
        }
        E::Expired | E::ExpiredContext { .. } => format!(
            "{refused}: it has expired (renew it on the server, or check this machine's clock; \
             --insecure skips verification)"
        ),
        E::NotValidYet | E::NotValidYetContext { .. } => format!(
            "{refused}: it is not valid yet (check the clocks of both machines; --insecure \
             skips verification)"
        ),
        E::NotValidForName | E::NotValidForNameContext { .. } => format!(
            "{refused}: it is not issued for the URL's host (use a name the certificate \
             names in the URL, or --insecure)"
        ),
        E::BadSignature
        | E::UnsupportedSignatureAlgorithmContext { .. }
        | E::UnsupportedSignatureAlgorithmForPublicKeyContext { .. } => match trust {
            Trust::File(_) => format!(
                "{refused}: its signature does not verify with the key of {} (a different \
                 certificate with the same name, or an algorithm the probe does not support): \
                 check that --cacert holds the CA that really issued it, or --insecure",
                issuer(trust)
            ),
            // No --cacert: a system root that merely bears the issuer's
            // name (a snakeoil certificate) is no CA of the server's.
            _ => format!(
                "the server's certificate is not trusted: its signature does not verify with the \
                 key of {} (that root only shares a name with the one that signed it; the server \
                 is self-signed or from a private CA): {}",
                issuer(trust),
                trust_fix()
            ),
        },
        E::InvalidPurpose | E::InvalidPurposeContext { .. } => format!(
            "{refused}: it is not meant for a TLS server (its extended key usage lacks \
             serverAuth)"
        ),
        E::BadEncoding => format!("{refused}: it is not a well-formed certificate"),
        E::Revoked => format!("{refused}: it has been revoked"),
        other => format!("{refused} ({other:?}): {}", trust_fix()),
    }
}

fn alert_words(alert: AlertDescription) -> String {
    let what = match alert {
        AlertDescription::HandshakeFailure | AlertDescription::ProtocolVersion => {
            "it shares no TLS version or cipher suite with the probe (TLS 1.2 and 1.3)"
        }
        AlertDescription::NoApplicationProtocol => {
            "it speaks none of the application protocols offered (ALPN http/1.1)"
        }
        AlertDescription::UnrecognisedName => "it has no certificate for the URL's host name",
        AlertDescription::CertificateRequired => "it requires a client certificate",
        _ => "",
    };
    match what {
        "" => format!("the server ended the TLS handshake with the alert {alert:?}"),
        what => format!("the server ended the TLS handshake with the alert {alert:?}: {what}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn says(error: Error, trust: &Trust, words: &[&str]) {
        let text = explain(&error, trust);
        for word in words {
            assert!(text.contains(word), "{word:?} not in: {text}");
        }
        assert!(!text.contains("OtherError"), "debug output: {text}");
    }

    #[test]
    fn certificate_errors_say_what_happened_and_what_to_do() {
        let file = Trust::File("ca.pem".into());
        says(
            Error::InvalidCertificate(CertificateError::UnknownIssuer),
            &Trust::System,
            &["not signed by any root", "--cacert FILE", "--insecure"],
        );
        says(
            Error::InvalidCertificate(CertificateError::UnknownIssuer),
            &file,
            &[
                "not signed by a certificate in --cacert ca.pem",
                "--insecure",
            ],
        );
        #[derive(Debug)]
        struct CaUsedAsEndEntity;
        impl std::fmt::Display for CaUsedAsEndEntity {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("CaUsedAsEndEntity")
            }
        }
        impl std::error::Error for CaUsedAsEndEntity {}
        let other = rustls::OtherError(std::sync::Arc::new(CaUsedAsEndEntity));
        says(
            Error::InvalidCertificate(CertificateError::Other(other)),
            &Trust::System,
            &["a CA certificate as its own", "--cacert FILE", "--insecure"],
        );
        says(
            Error::InvalidCertificate(CertificateError::Expired),
            &file,
            &["expired", "clock"],
        );
        says(
            Error::InvalidCertificate(CertificateError::NotValidForName),
            &file,
            &["not issued for the URL's host"],
        );
        says(
            Error::InvalidCertificate(CertificateError::BadSignature),
            &file,
            &[
                "signature does not verify",
                "--cacert ca.pem",
                "really issued it",
            ],
        );
        says(
            Error::InvalidCertificate(CertificateError::InvalidPurpose),
            &file,
            &["serverAuth"],
        );
    }

    /// No --cacert, and a system root with the issuer's name (a snakeoil
    /// certificate): not trusted, and both ways out, not a --cacert that
    /// was never given.
    #[test]
    fn a_signature_refused_without_cacert_names_both_ways_out() {
        let text = explain(
            &Error::InvalidCertificate(CertificateError::BadSignature),
            &Trust::System,
        );
        for words in ["is not trusted", "--cacert FILE", "--insecure"] {
            assert!(text.contains(words), "{words:?} not in: {text}");
        }
        assert!(!text.contains("check that --cacert"), "{text}");
    }

    #[test]
    fn plain_text_and_alerts_are_named() {
        says(
            Error::InvalidMessage(InvalidMessage::InvalidContentType),
            &Trust::System,
            &["plain HTTP", "use http://"],
        );
        says(
            Error::AlertReceived(AlertDescription::HandshakeFailure),
            &Trust::System,
            &["HandshakeFailure", "no TLS version or cipher suite"],
        );
        says(
            Error::AlertReceived(AlertDescription::CertificateRequired),
            &Trust::System,
            &["client certificate"],
        );
    }
}
