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
//! the head of a reply that passes the body through as it arrives.
//!
//! Per-request choices that shape the response and the connection sit
//! here, beside routing, never in the state machine: among them the
//! query controls a test uses to set how its connection is kept
//! ([`controls`]: `ka=`, `advertise=`, `close=`, `after=`, `max=`). What
//! they set outlives the request: the plan carries the terms the
//! connection is kept on from then on ([`KeepTerms`]), which the session
//! holds and the connection's timers and idle close follow.

pub mod controls;
pub mod filler;
pub mod keep_terms;
pub mod routes;

use crate::config::Settings;
use crate::http::Status;
use crate::http::response::Persistence;
use crate::http::target::Target;
use crate::http::{Method, RequestHead};
use controls::{After, BadControl, Controls, parse_controls};
use keep_terms::{AdvertiseOverride, KeepTerms};
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
    /// The terms the connection was kept on before this request.
    pub kept_on: KeepTerms,
}

/// The application's decision on one request, made when its head arrives
/// and kept (it borrows nothing) until the response is queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    route: Route,
    pub method: Method,
    pub is_head: bool,
    pub terms: Terms,
    /// The terms the connection is kept on from this request on (what its
    /// controls changed, or as before).
    pub kept_on: KeepTerms,
}

/// What the response head says about the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Terms {
    pub persistence: Persistence,
    /// Requests the connection will take after this one, when
    /// `--max-requests-per-socket` or a `max=` control limits them
    /// (`Keep-Alive: max=N`).
    pub requests_left: Option<u32>,
    /// What `Keep-Alive: timeout=` says, when an `advertise=` control
    /// changed it.
    pub advertise: Option<AdvertiseOverride>,
}

/// Room for a `Keep-Alive` field an `advertise=` control asked for.
pub type KeepAliveScratch = [u8; 64];

impl Terms {
    /// The terms of an error response: `Connection: close`.
    pub const CLOSE: Terms = Terms {
        persistence: Persistence::Close,
        requests_left: None,
        advertise: None,
    };

    /// The `Connection: keep-alive` and `Keep-Alive` fields a persistent
    /// response carries (without their final CRLF): the server's own, or
    /// what an `advertise=` control set, written into `scratch`.
    pub fn keep_alive_header<'a>(
        self,
        settings: &'a Settings,
        scratch: &'a mut KeepAliveScratch,
    ) -> &'a [u8] {
        use std::io::Write as _;
        let mut out = std::io::Cursor::new(&mut scratch[..]);
        match self.advertise {
            None => return &settings.keep_alive_header,
            Some(AdvertiseOverride::Nothing) => {
                let _ = out.write_all(b"Connection: keep-alive");
            }
            Some(AdvertiseOverride::Secs(secs)) => {
                let _ = write!(out, "Connection: keep-alive\r\nKeep-Alive: timeout={secs}");
            }
        }
        let written = out.position() as usize;
        &scratch[..written]
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
    /// Routes `request` and decides its terms, taking in its controls
    /// (when the server obeys them); a control with a bad value refuses
    /// the request.
    pub fn of(mut request: Request<'_>, settings: &Settings) -> Result<Plan, BadControl> {
        let head = request.head;
        let controls = read_controls(head, settings)?;
        if !controls.is_empty() {
            request.kept_on.apply(controls, request.served);
        }
        Ok(Plan {
            route: Route::of_target(head.target),
            method: head.method,
            is_head: head.is_head,
            terms: terms(&request, settings),
            kept_on: request.kept_on,
        })
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

/// The test controls in a request's query, when the server obeys them
/// (`--test-controls`); none otherwise.
fn read_controls(head: &RequestHead<'_>, settings: &Settings) -> Result<Controls, BadControl> {
    match head.target {
        Target::Path(path) if settings.test_controls => parse_controls(path),
        _ => Ok(Controls::default()),
    }
}

/// The keep-alive decision, in one place.
fn terms(request: &Request<'_>, settings: &Settings) -> Terms {
    let request_number = request.served.wrapping_add(1);
    let limit = settings.max_requests_per_socket;
    let by_settings = (limit > 0).then(|| limit.saturating_sub(request_number));
    let controls = request.kept_on;
    let requests_left = match (by_settings, controls.requests_left_after(request_number)) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let allowed = settings.keep_alive
        && !request.draining
        && requests_left != Some(0)
        && controls.after() != After::Close
        && request.head.wants_persistence();
    let advertise = controls.advertise_override();
    Terms {
        persistence: if allowed {
            Persistence::KeepAlive
        } else {
            Persistence::Close
        },
        // No Keep-Alive field, no max= in it.
        requests_left: requests_left.filter(|_| match advertise {
            Some(AdvertiseOverride::Nothing) => false,
            Some(AdvertiseOverride::Secs(_)) => true,
            None => settings.keep_alive_advertised_secs.is_some(),
        }),
        advertise,
    }
}
