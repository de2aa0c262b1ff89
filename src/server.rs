//! Starting and stopping the server: binds one SO_REUSEPORT listener per
//! worker on the same address, runs each worker's loop on its own thread,
//! and hands back a [`ServerHandle`] to find the address, read the
//! counters, and shut down gracefully.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::thread::JoinHandle;

use mio::{Poll, Waker};
use socket2::{Domain, Protocol, Socket, Type};

use crate::access_log::AccessLogSink;
use crate::config::Settings;
use crate::peer_observer::peers::{LazyBoard, Listening};
use crate::peer_observer::{ObserverStats, PeerObserver};
use crate::shared::{Control, Remote, WorkerShared};
use crate::stats::Stats;
use crate::worker::{WAKER, Worker};

const LISTEN_BACKLOG: i32 = 1024;

/// Bound listeners, not yet serving.
pub struct Server {
    settings: Arc<Settings>,
    access_log: AccessLogSink,
    listeners: Vec<std::net::TcpListener>,
    local_addr: SocketAddr,
}

impl Server {
    /// Binds `settings.workers` listeners to `settings.listen` and opens the
    /// access log. A port that is already taken (even by a SO_REUSEPORT
    /// listener) is an `AddrInUse` error. The error says what failed:
    /// "cannot listen on ADDR" or "cannot open access log PATH".
    pub fn bind(settings: Settings) -> io::Result<Server> {
        let cannot_listen = |e: io::Error| {
            io::Error::new(
                e.kind(),
                format!("cannot listen on {}: {e}", settings.listen),
            )
        };
        let (local_addr, listeners) = bind_listeners(&settings).map_err(cannot_listen)?;
        reserve_descriptor_table(&listeners[0]);
        let access_log = AccessLogSink::open(&settings.access_log).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot open access log {}: {e}", settings.access_log),
            )
        })?;
        Ok(Server {
            settings: Arc::new(settings),
            access_log,
            listeners,
            local_addr,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Starts one thread per worker.
    pub fn start(self) -> io::Result<ServerHandle> {
        let control = Arc::new(Control {
            stopping: AtomicBool::new(false),
            access_log: self.access_log,
        });
        let mut workers = Vec::new();
        // Where every worker's peer observer pairs a lazy pool's closes with its next
        // connection, which may land on another worker.
        let lazy = Arc::new(LazyBoard::shared());
        // A request's `Host` is judged against this (a proxy names its
        // upstream there).
        let tls = self.settings.tls.is_some();
        let listening = Listening::on(self.local_addr.port(), tls);
        for (index, listener) in self.listeners.into_iter().enumerate() {
            let poll = Poll::new()?;
            let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
            let shared = Arc::new(WorkerShared::default());
            // The worker's observer: the peer observer, writing its
            // figures where `/metrics` reads them.
            let observer =
                PeerObserver::new(Arc::clone(&shared.observer), self.settings.peers_window_us)
                    .sharing_lazy_board(Arc::clone(&lazy))
                    .telling_agents_apart(self.settings.clients_by_agent)
                    .listening_on(listening);
            let worker = Worker::new(
                index,
                poll,
                mio::net::TcpListener::from_std(listener),
                Arc::clone(&self.settings),
                Arc::clone(&shared),
                Arc::clone(&control),
                Box::new(observer),
            )?;
            let thread = std::thread::Builder::new()
                .name(format!("worker-{index}"))
                .spawn(move || worker.run())?;
            workers.push(WorkerHandle {
                thread: Some(thread),
                waker,
                shared,
            });
        }
        Ok(ServerHandle {
            local_addr: self.local_addr,
            control,
            workers,
        })
    }
}

/// Most descriptors the table is grown for up front.
const RESERVED_DESCRIPTORS: u64 = 1 << 17;

/// Grows the process's descriptor table to the descriptor limit now, once.
///
/// Linux grows the table by doubling as descriptors are opened, and in a
/// multithreaded process each growth waits for an RCU grace period: an
/// `accept()` that crosses fd 256, 512, 1024, ... stalls its whole worker
/// for ~10–15 ms, and every timer stamped after that turn starts late
/// (measured with scripts/soak.sh: p99 close lateness 18–22 ms). Duplicating
/// a descriptor to just under the limit grows the table to its final size
/// before serving starts; the duplicate is closed at once. Best effort.
fn reserve_descriptor_table(fd: &impl std::os::fd::AsFd) {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(RESERVED_DESCRIPTORS)
        .min(RESERVED_DESCRIPTORS);
    let Ok(highest) = i32::try_from(limit.saturating_sub(1)) else {
        return;
    };
    if let Err(e) = rustix::io::fcntl_dupfd_cloexec(fd, highest) {
        tracing::debug!(error = %e, highest, "could not pre-size the descriptor table");
    }
}

/// Tries for port 0 before giving up: the port a probe bind picked is free
/// again once the probe is dropped, and another socket (a client's
/// ephemeral port) may take it before the real listeners do.
const PORT_0_TRIES: u32 = 8;

/// The listeners for `settings.listen`, one per worker, and their address.
fn bind_listeners(settings: &Settings) -> io::Result<(SocketAddr, Vec<std::net::TcpListener>)> {
    let mut tries = 0;
    loop {
        tries += 1;
        match bind_once(settings) {
            Err(e)
                if e.kind() == io::ErrorKind::AddrInUse
                    && settings.listen.port() == 0
                    && tries < PORT_0_TRIES => {}
            result => return result,
        }
    }
}

/// One attempt: a plain probe bind first (SO_REUSEPORT sockets would
/// silently share a port with another instance, so prove the port is
/// free, and learn which one port 0 picked), then the real listeners.
fn bind_once(settings: &Settings) -> io::Result<(SocketAddr, Vec<std::net::TcpListener>)> {
    let probe = std::net::TcpListener::bind(settings.listen)?;
    let local_addr = probe.local_addr()?;
    drop(probe);
    let listeners = (0..settings.workers.max(1))
        .map(|_| reuseport_listener(local_addr, settings.defer_accept))
        .collect::<io::Result<Vec<_>>>()?;
    Ok((local_addr, listeners))
}

fn reuseport_listener(addr: SocketAddr, defer_accept: bool) -> io::Result<std::net::TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    if defer_accept {
        set_defer_accept(&socket, DEFER_ACCEPT_SECS)?;
    }
    socket.bind(&addr.into())?;
    socket.listen(LISTEN_BACKLOG)?;
    Ok(socket.into())
}

/// How long the kernel holds a connection that has sent nothing before
/// handing it over anyway: the least it takes (one SYN-ACK retransmission).
const DEFER_ACCEPT_SECS: i32 = 1;

/// Sets TCP_DEFER_ACCEPT: the listener reports a connection only once its
/// first bytes have arrived (or after `secs` of silence), so the worker can
/// serve a one-request connection in the turn it accepts it. Measured with
/// `Connection: close` load (scripts/loadtest.sh, BENCHMARKS.md): a quarter
/// less CPU per request, and ten times fewer context switches, because one
/// wake-up serves a whole connection instead of one for the handshake and
/// one for the request. Neither socket2 nor rustix exposes this option.
fn set_defer_accept(socket: &Socket, secs: i32) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: `socket` is an open socket for the duration of the call, and
    // the option value is a live, properly aligned c_int whose size is
    // passed alongside it, as setsockopt(2) requires for TCP_DEFER_ACCEPT.
    let result = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_DEFER_ACCEPT,
            std::ptr::from_ref(&secs).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if result == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

struct WorkerHandle {
    thread: Option<JoinHandle<io::Result<()>>>,
    waker: Arc<Waker>,
    shared: Arc<WorkerShared>,
}

/// A running server.
pub struct ServerHandle {
    local_addr: SocketAddr,
    control: Arc<Control>,
    workers: Vec<WorkerHandle>,
}

impl ServerHandle {
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Each worker's counters.
    pub fn stats(&self) -> impl Iterator<Item = &Stats> {
        self.workers.iter().map(|w| &w.shared.stats)
    }

    /// Each worker's peer observer figures.
    pub fn observer_stats(&self) -> impl Iterator<Item = &ObserverStats> {
        self.workers.iter().map(|w| w.shared.observer.as_ref())
    }

    /// A handle that can only observe the workers and stop them: for the
    /// admin listener and signal handlers.
    pub fn remote(&self) -> Remote {
        Remote::new(
            Arc::clone(&self.control),
            self.workers
                .iter()
                .map(|w| (Arc::clone(&w.shared), Arc::clone(&w.waker)))
                .collect(),
        )
    }

    /// Open connections across all workers.
    pub fn open_connections(&self) -> u64 {
        self.stats().map(Stats::open_connections).sum()
    }

    /// Begins a graceful shutdown: stop accepting, close idle connections,
    /// finish in-flight requests. Returns at once; [`ServerHandle::join`] waits.
    pub fn shutdown(&self) {
        self.remote().shutdown();
    }

    /// Waits for every worker to finish; the first error wins.
    pub fn join(mut self) -> io::Result<()> {
        let mut result = Ok(());
        for worker in &mut self.workers {
            if let Some(thread) = worker.thread.take() {
                let outcome = thread
                    .join()
                    .unwrap_or_else(|_| Err(io::Error::other("a worker panicked")));
                if result.is_ok() {
                    result = outcome;
                }
            }
        }
        result
    }
}

impl Drop for ServerHandle {
    /// A dropped handle shuts the server down (without waiting).
    fn drop(&mut self) {
        self.shutdown();
    }
}
