//! What this server answers, apart from how HTTP/1.1 carries it: the
//! demonstration routes ([`routes`]), the filler `/bytes` sends
//! ([`filler`]), and the terms each response sets for its connection
//! (keep-alive, the request limit).
//!
//! The exchange in `session` asks once per request head, with a
//! [`Request`] (method and target): the answer is a [`Plan`], a small
//! value it keeps while the body arrives. The plan says what the route
//! wants of the body ([`Plan::keeps_body`]), whether the answer waits
//! ([`Plan::waits`]: on a `/delay` timer, or on an admin round), the
//! connection's [`Terms`] for the response head, and the answer: once the
//! body is in, a [`Reply`] (status, content type and a [`BodySource`]);
//! or, when a kept body outgrows what is gathered, the head of a reply
//! that passes the body through as it arrives.
//!
//! A worker serves one application: these demonstration routes, or, on
//! the admin listener's worker, the admin's (`crate::admin::service`,
//! planned with [`Plan::admin`]), or, with `--upstream`, the service it
//! forwards to ([`Plan::forwards`]: the session relays its answer, and
//! the query controls still set the client connection's terms): the plan
//! holds which, so a request on the main listener pays one branch for it.
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

use crate::admin::rounds::RoundId;
use crate::admin::service::{Answer, Service as AdminService};
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
    route: Routed,
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

/// What an answer waits on once its request is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    Nothing,
    /// A timer of this many ms (`/delay`).
    Ms(u64),
    /// The end of this admin snapshot round, woken by the worker.
    Round(RoundId),
    /// The upstream's answer (`--upstream`).
    Upstream,
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
    /// The opening of a body that runs until the close, fed as it goes
    /// (the admin's event stream; for HEAD, its head alone).
    Stream(&'a [u8]),
}

/// What a response head says about the response itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyHead {
    pub status: Status,
    pub content_type: &'static str,
    /// Header lines of its own, each ending in CRLF (see
    /// [`crate::http::response::ResponseHead::extra`]); the demonstration
    /// routes have none.
    pub extra: &'static [u8],
}

/// Which application a worker serves: the demonstration routes (the main
/// listener), or the admin's (`--admin`). Chosen per worker, so the main
/// listener's requests pay one branch on it, nothing more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Routed {
    Demo(Route),
    Admin(Answer),
    /// Forwarded to the upstream (`--upstream`): the demo routes are off.
    Forward,
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
        let route = match settings.upstream {
            Some(_) => Routed::Forward,
            None => Routed::Demo(Route::of_target(head.target)),
        };
        Ok(Plan {
            route,
            method: head.method,
            is_head: head.is_head,
            terms: terms(&request, settings),
            kept_on: request.kept_on,
        })
    }

    /// The plan for an admin request, answered `answer` by the admin's
    /// routes (`admin::service`); its terms as any request's (the admin's
    /// settings keep nothing alive: `Connection: close`).
    pub fn admin(request: Request<'_>, answer: Answer, settings: &Settings) -> Plan {
        Plan {
            route: Routed::Admin(answer),
            method: request.head.method,
            is_head: request.head.is_head,
            terms: terms(&request, settings),
            kept_on: request.kept_on,
        }
    }

    /// The admin's answer, when this is an admin request.
    pub fn admin_answer(self) -> Option<Answer> {
        match self.route {
            Routed::Admin(answer) => Some(answer),
            Routed::Demo(_) | Routed::Forward => None,
        }
    }

    /// The request is forwarded to the upstream (`--upstream`).
    pub fn forwards(self) -> bool {
        self.route == Routed::Forward
    }

    /// What the answer waits on once the request is in, if anything.
    pub fn waits(self) -> Wait {
        match self.route {
            Routed::Demo(Route::Delay { ms }) => Wait::Ms(ms),
            Routed::Admin(Answer::AfterRound { round, .. }) => Wait::Round(round),
            Routed::Forward => Wait::Upstream,
            _ => Wait::Nothing,
        }
    }

    /// The route wants the body (the echo at `/`), gathered while it is
    /// short; a longer one is passed through ([`Plan::streamed_reply`]).
    /// Other routes ignore it: it is read and dropped.
    pub fn keeps_body(self) -> bool {
        self.route == Routed::Demo(Route::Root)
    }

    /// The answer once the request is in; `body` holds what was kept of
    /// its body (see [`Plan::keeps_body`]) and may be reused to build it.
    /// An admin answer is the admin's `service`, when the worker has one.
    pub fn reply<'b>(
        self,
        body: &'b mut Vec<u8>,
        settings: &Settings,
        admin: Option<&AdminService>,
    ) -> Reply<'b> {
        let route = match (self.route, admin) {
            (Routed::Demo(route), _) => route,
            (Routed::Admin(answer), Some(admin)) => {
                let (head, body) = admin.reply(answer, body);
                return Reply { head, body };
            }
            (Routed::Admin(_), None) | (Routed::Forward, _) => Route::NotFound,
        };
        let (status, content_type, body) = match route {
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
                extra: b"",
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
            extra: b"",
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
