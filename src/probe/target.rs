//! The server to measure: the URL parsed (`http://` or `https://`), its
//! host resolved, for https the TLS client that will speak to it (SNI and
//! verification from the host, roots from `--cacert`, the system, or none
//! with `--insecure`), and the one request the probe sends, built once.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

use http::Uri;

use super::cli::Method;
use super::failure::Failure;
use crate::tls::client::{TlsTarget, Trust};

/// Where to connect and what to send.
#[derive(Debug, Clone)]
pub struct Target {
    /// The URL as given.
    pub url: String,
    pub addr: SocketAddr,
    /// The request, byte for byte.
    pub request: Arc<[u8]>,
    /// The request is HEAD (responses have no body).
    pub head_request: bool,
    /// For an https URL: how to speak TLS to it.
    pub tls: Option<TlsTarget>,
}

/// The parts of an `http://` URL the probe uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    /// `Host` field value: the authority without user info.
    pub authority: String,
    pub host: String,
    pub port: u16,
    /// Path and query, `/` when absent.
    pub path: String,
    /// `https://`: speak TLS.
    pub tls: bool,
}

/// Parses `text` as an `http://` or `https://` URL; anything else is a
/// usage error.
pub fn parse_url(text: &str) -> Result<Url, Failure> {
    let bad = |why: &str| Failure::Usage(format!("invalid URL '{text}': {why}"));
    if let Some(http) = with_scheme(text) {
        return Err(bad(&format!(
            "no scheme: did you mean {http} (or https{} for TLS)?",
            &http["http".len()..]
        )));
    }
    let uri: Uri = text
        .parse()
        .map_err(|e: http::uri::InvalidUri| bad(&e.to_string()))?;
    let tls = match uri.scheme_str() {
        Some(scheme) if scheme.eq_ignore_ascii_case("http") => false,
        Some(scheme) if scheme.eq_ignore_ascii_case("https") => true,
        Some(scheme) => {
            return Err(bad(&format!(
                "scheme {scheme}: only http:// and https:// are supported"
            )));
        }
        None => return Err(bad("no scheme: give http:// or https://")),
    };
    let authority = uri.authority().ok_or_else(|| bad("no host"))?;
    if authority.as_str().contains('@') {
        return Err(bad("user info is not supported"));
    }
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    if host.is_empty() {
        return Err(bad("no host"));
    }
    // `Authority::port` is `None` for a port past u16 as for no port: read
    // the text after the host.
    let port_text = match authority.as_str().rsplit_once(']') {
        Some((_, rest)) => rest.strip_prefix(':'),
        None => authority.as_str().rsplit_once(':').map(|(_, port)| port),
    };
    let port = match port_text {
        None | Some("") if tls => 443,
        None | Some("") => 80,
        Some(text) => match text.parse::<u16>() {
            Ok(port) if port > 0 => port,
            _ => return Err(bad(&format!("port {text} is out of range (1 to 65535)"))),
        },
    };
    let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
    Ok(Url {
        authority: authority.as_str().to_owned(),
        host: host.to_owned(),
        port,
        path: if path.is_empty() { "/".into() } else { path },
        tls,
    })
}

/// `text` with `http://` put before it (and a `/` after a bare
/// host:port), when it has no scheme and so makes a URL; `None` when it
/// has one, or is not a host even so.
fn with_scheme(text: &str) -> Option<String> {
    if text.contains("://") || text.chars().any(char::is_whitespace) {
        return None;
    }
    let slash = if text.contains('/') { "" } else { "/" };
    let http = format!("http://{text}{slash}");
    let uri: Uri = http.parse().ok()?;
    uri.host().filter(|host| !host.is_empty())?;
    Some(http)
}

impl Target {
    /// Parses and resolves `url`, and builds the request; an https URL
    /// is spoken to trusting `trust` (which an http URL must leave at the
    /// system's roots: `--cacert` and `--insecure` are for https).
    pub fn new(url: &str, method: Method, http1_0: bool, trust: &Trust) -> Result<Target, Failure> {
        let parsed = parse_url(url)?;
        let tls = match (parsed.tls, trust) {
            (true, trust) => Some(TlsTarget::new(&parsed.host, trust).map_err(Failure::Usage)?),
            (false, Trust::System) => None,
            (false, _) => {
                return Err(Failure::Usage(format!(
                    "{url}: --cacert and --insecure are for https:// URLs"
                )));
            }
        };
        let addr = (parsed.host.as_str(), parsed.port)
            .to_socket_addrs()
            .map_err(|e| Failure::Server(format!("cannot resolve {}: {e}", parsed.host)))?
            .next()
            .ok_or_else(|| Failure::Server(format!("{} has no address", parsed.host)))?;
        Ok(Target {
            url: url.to_owned(),
            addr,
            request: request(&parsed, method, http1_0).into(),
            head_request: method == Method::Head,
            tls,
        })
    }
}

/// The request: HTTP/1.1, or HTTP/1.0 asking for keep-alive explicitly.
fn request(url: &Url, method: Method, http1_0: bool) -> Vec<u8> {
    let (version, keep_alive) = if http1_0 {
        ("HTTP/1.0", "Connection: keep-alive\r\n")
    } else {
        ("HTTP/1.1", "")
    };
    format!(
        "{} {} {version}\r\nHost: {}\r\nUser-Agent: keepalive-server-probe/{}\r\nAccept: */*\r\n{keep_alive}\r\n",
        method.as_str(),
        url.path,
        url.authority,
        env!("CARGO_PKG_VERSION"),
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_urls_parse_with_defaults() {
        let url = parse_url("http://example.test").unwrap();
        assert_eq!(
            (url.host.as_str(), url.port, url.path.as_str()),
            ("example.test", 80, "/")
        );
        let url = parse_url("http://[::1]:8080/a/b?c=d").unwrap();
        assert_eq!((url.host.as_str(), url.port), ("::1", 8080));
        assert_eq!(url.path, "/a/b?c=d");
        assert_eq!(url.authority, "[::1]:8080");
        assert!(!url.tls);
        let url = parse_url("https://example.test/x").unwrap();
        assert_eq!((url.port, url.tls), (443, true));
        assert_eq!(parse_url("HTTPS://h:8443/").unwrap().port, 8443);
    }

    #[test]
    fn other_schemes_and_junk_are_usage_errors() {
        for text in [
            "ftp://x/",
            "example.test:80",
            "http://",
            "::::",
            "http://u:p@h/",
            "http://127.0.0.1:99999/",
            "http://127.0.0.1:0/",
            "http://h:65536/",
        ] {
            match parse_url(text) {
                Err(Failure::Usage(message)) => assert!(message.contains(text), "{message}"),
                other => panic!("{text}: {other:?}"),
            }
        }
        for (text, says) in [
            (
                "localhost:8443/",
                "did you mean http://localhost:8443/ (or https://localhost:8443/",
            ),
            (
                "10.1.2.3:9000",
                "did you mean http://10.1.2.3:9000/ (or https://10.1.2.3:9000/",
            ),
            ("example.test/a?b", "did you mean http://example.test/a?b"),
        ] {
            let Err(Failure::Usage(message)) = parse_url(text) else {
                panic!("{text} parsed")
            };
            assert!(message.contains(says), "{message}");
        }
        let Err(Failure::Usage(message)) = parse_url("http://127.0.0.1:99999/") else {
            unreachable!()
        };
        assert!(message.contains("port 99999 is out of range"), "{message}");
        assert_eq!(parse_url("http://h:65535/").unwrap().port, 65535);
    }

    #[test]
    fn http_1_0_asks_for_keep_alive() {
        let url = parse_url("http://h:81/x").unwrap();
        let request = String::from_utf8(request(&url, Method::Head, true)).unwrap();
        assert!(
            request.starts_with("HEAD /x HTTP/1.0\r\nHost: h:81\r\n"),
            "{request}"
        );
        assert!(
            request.ends_with("Connection: keep-alive\r\n\r\n"),
            "{request}"
        );
    }
}
