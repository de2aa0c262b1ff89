//! What the admin listener answers, apart from how its connections carry
//! it: each request's [`Answer`] (a page or a refusal, a figure after a
//! snapshot round, or the event stream), the rounds and dashboard ticks
//! that feed them, and what a finished round renders.
//!
//! The admin listener runs on the server's own worker, connection and
//! session core (`worker::admin`); this is its application, as `app` is
//! the main listener's: the session asks it for an [`Answer`] once per
//! request head ([`Service::plan`]) and for the reply once the request is
//! in, or once the round it waits on has ended ([`Service::reply`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use mio::Waker;

use super::http::{self, Route};
use super::rounds::{Finished, RoundId, Rounds};
use super::view::{View, peers_report};
use super::{AdminTimer, metrics, page};
use crate::app::{BodySource, ReplyHead};
use crate::http::target::Target;
use crate::http::{Method, Status};
use crate::shared::Remote;
use crate::timer_event::TimerEvent;
use crate::timers::{Micros, TimerId, TimerLists};

/// Header lines every admin response carries: nothing of it is cached,
/// and its content types are taken as said.
const FIELDS: &[u8] = b"Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n";
/// The same, for a page, under its Content-Security-Policy.
const PAGE_FIELDS: &[u8] = b"Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n\
    Content-Security-Policy: default-src 'self'\r\n";
/// The same, for a 405: the methods the admin answers.
const NOT_ALLOWED_FIELDS: &[u8] =
    b"Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nAllow: GET, HEAD\r\n";
/// The event stream's first words: how soon a browser reconnects.
const STREAM_OPENING: &[u8] = b"retry: 2000\n\n";

/// What a request gets: a small value the session keeps until it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// A page, the health check or a refusal, rendered when the request is in.
    Now(Route),
    /// A method other than GET and HEAD (405, naming those two).
    NotAllowed,
    /// A figure that needs every worker's: answered when round `round`
    /// ends.
    AfterRound { round: RoundId, route: Route },
    /// The event stream: its opening, then a frame per tick of
    /// `interval_ms`, the first from round `round`. The viewer is counted
    /// until [`Service::unsubscribe`].
    Stream { interval_ms: u64, round: RoundId },
}

/// What the requests waiting on a round want rendered from it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Wanted {
    /// The view's JSON (`/timers`, and the stream's frames).
    pub view: bool,
    pub metrics: bool,
    pub peers: bool,
}

/// A finished round, rendered once for everyone who waited for it.
#[derive(Default)]
struct Delivery {
    metrics: Option<String>,
    peers: Option<Vec<u8>>,
    json: Option<Vec<u8>>,
}

/// Viewers on one push interval and their shared tick.
struct Tick {
    viewers: usize,
    timer: TimerId,
}

/// The admin's routes, rounds and dashboard ticks.
pub struct Service {
    remote: Remote,
    rounds: Rounds,
    /// Push interval (ms) -> its viewers' tick.
    ticks: BTreeMap<u64, Tick>,
    /// The last round's rendering, for the answers that waited on it.
    delivered: Delivery,
}

impl Service {
    /// Workers answer rounds by waking `reply_to`.
    pub fn new(remote: Remote, reply_to: Arc<Waker>) -> Self {
        Service {
            remote,
            rounds: Rounds::new(reply_to),
            ticks: BTreeMap::new(),
            delivered: Delivery::default(),
        }
    }

    /// Answers a request head: what it names, and for a figure or the
    /// stream, the round it waits on (started or shared).
    pub fn plan(
        &mut self,
        method: Method,
        target: Target<'_>,
        timers: &mut TimerLists<TimerEvent>,
        now: Micros,
    ) -> Answer {
        if !matches!(method, Method::Get | Method::Head) {
            return Answer::NotAllowed;
        }
        let route = match target {
            Target::Path(target) => http::route(target),
            Target::Asterisk | Target::Authority => Route::NotFound,
        };
        match route {
            Route::Metrics | Route::Timers | Route::Peers => {
                let round = self.rounds.fresh(&self.remote, timers, now);
                Answer::AfterRound { round, route }
            }
            // A HEAD of the stream is its head alone, at once.
            Route::Events { .. } if method == Method::Head => Answer::Now(route),
            Route::Events { interval_ms } => self.subscribe(interval_ms, timers, now),
            route => Answer::Now(route),
        }
    }

    /// The reply to `answer`: its head and its body, written into `body`
    /// when it is not a page (the buffers' scratch, as `app` uses it).
    pub fn reply<'b>(&self, answer: Answer, body: &'b mut Vec<u8>) -> (ReplyHead, BodySource<'b>) {
        let page = |content_type, text: &'static str| {
            let head = reply_head(Status::Ok, content_type, PAGE_FIELDS);
            (head, BodySource::Bytes(text.as_bytes()))
        };
        let refusal = |status, text: &'static [u8]| {
            (
                reply_head(status, "text/plain", FIELDS),
                BodySource::Bytes(text),
            )
        };
        let route = match answer {
            Answer::NotAllowed => {
                let head = reply_head(Status::MethodNotAllowed, "text/plain", NOT_ALLOWED_FIELDS);
                return (head, BodySource::Bytes(b"GET or HEAD only\n"));
            }
            Answer::Stream { .. } => {
                let head = reply_head(Status::Ok, "text/event-stream", FIELDS);
                return (head, BodySource::Stream(STREAM_OPENING));
            }
            Answer::Now(route) | Answer::AfterRound { route, .. } => route,
        };
        let delivered = &self.delivered;
        let figure = |content_type, rendered: Option<&[u8]>, body: &'b mut Vec<u8>| {
            body.clear();
            body.extend_from_slice(rendered.unwrap_or(b"{}"));
            let head = reply_head(Status::Ok, content_type, FIELDS);
            (head, BodySource::Bytes(&body[..]))
        };
        match route {
            Route::Page => page("text/html; charset=utf-8", page::INDEX_HTML),
            Route::Script => page("text/javascript; charset=utf-8", page::DASHBOARD_JS),
            Route::Style => page("text/css; charset=utf-8", page::DASHBOARD_CSS),
            Route::Icon => page("image/svg+xml", page::FAVICON_SVG),
            Route::Healthz if self.remote.is_stopping() => {
                refusal(Status::ServiceUnavailable, b"stopping\n")
            }
            Route::Healthz => page("text/plain", "ok\n"),
            Route::NotFound => refusal(
                Status::NotFound,
                b"try / (the dashboard), /events, /metrics, /timers, /peers or /healthz\n",
            ),
            Route::BadInterval => refusal(Status::BadRequest, http::BAD_INTERVAL.as_bytes()),
            // The head of the stream, for HEAD.
            Route::Events { .. } => (
                reply_head(Status::Ok, "text/event-stream", FIELDS),
                BodySource::Stream(b""),
            ),
            Route::Metrics => figure(
                "text/plain; version=0.0.4; charset=utf-8",
                delivered.metrics.as_deref().map(str::as_bytes),
                body,
            ),
            Route::Peers => figure("application/json", delivered.peers.as_deref(), body),
            Route::Timers => figure("application/json", delivered.json.as_deref(), body),
        }
    }

    /// `/events`: a viewer more on `interval_ms`, and the round its first
    /// frame comes from.
    fn subscribe(
        &mut self,
        interval_ms: u64,
        timers: &mut TimerLists<TimerEvent>,
        now: Micros,
    ) -> Answer {
        let round = self.rounds.any(&self.remote, timers, now);
        match self.ticks.get_mut(&interval_ms) {
            Some(tick) => tick.viewers += 1,
            None => {
                let event = TimerEvent::Admin(AdminTimer::tick(interval_ms));
                let timer = timers.enroll(now, interval_ms, false, event);
                self.ticks.insert(interval_ms, Tick { viewers: 1, timer });
            }
        }
        tracing::debug!(
            interval_ms,
            viewers = self.viewers(),
            "dashboard viewer subscribed"
        );
        Answer::Stream { interval_ms, round }
    }

    /// A viewer left; the last one on an interval stops its tick.
    pub fn unsubscribe(&mut self, interval_ms: u64, timers: &mut TimerLists<TimerEvent>) {
        let Some(tick) = self.ticks.get_mut(&interval_ms) else {
            return;
        };
        tick.viewers -= 1;
        if tick.viewers == 0 {
            let timer = tick.timer;
            self.ticks.remove(&interval_ms);
            timers.unenroll(timer);
        }
        tracing::debug!(viewers = self.viewers(), "dashboard viewer left");
    }

    /// Viewers on `interval_ms` are due a snapshot (their tick fired): the
    /// round they share (the one in flight, or a new one), and the next
    /// tick armed; `None` when nobody watches on that interval any more.
    pub fn tick(
        &mut self,
        interval_ms: u64,
        timers: &mut TimerLists<TimerEvent>,
        now: Micros,
    ) -> Option<RoundId> {
        let tick = self.ticks.get_mut(&interval_ms)?;
        let event = TimerEvent::Admin(AdminTimer::tick(interval_ms));
        tick.timer = timers.enroll(now, interval_ms, false, event);
        Some(self.rounds.any(&self.remote, timers, now))
    }

    /// A worker answered (the waker rang): the round, if it has ended.
    pub fn collect(
        &mut self,
        timers: &mut TimerLists<TimerEvent>,
        now: Micros,
    ) -> Option<Finished> {
        self.rounds.collect(&self.remote, timers, now)
    }

    /// The round's timeout fired: it ends with the answers so far.
    pub fn round_timed_out(
        &mut self,
        timers: &mut TimerLists<TimerEvent>,
        now: Micros,
    ) -> Option<Finished> {
        self.rounds.time_out(&self.remote, timers, now)
    }

    /// Renders a finished round, once, as far as it is `wanted`, for the
    /// replies that waited on it; returns the stream's frame
    /// (`data: <view JSON>`), if the view was wanted.
    pub fn deliver(&mut self, finished: Finished, wanted: Wanted) -> Option<Vec<u8>> {
        let peers = wanted
            .peers
            .then(|| serde_json::to_vec(&peers_report(&finished.snapshots)).unwrap_or_default());
        let metrics = wanted
            .metrics
            .then(|| metrics::render(&self.remote, &finished.snapshots, self.viewers()));
        let json = wanted
            .view
            .then(|| View::new(&self.remote, finished.snapshots).to_json());
        let frame = json.as_ref().map(|json| {
            let mut frame = Vec::with_capacity(json.len() + 8);
            frame.extend_from_slice(b"data: ");
            frame.extend_from_slice(json);
            frame.extend_from_slice(b"\n\n");
            frame
        });
        self.delivered = Delivery {
            metrics,
            peers,
            json,
        };
        frame
    }

    /// Event streams open.
    pub fn viewers(&self) -> usize {
        self.ticks.values().map(|tick| tick.viewers).sum()
    }
}

fn reply_head(status: Status, content_type: &'static str, extra: &'static [u8]) -> ReplyHead {
    ReplyHead {
        status,
        content_type,
        extra,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared::Control;

    /// A service over a server with no workers (rounds end as soon as
    /// they are collected), and its timer lists.
    fn service() -> (Service, TimerLists<TimerEvent>, mio::Poll) {
        let poll = mio::Poll::new().unwrap();
        let waker = Arc::new(Waker::new(poll.registry(), mio::Token(0)).unwrap());
        let remote = Remote::new(Arc::new(Control::default()), Vec::new());
        (Service::new(remote, waker), TimerLists::new(), poll)
    }

    fn get(service: &mut Service, timers: &mut TimerLists<TimerEvent>, path: &str) -> Answer {
        service.plan(Method::Get, Target::Path(path), timers, 0)
    }

    /// The reply to `answer`: its head and its body, as text.
    fn reply(service: &Service, answer: Answer) -> (ReplyHead, String) {
        let mut scratch = Vec::new();
        let (head, body) = service.reply(answer, &mut scratch);
        let (BodySource::Bytes(body) | BodySource::Stream(body)) = body else {
            panic!("the admin generates no filler");
        };
        (head, String::from_utf8_lossy(body).into_owned())
    }

    #[test]
    fn pages_and_refusals_are_answered_at_once_without_asking_workers() {
        let (mut service, mut timers, _poll) = service();
        let answer = get(&mut service, &mut timers, "/");
        assert_eq!(answer, Answer::Now(Route::Page));
        let (head, body) = reply(&service, answer);
        assert_eq!(head.status, Status::Ok);
        assert!(head.extra.starts_with(b"Cache-Control: no-store\r\n"));
        assert!(String::from_utf8_lossy(head.extra).contains("Content-Security-Policy: "));
        assert!(
            body.contains("<html") || body.contains("<!doctype"),
            "{body}"
        );
        let post = service.plan(Method::Post, Target::Path("/metrics"), &mut timers, 0);
        assert_eq!(post, Answer::NotAllowed);
        let (head, _) = reply(&service, post);
        assert_eq!(head.status, Status::MethodNotAllowed);
        assert!(String::from_utf8_lossy(head.extra).contains("Allow: GET, HEAD\r\n"));
        assert_eq!(timers.next_expiry(), None, "no round, no tick");
    }

    #[test]
    fn a_figure_waits_for_a_round_rendered_once_for_what_is_wanted() {
        let (mut service, mut timers, _poll) = service();
        let answer = get(&mut service, &mut timers, "/metrics");
        let Answer::AfterRound { route, .. } = answer else {
            panic!("{answer:?}");
        };
        assert_eq!(route, Route::Metrics);
        assert!(timers.next_expiry().is_some(), "the round's timeout");
        let finished = service
            .collect(&mut timers, 0)
            .expect("no worker to wait for");
        assert_eq!(timers.next_expiry(), None, "the round's timeout is gone");
        let wanted = Wanted {
            metrics: true,
            ..Wanted::default()
        };
        assert!(
            service.deliver(finished, wanted).is_none(),
            "no view wanted"
        );
        let (head, metrics) = reply(&service, answer);
        assert_eq!(head.status, Status::Ok);
        assert!(metrics.contains("kas_"), "{metrics}");
    }

    #[test]
    fn the_stream_ticks_only_while_someone_watches() {
        let (mut service, mut timers, _poll) = service();
        let answer = get(&mut service, &mut timers, "/events?interval=500");
        let Answer::Stream { interval_ms, .. } = answer else {
            panic!("{answer:?}");
        };
        assert_eq!((interval_ms, service.viewers()), (500, 1));
        let (head, opening) = reply(&service, answer);
        assert_eq!(head.content_type, "text/event-stream");
        assert!(opening.starts_with("retry: "), "{opening}");
        let _ = service.collect(&mut timers, 0);
        // The tick fires (leaving the lists), as the worker fires it.
        let due = timers.expire(500_000).expect("the viewer's tick");
        assert_eq!(due.payload, TimerEvent::Admin(AdminTimer::tick(500)));
        assert!(service.tick(500, &mut timers, 500_000).is_some());
        let finished = service.collect(&mut timers, 500_000).expect("ended");
        let view = Wanted {
            view: true,
            ..Wanted::default()
        };
        let frame = service.deliver(finished, view).expect("a frame");
        assert!(frame.starts_with(b"data: {") && frame.ends_with(b"\n\n"));
        service.unsubscribe(500, &mut timers);
        assert_eq!(service.viewers(), 0);
        assert_eq!(timers.next_expiry(), None, "nobody watches: no timer");
        assert_eq!(service.tick(500, &mut timers, 1_000_000), None);
    }

    #[test]
    fn health_turns_503_once_stopping() {
        let (mut service, mut timers, _poll) = service();
        let health = get(&mut service, &mut timers, "/healthz");
        assert_eq!(reply(&service, health).0.status, Status::Ok);
        service.remote.shutdown();
        let (head, body) = reply(&service, health);
        assert_eq!(
            (head.status, body.as_str()),
            (Status::ServiceUnavailable, "stopping\n")
        );
    }
}
