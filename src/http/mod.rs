//! HTTP/1.0–1.1 message handling, free of I/O: parsing request heads
//! ([`request`]) and checking their targets and hosts ([`target`]), decoding
//! request bodies ([`body`]) and encoding response heads ([`response`]);
//! what to answer is the application's (`crate::app`). Every way a
//! request can be refused is one [`RequestError`], mapped to its status in
//! one place.

pub mod body;
pub mod method;
pub mod request;
pub mod response;
pub mod target;

pub use body::{BodyDecoder, BodyProgress};
pub use method::Method;
pub use request::{Framing, HeadLimits, RequestHead, parse_head};
pub use response::Status;

/// Why a request is refused. Each is answered with [`RequestError::status`]
/// and `Connection: close`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestError {
    /// Syntax the grammar does not allow, or framing that is ambiguous.
    Malformed(&'static str),
    /// The head did not fit in `--max-header-size`.
    HeadTooLarge,
    /// The request line alone did not fit in `--max-header-size`.
    TargetTooLong,
    /// More header fields than `--max-headers`.
    TooManyHeaders,
    /// The body is over `--max-body-size`.
    BodyTooLarge,
    /// Chunked framing (size lines, extensions) past its bounds.
    BodyFramingTooLarge(&'static str),
    /// A chunked body's trailer section over `--max-header-size`.
    TrailersTooLarge,
    /// A method this server does not serve (CONNECT: it is not a proxy).
    MethodNotAllowed,
    /// A transfer coding other than a final `chunked`.
    UnsupportedTransferCoding,
    /// An HTTP major version other than 1.
    UnsupportedVersion,
    /// An `Expect` other than `100-continue`.
    ExpectationFailed,
}

impl RequestError {
    /// The one place a refusal becomes a status code.
    pub fn status(self) -> Status {
        match self {
            RequestError::Malformed(_) => Status::BadRequest,
            RequestError::HeadTooLarge
            | RequestError::TooManyHeaders
            | RequestError::TrailersTooLarge => Status::RequestHeaderFieldsTooLarge,
            RequestError::TargetTooLong => Status::UriTooLong,
            RequestError::BodyTooLarge | RequestError::BodyFramingTooLarge(_) => {
                Status::ContentTooLarge
            }
            RequestError::MethodNotAllowed => Status::MethodNotAllowed,
            RequestError::UnsupportedTransferCoding => Status::NotImplemented,
            RequestError::UnsupportedVersion => Status::HttpVersionNotSupported,
            RequestError::ExpectationFailed => Status::ExpectationFailed,
        }
    }
}
