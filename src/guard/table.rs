//! What the guard tells at the end of a run: a short table of the clients
//! on stderr (one line each, then its advice, indented), then, apart, the
//! service behind the lab against its balancer (the other hop, with
//! `--lb-idle-timeout`), closed by the run's one verdict
//! ([`outcome`]); and the same as a JSON document for
//! `--json FILE`.

use std::fmt::Write as _;

use serde::Serialize;

use crate::peer_observer::report::ServerIdle;

use super::judge::{ClientVerdict, GuardVerdict};
use super::other_hop::verdict::ServiceHop;
use super::outcome;
use super::upstream_errors::UpstreamErrors;
use crate::probe::lb_hop::Verdict;

/// The guard's findings on one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunReport {
    /// COMMAND and its arguments, as given (lossy UTF-8).
    pub command: Vec<String>,
    /// COMMAND's exit status (128 + N when signal N ended it).
    pub command_status: i32,
    /// From the server's start to the judgement, seconds, rounded up to a
    /// tenth: the window the verdicts' words name.
    pub duration_s: f64,
    /// Whether connections may persist (`--keep-alive-timeout` not zero).
    pub keep_alive: bool,
    /// The server's idle timeouts the clients were judged against.
    pub server: ServerIdle,
    /// Which verdicts fail the run: `race`, `at-risk` or `inconclusive`.
    pub fail_on: &'static str,
    /// The shadow deadline's least length, ms: an idle connection was
    /// kept past its deadline as long again, at least this (`None`:
    /// `--real-close`, closed at the deadline).
    pub shadow_ms: Option<u64>,
    /// Connections still open when the guard stopped waiting (a process
    /// COMMAND left behind holds them): what they would still show is
    /// not judged.
    pub connections_left_open: u64,
    pub clients: Vec<ClientVerdict>,
    /// Whether the clients pass (COMMAND's own status aside).
    pub clients_pass: bool,
    /// The lab's base URL, as COMMAND was given it in `KAS_LAB_URL`.
    pub lab_url: String,
    /// A run no client reached passes (`--allow-no-clients`).
    pub allow_no_clients: bool,
    /// With `--upstream`: the service's failures and the lab's retries,
    /// apart from the clients' verdicts.
    pub upstream: Option<UpstreamErrors>,
    /// The other hop: the service behind the lab against the balancer in
    /// front of it (`--lb-idle-timeout`), apart from the clients.
    pub lb_hop: Option<ServiceHop>,
}

/// The words a verdict is shown with.
pub fn verdict_label(verdict: GuardVerdict) -> &'static str {
    match verdict {
        GuardVerdict::Ok => "ok",
        GuardVerdict::Inconclusive => "inconclusive",
        GuardVerdict::AtRisk => "at risk",
        GuardVerdict::Race => "race",
    }
}

impl RunReport {
    /// The table for stderr.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "keepalive-server lab: {} client{} in {:.1} s; {}",
            self.clients.len(),
            plural(self.clients.len()),
            self.duration_s,
            self.server_terms(),
        );
        let names: Vec<String> = self.clients.iter().map(client_name).collect();
        let width = names.iter().map(String::len).max().unwrap_or(0).max(6);
        if !self.clients.is_empty() {
            let _ = writeln!(
                out,
                "  {:<width$}  {:<12}  {:>8}  {:>4}  {:>11}",
                "CLIENT", "VERDICT", "REQUESTS", "LOST", "NEAR MISSES"
            );
        }
        for (client, name) in self.clients.iter().zip(&names) {
            let _ = writeln!(
                out,
                "  {name:<width$}  {:<12}  {:>8}  {:>4}  {:>11}",
                verdict_label(client.verdict),
                client.requests,
                client.lost_requests + client.requests_past_deadline,
                client.near_misses,
            );
            let _ = writeln!(out, "      {}", client.advice);
        }
        if self.connections_left_open > 0 {
            let _ = writeln!(
                out,
                "  {} connection{} still open after COMMAND ended (a process it left behind?): not judged",
                self.connections_left_open,
                if self.connections_left_open == 1 {
                    ""
                } else {
                    "s"
                }
            );
        }
        if let Some(line) = self.upstream.as_ref().and_then(UpstreamErrors::line) {
            out.push_str(&line);
        }
        if let Some(hop) = &self.lb_hop {
            out.push_str(&service_rows(hop));
        }
        out.push_str(&outcome::closing_line(self));
        out
    }

    /// The idle terms the clients met, for the table's first line.
    fn server_terms(&self) -> String {
        if !self.keep_alive {
            return "keep-alive is off (--keep-alive-timeout 0): every connection closes after its response".into();
        }
        let advertised = self
            .server
            .advertised_timeout_s
            .map_or_else(|| "nothing".to_owned(), |s| format!("{s} s"));
        let after = match self.shadow_ms {
            Some(ms) => format!(
                "; the guard keeps them open past it as long again, at least {ms} ms more (the \
                 shadow deadline), and counts each reuse then as a request production would lose"
            ),
            None => "; --real-close: closed there, lost requests counted as they come".to_owned(),
        };
        format!(
            "the server closes idle connections after {} ms and advertises {advertised}{after}",
            self.server.idle_timeout_ms
        )
    }

    /// The guard's exit status, as the closing line says it.
    pub fn status(&self) -> u8 {
        outcome::status(self)
    }

    /// The JSON document for `--json`, with the exit status as `status`.
    pub fn json(&self) -> String {
        let mut json = serde_json::to_value(self).expect("the report serializes");
        json["status"] = self.status().into();
        let mut text = serde_json::to_string_pretty(&json).expect("the report serializes");
        text.push('\n');
        text
    }
}

/// The other hop's rows: the service against the balancer, apart from
/// the clients against the lab.
fn service_rows(hop: &ServiceHop) -> String {
    let verdict = match hop.hop.verdict {
        Verdict::Ok => "ok",
        Verdict::ClosesFirst => "closes first",
        Verdict::NoKeepAlive => "no keep-alive",
        Verdict::Inconclusive => "inconclusive",
    };
    let seconds = |ms: f64| format!("{:.1} s", ms / 1e3);
    let closed = hop
        .hop
        .service_closed_after_ms
        .map_or_else(|| "-".to_owned(), seconds);
    let balancer = format!(
        "{} + {}",
        seconds(hop.hop.lb_idle_timeout_ms as f64),
        seconds(hop.hop.margin_ms as f64)
    );
    let width = hop.upstream.len().max(24);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  {:<width$}  {:<15}  {:<13}  {:>12}",
        "SERVICE (THE OTHER HOP)", "BALANCER+MARGIN", "VERDICT", "CLOSED AFTER"
    );
    let _ = writeln!(
        out,
        "  {:<width$}  {balancer:<15}  {verdict:<13}  {closed:>12}",
        hop.upstream
    );
    let _ = writeln!(out, "      {}", hop.hop.advice);
    if let Some(why) = &hop.cut_short {
        let _ = writeln!(out, "      Cut short: {why}.");
    }
    out
}

/// A client as the table names it: its address and User-Agent.
fn client_name(client: &ClientVerdict) -> String {
    match &client.user_agent {
        Some(agent) => format!("{} {agent}", client.addr),
        None => format!("{} (no User-Agent)", client.addr),
    }
}

/// `s` for a count other than one.
pub(super) fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A client of the given verdict, with advice (for the tables' tests).
    pub(in crate::guard) fn client(verdict: GuardVerdict) -> ClientVerdict {
        ClientVerdict {
            addr: "127.0.0.1".into(),
            user_agent: Some("python-httpx/0.28.1".into()),
            user_agents: vec!["python-httpx/0.28.1".into()],
            client: Some("httpx"),
            verdict,
            connections: 2,
            requests: 4,
            lost_requests: 0,
            requests_past_deadline: 0,
            near_misses: 1,
            server_idle_closes: 0,
            client_limit: Default::default(),
            settling_pause_s: None,
            safe_pool_idle_timeout_ms: Some(900),
            advice: "Set httpx's keepalive_expiry=0.9 in httpx.Limits (900 ms or less).".into(),
        }
    }

    /// A run of `clients`, passing or not, its COMMAND passed.
    pub(in crate::guard) fn run(clients: Vec<ClientVerdict>, pass: bool) -> RunReport {
        RunReport {
            command: vec!["pytest".into()],
            command_status: 0,
            duration_s: 2.5,
            keep_alive: true,
            server: ServerIdle {
                advertised_timeout_s: Some(1),
                idle_timeout_ms: 2000,
            },
            fail_on: "at-risk",
            shadow_ms: Some(2000),
            connections_left_open: 0,
            clients,
            clients_pass: pass,
            lab_url: "http://127.0.0.1:4000/".into(),
            allow_no_clients: false,
            upstream: None,
            lb_hop: None,
        }
    }

    #[test]
    fn the_table_shows_each_client_with_its_advice() {
        let text = run(vec![client(GuardVerdict::AtRisk)], false).text();
        assert!(
            text.contains("127.0.0.1 python-httpx/0.28.1  at risk"),
            "{text}"
        );
        assert!(text.contains("keepalive_expiry=0.9"), "{text}");
        assert!(
            text.contains("FAIL (--fail-on at-risk): 1 client would race"),
            "{text}"
        );
    }

    #[test]
    fn an_empty_run_says_nothing_was_judged_and_fails() {
        let text = run(Vec::new(), true).text();
        assert!(text.contains("no client connected"), "{text}");
        assert!(text.contains("FAIL (status 3)"), "{text}");
        assert!(!text.contains("CLIENT"), "no table: {text}");
    }

    #[test]
    fn the_first_line_gives_the_servers_terms_or_says_keep_alive_is_off() {
        let mut report = run(Vec::new(), true);
        let text = report.text();
        assert!(
            text.contains(
                "in 2.5 s; the server closes idle connections after 2000 ms and advertises 1 s"
            ),
            "{text}"
        );
        report.keep_alive = false;
        let text = report.text();
        assert!(text.contains("keep-alive is off"), "{text}");
        assert!(!text.contains("2000 ms"), "{text}");
    }

    #[test]
    fn a_failed_command_is_named_as_the_runs_status() {
        let mut report = run(vec![client(GuardVerdict::Ok)], true);
        assert!(!report.text().contains("COMMAND failed"));
        report.command_status = 3;
        let text = report.text();
        assert!(text.contains("FAIL (COMMAND's status 3)"), "{text}");
        assert!(!text.contains(": pass"), "one verdict: {text}");
    }

    #[test]
    fn the_service_is_shown_apart_from_the_clients_in_the_table_and_the_json() {
        use crate::guard::other_hop::verdict::tests::hop_closing_after;
        let mut report = run(vec![client(GuardVerdict::Ok)], true);
        report.lb_hop = Some(hop_closing_after(1000.0, false));
        let text = report.text();
        let clients = text.find("CLIENT").unwrap();
        let service = text.find("SERVICE (THE OTHER HOP)").unwrap();
        assert!(clients < service, "{text}");
        assert!(
            text.contains("http://s/") && text.contains("closes first") && text.contains("1.0 s"),
            "{text}"
        );
        let json: serde_json::Value = serde_json::from_str(&report.json()).unwrap();
        assert_eq!(json["lb_hop"]["verdict"], "closes_first");
        assert_eq!(json["lb_hop"]["upstream"], "http://s/");
        assert_eq!(json["lb_hop"]["lb_idle_timeout_ms"], 2000);
        assert_eq!(json["clients"][0]["verdict"], "ok", "apart");
        assert_eq!(json["status"], 4);
    }

    #[test]
    fn the_json_has_the_tables_fields() {
        let json: serde_json::Value =
            serde_json::from_str(&run(vec![client(GuardVerdict::Race)], false).json()).unwrap();
        let first = &json["clients"][0];
        assert_eq!(first["verdict"], "race");
        assert_eq!(first["user_agent"], "python-httpx/0.28.1");
        assert_eq!(first["lost_requests"], 0);
        assert_eq!(json["clients_pass"], false);
        assert_eq!(json["server"]["idle_timeout_ms"], 2000);
    }
}
