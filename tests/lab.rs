//! The keep-alive lab against an in-process server, over real sockets:
//! each query control's effect on the wire (and the server flags that set
//! them for every connection), and what `/peers` and
//! `/metrics` learn from clients told apart by their loopback source
//! address (127.0.0.2, 127.0.0.3, …): a client's own idle timeout, a client
//! that races the server's deadline, one that reuses just before it, a
//! proxy that adds no forwarding header (its clients' User-Agents taking
//! turns over its connections, or on one; real nginx in front of one
//! client, told by its HTTP/1.0 upstream and its upstream's name as
//! `Host`), a table that stays bounded
//! however many addresses connect, and the advised nginx setting checked
//! by `nginx -t`.

mod probe_fixtures;
mod support;

use std::io::{self, Read};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::binary::serve;
use support::client::{Client, get};
use support::eventually;
use support::exposition::Exposition;
use support::server::{AdminFixture, keep_alive, start_with_admin};

const WITHIN: Duration = Duration::from_secs(10);

fn loopback(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
}

/// What the client's next read meets: bytes, EOF (`fin`) or a reset.
fn next_read(client: &mut Client, within: Duration) -> &'static str {
    client.stream.set_read_timeout(Some(within)).unwrap();
    let mut byte = [0u8; 1];
    match client.stream.read(&mut byte) {
        Ok(0) => "fin",
        Ok(_) => "data",
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => "rst",
        Err(e) => panic!("no close within {within:?}: {e}"),
    }
}

fn peers(fixture: &AdminFixture) -> Value {
    let response = get(fixture.admin, "/peers");
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-type"), Some("application/json"));
    serde_json::from_slice(&response.body).expect("/peers is JSON")
}

/// The `/peers` entry for `addr`, once `ready` holds for it.
fn peer_when(fixture: &AdminFixture, addr: IpAddr, ready: impl Fn(&Value) -> bool) -> Value {
    eventually(WITHIN, || {
        let doc = peers(fixture);
        let entry = doc["peers"]
            .as_array()
            .and_then(|all| all.iter().find(|p| p["addr"] == addr.to_string()).cloned());
        match entry {
            Some(entry) if ready(&entry) => Ok(entry),
            other => Err(format!("{addr}: {other:?}")),
        }
    })
}

#[test]
fn advertise_and_max_change_what_responses_say() {
    let fixture = start_with_admin(|c| keep_alive(c, "5s", "1s"));
    let mut client = Client::connect(fixture.addr);
    let first = client.request("/?advertise=7s&max=2");
    assert_eq!(first.header("keep-alive"), Some("timeout=7, max=2"));
    // Kept until changed; max counts down, then the connection closes.
    let second = client.request("/bytes/3");
    assert_eq!(second.header("keep-alive"), Some("timeout=7, max=1"));
    let third = client.request("/delay/1");
    assert!(third.closes(), "{:?}", third.headers);
    assert_eq!(next_read(&mut client, WITHIN), "fin");

    let mut client = Client::connect(fixture.addr);
    let silent = client.request("/nothing-here?advertise=none");
    assert_eq!(silent.status, 404);
    assert_eq!(silent.header("keep-alive"), None);
    assert_eq!(silent.header("connection"), Some("keep-alive"));
    assert_eq!(client.request("/").header("keep-alive"), None, "kept");
}

#[test]
fn after_closes_politely_silently_or_with_a_reset() {
    let fixture = start_with_admin(|c| keep_alive(c, "5s", "1s"));
    let cases = [
        ("close", true, "fin"),
        ("silent", false, "fin"),
        ("rst", false, "rst"),
        ("keep", false, "open"),
    ];
    for (after, says_close, then) in cases {
        let mut client = Client::connect(fixture.addr);
        let response = client.request(&format!("/?after={after}"));
        assert_eq!(response.status, 200, "{after}");
        assert_eq!(
            response.closes(),
            says_close,
            "{after}: {:?}",
            response.headers
        );
        if !says_close {
            assert_eq!(response.header("connection"), Some("keep-alive"), "{after}");
        }
        match then {
            "open" => assert_eq!(client.request("/").status, 200, "{after}"),
            close => assert_eq!(next_read(&mut client, WITHIN), close, "{after}"),
        }
    }
}

#[test]
fn ka_sets_the_real_idle_timeout_and_close_how_it_ends() {
    let fixture = start_with_admin(|c| keep_alive(c, "30s", "1s"));
    for (close, expected) in [("fin", "fin"), ("rst", "rst")] {
        let mut client = Client::connect(fixture.addr);
        let began = Instant::now();
        let response = client.request(&format!("/?ka=300ms&close={close}"));
        assert_eq!(
            response.header("keep-alive"),
            Some("timeout=30"),
            "ka does not advertise"
        );
        assert_eq!(next_read(&mut client, WITHIN), expected, "close={close}");
        let waited = began.elapsed();
        assert!(
            waited >= Duration::from_millis(300),
            "closed early: {waited:?}"
        );
    }
}

/// `--advertise` and `--idle-close` set for every connection what the
/// `advertise=` and `close=` controls set for one; a control still wins on
/// its own connection.
#[test]
fn server_flags_set_what_every_connection_advertises_and_how_it_closes() {
    use keepalive_server::config::{Advertised, IdleClose};
    for (advertise, says) in [
        (Advertised::KeepAliveTimeout, Some("timeout=5")),
        (
            Advertised::Timeout(Duration::from_millis(30_900)),
            Some("timeout=30"),
        ),
        (Advertised::Nothing, None),
    ] {
        let fixture = start_with_admin(|c| {
            keep_alive(c, "5s", "1s");
            c.advertise = advertise;
        });
        let mut client = Client::connect(fixture.addr);
        let response = client.request("/");
        assert_eq!(response.header("keep-alive"), says, "{advertise:?}");
        assert_eq!(response.header("connection"), Some("keep-alive"));
        let overridden = client.request("/?advertise=7s");
        assert_eq!(overridden.header("keep-alive"), Some("timeout=7"));
    }

    let fixture = start_with_admin(|c| {
        keep_alive(c, "300ms", "0s");
        c.idle_close = IdleClose::Rst;
    });
    let mut client = Client::connect(fixture.addr);
    let began = Instant::now();
    assert_eq!(client.request("/").status, 200);
    assert_eq!(next_read(&mut client, WITHIN), "rst", "ECONNRESET");
    assert!(began.elapsed() >= Duration::from_millis(300), "not early");
    let mut client = Client::connect(fixture.addr);
    assert_eq!(client.request("/?close=fin").status, 200);
    assert_eq!(next_read(&mut client, WITHIN), "fin", "the control wins");
}

#[test]
fn bad_control_values_get_400_naming_the_control() {
    let fixture = start_with_admin(|c| keep_alive(c, "5s", "1s"));
    let cases = [
        ("/?ka=0", "ka"),
        ("/?ka=11m", "ka"),
        ("/?ka=10m1ms", "ka"),
        ("/delay/5?advertise=soon", "advertise"),
        ("/bytes/4?close=gently", "close"),
        ("/x?after=reset", "after"),
        ("/?max=-1", "max"),
    ];
    for (target, name) in cases {
        let mut client = Client::connect(fixture.addr);
        let response = client.request(target);
        assert_eq!(response.status, 400, "{target}");
        assert!(response.closes(), "{target}");
        let body = response.text();
        assert!(
            body.contains(&format!("the {name} control")),
            "{target}: {body}"
        );
        assert!(body.contains("it takes"), "{target}: {body}");
        assert_eq!(next_read(&mut client, WITHIN), "fin", "{target}");
    }
    // Unknown parameters are the application's: ignored.
    let mut client = Client::connect(fixture.addr);
    assert_eq!(client.request("/?kaa=1&page=2").status, 200);
}

#[test]
fn test_controls_off_ignores_them() {
    let fixture = start_with_admin(|c| {
        keep_alive(c, "5s", "1s");
        c.test_controls = false;
    });
    let mut client = Client::connect(fixture.addr);
    let response = client.request("/?advertise=9s&after=rst&ka=bad");
    assert_eq!(response.status, 200);
    assert_eq!(response.header("keep-alive"), Some("timeout=5"));
    assert_eq!(client.request("/").status, 200, "after=rst ignored");
}

/// `connections` clients from `from`, each: one request, then idle for
/// `idle`, then a close of its own.
fn close_after_idle(addr: SocketAddr, from: IpAddr, connections: usize, idle: Duration) {
    let clients: Vec<_> = (0..connections)
        .map(|_| {
            thread::spawn(move || {
                let mut client = Client::connect_from(from, addr);
                assert_eq!(client.request("/").status, 200);
                thread::sleep(idle);
            })
        })
        .collect();
    for client in clients {
        client.join().unwrap();
    }
}

#[test]
fn a_client_that_closes_idle_connections_first_is_estimated_within_5_percent() {
    let fixture = start_with_admin(|c| keep_alive(c, "10s", "1s"));
    let addr = fixture.addr;
    let short =
        thread::spawn(move || close_after_idle(addr, loopback(2), 8, Duration::from_millis(1200)));
    let long =
        thread::spawn(move || close_after_idle(addr, loopback(3), 8, Duration::from_millis(2500)));
    short.join().unwrap();
    long.join().unwrap();
    for (peer, expected_ms) in [(loopback(2), 1200.0), (loopback(3), 2500.0)] {
        let entry = peer_when(&fixture, peer, |p| p["client_idle_closes"] == 8);
        let estimate = entry["client_idle_timeout_ms"]
            .as_f64()
            .expect("an estimate");
        let error = (estimate - expected_ms).abs() / expected_ms;
        eprintln!(
            "{peer}: closes at {expected_ms} ms, estimated {estimate} ms ({:.2}%)",
            error * 100.0
        );
        assert!(error <= 0.05, "{peer}: {entry}");
        assert_eq!(entry["server_idle_closes"], 0);
        assert_eq!(entry["verdict"], "ok", "{entry}");
    }
    let metrics = Exposition::parse(&get(fixture.admin, "/metrics").text());
    let client_closes = metrics.value("kas_idle_close_age_seconds_count", &[("closer", "client")]);
    assert_eq!(client_closes, Some(16.0));
}

#[test]
fn a_client_that_reuses_past_the_deadline_sends_late_requests_and_races() {
    // The server really closes at 1 s, and says 1 s.
    let fixture = start_with_admin(|c| keep_alive(c, "1s", "0s"));
    let addr = fixture.addr;
    let racers: Vec<_> = (0..4u64)
        .map(|i| {
            thread::spawn(move || {
                let mut client = Client::connect_from(loopback(4), addr);
                assert_eq!(client.request("/").status, 200);
                // Idle past the server's 1 s deadline (the race itself).
                thread::sleep(Duration::from_millis(1030 + 10 * i));
                // The pool thinks the connection is still good.
                // (The server's FIN is in; a write may still go through.)
                let late = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";
                let _ = io::Write::write_all(&mut client.stream, late);
                let seen = next_read(&mut client, WITHIN);
                assert_ne!(seen, "data", "answered after the server's idle close");
            })
        })
        .collect();
    for racer in racers {
        racer.join().unwrap();
    }
    let entry = peer_when(&fixture, loopback(4), |p| {
        p["late_requests"].as_u64() >= Some(1)
    });
    eprintln!("racing client: {entry}");
    assert_eq!(entry["verdict"], "race", "{entry}");
    let advice = entry["advice"].as_str().unwrap();
    assert!(advice.contains("ms or less"), "{entry}");
    // It sent no User-Agent (as Node's http.Agent does not): the common
    // pools' settings are named, not "this client's pool idle timeout".
    assert_eq!(entry["user_agent"], Value::Null, "{entry}");
    for setting in [
        "Node http.Agent: timeout",
        "freeSocketTimeout",
        "keepAliveTimeout",
    ] {
        assert!(advice.contains(setting), "{setting:?} not in {advice}");
    }
    let delay = entry["late_request_delay_ms"]["max"].as_f64().unwrap();
    assert!(delay < 1000.0, "within the watch: {entry}");
    let metrics = Exposition::parse(&get(fixture.admin, "/metrics").text());
    let late = metrics.value("kas_late_requests_total", &[]).unwrap();
    assert!(late >= 1.0, "late requests: {late}");
}

#[test]
fn a_proxy_without_forwarding_headers_is_told_apart_by_user_agents_taking_turns() {
    // As nginx does by default: its clients' User-Agents passed on, no
    // X-Forwarded-For or Via, its upstream connections from one address,
    // the server's own address as Host (`proxy_pass http://ADDR;`, which
    // a client addressing the server directly sends too).
    let fixture = start_with_admin(|c| keep_alive(c, "1s", "0s"));
    let host = fixture.addr;
    let agents = [
        "python-requests/2.32.3",
        "curl/8.5.0",
        "python-requests/2.32.3",
    ];
    let mut upstream: Vec<Client> = agents
        .iter()
        .map(|agent| {
            let mut client = Client::connect_from(loopback(9), fixture.addr);
            let head = format!("GET / HTTP/1.1\r\nHost: {host}\r\nUser-Agent: {agent}\r\n\r\n");
            client.send(head.as_bytes());
            assert_eq!(client.read_response().status, 200);
            client
        })
        .collect();
    // One pooled connection is reused past the server's 1 s deadline.
    thread::sleep(Duration::from_millis(1100));
    let late = &mut upstream[0];
    let _ = late.try_send(format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes());
    assert_ne!(next_read(late, WITHIN), "data", "answered after the close");
    let entry = peer_when(&fixture, loopback(9), |p| {
        p["late_requests"].as_u64() >= Some(1)
    });
    assert_eq!(entry["likely_proxy"], true, "{entry}");
    assert_eq!(entry["forwarded"], false, "{entry}");
    let advice = entry["advice"].as_str().unwrap();
    // Both fixes: the proxy's upstream idle timeout and the clients'.
    for words in [
        "likely a proxy",
        "nginx: keepalive_timeout",
        "If the clients",
    ] {
        assert!(advice.contains(words), "{words:?} not in {advice}");
    }
}

/// nginx in front of this server (`proxy` as its `location /`, see
/// `probe_fixtures::nginx_proxy`), one client behind it: one request
/// through it as python-requests sends it, then the `/peers` entry of
/// nginx's address once `ready` holds for it. `None`: no nginx, outside CI.
fn through_nginx(
    fixture: &AdminFixture,
    proxy: &str,
    ready: impl Fn(&Value) -> bool,
) -> Option<Value> {
    let nginx = probe_fixtures::nginx_proxy(fixture.addr, proxy)?;
    let mut client = Client::connect(nginx.addr);
    let head = format!(
        "GET / HTTP/1.1\r\nHost: {}\r\nUser-Agent: python-requests/2.32.3\r\n\
         Accept: */*\r\nConnection: keep-alive\r\n\r\n",
        nginx.addr
    );
    client.send(head.as_bytes());
    assert_eq!(client.read_response().status, 200);
    Some(peer_when(fixture, loopback(1), ready))
}

#[test]
fn nginx_s_default_http_1_0_upstream_shows_a_proxy_with_one_client_behind_it() {
    // `proxy_pass http://ADDR;` as it comes: no X-Forwarded-For, one
    // User-Agent, but HTTP/1.0 (and `Connection: close`), which
    // python-requests never sends.
    let fixture = start_with_admin(|c| keep_alive(c, "30s", "0s"));
    let proxy = format!("proxy_pass http://{};", fixture.addr);
    let Some(entry) = through_nginx(&fixture, &proxy, |p| p["requests"] == 1) else {
        return;
    };
    assert_eq!(entry["user_agent"], "python-requests/2.32.3", "{entry}");
    assert_eq!(entry["forwarded"], false, "{entry}");
    assert_eq!(entry["likely_proxy"], true, "{entry}");
    let signs = entry["proxy_signs"].as_array().unwrap();
    assert!(
        signs.contains(&"http/1.0 from an http/1.1 client".into()),
        "{entry}"
    );
}

#[test]
fn nginx_pooling_upstream_connections_is_likely_a_proxy_and_its_fix_leads() {
    // nginx keeping upstream connections alive, as the advice has it do:
    // HTTP/1.1 with no Connection field, and `Host: backend`, its
    // upstream block's name, though the server listens on another port.
    let fixture = start_with_admin(|c| keep_alive(c, "1s", "0s"));
    let proxy = "proxy_pass http://backend; proxy_http_version 1.1; \
                 proxy_set_header Connection \"\";";
    // Once the server has closed nginx's idle connection: the advice.
    let ready = |p: &Value| p["server_idle_closes"].as_u64() >= Some(1);
    let Some(entry) = through_nginx(&fixture, proxy, ready) else {
        return;
    };
    assert_eq!(entry["forwarded"], false, "{entry}");
    assert_eq!(entry["likely_proxy"], true, "{entry}");
    let signs = entry["proxy_signs"].as_array().unwrap();
    assert!(
        signs.contains(&"host is an upstream name".into()),
        "{entry}"
    );
    let advice = entry["advice"].as_str().unwrap();
    let proxy_fix = advice.find("Likely a proxy").expect(advice);
    let nginx = advice.find("nginx: keepalive_timeout").expect(advice);
    let client = advice
        .find("python-requests cannot be told so")
        .expect(advice);
    assert!(
        proxy_fix < nginx && nginx < client,
        "nginx's fix leads: {advice}"
    );
}

#[test]
fn one_connection_carrying_two_user_agents_in_turn_is_likely_a_proxy() {
    // A proxy multiplexing its clients' requests onto one pooled upstream
    // connection: two User-Agents take turns on it, with no forwarding
    // header. One client on its own connection is not.
    let fixture = start_with_admin(|c| keep_alive(c, "30s", "0s"));
    let host = fixture.addr;
    let (proxy, client) = (loopback(10), loopback(11));
    let mut upstream = Client::connect_from(proxy, fixture.addr);
    let mut alone = Client::connect_from(client, fixture.addr);
    for agent in [
        "python-requests/2.32.3",
        "curl/8.5.0",
        "python-requests/2.32.3",
    ] {
        let head = format!("GET / HTTP/1.1\r\nHost: {host}\r\nUser-Agent: {agent}\r\n\r\n");
        upstream.send(head.as_bytes());
        assert_eq!(upstream.read_response().status, 200);
        let head = format!("GET / HTTP/1.1\r\nHost: {host}\r\nUser-Agent: curl/8.5.0\r\n\r\n");
        alone.send(head.as_bytes());
        assert_eq!(alone.read_response().status, 200);
    }
    let entry = peer_when(&fixture, proxy, |p| p["requests"].as_u64() >= Some(3));
    assert_eq!(entry["connections"], 1, "{entry}");
    assert_eq!(entry["likely_proxy"], true, "{entry}");
    assert_eq!(entry["forwarded"], false, "{entry}");
    assert_eq!(entry["user_agent"], "python-requests/2.32.3", "{entry}");
    let entry = peer_when(&fixture, client, |p| p["requests"].as_u64() >= Some(3));
    assert_eq!(entry["likely_proxy"], false, "{entry}");
}

#[test]
fn a_client_that_reuses_just_before_the_deadline_counts_near_misses() {
    let fixture = start_with_admin(|c| keep_alive(c, "1s", "0s"));
    let mut client = Client::connect_from(loopback(5), fixture.addr);
    assert_eq!(client.request("/").status, 200);
    // Idle until 50 ms before the server's 1 s deadline.
    thread::sleep(Duration::from_millis(950));
    assert_eq!(client.request("/").status, 200, "served, with 50 ms left");
    let entry = peer_when(&fixture, loopback(5), |p| {
        p["near_misses"].as_u64() >= Some(1)
    });
    assert_eq!(entry["verdict"], "at risk", "{entry}");
    assert_eq!(entry["late_requests"], 0);
    let gap = entry["reuse_gap_ms"]["max"].as_f64().unwrap();
    assert!((900.0..1000.0).contains(&gap), "{entry}");
}

#[test]
fn the_peer_table_stays_bounded_with_ten_thousand_addresses() {
    let fixture = start_with_admin(|c| keep_alive(c, "5s", "1s"));
    let addr = fixture.addr;
    const ADDRESSES: u32 = 10_000;
    let halves: Vec<_> = (0..2u32)
        .map(|half| {
            thread::spawn(move || {
                for n in (half * ADDRESSES / 2)..((half + 1) * ADDRESSES / 2) {
                    let from = IpAddr::V4(Ipv4Addr::from(0x7f01_0000 + n));
                    let mut client = Client::connect_from(from, addr);
                    client.send(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
                    assert_eq!(client.read_response().status, 200);
                }
            })
        })
        .collect();
    for half in halves {
        half.join().unwrap();
    }
    let doc = eventually(WITHIN, || {
        let doc = peers(&fixture);
        let all = doc["peers"].as_array().cloned().unwrap_or_default();
        let connections: u64 = all.iter().filter_map(|p| p["connections"].as_u64()).sum();
        if connections == u64::from(ADDRESSES) {
            Ok(doc)
        } else {
            Err(format!("{connections} connections so far"))
        }
    });
    let all = doc["peers"].as_array().unwrap();
    assert_eq!(all.len(), 64 + 1, "64 peers and other");
    assert_eq!(all.last().unwrap()["addr"], "other");
    assert_eq!(all.last().unwrap()["connections"], ADDRESSES - 64);
}

/// One request from `from` on `path` (its controls kept by the connection),
/// idle for `idle`, then a request the server's idle close has overtaken:
/// what the client's next read meets.
fn lose_a_race(
    addr: SocketAddr,
    from: IpAddr,
    path: &str,
    idle: Duration,
    agent: &str,
) -> &'static str {
    let mut client = Client::connect_from(from, addr);
    client
        .send(format!("GET {path} HTTP/1.1\r\nHost: t\r\nUser-Agent: {agent}\r\n\r\n").as_bytes());
    assert_eq!(client.read_response().status, 200);
    thread::sleep(idle);
    let request = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";
    match io::Write::write_all(&mut client.stream, request) {
        // A reset already in: the write reports it (and the read sees EOF).
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => "rst",
        _ => next_read(&mut client, WITHIN),
    }
}

#[test]
fn the_verdict_describes_the_recent_window_and_the_totals_stay() {
    // A one-second window: a client that raced and then behaves reads "ok"
    // again once the race is a window old; the totals keep the race.
    let fixture = start_with_admin(|c| {
        keep_alive(c, "30s", "0s");
        c.peers_window = Duration::from_secs(1);
    });
    let from = loopback(6);
    let seen = lose_a_race(
        fixture.addr,
        from,
        "/?ka=200ms",
        Duration::from_millis(500),
        "t",
    );
    assert_ne!(seen, "data");
    let raced = peer_when(&fixture, from, |p| p["verdict"] == "race");
    assert_eq!(raced["recent"]["late_requests"], 1, "{raced}");
    let doc = peers(&fixture);
    assert_eq!(doc["window_s"], 1.0, "{doc}");
    // The client behaves from now on: the verdict comes back.
    let mut client = Client::connect_from(from, fixture.addr);
    assert_eq!(client.request("/").status, 200);
    let back = peer_when(&fixture, from, |p| p["verdict"] == "ok");
    assert_eq!(
        back["late_requests"], 1,
        "the total since start stays: {back}"
    );
    assert_eq!(back["recent"]["late_requests"], 0, "{back}");
    assert!(
        back["advice"]
            .as_str()
            .unwrap()
            .contains("none in the last 1 s"),
        "{back}"
    );
}

#[test]
fn lost_requests_are_judged_against_their_connections_own_timeout() {
    // One address, two idle timeouts: the server's 30 s, and 200 ms set by
    // `ka=` on the connection that lost the race. The advice is about the
    // 200 ms one, and says so, with the client's own setting (httpx).
    let fixture = start_with_admin(|c| keep_alive(c, "30s", "0s"));
    let from = loopback(7);
    let mut calm = Client::connect_from(from, fixture.addr);
    assert_eq!(calm.request("/").status, 200);
    let seen = lose_a_race(
        fixture.addr,
        from,
        "/?ka=200ms",
        Duration::from_millis(500),
        "python-httpx/0.27.0",
    );
    assert_ne!(seen, "data");
    assert_eq!(calm.request("/").status, 200);
    let entry = peer_when(&fixture, from, |p| p["verdict"] == "race");
    assert_eq!(entry["judged_idle_timeout_ms"], 200, "{entry}");
    assert_eq!(entry["client"], "httpx", "{entry}");
    let advice = entry["advice"].as_str().unwrap();
    assert!(advice.contains("own idle timeout of 200 ms"), "{entry}");
    assert!(advice.contains("keepalive_expiry="), "{entry}");
    // Sent half a second after the FIN: after it, not across it.
    assert_eq!(entry["recent"]["late_requests"], 1, "{entry}");
    assert_eq!(entry["recent"]["late_requests_crossed_fin"], 0, "{entry}");
    assert!(entry["round_trip_ms"].as_f64().is_some(), "{entry}");
}

#[test]
fn a_server_that_resets_idle_connections_says_lost_requests_cannot_be_seen() {
    let fixture = start_with_admin(|c| keep_alive(c, "30s", "0s"));
    let from = loopback(8);
    let seen = lose_a_race(
        fixture.addr,
        from,
        "/?ka=200ms&close=rst",
        Duration::from_millis(500),
        "t",
    );
    assert_eq!(seen, "rst", "the client met the reset");
    let entry = peer_when(&fixture, from, |p| p["recent"]["server_resets"] == 1);
    assert_eq!(entry["late_requests"], 0, "the server saw nothing: {entry}");
    assert_eq!(
        entry["verdict"], "at risk",
        "never ok after a reset: {entry}"
    );
    assert!(
        entry["advice"]
            .as_str()
            .unwrap()
            .contains("cannot be counted"),
        "{entry}"
    );
}

#[test]
fn a_pool_that_closes_when_it_is_next_used_is_an_upper_bound() {
    // httpx drops an expired idle connection only when it is next used:
    // its close comes with its next connection, and the close age is the
    // pause between requests, not its idle timeout.
    let fixture = start_with_admin(|c| keep_alive(c, "30s", "1s"));
    let from = loopback(9);
    let mut old = Client::connect_from(from, fixture.addr);
    assert_eq!(old.request("/").status, 200);
    for pause in [300, 360, 330] {
        thread::sleep(Duration::from_millis(pause));
        drop(old); // the expired one, dropped as the pool is used...
        old = Client::connect_from(from, fixture.addr); // ...for this request
        assert_eq!(old.request("/").status, 200);
    }
    let entry = peer_when(&fixture, from, |p| p["client_idle_closes"] == 3);
    assert_eq!(entry["recent"]["lazy_client_closes"], 3, "{entry}");
    assert_eq!(entry["client_idle_timeout_is_upper_bound"], true, "{entry}");
    assert!(
        entry["advice"].as_str().unwrap().contains("upper bound"),
        "{entry}"
    );
}

#[test]
fn a_reuse_served_past_the_deadline_is_at_risk_and_its_late_timer_is_counted() {
    // The worker stalls (SIGSTOP) across an idle connection's 1 s deadline;
    // the client's request arrives meanwhile and is served when the worker
    // wakes (the idle close reads first). Nothing was lost: "at risk", not
    // "race". The timer was overdue when the worker woke, and the lateness
    // figures say so whether it fired or the request cancelled it first
    // (that case: conn::tests::a_request_that_cancels_an_overdue_idle_timer…).
    let server = serve(&[
        "--workers",
        "1",
        "--admin",
        "127.0.0.1:0",
        "--keep-alive-timeout",
        "1s",
        "--keep-alive-buffer",
        "0s",
    ]);
    let admin = server.admin_addr();
    let lateness = || {
        let metrics = Exposition::parse(&get(admin, "/metrics").text());
        metrics.value("kas_timer_lateness_seconds_count", &[])
    };
    let before = lateness().expect("the lateness histogram");
    let mut client = Client::connect(server.addr);
    assert_eq!(client.request("/").status, 200);
    // Its idle timer starts when the answer is done: by now, give or take
    // the worker's turn.
    let answered = Instant::now();
    // The worker is done with the answer: the connection idles.
    eventually(WITHIN, || {
        let metrics = Exposition::parse(&get(admin, "/metrics").text());
        match metrics.value("kas_connections", &[("state", "idle")]) {
            Some(1.0) => Ok(()),
            other => Err(format!("idle connections: {other:?}")),
        }
    });
    server.signal("STOP");
    assert!(
        answered.elapsed() < Duration::from_millis(800),
        "stopped {:?} after the answer: too near the 1 s deadline",
        answered.elapsed()
    );
    // The deadline passes while the worker is stopped.
    thread::sleep(
        (answered + Duration::from_millis(1300)).saturating_duration_since(Instant::now()),
    );
    client.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    server.signal("CONT");
    assert_eq!(client.read_response().status, 200, "served after the stall");
    let fixture_peers = || {
        let response = get(admin, "/peers");
        serde_json::from_slice::<Value>(&response.body).expect("JSON")
    };
    let entry = eventually(WITHIN, || {
        let doc = fixture_peers();
        match doc["peers"].get(0) {
            Some(p) if p["recent"]["reuses"] == 1 => Ok(p.clone()),
            other => Err(format!("{other:?}")),
        }
    });
    assert_eq!(entry["verdict"], "at risk", "{entry}");
    assert_eq!(entry["late_requests"], 0, "{entry}");
    assert!(
        lateness().unwrap() > before,
        "the overdue timer is not in kas_timer_lateness_seconds"
    );
}

#[test]
fn the_advised_nginx_setting_passes_nginx_t() {
    // What /peers tells nginx goes into its upstream block as written:
    // milliseconds below a whole second and between seconds, never `0s`.
    let found = ["nginx", "/usr/sbin/nginx"]
        .into_iter()
        .find(|bin| std::process::Command::new(bin).arg("-v").output().is_ok());
    let Some(nginx) = found else {
        support::skip::because("nginx is not installed (.ci/run installs it)");
        return;
    };
    let proxy = keepalive_server::advice::clients::PROXIES
        .iter()
        .find(|proxy| proxy.name == "nginx")
        .unwrap();
    let dir = std::env::temp_dir().join(format!("kas-lab-nginx-t-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for safe in [970, 1900, 63_000] {
        let advice = proxy.advice(safe);
        let directive = &advice[..=advice.find(';').unwrap()];
        assert!(directive.starts_with("keepalive_timeout "), "{advice}");
        let d = dir.display();
        let text = format!(
            "error_log {d}/error.log;\npid {d}/nginx.pid;\nevents {{}}\nhttp {{\n\
             access_log off;\n\
             client_body_temp_path {d}/body; proxy_temp_path {d}/proxy;\n\
             fastcgi_temp_path {d}/fastcgi; uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;\n\
             upstream backend {{ server 127.0.0.1:9; keepalive 8; {directive} }}\n}}\n"
        );
        std::fs::write(dir.join("nginx.conf"), text).unwrap();
        let (log, conf) = (format!("{d}/error.log"), format!("{d}/nginx.conf"));
        let args = ["-t", "-p", &d.to_string(), "-e", &log, "-c", &conf];
        let checked = std::process::Command::new(nginx)
            .args(args)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&checked.stderr);
        assert!(
            checked.status.success(),
            "{directive} for {safe} ms: {said}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
