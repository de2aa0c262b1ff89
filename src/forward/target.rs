//! The target a forwarded request is sent with: origin-form (RFC 9112
//! §3.2.1) under the upstream's path prefix, without the lab's query
//! controls, which are the lab's and not the service's.
//!
//! `/a?x=1&ka=5s&y=2` goes as `/a?x=1&y=2` and `/a?ka=5s` as `/a`; other
//! parameters keep their order and bytes. An absolute-form target
//! (`http://host/a?x`) loses its scheme and authority (the authority
//! becomes the `Host`, see [`absolute_form_authority`]); a fragment,
//! which no client should send, is not forwarded.

use crate::app::controls;

/// Appends the origin-form of `raw_target` (as the request line had it,
/// already checked by `http::target`) under `prefix`, without the
/// controls when `strip_controls`.
pub(super) fn push_origin_form(
    out: &mut Vec<u8>,
    raw_target: &str,
    prefix: &str,
    strip_controls: bool,
) {
    let target = raw_target.split_once('#').map_or(raw_target, |(t, _)| t);
    if target == "*" {
        // OPTIONS * asks about the server, not a resource under the prefix.
        out.push(b'*');
        return;
    }
    let path_and_query = match absolute_form_parts(target) {
        Some((_, path_and_query)) => path_and_query,
        None => target,
    };
    let (path, query) = match path_and_query.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (path_and_query, None),
    };
    let prefix = prefix.trim_end_matches('/');
    out.extend_from_slice(prefix.as_bytes());
    if path.is_empty() {
        out.push(b'/');
    }
    out.extend_from_slice(path.as_bytes());
    match query {
        Some(query) if strip_controls => push_query_without_controls(out, query),
        Some(query) => {
            out.push(b'?');
            out.extend_from_slice(query.as_bytes());
        }
        None => {}
    }
}

/// The authority of an absolute-form target (`http://host:8080/a` gives
/// `host:8080`), which RFC 9112 §3.2.2 makes the forwarded `Host`.
pub(super) fn absolute_form_authority(raw_target: &str) -> Option<&str> {
    absolute_form_parts(raw_target).map(|(authority, _)| authority)
}

/// An absolute-form target's authority and the rest (path and query,
/// perhaps empty); `None` for any other form.
fn absolute_form_parts(target: &str) -> Option<(&str, &str)> {
    if target.starts_with('/') || target == "*" {
        return None;
    }
    let (_scheme, rest) = target.split_once("://")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    Some(rest.split_at(end))
}

/// Appends `?query` without the control parameters, or nothing when none
/// is left. A query with no control is kept byte for byte (`/a?` too).
fn push_query_without_controls(out: &mut Vec<u8>, query: &str) {
    if !query.split('&').any(is_control) {
        out.push(b'?');
        out.extend_from_slice(query.as_bytes());
        return;
    }
    let mut separator = b'?';
    for pair in query.split('&').filter(|pair| !is_control(pair)) {
        out.push(separator);
        out.extend_from_slice(pair.as_bytes());
        separator = b'&';
    }
}

/// Whether a query's `name=value` pair is one of the lab's controls.
fn is_control(pair: &str) -> bool {
    let name = pair.split_once('=').map_or(pair, |(name, _)| name);
    controls::NAMES.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin_form(target: &str, prefix: &str) -> String {
        let mut out = Vec::new();
        push_origin_form(&mut out, target, prefix, true);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn controls_leave_the_query_and_the_rest_keeps_its_order() {
        let cases = [
            ("/a?x=1&ka=5s&y=2", "/a?x=1&y=2"),
            ("/a?ka=5s", "/a"),
            ("/a?ka=5s&advertise=none&close=rst&after=close&max=3", "/a"),
            ("/a?max=3&z", "/a?z"),
            ("/a?x=1&&y=2", "/a?x=1&&y=2"),
            ("/a?kab=1&xka=2&KA=3", "/a?kab=1&xka=2&KA=3"),
            ("/a?", "/a?"),
            ("/a?ka=1s&", "/a?"),
            ("/a", "/a"),
            ("/", "/"),
        ];
        for (target, forwarded) in cases {
            assert_eq!(origin_form(target, ""), forwarded, "{target}");
        }
    }

    #[test]
    fn controls_stay_when_the_lab_does_not_obey_them() {
        let mut out = Vec::new();
        push_origin_form(&mut out, "/a?max=10&ka=1s", "", false);
        assert_eq!(out, b"/a?max=10&ka=1s");
    }

    #[test]
    fn absolute_form_becomes_origin_form() {
        let cases = [
            ("http://h:8080/a?x=1", "/a?x=1"),
            ("http://h", "/"),
            ("HTTPS://h?x=1&ka=1s", "/?x=1"),
            ("http://[::1]:80/p/q", "/p/q"),
            ("/a#frag", "/a"),
            ("/a?x#f?ka=1", "/a?x"),
        ];
        for (target, forwarded) in cases {
            assert_eq!(origin_form(target, ""), forwarded, "{target}");
        }
        assert_eq!(absolute_form_authority("http://h:8080/a"), Some("h:8080"));
        assert_eq!(absolute_form_authority("http://h?x"), Some("h"));
        assert_eq!(absolute_form_authority("/a://b"), None);
        assert_eq!(absolute_form_authority("*"), None);
    }

    #[test]
    fn the_prefix_goes_before_the_path_with_one_slash() {
        assert_eq!(origin_form("/a?x=1&ka=1s", "/api"), "/api/a?x=1");
        assert_eq!(origin_form("/a", "/api/"), "/api/a");
        assert_eq!(origin_form("/", "/api"), "/api/");
        assert_eq!(origin_form("http://h?x", "/api"), "/api/?x");
        assert_eq!(origin_form("/a", "/"), "/a");
        assert_eq!(origin_form("*", "/api"), "*");
    }
}
