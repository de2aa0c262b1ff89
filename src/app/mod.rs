//! What this server answers, apart from how HTTP/1.1 carries it: the
//! demonstration routes ([`routes`]), the filler `/bytes` sends
//! ([`filler`]), and the terms each response sets for its connection
//! (keep-alive, the request limit).
//!
//! The exchange in `session` asks once per request head, with a
//! [`Request`] (method and target): the answer is a [`Plan`], a small
//! value it keeps while the body arrives. The plan says what the route
//! wants of the body ([`Plan::keeps_body`]), whether the answer waits
//! ([`Plan::wait_ms`]), the connection's [`Terms`] for the response head,
//! and the answer: once the body is in, a [`Reply`] (status, content type
//! and a [`BodySource`]); or, when a kept body outgrows what is gathered,
//! the head of a reply that passes the body through as it arrives. Per-request choices that shape the response head sit
//! here, beside routing, never in the state machine.

pub mod filler;
pub mod routes;

use crate::config::Settings;
use crate::http::Status;
use crate::http::response::Persistence;
use crate::http::{Method, RequestHead};
use routes::Route;

const HELLO: &[u8] = b"Hello, World!";

/// A request as the application sees it, once its head is in.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub head: &'a RequestHead<'a>,
    /// Responses already queued on this connection.
    pub served: u32,
    /// The server is shutting down: no new persistence.
    pub draining: bool,
}

/// The application's decision on one request, made when its head arrives
/// and kept (it borrows nothing) until the response is queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    route: Route,
    pub method: Method,
    pub is_head: bool,
    pub terms: Terms,
}

/// What the response head says about the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Terms {
    pub persistence: Persistence,
    /// Requests the connection will take after this one, when
    /// `--max-requests-per-socket` limits them (`Keep-Alive: max=N`).
    pub requests_left: Option<u32>,
}

impl Terms {
    /// The `Connection: keep-alive` and `Keep-Alive` fields a persistent
    /// response carries (without their final CRLF).
    pub fn keep_alive_header(self, settings: &Settings) -> &[u8] {
        &settings.keep_alive_header
    }

    /// Terms decided before shutdown began do not persist: a draining
    /// server keeps nothing.
    pub fn when_draining(self, draining: bool) -> Terms {
        if draining {
            Terms {
                persistence: Persistence::Close,
                ..self
            }
        } else {
            self
        }
    }
}

/// What a response's body is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodySource<'a> {
    /// These bytes, whole.
    Bytes(&'a [u8]),
    /// This many bytes of [`filler`], generated as the output drains.
    Filler(u64),
}

/// What a response head says about the response itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyHead {
    pub status: Status,
    pub content_type: &'static str,
}

/// A route's answer to a request received whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply<'a> {
    pub head: ReplyHead,
    pub body: BodySource<'a>,
}

impl Plan {
    /// Routes `request` and decides its terms.
    pub fn of(request: Request<'_>, settings: &Settings) -> Plan {
        let head = request.head;
        Plan {
            route: Route::of_target(head.target),
            method: head.method,
            is_head: head.is_head,
            terms: terms(head, request.served, settings, request.draining),
        }
    }

    /// The route wants the body (the echo at `/`), gathered while it is
    /// short; a longer one is passed through ([`Plan::streamed_reply`]).
    /// Other routes ignore it: it is read and dropped.
    pub fn keeps_body(self) -> bool {
        self.route == Route::Root
    }

    /// The answer waits this long once the request is in (`/delay`).
    pub fn wait_ms(self) -> Option<u64> {
        match self.route {
            Route::Delay { ms } => Some(ms),
            _ => None,
        }
    }

    /// The answer once the request is in; `body` holds what was kept of
    /// its body (see [`Plan::keeps_body`]) and may be reused to build it.
    pub fn reply<'b>(self, body: &'b mut Vec<u8>, settings: &Settings) -> Reply<'b> {
        let (status, content_type, body) = match self.route {
            Route::Root if body.is_empty() => (Status::Ok, "text/plain", BodySource::Bytes(HELLO)),
            Route::Bytes { n } if n <= settings.max_body_size as u64 => (
                Status::Ok,
                "application/octet-stream",
                BodySource::Filler(n),
            ),
            Route::Root => (
                Status::Ok,
                "application/octet-stream",
                BodySource::Bytes(body),
            ),
            Route::Delay { ms } => {
                body.clear();
                body.extend_from_slice(b"delayed ");
                crate::http::response::push_decimal(body, ms);
                body.extend_from_slice(b"ms\n");
                (Status::Ok, "text/plain", BodySource::Bytes(body))
            }
            Route::Asterisk => (Status::Ok, "text/plain", BodySource::Bytes(b"")),
            Route::Bytes { .. } | Route::NotFound => (
                Status::NotFound,
                "text/plain",
                BodySource::Bytes(Status::NotFound.reason_line()),
            ),
        };
        Reply {
            head: ReplyHead {
                status,
                content_type,
            },
            body,
        }
    }

    /// The answer when a kept body outgrows what is gathered: the echo,
    /// whose body is the request's own, passed through as it arrives.
    pub fn streamed_reply(self) -> ReplyHead {
        ReplyHead {
            status: Status::Ok,
            content_type: "application/octet-stream",
        }
    }
}

/// The keep-alive decision, in one place.
fn terms(head: &RequestHead<'_>, served: u32, settings: &Settings, draining: bool) -> Terms {
    let limit = settings.max_requests_per_socket;
    let allowed = settings.keep_alive_advertised_secs.is_some()
        && !draining
        && (limit == 0 || served + 1 < limit)
        && head.wants_persistence();
    Terms {
        persistence: if allowed {
            Persistence::KeepAlive
        } else {
            Persistence::Close
        },
        requests_left: (limit > 0).then(|| limit.saturating_sub(served + 1)),
    }
}
