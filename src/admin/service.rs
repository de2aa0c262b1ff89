//! What the admin listener answers, apart from how its connections carry
//! it: each request's [`Answer`] (a page or a refusal now, a figure after
//! a snapshot round, or the event stream), the rounds and the dashboard
//! ticks that feed them, and what a finished round renders ([`Delivery`]).
//!
//! No socket and no connection state here: the admin loop (`event_loop`)
//! owns those and asks this module, as the server's session asks `app` for
//! a plan once per request head. Keeping the two apart is the seam along
//! which the admin's connections can move onto the server's own worker,
//! connection and session core: this module stays, the loop goes.

use std::collections::BTreeMap;
use std::sync::Arc;

use mio::Waker;

use super::http::{self, Reply, Request, Route};
use super::rounds::{Finished, RoundId, Rounds};
use super::view::{View, peers_report};
use super::{AdminTimer, metrics, page};
use crate::http::Status;
use crate::http::response::BodyLength;
use crate::shared::Remote;
use crate::timers::{Micros, TimerId, TimerLists};

const CSP: &str = "Content-Security-Policy: default-src 'self'\r\n";

/// What a request gets.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// A whole response, to send now.
    Now(Vec<u8>),
    /// A figure that needs every worker's: answered when round `round`
    /// ends ([`Delivery::reply`]).
    AfterRound {
        round: RoundId,
        route: Route,
        head_only: bool,
    },
    /// The event stream: its opening now, then a frame per tick of
    /// `interval_ms`, the first from round `round`. The viewer is counted
    /// until [`Service::unsubscribe`].
    Stream {
        opening: Vec<u8>,
        interval_ms: u64,
        round: RoundId,
    },
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
pub struct Delivery {
    metrics: Option<String>,
    peers: Option<Vec<u8>>,
    json: Option<Vec<u8>>,
    /// The stream's frame (`data: <view JSON>`), shared by every viewer.
    pub frame: Option<Arc<[u8]>>,
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
}

impl Service {
    /// Workers answer rounds by waking `reply_to`.
    pub fn new(remote: Remote, reply_to: Arc<Waker>) -> Self {
        Service {
            remote,
            rounds: Rounds::new(reply_to),
            ticks: BTreeMap::new(),
        }
    }

    /// Answers a request head: at once, after a round, or as a stream.
    pub fn answer(
        &mut self,
        request: Request,
        timers: &mut TimerLists<AdminTimer>,
        now: Micros,
    ) -> Answer {
        let (route, head_only) = match request {
            Request::Partial => unreachable!("only a whole head is answered"),
            Request::MethodNotAllowed => {
                let reply = Reply::error(Status::MethodNotAllowed, b"GET or HEAD only\n");
                let reply = reply.with_extra("Allow: GET, HEAD\r\n");
                return Answer::Now(http::response(reply, false));
            }
            Request::Refused(status) => {
                let reply = Reply::error(status, status.reason_line());
                return Answer::Now(http::response(reply, false));
            }
            Request::Get { route, head_only } => (route, head_only),
        };
        let reply = match route {
            Route::Page => page_reply("text/html; charset=utf-8", page::INDEX_HTML),
            Route::Script => page_reply("text/javascript; charset=utf-8", page::DASHBOARD_JS),
            Route::Style => page_reply("text/css; charset=utf-8", page::DASHBOARD_CSS),
            Route::Icon => page_reply("image/svg+xml", page::FAVICON_SVG),
            Route::Healthz if self.remote.is_stopping() => {
                Reply::error(Status::ServiceUnavailable, b"stopping\n")
            }
            Route::Healthz => page_reply("text/plain", "ok\n"),
            Route::NotFound => Reply::error(
                Status::NotFound,
                b"try / (the dashboard), /events, /metrics, /timers, /peers or /healthz\n",
            ),
            Route::BadInterval => Reply::error(Status::BadRequest, http::BAD_INTERVAL.as_bytes()),
            Route::Metrics | Route::Timers | Route::Peers => {
                let round = self.rounds.fresh(&self.remote, timers, now);
                return Answer::AfterRound {
                    round,
                    route,
                    head_only,
                };
            }
            Route::Events { interval_ms } => {
                return self.subscribe(interval_ms, head_only, timers, now);
            }
        };
        Answer::Now(http::response(reply, head_only))
    }

    /// `/events`: the stream's head now (all of it, for HEAD), then a
    /// snapshot per tick.
    fn subscribe(
        &mut self,
        interval_ms: u64,
        head_only: bool,
        timers: &mut TimerLists<AdminTimer>,
        now: Micros,
    ) -> Answer {
        let mut opening = http::head(Status::Ok, "text/event-stream", BodyLength::UntilClose, "");
        if head_only {
            return Answer::Now(opening);
        }
        opening.extend_from_slice(b"retry: 2000\n\n");
        let round = self.rounds.any(&self.remote, timers, now);
        match self.ticks.get_mut(&interval_ms) {
            Some(tick) => tick.viewers += 1,
            None => {
                let timer = timers.enroll(now, interval_ms, false, AdminTimer::Tick(interval_ms));
                self.ticks.insert(interval_ms, Tick { viewers: 1, timer });
            }
        }
        tracing::debug!(
            interval_ms,
            viewers = self.viewers(),
            "dashboard viewer subscribed"
        );
        Answer::Stream {
            opening,
            interval_ms,
            round,
        }
    }

    /// A viewer left; the last one on an interval stops its tick.
    pub fn unsubscribe(&mut self, interval_ms: u64, timers: &mut TimerLists<AdminTimer>) {
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

    /// Viewers on `interval_ms` are due a snapshot: the round they share
    /// (the one in flight, or a new one), and the next tick armed; `None`
    /// when nobody watches on that interval any more.
    pub fn tick(
        &mut self,
        interval_ms: u64,
        timers: &mut TimerLists<AdminTimer>,
        now: Micros,
    ) -> Option<RoundId> {
        let tick = self.ticks.get_mut(&interval_ms)?;
        tick.timer = timers.enroll(now, interval_ms, false, AdminTimer::Tick(interval_ms));
        Some(self.rounds.any(&self.remote, timers, now))
    }

    /// A worker answered (the waker rang): the round, if it has ended.
    pub fn collect(
        &mut self,
        timers: &mut TimerLists<AdminTimer>,
        now: Micros,
    ) -> Option<Finished> {
        self.rounds.collect(&self.remote, timers, now)
    }

    /// The round's timeout fired: it ends with the answers so far.
    pub fn round_timed_out(
        &mut self,
        timers: &mut TimerLists<AdminTimer>,
        now: Micros,
    ) -> Option<Finished> {
        self.rounds.time_out(&self.remote, timers, now)
    }

    /// Renders a finished round, once, as far as it is `wanted`.
    pub fn deliver(&self, finished: Finished, wanted: Wanted) -> Delivery {
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
            frame.into()
        });
        Delivery {
            metrics,
            peers,
            json,
            frame,
        }
    }

    /// Event streams open.
    pub fn viewers(&self) -> usize {
        self.ticks.values().map(|tick| tick.viewers).sum()
    }
}

impl Delivery {
    /// The whole response to a request that waited for this round.
    pub fn reply(&self, route: Route, head_only: bool) -> Vec<u8> {
        let reply = match route {
            Route::Metrics => Reply::ok(
                "text/plain; version=0.0.4; charset=utf-8",
                self.metrics.as_deref().unwrap_or_default().as_bytes(),
            ),
            Route::Peers => Reply::ok("application/json", self.peers.as_deref().unwrap_or(b"{}")),
            _ => Reply::ok("application/json", self.json.as_deref().unwrap_or(b"{}")),
        };
        http::response(reply, head_only)
    }
}

/// `200 OK` with an embedded page (or a short text), under the CSP.
fn page_reply(content_type: &'static str, body: &'static str) -> Reply<'static> {
    Reply::ok(content_type, body.as_bytes()).with_extra(CSP)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared::Control;

    /// A service over a server with no workers (rounds end as soon as
    /// they are collected), and its timer lists.
    fn service() -> (Service, TimerLists<AdminTimer>, mio::Poll) {
        let poll = mio::Poll::new().unwrap();
        let waker = Arc::new(Waker::new(poll.registry(), mio::Token(0)).unwrap());
        let remote = Remote::new(Arc::new(Control::default()), Vec::new());
        (Service::new(remote, waker), TimerLists::new(), poll)
    }

    fn get(route: &str) -> Request {
        Request::Get {
            route: http::route(route),
            head_only: false,
        }
    }

    fn text(response: &[u8]) -> String {
        String::from_utf8_lossy(response).into_owned()
    }

    #[test]
    fn pages_and_refusals_are_answered_at_once_without_asking_workers() {
        let (mut service, mut timers, _poll) = service();
        let Answer::Now(page) = service.answer(get("/"), &mut timers, 0) else {
            panic!("the page waits");
        };
        let page = text(&page);
        assert!(page.starts_with("HTTP/1.1 200 OK\r\n"), "{page}");
        assert!(page.contains("Content-Security-Policy: "), "{page}");
        let refused = service.answer(Request::MethodNotAllowed, &mut timers, 0);
        let Answer::Now(refused) = refused else {
            panic!("a refusal waits");
        };
        assert!(text(&refused).contains("Allow: GET, HEAD\r\n"));
        assert_eq!(timers.next_expiry(), None, "no round, no tick");
    }

    #[test]
    fn a_figure_waits_for_a_round_rendered_once_for_what_is_wanted() {
        let (mut service, mut timers, _poll) = service();
        let answer = service.answer(get("/metrics"), &mut timers, 0);
        let Answer::AfterRound { route, .. } = answer else {
            panic!("{answer:?}");
        };
        assert!(timers.next_expiry().is_some(), "the round's timeout");
        let finished = service
            .collect(&mut timers, 0)
            .expect("no worker to wait for");
        assert_eq!(timers.next_expiry(), None, "the round's timeout is gone");
        let wanted = Wanted {
            metrics: true,
            ..Wanted::default()
        };
        let delivery = service.deliver(finished, wanted);
        assert!(delivery.frame.is_none(), "no view was wanted");
        let metrics = text(&delivery.reply(route, false));
        assert!(metrics.starts_with("HTTP/1.1 200 OK\r\n"), "{metrics}");
        assert!(metrics.contains("kas_"), "{metrics}");
    }

    #[test]
    fn the_stream_ticks_only_while_someone_watches() {
        let (mut service, mut timers, _poll) = service();
        let answer = service.answer(get("/events?interval=500"), &mut timers, 0);
        let Answer::Stream { interval_ms, .. } = answer else {
            panic!("{answer:?}");
        };
        assert_eq!((interval_ms, service.viewers()), (500, 1));
        let _ = service.collect(&mut timers, 0);
        // The tick fires (leaving the lists), as the loop fires it.
        let due = timers.expire(500_000).expect("the viewer's tick");
        assert_eq!(due.payload, AdminTimer::Tick(500));
        assert!(service.tick(500, &mut timers, 500_000).is_some());
        let _ = service.collect(&mut timers, 500_000);
        service.unsubscribe(500, &mut timers);
        assert_eq!(service.viewers(), 0);
        assert_eq!(timers.next_expiry(), None, "nobody watches: no timer");
        assert_eq!(service.tick(500, &mut timers, 1_000_000), None);
    }

    #[test]
    fn health_turns_503_once_stopping() {
        let (mut service, mut timers, _poll) = service();
        let Answer::Now(ok) = service.answer(get("/healthz"), &mut timers, 0) else {
            panic!("health waits");
        };
        assert!(text(&ok).starts_with("HTTP/1.1 200 OK\r\n"));
        service.remote.shutdown();
        let Answer::Now(stopping) = service.answer(get("/healthz"), &mut timers, 0) else {
            panic!("health waits");
        };
        assert!(text(&stopping).starts_with("HTTP/1.1 503 "));
    }
}
