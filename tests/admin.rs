//! The admin listener against an in-process server: `/metrics` counts what
//! the test did (parsed as the text exposition format), `/timers` labels
//! every list with what it holds, shows idle sockets in their unref'd list
//! and in-flight `/delay`s as ref'd, `/healthz` flips on shutdown.

mod support;

use std::time::Duration;

use serde_json::Value;
use support::client::{Client, get};
use support::eventually;
use support::exposition::Exposition;
use support::server::{AdminFixture, keep_alive, start_with_admin};

const WITHIN: Duration = Duration::from_secs(10);

type Fixture = AdminFixture;

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
    let f = start_with_admin(|c| keep_alive(c, "5s", "1s"));
    let _idle = f.idle_client();
    let response = get(f.admin, "/metrics");
    assert_eq!(response.status, 200);
    assert_eq!(
        response.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let text = response.text();
    let metrics = Exposition::parse(&text);
    for name in metrics.samples.iter().map(|s| &s.name) {
        assert!(
            name.starts_with("kas_") || name.starts_with("process_"),
            "series outside kas_ and process_: {name}"
        );
    }
    let families = [
        ("kas_connections", "gauge"),
        ("kas_connections_accepted_total", "counter"),
        ("kas_connections_closed_total", "counter"),
        ("kas_requests_total", "counter"),
        ("kas_responses_total", "counter"),
        ("kas_request_duration_seconds", "histogram"),
        ("kas_connection_duration_seconds", "histogram"),
        ("kas_requests_per_connection", "histogram"),
        ("kas_timer_expirations_total", "counter"),
        ("kas_timer_lateness_seconds", "histogram"),
        ("kas_build_info", "gauge"),
        ("process_resident_memory_bytes", "gauge"),
        ("process_open_fds", "gauge"),
        ("process_cpu_seconds_total", "counter"),
        ("process_start_time_seconds", "gauge"),
    ];
    for (name, kind) in families {
        assert_eq!(
            metrics.types.get(name).map(String::as_str),
            Some(kind),
            "{name}"
        );
    }
    // Every family is documented in docs/metrics.md, one line each.
    let guide = std::fs::read_to_string(support::files::repo_path("docs/metrics.md")).unwrap();
    for name in metrics.types.keys() {
        assert!(
            guide.lines().any(|l| l.contains(&format!("`{name}`"))),
            "{name} is not listed in docs/metrics.md"
        );
    }
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        metrics.value("kas_build_info", &[("version", version)]),
        Some(1.0)
    );
    assert!(metrics.value("process_resident_memory_bytes", &[]).unwrap() > 1e6);
    assert!(metrics.value("process_open_fds", &[]).unwrap() >= 4.0);
    let started = metrics.value("process_start_time_seconds", &[]).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        started <= now + 1.0 && started > now - 3600.0,
        "start {started}, now {now}"
    );
    assert!(metrics.value("process_cpu_seconds_total", &[]).unwrap() >= 0.0);
    // Each timer kind has its series, in the words /timers uses.
    for timer in [
        "keep-alive",
        "headers",
        "inactivity",
        "request",
        "delay",
        "date",
    ] {
        assert!(
            metrics
                .value("kas_timer_expirations_total", &[("timer", timer)])
                .is_some(),
            "no expirations series for {timer}"
        );
    }
}

#[test]
fn metrics_count_accepts_requests_and_idle_connections() {
    let f = start_with_admin(|c| keep_alive(c, "5s", "1s"));
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
        expect_sample(&m, "kas_responses_total{code=\"200\",method=\"GET\"}", 4.0)?;
        expect_sample(&m, "kas_responses_total{code=\"404\",method=\"GET\"}", 1.0)?;
        expect_sample(&m, "kas_request_duration_seconds_count", 5.0)?;
        // Two answers on `a` and one on `b` came on a reused connection.
        expect_sample(&m, "kas_keepalive_reused_requests_total", 3.0)?;
        expect_sample(&m, "kas_connections{state=\"idle\"}", 2.0)?;
        expect_sample(&m, "kas_connections{state=\"writing\"}", 0.0)?;
        // Nothing closed yet.
        expect_sample(&m, "kas_connection_duration_seconds_count", 0.0)
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
        expect_sample(&m, "kas_connections_closed_total{cause=\"client\"}", 1.0)?;
        // `a` served three requests in its life.
        expect_sample(&m, "kas_connection_duration_seconds_count", 1.0)?;
        expect_sample(&m, "kas_requests_per_connection_sum", 3.0)?;
        expect_sample(&m, "kas_requests_per_connection_bucket{le=\"2\"}", 0.0)?;
        expect_sample(&m, "kas_requests_per_connection_bucket{le=\"5\"}", 1.0)
    });
    drop((b, c));
}

#[test]
fn metrics_count_closes_by_keep_alive_timeout() {
    let f = start_with_admin(|c| keep_alive(c, "1s", "0s"));
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
        expect_sample(&m, "kas_timers_refed", 0.0)?;
        expect_sample(&m, "kas_timer_expirations_total{timer=\"keep-alive\"}", 2.0)
    });
    let lateness = Exposition::parse(&f.metrics());
    let fired = lateness
        .value("kas_timer_lateness_seconds_count", &[])
        .unwrap();
    assert!(fired >= 2.0, "{fired} expiries measured");
    // A keep-alive close on time: the lateness recorded is small (generous
    // bound: the machine is shared).
    let within_second = lateness
        .value("kas_timer_lateness_seconds_bucket", &[("le", "1")])
        .unwrap();
    assert_eq!(within_second, fired, "a timer fired over a second late");
}

#[test]
fn timers_show_idle_sockets_in_one_unrefed_list() {
    const N: usize = 4;
    let f = start_with_admin(|c| keep_alive(c, "5s", "1s"));
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
    let f = start_with_admin(|c| keep_alive(c, "5s", "1s"));
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
    let f = start_with_admin(|c| keep_alive(c, "5s", "1s"));
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
    let f = start_with_admin(|c| keep_alive(c, "5s", "1s"));
    assert_eq!(get(f.admin, "/metricsx").status, 404);
    assert_eq!(get(f.admin, "/timers/").status, 404);
    // A query string does not hide the route.
    assert_eq!(get(f.admin, "/healthz?verbose=1").status, 200);
    let mut client = Client::connect(f.admin);
    client.send(b"POST /metrics HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n");
    let response = client.read_response();
    assert_eq!(response.status, 405);
    assert_eq!(response.header("allow"), Some("GET, HEAD"));
    assert!(response.closes());
    let mut client = Client::connect(f.admin);
    client.send(b"\x16\x03\x01 not http at all\r\n\r\n");
    assert_eq!(client.read_response().status, 400);
}

#[test]
fn an_event_interval_out_of_range_or_not_a_number_gets_400_naming_the_range() {
    let f = start_with_admin(|c| keep_alive(c, "5s", "1s"));
    for bad in ["50", "abc", "99", "5001", ""] {
        let response = get(f.admin, &format!("/events?interval={bad}"));
        assert_eq!(response.status, 400, "interval={bad}");
        assert!(
            response.text().contains("from 100 to 5000"),
            "interval={bad}: {}",
            response.text()
        );
    }
    let mut client = Client::connect(f.admin);
    client.send(b"GET /events?interval=100 HTTP/1.1\r\nHost: t\r\n\r\n");
    let response = client.read_head_response();
    assert_eq!(response.status, 200, "the bounds themselves are taken");
}

#[test]
fn head_answers_headers_only() {
    use std::io::Read;
    let f = start_with_admin(|c| keep_alive(c, "5s", "1s"));
    for path in ["/healthz", "/metrics", "/timers", "/", "/nope"] {
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

#[test]
fn timers_label_each_list_with_what_it_holds() {
    let f = start_with_admin(|c| keep_alive(c, "5s", "1s"));
    let _idle = f.idle_client(); // keep-alive: 5 s + 1 s buffer
    let _fresh = Client::connect(f.addr); // headers: nothing sent yet
    let mut partial = Client::connect(f.addr);
    partial.send(b"GET / HTTP/1.1\r\nHo"); // headers, and the request deadline
    let mut delayed = Client::connect(f.addr);
    delayed.get("/delay/3000");
    let want = [
        (3_000, "delay"),
        (6_000, "keep-alive"),
        (60_000, "headers"),
        (300_000, "request"),
    ];
    let timers = eventually(WITHIN, || {
        let timers = f.timers();
        let found: Vec<(u64, String)> = lists(&timers)
            .into_iter()
            .map(|l| {
                let label = l["label"].as_str().unwrap_or_default().to_string();
                (l["duration_ms"].as_u64().unwrap(), label)
            })
            .collect();
        let all = want
            .iter()
            .all(|(ms, label)| found.iter().any(|(d, l)| d == ms && l == label));
        if all {
            Ok(timers)
        } else {
            Err(format!("wanted {want:?}, found {found:?}"))
        }
    });
    let headers = lists(&timers)
        .into_iter()
        .find(|l| l["duration_ms"] == 60_000)
        .unwrap()
        .clone();
    assert_eq!(headers["length"], 2, "{headers}");
    assert_eq!(
        headers["holds"],
        serde_json::json!([{"kind": "headers", "count": 2}])
    );
    // One of the two (the partial head) is a request in progress: ref'd.
    assert_eq!(headers["refed_timers"], 1);
    // Ages are drawn oldest first, all sampled in a short list.
    let ages: Vec<u64> = headers["ages_ms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_u64().unwrap())
        .collect();
    assert_eq!(ages.len(), 2);
    assert!(ages[0] >= ages[1] && ages[0] < 60_000, "{ages:?}");
    assert_eq!(headers["rest"], serde_json::json!([]));
    // The total view merges the one worker's lists unchanged.
    assert_eq!(
        timers["total"]["lists"].as_array().unwrap().len(),
        lists(&timers).len()
    );
    assert_eq!(timers["workers"][0]["timeouts"]["keep_alive_ms"], 6_000);
    assert_eq!(timers["workers"][0]["stays_alive"], true, "it is listening");

    // A response formats the Date value and arms its one-second tick.
    let mut client = f.idle_client();
    eventually(WITHIN, || {
        assert_eq!(client.request("/").status, 200);
        let timers = f.timers();
        let date = lists(&timers)
            .into_iter()
            .any(|l| l["label"] == "date" && l["duration_ms"].as_u64().unwrap() <= 1000);
        let cached = timers["workers"][0]["date"].as_str().is_some();
        if date && cached {
            Ok(())
        } else {
            Err(format!("no date list: {timers}"))
        }
    });
    assert_eq!(delayed.read_response().status, 200);
}

#[test]
fn the_dashboard_page_and_its_files_are_served() {
    let f = start_with_admin(|c| keep_alive(c, "5s", "1s"));
    let page = get(f.admin, "/");
    assert_eq!(page.status, 200);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert!(
        page.header("content-security-policy")
            .is_some_and(|csp| csp.contains("default-src 'self'")),
        "{:?}",
        page.headers
    );
    let html = page.text();
    assert!(html.contains("<script src=\"/dashboard.js\""), "{html}");
    assert!(html.contains("href=\"/dashboard.css\""), "{html}");
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "no CDN"
    );
    let script = get(f.admin, "/dashboard.js");
    assert_eq!(script.status, 200);
    assert!(script.text().contains("EventSource"));
    assert_eq!(get(f.admin, "/dashboard.css").status, 200);
}

#[test]
fn answers_are_dated_closed_never_cached_and_refused_by_the_servers_rules() {
    let f = start_with_admin(|c| keep_alive(c, "5s", "1s"));
    for path in ["/healthz", "/metrics", "/nope"] {
        let response = get(f.admin, path);
        assert_eq!(response.header("cache-control"), Some("no-store"), "{path}");
        assert_eq!(
            response.header("x-content-type-options"),
            Some("nosniff"),
            "{path}"
        );
        assert!(response.header("date").is_some(), "{path}");
        assert!(response.closes(), "{path}");
    }
    // The main listener's request rules: Host on HTTP/1.1, the head's size.
    let mut client = Client::connect(f.admin);
    client.send(b"GET /healthz HTTP/1.1\r\n\r\n");
    assert_eq!(client.read_response().status, 400);
    let mut client = Client::connect(f.admin);
    let long = format!(
        "GET /healthz HTTP/1.1\r\nHost: t\r\nX: {}\r\n\r\n",
        "a".repeat(9000)
    );
    client.send(long.as_bytes());
    assert_eq!(client.read_response().status, 431);
}
