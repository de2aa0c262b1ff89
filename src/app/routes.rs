//! The demonstration routes: what a request target asks for.

use crate::http::target::Target;

/// The longest `/delay/<ms>` honoured: ten minutes.
pub const MAX_DELAY_MS: u64 = 600_000;

/// What a request target names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `/`: hello for a bodiless request, echo of the body otherwise.
    Root,
    /// `/delay/<ms>`: answered after a ref'd timer.
    Delay { ms: u64 },
    /// `/bytes/<n>`: n bytes of filler, for sweeping response sizes (up
    /// to `--max-body-size`; beyond it, 404).
    Bytes { n: u64 },
    /// `*` (asterisk-form, for `OPTIONS *`).
    Asterisk,
    /// Anything else: 404.
    NotFound,
}

impl Route {
    /// Routes a checked request target (see [`Target`]).
    pub fn of_target(target: Target<'_>) -> Route {
        let path = match target {
            Target::Asterisk => return Route::Asterisk,
            Target::Authority => return Route::NotFound,
            Target::Path(path) => path,
        };
        let path = path.split_once('?').map_or(path, |(path, _query)| path);
        if path == "/" {
            return Route::Root;
        }
        if let Some(digits) = path.strip_prefix("/delay/") {
            return match parse_number(digits, 9) {
                Some(ms) if ms <= MAX_DELAY_MS => Route::Delay { ms },
                _ => Route::NotFound,
            };
        }
        match path
            .strip_prefix("/bytes/")
            .and_then(|n| parse_number(n, 15))
        {
            Some(n) => Route::Bytes { n },
            None => Route::NotFound,
        }
    }
}

/// A decimal of at most `max_digits` digits (no sign, no spaces).
fn parse_number(digits: &str, max_digits: usize) -> Option<u64> {
    if digits.is_empty() || digits.len() > max_digits || !digits.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(path: &str) -> Route {
        Route::of_target(Target::Path(path))
    }

    #[test]
    fn routes_by_path() {
        assert_eq!(route("/"), Route::Root);
        assert_eq!(route("/?a=1"), Route::Root);
        assert_eq!(route("/delay/250"), Route::Delay { ms: 250 });
        assert_eq!(route("/delay/250?x"), Route::Delay { ms: 250 });
        assert_eq!(route("/delay/"), Route::NotFound);
        assert_eq!(route("/delay/-1"), Route::NotFound);
        assert_eq!(route("/delay/600001"), Route::NotFound);
        assert_eq!(route("/bytes/0"), Route::Bytes { n: 0 });
        assert_eq!(route("/bytes/16384?x"), Route::Bytes { n: 16384 });
        assert_eq!(route("/bytes/"), Route::NotFound);
        assert_eq!(route("/bytes/1k"), Route::NotFound);
        assert_eq!(route("/bytes/1234567890123456"), Route::NotFound);
        assert_eq!(route("/nope"), Route::NotFound);
        assert_eq!(Route::of_target(Target::Asterisk), Route::Asterisk);
    }
}
