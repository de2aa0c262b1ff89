//! One forwarded exchange's link to its upstream connection, kept in the
//! client connection's pooled buffers while the exchange lasts: which
//! upstream connection it borrowed, the bytes still to send up, the bytes
//! come back and not yet relayed, and where the answer's relay stands.

use crate::forward::ClientFraming;
use crate::http::BodyDecoder;
use crate::pool::Input;
use crate::session::OUTPUT_HIGH_WATER;

/// Where the relay of the upstream's answer stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relay {
    /// Waiting for the final answer head (interim 1xx ones are passed on).
    Head,
    /// The client's head is queued; the body follows as it comes.
    Body {
        body: UpstreamBody,
        /// How the client's head said it is sent.
        out: ClientFraming,
        /// The upstream said its connection persists.
        reusable: bool,
    },
    /// The answer is relayed whole; the upstream connection may carry
    /// another exchange when `reusable`.
    Done { reusable: bool },
}

/// How the upstream frames its answer's body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamBody {
    /// By `Content-Length` or chunked: decoded as a request body is.
    Framed(BodyDecoder),
    /// Until the upstream closes.
    UntilClose,
}

/// A forwarded exchange's link to its upstream.
#[derive(Debug)]
pub struct UpstreamLink {
    /// The upstream connection it uses (its key in `Upstreams`); `None`
    /// before one is taken or connected, and after it is given back.
    pub key: Option<u32>,
    /// The connect has completed.
    pub connected: bool,
    /// Addresses of the upstream's name refused so far, for this request
    /// (the next connect tries the one after).
    pub tries: u8,
    /// The connection came from the pool: a close before any answer may
    /// be the upstream's idle close racing this request.
    pub reused: bool,
    /// This request was sent again once already.
    pub retried: bool,
    /// The request may be sent twice (GET HEAD PUT DELETE OPTIONS TRACE).
    pub idempotent: bool,
    /// The request bytes, head and body: `out[sent..]` is still to go.
    /// Kept whole until an answer begins (so a retry can resend them),
    /// unless they outgrow [`OUTPUT_HIGH_WATER`] (`trimmed`: no retry).
    pub out: Vec<u8>,
    pub sent: usize,
    pub trimmed: bool,
    /// Sending failed (the upstream stopped reading: it may have answered
    /// early, a 413 say): what is queued for it is dropped from then on,
    /// and its answer, whole or not, decides.
    pub send_broken: bool,
    /// The whole request (its body's end included) is in `out`.
    pub request_done: bool,
    /// What came from the upstream and is not yet relayed.
    pub input: Input,
    /// The upstream closed its side (read), or an event said it hung up
    /// (`hung_up`: then it is not pooled, though its EOF may be unread).
    pub eof: bool,
    pub hung_up: bool,
    /// A byte of an answer came back.
    pub answered: bool,
    /// Reading stopped because the client's output was full: it resumes
    /// when that drains (no edge will come for bytes already in the socket).
    pub paused: bool,
    pub relay: Relay,
    /// The answer's status, once its head is in.
    pub status: u16,
    /// Body bytes relayed to the client (for the access log).
    pub relayed: u64,
    /// The client speaks HTTP/1.0 (no interim answers, no chunks for it).
    pub client_http10: bool,
    /// The client's head said `Connection: close` (its body runs until
    /// the close), whatever the request's terms were.
    pub client_closes: bool,
}

impl Default for UpstreamLink {
    fn default() -> Self {
        UpstreamLink {
            key: None,
            connected: false,
            tries: 0,
            reused: false,
            retried: false,
            idempotent: false,
            out: Vec::new(),
            sent: 0,
            trimmed: false,
            send_broken: false,
            request_done: false,
            input: Input::new(),
            eof: false,
            hung_up: false,
            answered: false,
            paused: false,
            relay: Relay::Head,
            status: 0,
            relayed: 0,
            client_http10: false,
            client_closes: false,
        }
    }
}

impl UpstreamLink {
    /// Ready for a new exchange (its connection given back before),
    /// keeping its buffers' room.
    pub fn reset(&mut self, idempotent: bool, client_http10: bool) {
        debug_assert!(self.key.is_none(), "a link reset holding {:?}", self.key);
        self.connected = false;
        self.tries = 0;
        self.reused = false;
        self.retried = false;
        self.idempotent = idempotent;
        self.out.clear();
        self.sent = 0;
        self.trimmed = false;
        self.send_broken = false;
        self.request_done = false;
        self.input.clear();
        self.eof = false;
        self.hung_up = false;
        self.answered = false;
        self.paused = false;
        self.relay = Relay::Head;
        self.status = 0;
        self.relayed = 0;
        self.client_http10 = client_http10;
        self.client_closes = false;
    }

    /// Request bytes still to send.
    pub fn unsent(&self) -> &[u8] {
        &self.out[self.sent..]
    }

    /// Request bytes queued and not yet sent: what backpressure weighs.
    pub fn pending(&self) -> usize {
        self.out.len() - self.sent
    }

    /// `n` more request bytes went up. Sent bytes are dropped once an
    /// answer has begun, or once they outgrow [`OUTPUT_HIGH_WATER`]
    /// (the request can then no longer be retried).
    pub fn wrote(&mut self, n: usize) {
        self.sent += n;
        if self.answered || self.sent > OUTPUT_HIGH_WATER {
            self.trimmed |= !self.answered;
            self.out.drain(..self.sent);
            self.sent = 0;
        }
    }

    /// Whether a close before any answer may be retried on a fresh
    /// connection: the connection was pooled (the upstream's idle close
    /// may have crossed the request), this is the first try, the method
    /// is idempotent and every byte of the request can be sent again.
    pub fn can_retry(&self) -> bool {
        self.reused && !self.retried && self.idempotent && !self.trimmed && !self.answered
    }

    /// Starts over on a fresh connection (its old one closed): the whole
    /// request goes again.
    pub fn restart(&mut self) {
        self.key = None;
        self.connected = false;
        self.reused = false;
        self.retried = true;
        self.sent = 0;
        self.input.clear();
        self.eof = false;
        self.hung_up = false;
        self.paused = false;
    }

    /// Whether the upstream connection may carry another exchange: the
    /// whole request went up, the answer came whole and persists, and
    /// nothing more came behind it.
    pub fn reusable(&self) -> bool {
        self.relay == (Relay::Done { reusable: true })
            && self.request_done
            && self.pending() == 0
            && self.input.is_empty()
            && !self.eof
            && !self.hung_up
            && !self.send_broken
    }

    /// The client's head is queued (a final answer came): a failure now
    /// can only cut the answer short.
    pub fn answer_begun(&self) -> bool {
        self.relay != Relay::Head
    }
}
