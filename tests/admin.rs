//! The admin listener against an in-process server: `/metrics` counts what
//! the test did, `/timers` shows idle sockets in their unref'd list and
//! in-flight `/delay`s as ref'd, `/healthz` flips on shutdown.

mod common_ops;

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::time::Duration;

use common_ops::{Client, eventually, get};
use keepalive_server::{Config, Server, ServerHandle, admin};
use serde_json::Value;

const WITHIN: Duration = Duration::from_secs(10);

struct Fixture {
    handle: ServerHandle,
    addr: SocketAddr,
    admin: SocketAddr,
}

/// One worker (so list lengths are exact), the admin listener on port 0.
fn start(keep_alive: &str, buffer: &str) -> Fixture {
    let mut config = Config::with_listen("127.0.0.1:0".parse().unwrap());
    config.workers = Some(NonZeroUsize::new(1).unwrap());
    config.keep_alive_timeout = keepalive_server::config::parse_duration(keep_alive).unwrap();
    config.keep_alive_buffer = keepalive_server::config::parse_duration(buffer).unwrap();
    let handle = Server::bind(config.settings()).unwrap().start().unwrap();
    let (admin, _thread) = admin::spawn("127.0.0.1:0".parse().unwrap(), handle.remote()).unwrap();
    let addr = handle.local_addr();
    Fixture {
        handle,
        addr,
        admin,
    }
}

impl Fixture {
    fn metrics(&self) -> String {
        let response = get(self.admin, "/metrics");
        assert_eq!(response.status, 200);
        response.text()
    }

    fn timers(&self) -> Value {
        let response = get(self.admin, "/timers");
        assert_eq!(response.status, 200);
        assert_eq!(response.header("content-type"), Some("application/json"));
        serde_json::from_slice(&response.body).expect("/timers is JSON")
    }

    /// A persistent connection that has had one `GET /` answered.
    fn idle_client(&self) -> Client {
        let mut client = Client::connect(self.addr);
        let response = client.request("/");
        assert_eq!(response.status, 200);
        assert!(!response.closes());
        client
    }
}

/// The value of one sample, `series` written exactly as exposed (labels included).
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let value = line.strip_prefix(series)?.strip_prefix(' ')?;
        Some(value.trim().parse().expect("a sample value"))
    })
}

fn expect_sample(metrics: &str, series: &str, want: f64) -> Result<(), String> {
    match sample(metrics, series) {
        Some(got) if got == want => Ok(()),
        got => Err(format!("{series} = {got:?}, wanted {want}\n{metrics}")),
    }
}

/// Every timer list of every worker.
fn lists(timers: &Value) -> Vec<&Value> {
    timers["workers"]
        .as_array()
        .expect("workers is an array")
        .iter()
        .flat_map(|w| w["lists"].as_array().expect("lists is an array"))
        .collect()
}

#[test]
fn metrics_is_prometheus_text_with_help_and_type_for_every_series() {
    let f = start("5s", "1s");
    let response = get(f.admin, "/metrics");
    assert_eq!(response.status, 200);
    assert!(
        response
            .header("content-type")
            .is_some_and(|t| t.starts_with("text/plain")),
        "{:?}",
        response.headers
    );
    let text = response.text();
    assert!(text.contains("# HELP "), "{text}");
    assert!(text.contains("# TYPE "), "{text}");
    let mut samples = 0;
    for line in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let name = line.split(['{', ' ']).next().unwrap();
        assert!(
            name.starts_with("kas_"),
            "series without kas_ prefix: {line}"
        );
        assert!(
            text.contains(&format!("# TYPE {name} ")),
            "no # TYPE for {name}"
        );
        assert!(
            text.contains(&format!("# HELP {name} ")),
            "no # HELP for {name}"
        );
        let value = line.rsplit(' ').next().unwrap();
        assert!(value.parse::<f64>().is_ok(), "bad sample value: {line}");
        samples += 1;
    }
    assert!(samples >= 10, "only {samples} samples:\n{text}");
}

#[test]
fn metrics_count_accepts_requests_and_idle_connections() {
    let f = start("5s", "1s");
    // Three requests on one connection, then a 200 and a 404 on another.
    let mut a = f.idle_client();
    assert_eq!(a.request("/").status, 200);
    assert_eq!(a.request("/").status, 200);
    let mut b = f.idle_client();
    assert_eq!(b.request("/no/such/page").status, 404);

    eventually(WITHIN, || {
        let m = f.metrics();
        expect_sample(&m, "kas_connections_accepted_total", 2.0)?;
        expect_sample(&m, "kas_requests_total{class=\"2xx\"}", 4.0)?;
        expect_sample(&m, "kas_requests_total{class=\"4xx\"}", 1.0)?;
        expect_sample(&m, "kas_requests_total{class=\"5xx\"}", 0.0)?;
        // Two answers on `a` and one on `b` came on a reused connection.
        expect_sample(&m, "kas_keepalive_reused_requests_total", 3.0)?;
        expect_sample(&m, "kas_requests_per_connection", 2.5)?;
        expect_sample(&m, "kas_connections{state=\"idle\"}", 2.0)?;
        expect_sample(&m, "kas_connections{state=\"writing\"}", 0.0)
    });

    // A third idle socket shows up in the gauge; closing one takes it out.
    let c = f.idle_client();
    eventually(WITHIN, || {
        expect_sample(&f.metrics(), "kas_connections{state=\"idle\"}", 3.0)
    });
    drop(a);
    eventually(WITHIN, || {
        let m = f.metrics();
        expect_sample(&m, "kas_connections{state=\"idle\"}", 2.0)?;
        expect_sample(&m, "kas_connections_closed_total{cause=\"client\"}", 1.0)
    });
    drop((b, c));
}

#[test]
fn metrics_count_closes_by_keep_alive_timeout() {
    let f = start("1s", "0s");
    let m = f.metrics();
    assert_eq!(
        sample(
            &m,
            "kas_connections_closed_total{cause=\"keep_alive_timeout\"}"
        ),
        Some(0.0),
        "{m}"
    );
    let mut idle = f.idle_client();
    let mut other = f.idle_client();
    eventually(WITHIN, || {
        expect_sample(&f.metrics(), "kas_connections{state=\"idle\"}", 2.0)
    });
    let waited = idle.expect_closed(WITHIN);
    assert!(
        waited <= Duration::from_secs(6),
        "closed after {waited:?} (timeout 1s)"
    );
    other.expect_closed(WITHIN);
    eventually(WITHIN, || {
        let m = f.metrics();
        expect_sample(
            &m,
            "kas_connections_closed_total{cause=\"keep_alive_timeout\"}",
            2.0,
        )?;
        expect_sample(&m, "kas_connections_closed_total{cause=\"client\"}", 0.0)?;
        expect_sample(&m, "kas_connections{state=\"idle\"}", 0.0)?;
        expect_sample(&m, "kas_timers_refed", 0.0)
    });
}

#[test]
fn timers_show_idle_sockets_in_one_unrefed_list() {
    const N: usize = 4;
    let f = start("5s", "1s");
    let clients: Vec<Client> = (0..N).map(|_| f.idle_client()).collect();
    let timers = eventually(WITHIN, || {
        let timers = f.timers();
        let found = lists(&timers).into_iter().any(|list| {
            list["duration_ms"] == 6000 && list["length"] == N && list["refed"] == false
        });
        if found {
            Ok(timers)
        } else {
            Err(format!("no 6000 ms list of {N} unref'd timers: {timers}"))
        }
    });
    assert_eq!(timers["stopping"], false);
    let worker = &timers["workers"][0];
    assert_eq!(worker["accepting"], true);
    assert_eq!(worker["connections"]["idle"], N);
    // Idle sockets keep nothing alive.
    assert_eq!(worker["ref_count"], 0, "{timers}");
    let list = lists(&timers)
        .into_iter()
        .find(|l| l["duration_ms"] == 6000)
        .unwrap()
        .clone();
    assert_eq!(list["refed_timers"], 0);
    let next = list["next_expiry_in_ms"].as_i64().unwrap();
    assert!((0..=6000).contains(&next), "next_expiry_in_ms {next}");
    drop(clients);
}

#[test]
fn timers_show_an_in_flight_delay_as_refed() {
    let f = start("5s", "1s");
    let mut delayed = Client::connect(f.addr);
    delayed.get("/delay/1500");
    let timers = eventually(WITHIN, || {
        let timers = f.timers();
        let found = lists(&timers).into_iter().any(|list| {
            list["duration_ms"] == 1500 && list["refed"] == true && list["length"] == 1
        });
        if found {
            Ok(timers)
        } else {
            Err(format!("no ref'd 1500 ms list: {timers}"))
        }
    });
    let worker = &timers["workers"][0];
    assert!(worker["ref_count"].as_u64().unwrap() >= 1, "{timers}");
    assert_eq!(worker["connections"]["writing"], 1, "{timers}");
    let m = f.metrics();
    assert!(sample(&m, "kas_timers_refed").unwrap() >= 1.0, "{m}");

    let response = delayed.read_response();
    assert_eq!(response.status, 200);
    // Answered: the ref'd timer is gone, the socket now idles unref'd.
    eventually(WITHIN, || {
        let timers = f.timers();
        let refed = lists(&timers).into_iter().any(|l| l["refed"] == true);
        if refed || timers["workers"][0]["ref_count"] != 0 {
            Err(format!("still ref'd: {timers}"))
        } else {
            Ok(())
        }
    });
}

#[test]
fn healthz_turns_503_on_shutdown() {
    let f = start("5s", "1s");
    let response = get(f.admin, "/healthz");
    assert_eq!(response.status, 200);
    f.handle.shutdown();
    let response = get(f.admin, "/healthz");
    assert_eq!(response.status, 503);
    assert!(response.closes());
    // The rest of the admin view still answers while (and after) draining.
    let timers = f.timers();
    assert_eq!(timers["stopping"], true);
    assert_eq!(f.handle.join().map_err(|e| e.to_string()), Ok(()));
}

#[test]
fn unknown_paths_and_methods_are_refused() {
    let f = start("5s", "1s");
    assert_eq!(get(f.admin, "/").status, 404);
    assert_eq!(get(f.admin, "/metricsx").status, 404);
    // A query string does not hide the route.
    assert_eq!(get(f.admin, "/healthz?verbose=1").status, 200);
    let mut client = Client::connect(f.admin);
    client.send(b"POST /metrics HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(client.read_response().status, 405);
    let mut client = Client::connect(f.admin);
    client.send(b"\x16\x03\x01 not http at all\r\n\r\n");
    assert_eq!(client.read_response().status, 400);
}

#[test]
fn head_answers_headers_only() {
    use std::io::Read;
    let f = start("5s", "1s");
    for path in ["/healthz", "/metrics", "/nope"] {
        let mut client = Client::connect(f.admin);
        client.send(format!("HEAD {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        let mut raw = Vec::new();
        client.stream.read_to_end(&mut raw).unwrap();
        let text = String::from_utf8_lossy(&raw);
        let (head, body) = text.split_once("\r\n\r\n").expect("a complete head");
        assert!(head.contains("Content-Length: "), "{head}");
        assert!(!head.contains("Content-Length: 0\r"), "{head}");
        assert_eq!(body, "", "HEAD {path} sent a body");
    }
}
