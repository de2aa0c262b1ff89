//! The demonstration routes: what a request target asks for.

/// The longest `/delay/<ms>` honoured: ten minutes.
pub const MAX_DELAY_MS: u64 = 600_000;

/// What a request target names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `/`: hello for a bodiless request, echo of the body otherwise.
    Root,
    /// `/delay/<ms>`: answered after a ref'd timer.
    Delay { ms: u64 },
    /// `*` (asterisk-form, for `OPTIONS *`).
    Asterisk,
    /// Anything else: 404.
    NotFound,
}

impl Route {
    /// Routes a request target in origin-form (`/p?q`), absolute-form
    /// (`http://host/p?q`) or asterisk-form (`*`).
    pub fn of_target(target: &str) -> Route {
        if target == "*" {
            return Route::Asterisk;
        }
        let path = path_of(target);
        let path = path.split_once('?').map_or(path, |(path, _query)| path);
        if path == "/" {
            return Route::Root;
        }
        match path.strip_prefix("/delay/").map(parse_delay) {
            Some(Some(ms)) => Route::Delay { ms },
            _ => Route::NotFound,
        }
    }
}

/// The path of an absolute-form target (`http://host:port/path` → `/path`),
/// or the target itself.
fn path_of(target: &str) -> &str {
    let Some(scheme_end) = target.find("://") else {
        return target;
    };
    let after_authority = &target[scheme_end + 3..];
    match after_authority.find(['/', '?']) {
        Some(at) if after_authority[at..].starts_with('/') => &after_authority[at..],
        _ => "/", // an empty path is "/" (RFC 9112 §3.2.2)
    }
}

fn parse_delay(digits: &str) -> Option<u64> {
    if digits.is_empty() || digits.len() > 9 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|ms| *ms <= MAX_DELAY_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_by_path() {
        assert_eq!(Route::of_target("/"), Route::Root);
        assert_eq!(Route::of_target("/?a=1"), Route::Root);
        assert_eq!(Route::of_target("/delay/250"), Route::Delay { ms: 250 });
        assert_eq!(Route::of_target("/delay/250?x"), Route::Delay { ms: 250 });
        assert_eq!(Route::of_target("/delay/"), Route::NotFound);
        assert_eq!(Route::of_target("/delay/-1"), Route::NotFound);
        assert_eq!(Route::of_target("/delay/600001"), Route::NotFound);
        assert_eq!(Route::of_target("/nope"), Route::NotFound);
        assert_eq!(Route::of_target("*"), Route::Asterisk);
    }

    #[test]
    fn absolute_form_uses_its_path() {
        assert_eq!(Route::of_target("http://example.com/"), Route::Root);
        assert_eq!(Route::of_target("http://example.com"), Route::Root);
        assert_eq!(
            Route::of_target("http://example.com:8080/delay/5"),
            Route::Delay { ms: 5 }
        );
        assert_eq!(Route::of_target("http://example.com/x"), Route::NotFound);
    }
}
