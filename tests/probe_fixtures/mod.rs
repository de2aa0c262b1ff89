//! Servers for the probe tests, each on a loopback port of its own: nginx,
//! Node's http server and uvicorn run as child processes (killed when dropped;
//! nginx with a temporary prefix, config and error log, in one process),
//! and small fixtures written here: a server that closes idle connections
//! with a reset, one that closes them in periodic passes (on a grid, as
//! coarse timer wheels do; following its load, as gunicorn's gthread loop
//! does; or at its loop's wake-ups, as waitress does), one that answers
//! only a connection's first
//! request, one that is not HTTP, one that never answers, and three that
//! answer without end: `100 Continue` again and again, a response head or
//! a body trickled a byte at a time.
//!
//! An external tool that is missing FAILS the test under `CI=true`, and
//! outside CI the test says it skipped (tests/support/skip.rs).

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// PEM files for a TLS server and a probe's `--cacert`, in a directory of
/// their own (removed when dropped).
pub struct Pems {
    pub dir: super::support::files::TempDir,
    pub cert: PathBuf,
    pub key: PathBuf,
    /// The file to give the probe as `--cacert`.
    pub cacert: PathBuf,
}

impl Pems {
    /// Paths as flag values.
    pub fn cacert_arg(&self) -> &str {
        self.cacert.to_str().unwrap()
    }
}

/// CA parameters for `rcgen`: a CA named `name`.
fn ca_params(name: &str) -> rcgen::CertificateParams {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    params
}

/// A server certificate for `localhost` signed by a CA (P-256), and as
/// `--cacert` another CA of the same name with an Ed25519 key: the probe
/// finds the issuer by name, and its key cannot have made the signature.
pub fn certificate_from_an_impostor_ca() -> Pems {
    let p256 = || rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let real = rcgen::CertifiedIssuer::self_signed(ca_params("Probe Test CA"), p256()).unwrap();
    let impostor_key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
    let impostor = ca_params("Probe Test CA")
        .self_signed(&impostor_key)
        .unwrap();
    let leaf_key = p256();
    let leaf = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&leaf_key, &real)
        .unwrap();
    let dir = super::support::files::TempDir::new();
    Pems {
        cert: dir.file("cert.pem", leaf.pem().as_bytes()),
        key: dir.file("key.pem", leaf_key.serialize_pem().as_bytes()),
        cacert: dir.file("impostor.pem", impostor.pem().as_bytes()),
        dir,
    }
}

/// A self-signed certificate for `localhost` marked as a CA (as `openssl
/// req -x509` makes by default), which is its own `--cacert`.
pub fn self_signed_ca_certificate() -> Pems {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut params = ca_params("localhost");
    params.subject_alt_names = vec![rcgen::SanType::DnsName("localhost".try_into().unwrap())];
    let cert = params.self_signed(&key).unwrap();
    let dir = super::support::files::TempDir::new();
    let cert_path = dir.file("cert.pem", cert.pem().as_bytes());
    Pems {
        cacert: cert_path.clone(),
        cert: cert_path,
        key: dir.file("key.pem", key.serialize_pem().as_bytes()),
        dir,
    }
}

/// This server over TLS with the certificate and key in `cert`, `key`.
pub fn tls_server(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> super::support::server::TestServer {
    let tls = keepalive_server::tls::ServerTls::load(cert, key).expect("the certificate loads");
    super::support::server::start(|config| config.tls = Some(tls))
}

/// How long an external server may take to start listening.
const STARTUP: Duration = Duration::from_secs(20);

/// A server running as a child process, killed when dropped.
pub struct External {
    child: Child,
    pub addr: SocketAddr,
    /// A directory to remove afterwards.
    dir: Option<PathBuf>,
}

impl Drop for External {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// `None` (having said so) when `tool` is missing outside CI; panics under
/// `CI=true`.
fn require(tool: &str, candidates: &[&str]) -> Option<String> {
    let found = candidates
        .iter()
        .find(|path| Command::new(path).arg("-v").output().is_ok());
    match found {
        Some(path) => Some((*path).to_owned()),
        None => {
            super::support::skip::because(&format!(
                "{tool} is not installed (.ci/run installs it)"
            ));
            None
        }
    }
}

/// A port that was free a moment ago.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    listener.local_addr().expect("local_addr").port()
}

/// Waits until `addr` accepts a connection.
fn wait_listening(addr: SocketAddr, child: &mut Child, what: &str) {
    let deadline = Instant::now() + STARTUP;
    while TcpStream::connect(addr).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited at startup: {status}");
        }
        assert!(Instant::now() < deadline, "{what} did not listen on {addr}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// nginx serving `return 200` with `keepalive` lines (e.g.
/// `keepalive_timeout 3s 2s;`), one process, everything under a temporary
/// prefix.
pub fn nginx(keepalive: &str) -> Option<External> {
    nginx_with(keepalive, "return 200 \"hello\\n\";")
}

/// nginx as a reverse proxy in front of `upstream` with its default
/// headers (no `X-Forwarded-For`, its clients' `User-Agent` passed on):
/// `location /` takes `proxy` (e.g. `proxy_pass http://127.0.0.1:PORT;`),
/// and `backend` names `upstream` in an `upstream` block with
/// `keepalive 8` (`proxy_pass http://backend;` pools its connections).
pub fn nginx_proxy(upstream: SocketAddr, proxy: &str) -> Option<External> {
    let upstream_block = format!("upstream backend {{ server {upstream}; keepalive 8; }}");
    nginx_with(&upstream_block, proxy)
}

/// nginx with `http_lines` in its `http` block and `location` as its one
/// server's `location /`.
fn nginx_with(http_lines: &str, location: &str) -> Option<External> {
    let bin = require("nginx", &["nginx", "/usr/sbin/nginx"])?;
    let port = free_port();
    let dir = std::env::temp_dir().join(format!("kas-probe-nginx-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create the nginx prefix");
    let d = dir.display();
    let conf = format!(
        "master_process off;\n\
         worker_processes 1;\n\
         error_log {d}/error.log;\n\
         pid {d}/nginx.pid;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n\
           access_log off;\n\
           client_body_temp_path {d}/body; proxy_temp_path {d}/proxy;\n\
           fastcgi_temp_path {d}/fastcgi; uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;\n\
           {http_lines}\n\
           server {{ listen 127.0.0.1:{port}; location / {{ {location} }} }}\n\
         }}\n"
    );
    std::fs::write(dir.join("nginx.conf"), conf).expect("write nginx.conf");
    let mut child = Command::new(bin)
        .arg("-p")
        .arg(&dir)
        .arg("-e")
        .arg(dir.join("error.log"))
        .arg("-c")
        .arg(dir.join("nginx.conf"))
        .args(["-g", "daemon off;"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn nginx");
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    wait_listening(addr, &mut child, "nginx");
    Some(External {
        child,
        addr,
        dir: Some(dir),
    })
}

/// Node's http server with `keepAliveTimeout` set, on a port it picks.
pub fn node(keep_alive_timeout_ms: u64) -> Option<External> {
    let bin = require("node", &["node", "nodejs"])?;
    let script = format!(
        "const s = require('http').createServer((q, r) => r.end('hello\\n'));\n\
         s.keepAliveTimeout = {keep_alive_timeout_ms};\n\
         s.listen(0, '127.0.0.1', () => console.log(s.address().port));\n"
    );
    let mut child = Command::new(bin)
        .args(["-e", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn node");
    let mut line = String::new();
    let stdout = child.stdout.take().expect("node's stdout");
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("node prints its port");
    let port: u16 = line.trim().parse().expect("node printed a port");
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    wait_listening(addr, &mut child, "node");
    Some(External {
        child,
        addr,
        dir: None,
    })
}

/// uvicorn at `--timeout-keep-alive seconds` serving a one-line ASGI app,
/// from the examples venv (`KAS_EXAMPLES_VENV`, default
/// target/examples-venv, which .ci/run makes with uvicorn in it).
pub fn uvicorn(timeout_keep_alive: u64) -> Option<External> {
    let venv = super::support::venv::examples_venv();
    let python = venv.join("bin/python");
    let usable = Command::new(&python)
        .args(["-c", "import uvicorn"])
        .output()
        .is_ok_and(|out| out.status.success());
    if !usable {
        super::support::skip::because(&format!(
            "no uvicorn in the venv at {} (.ci/run installs it)",
            venv.display()
        ));
        return None;
    }
    let port = free_port();
    let dir = std::env::temp_dir().join(format!("kas-probe-uvicorn-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create the app directory");
    let app = "async def app(scope, receive, send):\n\
               \x20   await send({'type': 'http.response.start', 'status': 200,\n\
               \x20               'headers': [(b'content-type', b'text/plain')]})\n\
               \x20   await send({'type': 'http.response.body', 'body': b'hello\\n'})\n";
    std::fs::write(dir.join("lbhop_app.py"), app).expect("write the app");
    let mut child = Command::new(python)
        .args(["-m", "uvicorn", "--app-dir"])
        .arg(&dir)
        .args([
            "lbhop_app:app",
            "--host",
            "127.0.0.1",
            "--log-level",
            "warning",
        ])
        .args(["--port", &port.to_string()])
        .args(["--timeout-keep-alive", &timeout_keep_alive.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn uvicorn");
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    wait_listening(addr, &mut child, "uvicorn");
    Some(External {
        child,
        addr,
        dir: Some(dir),
    })
}

/// Python's `http.server` (HTTP/1.0: it closes the connection after every
/// response), serving an empty directory on a port of its own.
pub fn python_http_server() -> Option<External> {
    let bin = require("python3", &["python3"])?;
    let port = free_port();
    let dir = std::env::temp_dir().join(format!("kas-probe-python-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create the served directory");
    let mut child = Command::new(bin)
        .args(["-m", "http.server", "--bind", "127.0.0.1"])
        .arg(port.to_string())
        .arg("--directory")
        .arg(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn python3 -m http.server");
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    wait_listening(addr, &mut child, "python3 -m http.server");
    Some(External {
        child,
        addr,
        dir: Some(dir),
    })
}

/// Serves keep-alive responses, and resets (SO_LINGER 0, then close) a
/// connection that stays idle for `idle`. Waits in epoll (a high-resolution
/// timeout): a socket read timeout would close up to ~30 ms late, as the
/// kernel's timer wheel rounds long timeouts.
pub fn resetting_server(idle: Duration) -> SocketAddr {
    serve(move |stream| {
        let _ = stream.set_nonblocking(true);
        let Ok(std) = stream.try_clone() else { return };
        let mut stream = mio::net::TcpStream::from_std(std);
        let Ok(mut poll) = mio::Poll::new() else {
            return;
        };
        let mut events = mio::Events::with_capacity(4);
        if poll
            .registry()
            .register(&mut stream, mio::Token(0), mio::Interest::READABLE)
            .is_err()
        {
            return;
        }
        let mut deadline = Instant::now() + idle;
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                // Idle too long: close abortively.
                let _ = socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO));
                return;
            }
            if poll.poll(&mut events, Some(left)).is_err() {
                return;
            }
            loop {
                match stream.read(&mut chunk) {
                    Ok(0) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(_) => return,
                }
            }
            while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                buf.drain(..end + 4);
                let response =
                    b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\r\nok\n";
                if stream.write_all(response).is_err() {
                    return;
                }
                deadline = Instant::now() + idle;
            }
        }
    })
}

/// The response the small fixtures send: keep-alive, a 3-byte body.
const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n";

/// Serves keep-alive responses, and closes idle connections (FIN) only in
/// passes every `period`, at whole multiples of it from its start: a
/// connection idle since `t` closes at the first pass at or after
/// `t + timeout`, so its idle time is anywhere from `timeout` to
/// `timeout + period`, by when it went idle.
pub fn periodic_closer(timeout: Duration, period: Duration) -> SocketAddr {
    closing_in_passes(timeout, period, PassesAt::Grid)
}

/// As [`periodic_closer`], but its passes follow its load, as gunicorn's
/// gthread loop and waitress's cleanup do: a pass runs whenever a
/// connection is accepted or a request answered, and `period` after the
/// last pass when nothing happens. The close still needs `timeout` idle.
pub fn load_following_closer(timeout: Duration, period: Duration) -> SocketAddr {
    closing_in_passes(timeout, period, PassesAt::Load)
}

/// As [`periodic_closer`], but its passes come as waitress's cleanup
/// does: its loop wakes on every event and at most `interval` after the
/// last wake-up, and runs a pass at the first wake-up `interval` or more
/// after the last pass. A wake-up just before the interval ends puts the
/// next pass nearly two intervals on; here one comes after every second
/// pass (as an event would), so the idle times always spread over more
/// than an interval, all at or past `timeout` (an exact float stamp).
pub fn interval_closer(timeout: Duration, interval: Duration) -> SocketAddr {
    closing_in_passes(timeout, interval, PassesAt::Interval)
}

/// When a fixture's passes come.
#[derive(Clone, Copy, PartialEq)]
enum PassesAt {
    /// At whole multiples of the period from its start.
    Grid,
    /// At every event, and a period after the last pass without one.
    Load,
    /// At the first wake-up a period after the last pass (waitress).
    Interval,
}

fn closing_in_passes(timeout: Duration, period: Duration, at: PassesAt) -> SocketAddr {
    /// Each connection: a handle to shut it, and since when it is idle.
    type Idle = Arc<Mutex<Vec<(u64, TcpStream, Option<Instant>)>>>;
    let conns: Idle = Arc::default();
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    let addr = listener.local_addr().expect("local_addr");
    let passes = conns.clone();
    let (activity, woken) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let epoch = Instant::now();
        let mut next = epoch + period;
        let early = period.saturating_sub(Duration::from_millis(10));
        for k in 1u32.. {
            match at {
                PassesAt::Grid => {
                    let at = epoch + period * k;
                    std::thread::sleep(at.saturating_duration_since(Instant::now()));
                }
                PassesAt::Load => {
                    let _ = woken.recv_timeout(period);
                }
                PassesAt::Interval => {
                    let wake = if k % 2 == 0 { early } else { period };
                    let _ = woken.recv_timeout(wake);
                    while Instant::now() < next {
                        let _ = woken.recv_timeout(period);
                    }
                    next = Instant::now() + period;
                }
            }
            let now = Instant::now();
            passes.lock().unwrap().retain(|(_, stream, since)| {
                let due = since.is_some_and(|since| since + timeout <= now);
                if due {
                    let _ = stream.shutdown(std::net::Shutdown::Both);
                }
                !due
            });
        }
    });
    std::thread::spawn(move || {
        for (id, stream) in (0u64..).zip(listener.incoming()) {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_nodelay(true);
            let Ok(handle) = stream.try_clone() else {
                continue;
            };
            conns.lock().unwrap().push((id, handle, None));
            let forget = conns.clone();
            let conns = conns.clone();
            let activity = activity.clone();
            let _ = activity.send(());
            // Marks the connection idle (Some) or busy (None); false once
            // a pass has closed it.
            let mark = move |since: Option<Instant>| {
                let _ = activity.send(());
                let mut conns = conns.lock().unwrap();
                match conns.iter_mut().find(|(i, ..)| *i == id) {
                    Some(entry) => {
                        entry.2 = since;
                        true
                    }
                    None => false,
                }
            };
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let n = match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    if !mark(None) {
                        break;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        buf.drain(..end + 4);
                        if stream.write_all(OK).is_err() {
                            return;
                        }
                    }
                    if buf.is_empty() && !mark(Some(Instant::now())) {
                        break;
                    }
                }
                forget.lock().unwrap().retain(|(i, ..)| *i != id);
                let _ = stream.shutdown(std::net::Shutdown::Both);
            });
        }
    });
    addr
}

/// Answers a connection's first request only (later ones are read, never
/// answered), and closes it (FIN) after `idle` without a byte from the
/// client: every reuse fails, however soon.
pub fn answers_once_server(idle: Duration) -> SocketAddr {
    serve(move |stream| {
        let _ = stream.set_nodelay(true);
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        if stream.write_all(OK).is_err() || stream.set_read_timeout(Some(idle)).is_err() {
            return;
        }
        while let Ok(n) = stream.read(&mut chunk) {
            if n == 0 {
                return;
            }
        }
        let _ = stream.shutdown(std::net::Shutdown::Both);
    })
}

/// Answers every connection with bytes that are not HTTP.
pub fn not_http_server() -> SocketAddr {
    serve(|stream| {
        let _ = stream.write_all(b"SSH-2.0-OpenSSH_9.2p1\r\n");
        std::thread::sleep(Duration::from_secs(2));
    })
}

/// Accepts and reads, never answers (each connection held 30 s).
pub fn silent_server() -> SocketAddr {
    serve(|stream| {
        let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
        let mut chunk = [0u8; 1024];
        while let Ok(n) = stream.read(&mut chunk) {
            if n == 0 {
                return;
            }
        }
    })
}

/// Reads a connection's first request head; false if it closed first.
fn read_head(stream: &mut TcpStream) -> bool {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    true
}

/// Writes `bytes` in pieces of `piece` bytes every `every`, then `then`
/// again and again, until the client goes away.
fn trickle(stream: &mut TcpStream, bytes: &[u8], piece: usize, every: Duration, then: &[u8]) {
    let _ = stream.set_nodelay(true);
    for piece in bytes.chunks(piece).chain(std::iter::repeat(then)) {
        if stream.write_all(piece).is_err() {
            return;
        }
        std::thread::sleep(every);
    }
}

/// Answers every request with `100 Continue`, again every 100 ms, and
/// never with a final response.
pub fn endless_continue_server() -> SocketAddr {
    serve(|stream| {
        if read_head(stream) {
            let interim = b"HTTP/1.1 100 Continue\r\n\r\n";
            trickle(
                stream,
                interim,
                interim.len(),
                Duration::from_millis(100),
                interim,
            );
        }
    })
}

/// Sends its response head a byte every 400 ms (each byte well within any
/// read timeout), the head never finished.
pub fn trickling_head_server() -> SocketAddr {
    serve(|stream| {
        if read_head(stream) {
            let head = b"HTTP/1.1 200 OK\r\nServer: drip\r\nX-Padding: ";
            trickle(stream, head, 1, Duration::from_millis(400), b"a");
        }
    })
}

/// Sends a whole head promising a 1 MB body, then the body a byte every
/// 400 ms.
pub fn trickling_body_server() -> SocketAddr {
    serve(|stream| {
        if read_head(stream) {
            let head = b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n";
            trickle(stream, head, head.len(), Duration::from_millis(400), b"b");
        }
    })
}

/// An https port as nginx keeps one: a plain request gets `400` (with
/// `Connection: close`), a TLS hello an alert (handshake_failure).
pub fn https_port_answering_plain_requests_400() -> SocketAddr {
    serve(|stream| {
        let mut first = [0u8; 1];
        if stream.read_exact(&mut first).is_err() {
            return;
        }
        if first[0] == 22 {
            let _ = stream.write_all(&[21, 3, 3, 0, 2, 2, 40]);
            return;
        }
        if read_head(stream) {
            let _ = stream.write_all(
                b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 48\r\n\r\n\
                  The plain HTTP request was sent to HTTPS port.\r\n",
            );
        }
    })
}

/// A listener on port 0 handing each connection to `handle` on a thread.
fn serve(handle: impl Fn(&mut TcpStream) + Send + Sync + Copy + 'static) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    let addr = listener.local_addr().expect("local_addr");
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || handle(&mut stream));
        }
    });
    addr
}
