//! Request targets (RFC 9112 §3.2) and host values (RFC 9110 §7.2, RFC
//! 3986 §3.2.2), checked against their grammar.
//!
//! A target takes one of four forms, each allowed where RFC 9112 allows it:
//!
//! | form | example | allowed |
//! |---|---|---|
//! | origin-form | `/path?query` | any method |
//! | absolute-form | `http://host:8080/path?query` | any method (`http`/`https` only) |
//! | authority-form | `host:443` | `CONNECT` only (refused: 405) |
//! | asterisk-form | `*` | `OPTIONS` only |
//!
//! Anything else (`abc`, `?x`, `ht"tp://h/`, `http://h:ffff1/`) is refused
//! with 400, as nginx does. A host is `uri-host [":" port]`: an IP literal
//! in brackets, or a reg-name of unreserved, percent-encoded and sub-delim
//! characters; a port is digits.
//!
//! Within a path and query we are as lenient as nginx and Node both are
//! (tests/target_conformance.rs holds the table): a `#fragment`, which no
//! client should send, is dropped before routing, as nginx does; `"`, `<`,
//! `>`, `` ` ``, `{`, `}`, `|`, `^`, `\`, `[`, `]` are answered. Control
//! bytes, spaces and a bad `%` escape in the path stay refused.

use super::RequestError;

/// What a well-formed target names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    /// A path with its query: origin-form, or the path of an absolute-form
    /// target (`/` when it has none).
    Path(&'a str),
    /// `*`, for `OPTIONS`.
    Asterisk,
    /// `host:port`, for `CONNECT`.
    Authority,
}

/// Classifies and checks `target`, sent with `method`.
pub fn parse_target<'a>(method: &str, target: &'a str) -> Result<Target<'a>, RequestError> {
    let bad = |why| Err(RequestError::Malformed(why));
    // A CONNECT is refused for its method (405) whatever it names; its
    // target only has to be well-formed: authority-form, as RFC 9110
    // wants, or any other form (`curl -X CONNECT http://h/` sends `/`,
    // which nginx also answers 405).
    if method == "CONNECT" && is_authority_form(target) {
        return Ok(Target::Authority);
    }
    // Dropped before anything else looks at the target, as nginx does (a
    // `#` ends the path or query: `/a#f?x` is `/a`).
    let target = match target.split_once('#') {
        Some((before, fragment)) if is_fragment(fragment) => before,
        Some(_) => return bad("invalid character in the request-target's fragment"),
        None => target,
    };
    if target == "*" {
        return if method == "OPTIONS" {
            Ok(Target::Asterisk)
        } else {
            bad("asterisk-form is only for OPTIONS")
        };
    }
    if target.starts_with('/') {
        return if is_path_and_query(target) {
            Ok(Target::Path(target))
        } else {
            bad("invalid character in request-target")
        };
    }
    absolute_form_path(target).map(Target::Path)
}

/// `scheme "://" authority path-abempty [ "?" query ]` with scheme `http`
/// or `https`, a non-empty host (RFC 9110 §4.2.1) and no userinfo (§4.2.4):
/// the path and query, or `/` when the path is empty.
fn absolute_form_path(target: &str) -> Result<&str, RequestError> {
    let bad = |why| Err(RequestError::Malformed(why));
    let Some((scheme, rest)) = target.split_once("://") else {
        return bad("request-target is in no known form");
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return bad("absolute-form target with a scheme other than http(s)");
    }
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    if authority.contains('@') {
        return bad("userinfo in the request-target");
    }
    if authority.is_empty() || !is_host_value(authority.as_bytes()) {
        return bad("invalid authority in the request-target");
    }
    match path {
        "" => Ok("/"),
        path if path.starts_with('?') && is_path_and_query(path) => Ok("/"),
        path if is_path_and_query(path) => Ok(path),
        _ => bad("invalid character in request-target"),
    }
}

/// `uri-host ":" port` with a non-empty host and port.
fn is_authority_form(target: &str) -> bool {
    let (host, port) = split_port(target.as_bytes());
    matches!(port, Some(port) if !port.is_empty())
        && !host.is_empty()
        && is_host_value(target.as_bytes())
}

/// A path and query by RFC 3986's characters (pchar, `/`, `?`, and a `%`
/// with two hex digits in the path), leniently also `" < > ` [ ] { } | ^ \`
/// and non-ASCII bytes, which real clients send unencoded and nginx and
/// Node accept. Refused: controls, spaces and `#` (split off before).
fn is_path_and_query(target: &str) -> bool {
    let bytes = target.as_bytes();
    let query_at = bytes.iter().position(|&b| b == b'?').unwrap_or(bytes.len());
    let (path, query) = bytes.split_at(query_at);
    path.iter().all(|&b| TARGET_BYTES[usize::from(b)])
        && is_pct_encoded_well(path)
        && query.iter().all(|&b| TARGET_BYTES[usize::from(b)])
}

/// What follows a `#`: the target's bytes, and more `#`s (nginx and Node
/// take `/a#f#g`).
fn is_fragment(fragment: &str) -> bool {
    fragment
        .bytes()
        .all(|b| b == b'#' || TARGET_BYTES[usize::from(b)])
}

/// A byte class as a table: `table[byte]` says whether `byte` is in it.
macro_rules! byte_table {
    ($class:ident) => {{
        let mut table = [false; 256];
        let mut byte = 0;
        while byte < 256 {
            table[byte] = $class(byte as u8);
            byte += 1;
        }
        table
    }};
}

/// [`is_target_byte`] for every byte value: one load per byte checked.
static TARGET_BYTES: [bool; 256] = byte_table!(is_target_byte);
/// The bytes of a reg-name: unreserved, sub-delims and `%`.
static REG_NAME_BYTES: [bool; 256] = byte_table!(is_reg_name_byte);

const fn is_reg_name_byte(byte: u8) -> bool {
    is_unreserved(byte) || is_sub_delim(byte) || byte == b'%'
}

const fn is_target_byte(byte: u8) -> bool {
    is_unreserved(byte)
        || is_sub_delim(byte)
        || matches!(
            byte,
            b':' | b'@'
                | b'/'
                | b'?'
                | b'%'
                | b'['
                | b']'
                | b'{'
                | b'}'
                | b'|'
                | b'^'
                | b'\\'
                | b'"'
                | b'<'
                | b'>'
                | b'`'
        )
        || byte >= 0x80
}

/// Every `%` is followed by two hex digits.
fn is_pct_encoded_well(bytes: &[u8]) -> bool {
    let mut at = 0;
    while let Some(offset) = bytes[at..].iter().position(|&b| b == b'%') {
        let percent = at + offset;
        match bytes.get(percent + 1..percent + 3) {
            Some(hex) if hex.iter().all(u8::is_ascii_hexdigit) => at = percent + 3,
            _ => return false,
        }
    }
    true
}

/// A `Host` field value or an authority: `uri-host [ ":" port ]`. The
/// whole value may be empty (a target without authority, RFC 9112 §3.2),
/// but a port needs a host before it (`:80` is refused, as nginx does).
pub fn is_host_value(value: &[u8]) -> bool {
    if value.is_empty() {
        return true;
    }
    if !value.starts_with(b"[") {
        // A reg-name (or IPv4 address) and maybe a port, in one pass: the
        // name runs to the first byte a reg-name cannot hold, which must
        // be the colon before the port.
        let name_len = value
            .iter()
            .position(|&b| !REG_NAME_BYTES[usize::from(b)])
            .unwrap_or(value.len());
        let (host, rest) = value.split_at(name_len);
        let port_ok = match rest.split_first() {
            None => true,
            Some((b':', port)) => port.iter().all(u8::is_ascii_digit),
            Some(_) => false,
        };
        return port_ok && !host.is_empty() && is_pct_encoded_well(host);
    }
    let (host, port) = split_port(value);
    let port_ok = port.is_none_or(|port| port.iter().all(u8::is_ascii_digit));
    port_ok && !host.is_empty() && is_uri_host(host)
}

/// Splits `host[:port]` after an IP literal's closing bracket or at the
/// first colon of a reg-name (which cannot hold one).
fn split_port(value: &[u8]) -> (&[u8], Option<&[u8]>) {
    let search_from = if value.starts_with(b"[") {
        value
            .iter()
            .position(|&b| b == b']')
            .map_or(value.len(), |at| at + 1)
    } else {
        0
    };
    match value[search_from..].iter().position(|&b| b == b':') {
        Some(at) => {
            let colon = search_from + at;
            (&value[..colon], Some(&value[colon + 1..]))
        }
        None => (value, None),
    }
}

/// `IP-literal / IPv4address / reg-name` (RFC 3986 §3.2.2). An IPv4
/// address is a reg-name by its characters, so it needs no case of its own.
fn is_uri_host(host: &[u8]) -> bool {
    if let Some(literal) = host.strip_prefix(b"[") {
        let Some(inside) = literal.strip_suffix(b"]") else {
            return false;
        };
        return is_ip_literal(inside);
    }
    host.iter().all(|&b| REG_NAME_BYTES[usize::from(b)]) && is_pct_encoded_well(host)
}

/// The inside of `[...]`: an IPv6 address by its characters (hex digits,
/// `:` and a dotted IPv4 tail), or `v` HEXDIG "." (IPvFuture).
fn is_ip_literal(inside: &[u8]) -> bool {
    if let Some(future) = inside
        .strip_prefix(b"v")
        .or_else(|| inside.strip_prefix(b"V"))
    {
        let Some(dot) = future.iter().position(|&b| b == b'.') else {
            return false;
        };
        let (version, rest) = future.split_at(dot);
        return !version.is_empty()
            && version.iter().all(u8::is_ascii_hexdigit)
            && rest.len() > 1
            && rest[1..]
                .iter()
                .all(|&b| is_unreserved(b) || is_sub_delim(b) || b == b':');
    }
    inside.contains(&b':')
        && inside
            .iter()
            .all(|&b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
}

const fn is_unreserved(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~')
}

const fn is_sub_delim(byte: u8) -> bool {
    matches!(
        byte,
        b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'='
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_four_forms() {
        assert_eq!(
            parse_target("GET", "/a/b?c=d"),
            Ok(Target::Path("/a/b?c=d"))
        );
        assert_eq!(
            parse_target("GET", "http://example.com:8080/delay/5?x"),
            Ok(Target::Path("/delay/5?x"))
        );
        assert_eq!(
            parse_target("GET", "HTTPS://example.com"),
            Ok(Target::Path("/"))
        );
        assert_eq!(
            parse_target("GET", "http://example.com?q"),
            Ok(Target::Path("/"))
        );
        assert_eq!(parse_target("OPTIONS", "*"), Ok(Target::Asterisk));
        assert_eq!(
            parse_target("CONNECT", "example.com:443"),
            Ok(Target::Authority)
        );
        assert_eq!(parse_target("CONNECT", "[::1]:443"), Ok(Target::Authority));
        assert_eq!(parse_target("CONNECT", "/"), Ok(Target::Path("/")));
    }

    #[test]
    fn targets_in_no_form_are_refused() {
        for (method, target) in [
            ("GET", "abc"),
            ("GET", "?x"),
            ("GET", "ht\"tp://h/"),
            ("GET", "http://h:ffff1/"),
            ("GET", "http:///path"),
            ("GET", "http://u@h/"),
            ("GET", "ftp://h/"),
            ("GET", "a:443"),
            ("GET", "*"),
            ("GET", "/a#fr ag"),
            ("GET", "/a#\u{1}"),
            ("GET", "/a%zz"),
            ("GET", "/a%4"),
            ("CONNECT", "example.com"),
            ("CONNECT", "example.com:"),
            ("CONNECT", ":443"),
        ] {
            assert!(
                matches!(
                    parse_target(method, target),
                    Err(RequestError::Malformed(_))
                ),
                "{method} {target}"
            );
        }
    }

    #[test]
    fn lenient_where_real_clients_are() {
        for target in [
            "/a|b",
            "/{x}",
            "/a^b",
            "/q?x=100%",
            "/caf\u{e9}",
            "/p?a=[1]",
            "/a\"b\"?q=\"x\"",
            "/a<b>",
            "/a`b",
        ] {
            assert!(parse_target("GET", target).is_ok(), "{target}");
        }
    }

    #[test]
    fn a_fragment_is_dropped_before_routing() {
        for (target, path) in [
            ("/forums/1?page=1#posts-17408", "/forums/1?page=1"),
            ("/a#f?x", "/a"),
            ("/a#f#g", "/a"),
            ("/#", "/"),
            ("http://h/p#f", "/p"),
        ] {
            assert_eq!(parse_target("GET", target), Ok(Target::Path(path)));
        }
    }

    #[test]
    fn host_values() {
        for good in [
            "",
            "a",
            "a.example:8080",
            "a.example:",
            "10.0.0.1",
            "[::1]",
            "[::1]:80",
            "[::ffff:10.0.0.1]:80",
            "[v1.fe]",
            "xn--d-1ga.example",
            "a%2Db",
        ] {
            assert!(is_host_value(good.as_bytes()), "{good:?}");
        }
        for bad in [
            ":a", ":80", "a:b", "a:80:80", "a b", "a/b", "u@a", "a?b", "a#b", "a\"b", "[::1",
            "[zz]", "[::1]x", "a%zz", "[]",
        ] {
            assert!(!is_host_value(bad.as_bytes()), "{bad:?}");
        }
    }
}
