//! Request methods as the metrics count them: the registered methods a
//! client is likely to send, and one class for everything else (so a
//! client cannot grow the label set).

/// A request method, or `Other`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Method {
    #[default]
    Get,
    Head,
    Post,
    Put,
    Delete,
    Patch,
    Options,
    /// Any other token, and requests refused before their method was read.
    Other,
}

impl Method {
    pub const ALL: [Method; 8] = [
        Method::Get,
        Method::Head,
        Method::Post,
        Method::Put,
        Method::Delete,
        Method::Patch,
        Method::Options,
        Method::Other,
    ];

    /// Classifies a method token (case-sensitive, RFC 9110 §9.1).
    pub fn of(token: &str) -> Method {
        match token {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "PATCH" => Method::Patch,
            "OPTIONS" => Method::Options,
            _ => Method::Other,
        }
    }

    /// The metrics label.
    pub fn label(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
            Method::Patch => "PATCH",
            Method::Options => "OPTIONS",
            Method::Other => "other",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_tokens_have_their_class_and_the_rest_are_other() {
        assert_eq!(Method::of("GET"), Method::Get);
        assert_eq!(Method::of("PATCH"), Method::Patch);
        assert_eq!(
            Method::of("get"),
            Method::Other,
            "methods are case-sensitive"
        );
        assert_eq!(Method::of("BREW"), Method::Other);
        for (i, method) in Method::ALL.iter().enumerate() {
            assert_eq!(method.index(), i);
        }
    }
}
