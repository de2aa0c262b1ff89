//! Every entry of the advice table (src/advice/clients.rs) run as its real
//! client against this server closing idle connections at exactly 2 s
//! (keep-alive buffer 0), as the server's `/peers` counts it: the advised
//! setting for a safe value of 1,900 ms keeps reuses under the deadline
//! and loses no request, and the "do not pool" setting opens a connection
//! per request. The responses say no `Keep-Alive:` hint
//! (`?advertise=none`), so the setting alone is what is tried (Node and
//! undici would otherwise lower theirs to the hint).
//!
//! Clients whose setting cannot keep them under 1,900 ms (JDK and libcurl
//! take whole seconds, checked coarsely; requests and urllib3 have none)
//! are advised the retry or "do not pool" there, so their "do not pool"
//! is what runs at the boundary; libcurl's whole-second rule (set to N, a
//! connection may be reused up to a second past N) runs against a 3 s
//! server. Envoy is in no registry here and reqwest is not built: the
//! table in docs/lab.md says how they were checked.
//!
//! The clients are driven by tests/clients: one script per language (two
//! for Java), the same pauses for each. They need Java and Debian's OkHttp
//! jars, Go, Node with the npm packages of tests/clients, a Python venv
//! with httpx, aiohttp and requests (`KAS_CLIENTS_VENV`, default
//! target/clients-venv), libcurl, nginx and HAProxy: .ci/run installs
//! them, and a missing one fails under `CI=true` (tests/support/skip.rs).

mod support;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::binary::wait_timeout;
use support::client::{Client, get};
use support::eventually;
use support::files::{TempDir, repo_path};
use support::server::{AdminFixture, keep_alive, start_with_admin};
use support::skip;

/// Pauses before each request after the first, seconds: one well under
/// the advised 1.9 s (it should reuse), one between it and the server's
/// 2 s, one past the server's.
const ADVISED_PAUSES: &[&str] = &["1.2", "1.95", "2.05"];
/// Pauses for the "do not pool" runs: reuse would be safe, none must come.
const NO_POOL_PAUSES: &[&str] = &["0.2", "0.2"];
/// A reuse this idle, ms, came past the advised 1,900 ms (the pause of
/// 1.95 s): the setting did not hold.
const PAST_ADVISED_MS: f64 = 1900.0;
/// How long a client run may take, start-up (a JVM, `go run`) included.
const RUN_LIMIT: Duration = Duration::from_secs(60);

/// What the server counted of one client run (its one `/peers` entry).
#[derive(Debug)]
struct Counted {
    connections: u64,
    requests: u64,
    /// The longest idle gap before a reuse, ms (none if no reuse).
    longest_reuse_ms: Option<f64>,
    /// Requests that met a connection the server had closed: lost, or
    /// retried by the client.
    late_requests: u64,
}

impl Counted {
    /// The advised setting held: it still pooled (the short pause reused
    /// a connection), no reuse came past the advised value, none lost.
    fn assert_advised_held(&self, client: &str) {
        assert!(
            self.connections < self.requests,
            "{client} pools with the advised setting: {self:?}"
        );
        let longest = self.longest_reuse_ms.unwrap_or(0.0);
        assert!(
            longest < PAST_ADVISED_MS,
            "{client} reused a connection idle {longest} ms: {self:?}"
        );
        assert_eq!(self.late_requests, 0, "{client}: {self:?}");
    }

    /// The "do not pool" setting opened a connection per request.
    fn assert_one_connection_each(&self, client: &str) {
        assert_eq!(
            (self.connections, self.late_requests),
            (self.requests, 0),
            "{client} without a pool: {self:?}"
        );
    }
}

/// This server closing idle connections at `timeout` (no buffer), with
/// its admin listener.
struct Boundary {
    fixture: AdminFixture,
}

impl Boundary {
    fn start(timeout: &str) -> Boundary {
        Boundary {
            fixture: start_with_admin(|c| keep_alive(c, timeout, "0s")),
        }
    }

    fn url(&self) -> String {
        format!("http://{}/?advertise=none", self.fixture.addr)
    }

    /// Runs `client` (a driver from tests/clients, its URL and pauses to
    /// be appended) to its exit, checks each request was answered, and
    /// returns what the server counted.
    fn run(&self, mut client: Command, pauses: &[&str]) -> Counted {
        client.arg(self.url()).args(pauses);
        let output = run_driver(client);
        let answered = output.lines().filter(|l| *l == "ok 200").count();
        assert_eq!(
            answered,
            pauses.len() + 1,
            "every request answered: {output}"
        );
        self.counted(answered as u64)
    }

    /// The one peer's counts, once at least `requests` are in (a request
    /// lost and retried by the client is counted too).
    fn counted(&self, requests: u64) -> Counted {
        let peer = eventually(Duration::from_secs(10), || {
            let body = get(self.fixture.admin, "/peers").body;
            let doc: Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
            match &doc["peers"][0] {
                peer if peer["requests"].as_u64() >= Some(requests) => Ok(peer.clone()),
                other => Err(format!("{requests} requests not yet counted: {other}")),
            }
        });
        let count = |key: &str| {
            peer[key]
                .as_u64()
                .unwrap_or_else(|| panic!("{key}: {peer}"))
        };
        Counted {
            connections: count("connections"),
            requests: count("requests"),
            longest_reuse_ms: peer["reuse_gap_ms"]["max"].as_f64(),
            late_requests: count("late_requests"),
        }
    }
}

/// Runs a client driver to its exit; its stdout, after checking it
/// succeeded.
fn run_driver(mut client: Command) -> String {
    client.stdin(Stdio::null());
    let (status, stdout, stderr) = support::binary::run_to_exit(client, RUN_LIMIT);
    assert!(status.success(), "{status}: {stdout}\n{stderr}");
    eprintln!("{}", stdout.lines().next().unwrap_or("no version line"));
    stdout
}

/// Runs `advised` (unless `None`) and `no_pool` at once, each against a
/// 2 s server of its own, and checks what each promised.
fn at_the_boundary(name: &str, advised: Option<Command>, no_pool: Command) {
    thread::scope(|scope| {
        let advised = advised
            .map(|client| scope.spawn(move || Boundary::start("2s").run(client, ADVISED_PAUSES)));
        let no_pool = Boundary::start("2s").run(no_pool, NO_POOL_PAUSES);
        no_pool.assert_one_connection_each(name);
        if let Some(advised) = advised {
            advised.join().unwrap().assert_advised_held(name);
        }
    });
}

/// Whether `program` runs (`program ARG` exits 0); says why not if not.
fn have(program: &str, arg: &str) -> bool {
    let runs = Command::new(program)
        .arg(arg)
        .output()
        .is_ok_and(|out| out.status.success());
    if !runs {
        skip::because(&format!("{program} is not installed (.ci/run installs it)"));
    }
    runs
}

/// A command run in tests/clients.
fn in_clients(program: &str, args: &[&str]) -> Command {
    let mut command = Command::new(program);
    command.current_dir(repo_path("tests/clients")).args(args);
    command
}

/// The venv's Python running tests/clients/pauses.py for `client`.
fn python(client: &str, mode: &str) -> Option<Command> {
    let venv = std::env::var_os("KAS_CLIENTS_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_path("target/clients-venv"));
    let python = venv.join("bin/python");
    let usable = Command::new(&python)
        .args(["-c", "import httpx, aiohttp, requests"])
        .output()
        .is_ok_and(|out| out.status.success());
    if !usable {
        skip::because(&format!(
            "no Python venv with httpx, aiohttp and requests at {} (.ci/run makes it)",
            venv.display()
        ));
        return None;
    }
    let python = python.to_str().expect("a UTF-8 path").to_owned();
    Some(in_clients(&python, &["pauses.py", client, mode]))
}

/// Node running tests/clients/pauses.mjs for `client`.
fn node(client: &str, mode: &str) -> Option<Command> {
    if !have("node", "--version") {
        return None;
    }
    if !repo_path("tests/clients/node_modules/undici").exists() {
        skip::because("tests/clients has no node_modules (.ci/run runs npm ci there)");
        return None;
    }
    Some(in_clients("node", &["pauses.mjs", client, mode]))
}

/// The Python `client` at the boundary: its advised setting and its "do
/// not pool".
fn python_at_the_boundary(client: &str) {
    if let (Some(advised), Some(no_pool)) = (python(client, "advised"), python(client, "nopool")) {
        at_the_boundary(client, Some(advised), no_pool);
    }
}

#[test]
fn httpx_keepalive_expiry_holds_and_no_keepalive_connections_pools_none() {
    python_at_the_boundary("httpx");
}

#[test]
fn aiohttp_keepalive_timeout_holds_and_force_close_pools_none() {
    python_at_the_boundary("aiohttp");
}

/// requests and urllib3 have no idle timeout: their advice is the retry
/// or `Connection: close`, which is what runs.
#[test]
fn requests_and_urllib3_with_connection_close_open_one_connection_each() {
    let (Some(requests), Some(urllib3)) =
        (python("requests", "nopool"), python("urllib3", "nopool"))
    else {
        return;
    };
    at_the_boundary("python-requests", None, requests);
    at_the_boundary("urllib3", None, urllib3);
}

#[test]
fn go_idle_conn_timeout_holds_and_disable_keep_alives_pools_none() {
    if !have("go", "version") {
        return;
    }
    at_the_boundary(
        "Go net/http",
        Some(in_clients("go", &["run", "pauses.go", "advised"])),
        in_clients("go", &["run", "pauses.go", "nopool"]),
    );
}

/// Node's http.Agent (axios uses one), agentkeepalive, undici and Node's
/// fetch: each setting as the table writes it.
#[test]
fn node_agents_and_undici_hold_their_timeouts_and_pool_none_when_told() {
    let clients = ["agent", "axios", "agentkeepalive", "undici", "fetch"];
    let mut runs = Vec::new();
    for client in clients {
        let (Some(advised), Some(no_pool)) = (node(client, "advised"), node(client, "nopool"))
        else {
            return;
        };
        runs.push((client, advised, no_pool));
    }
    // At once: their time is mostly the pauses.
    thread::scope(|scope| {
        for (client, advised, no_pool) in runs {
            scope.spawn(move || at_the_boundary(client, Some(advised), no_pool));
        }
    });
}

/// The JDK's setting cannot say 1.9 s (set to 1 it reused connections
/// idle 1,984 ms at a 2 s server and 2,606 ms at a 6 s one): its advice
/// there is the retry or `Connection: close` (allowed as a restricted
/// header), which is what runs.
#[test]
fn java_http_client_with_connection_close_opens_one_connection_each() {
    if !have("java", "-version") {
        return;
    }
    let no_pool = in_clients("java", &["Pauses.java", "nopool"]);
    at_the_boundary("Java HttpClient", None, no_pool);
}

/// OkHttp as Debian ships it (libokhttp-java, 3.x: the same
/// `ConnectionPool` as 4.x), its jars on the class path.
#[test]
fn okhttp_keep_alive_duration_holds_and_no_idle_connections_pools_none() {
    let jars = ["/usr/share/java/okhttp.jar", "/usr/share/java/okio.jar"];
    if !have("java", "-version") {
        return;
    }
    if let Some(missing) = jars.iter().find(|jar| !std::path::Path::new(jar).exists()) {
        skip::because(&format!("no {missing} (.ci/run installs libokhttp-java)"));
        return;
    }
    let okhttp = |mode| in_clients("java", &["-cp", &jars.join(":"), "OkHttpPauses.java", mode]);
    at_the_boundary("OkHttp", Some(okhttp("advised")), okhttp("nopool"));
}

/// libcurl through ctypes: `CURLOPT_FORBID_REUSE` at 1.9 s, and the
/// whole-second rule for `CURLOPT_MAXAGE_CONN` at 3 s.
#[test]
fn libcurl_forbid_reuse_opens_one_connection_each() {
    let (Some(no_pool), Some(seconds)) =
        (python("libcurl", "nopool"), python("libcurl", "seconds"))
    else {
        return;
    };
    at_the_boundary("libcurl", None, no_pool);
    whole_seconds_rule("libcurl", seconds);
}

/// Set to 1 s (what the table tells libcurl for a 3 s server: a second
/// under its safe 2,850 ms), the client reuses after 1.5 s idle and never
/// after 2.3 or 2.6 s: a connection outlives the setting by under a
/// second, so the server's 3 s is never met.
fn whole_seconds_rule(name: &str, client: Command) {
    let counted = Boundary::start("3s").run(client, &["1.5", "2.3", "2.6"]);
    assert!(
        counted.connections < counted.requests,
        "{name}: {counted:?}"
    );
    let longest = counted.longest_reuse_ms.unwrap_or(0.0);
    assert!(
        longest < 2300.0,
        "{name} reused at {longest} ms: {counted:?}"
    );
    assert_eq!(counted.late_requests, 0, "{name}: {counted:?}");
}

/// A proxy run as a child process on a port of its own, killed when
/// dropped.
struct Proxy {
    child: Child,
    addr: SocketAddr,
    _dir: TempDir,
}

impl Proxy {
    /// Starts `program` with `args`, where `{conf}` is the path of the
    /// file `conf`, written to a fresh directory (`{dir}`, in `args` and
    /// `conf`), `{port}` in it replaced by the port it is to listen on.
    fn start(program: &str, args: &[&str], conf: &str) -> Proxy {
        let dir = TempDir::new();
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let text = conf
            .replace("{dir}", dir.path.to_str().unwrap())
            .replace("{port}", &port.to_string());
        let path = dir.file("proxy.conf", text.as_bytes());
        let args = args.iter().map(|a| {
            a.replace("{conf}", path.to_str().unwrap())
                .replace("{dir}", dir.path.to_str().unwrap())
        });
        let mut child = Command::new(program)
            .args(args)
            .current_dir(&dir.path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {program}: {e}"));
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let started = Instant::now();
        while TcpStream::connect(addr).is_err() {
            let exited = wait_timeout(&mut child, Duration::from_millis(20));
            assert!(exited.is_none(), "{program} exited at start-up: {exited:?}");
            assert!(started.elapsed() < RUN_LIMIT, "{program} never listened");
        }
        Proxy {
            child,
            addr,
            _dir: dir,
        }
    }

    /// One client connection through the proxy: a request, then one
    /// after each pause; the statuses.
    fn requests(&self, pauses: &[f64]) -> Vec<u16> {
        let mut client = Client::connect(self.addr);
        let mut statuses = vec![client.request("/?advertise=none").status];
        for pause in pauses {
            thread::sleep(Duration::from_secs_f64(*pause));
            statuses.push(client.request("/?advertise=none").status);
        }
        statuses
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `proxy(upstream)` in front of a 2 s server: the statuses of requests
/// after `pauses`, and what the server counted.
fn behind(proxy: impl Fn(SocketAddr) -> Proxy, pauses: &[f64]) -> (Vec<u16>, Counted) {
    let boundary = Boundary::start("2s");
    let proxy = proxy(boundary.fixture.addr);
    let statuses = proxy.requests(pauses);
    let counted = boundary.counted(statuses.len() as u64);
    (statuses, counted)
}

const NGINX_CONF: &str = "master_process off; worker_processes 1; pid {dir}/nginx.pid;
error_log {dir}/error.log;
events { worker_connections 64; }
http { access_log off; proxy_temp_path {dir}/proxy; client_body_temp_path {dir}/body;
  fastcgi_temp_path {dir}/f; uwsgi_temp_path {dir}/u; scgi_temp_path {dir}/s;
  upstream app { server UPSTREAM; POOL }
  server { listen 127.0.0.1:{port};
    location / { proxy_pass http://app; proxy_http_version 1.1; proxy_set_header Connection \"\"; } } }";

fn nginx(upstream: SocketAddr, pool: &str) -> Proxy {
    let conf = NGINX_CONF
        .replace("UPSTREAM", &upstream.to_string())
        .replace("POOL", pool);
    let args = [
        "-p",
        "{dir}",
        "-e",
        "stderr",
        "-c",
        "{conf}",
        "-g",
        "daemon off;",
    ];
    Proxy::start(nginx_binary(), &args, &conf)
}

fn nginx_binary() -> &'static str {
    match Command::new("nginx").arg("-v").output() {
        Ok(_) => "nginx",
        Err(_) => "/usr/sbin/nginx",
    }
}

/// nginx's upstream `keepalive_timeout 1900ms` holds; without a
/// `keepalive` directive each request gets its own upstream connection.
#[test]
fn nginx_upstream_keepalive_timeout_holds_and_no_keepalive_pools_none() {
    if !have(nginx_binary(), "-v") {
        return;
    }
    let pauses = [1.2, 1.95, 2.05];
    let advised = |up| nginx(up, "keepalive 4; keepalive_timeout 1900ms;");
    let (statuses, counted) = behind(advised, &pauses);
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    counted.assert_advised_held("nginx");
    let (statuses, counted) = behind(|up| nginx(up, ""), &[0.2, 0.2]);
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    counted.assert_one_connection_each("nginx");
}

const HAPROXY_CONF: &str = "global
  maxconn 64
defaults
  mode http
  timeout connect 2s
  timeout client 30s
  timeout server 30s
frontend in
  bind 127.0.0.1:{port}
  default_backend out
backend out
  BACKEND
  server app UPSTREAM
";

fn haproxy(upstream: SocketAddr, backend: &str) -> Proxy {
    let conf = HAPROXY_CONF
        .replace("UPSTREAM", &upstream.to_string())
        .replace("BACKEND", backend);
    Proxy::start("haproxy", &["-db", "-f", "{conf}"], &conf)
}

/// HAProxy has no idle timeout for server connections: with the advised
/// retries, reuses at the server's deadline lose no request (it replays
/// one that met a close); `option http-server-close` pools none.
#[test]
fn haproxy_retries_lose_nothing_at_the_deadline_and_server_close_pools_none() {
    if !have("haproxy", "-v") {
        return;
    }
    let retries = "retry-on conn-failure empty-response\n  retries 3\n  http-reuse safe";
    let pauses = [1.2, 1.95, 2.0, 2.0, 2.05];
    let (statuses, counted) = behind(|up| haproxy(up, retries), &pauses);
    assert!(
        statuses.iter().all(|s| *s == 200),
        "{statuses:?} {counted:?}"
    );
    assert!(counted.connections < counted.requests, "{counted:?}");
    let close = "option http-server-close";
    let (statuses, counted) = behind(|up| haproxy(up, close), &[0.2, 0.2]);
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    counted.assert_one_connection_each("HAProxy");
}
