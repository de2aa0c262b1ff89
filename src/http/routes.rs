//! The demonstration routes: what a request target asks for.

use super::target::Target;

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
        match path.strip_prefix("/delay/").map(parse_delay) {
            Some(Some(ms)) => Route::Delay { ms },
            _ => Route::NotFound,
        }
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
        assert_eq!(route("/nope"), Route::NotFound);
        assert_eq!(Route::of_target(Target::Asterisk), Route::Asterisk);
    }
}
