//! Forwarding to an upstream (`--upstream URL`), the pure part: the heads
//! the lab writes on each side of itself and the framing decisions they
//! carry, with no I/O (the engine in the worker owns the sockets, the
//! pool and the states).
//!
//! - [`request`]: the client's request head as the upstream gets it
//!   (origin-form target under the prefix, hop-by-hop fields dropped,
//!   `Host` kept, `X-Forwarded-For`/`-Proto`, the lab's query controls
//!   taken out, the body's framing said anew), or why it is refused.
//! - [`response`]: the upstream's response head, parsed for its framing
//!   and whether the upstream connection can be used again, then written
//!   for the client with the lab's own framing and keep-alive terms.
//!
//! The rules are RFC 9110 §7.6 (intermediaries) and RFC 9112 (framing,
//! §6.3), taken as nginx's `proxy_pass` and Caddy's `reverse_proxy` take
//! them; where the two differ, the module that chose says which it
//! followed and why.

mod fields;
pub mod request;
pub mod response;
mod target;

pub use request::{Forwarding, Refused, write_upstream_head};
pub use response::{
    BadResponse, ClientFraming, ClientHead, ClientSide, ResponseFraming, UpstreamHead,
    parse_upstream_head, write_client_head,
};
