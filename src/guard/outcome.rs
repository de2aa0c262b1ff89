//! The run's one verdict: the guard's exit status and the closing line
//! that says it, both read from the same [`RunReport`], so they cannot
//! disagree (a run whose COMMAND failed never closes on "pass").
//!
//! The run has up to three parts, and what decides is the first that
//! fails, in this order: COMMAND (its own status: its test failures stay
//! its own); the clients (a run no client reached is [`NO_CLIENTS`], as
//! pytest's 5 for "no tests collected", unless `--allow-no-clients`; a
//! client that fails under `--fail-on` is [`CLIENTS_FAIL`]); the service
//! behind the lab against its balancer, the other hop ([`SERVICE_FAILS`]:
//! it closes idle connections first, or its check could not be finished,
//! which is inconclusive and not a pass: the run was asked to check the
//! service and did not). Else [`PASS`]. The closing line leads with
//! the part that decided and names the others after it ("the clients
//! alone would pass"), so it reads as one sentence, never as two verdicts.

use super::run::URL_VARIABLE;
use super::table::{RunReport, plural};
use crate::guard::judge::GuardVerdict;

/// Every part passed (or no client came, under `--allow-no-clients`).
pub const PASS: u8 = 0;
/// A client would race the server (or is at risk, or inconclusive, as
/// `--fail-on` says).
pub const CLIENTS_FAIL: u8 = 1;
/// A usage error, as clap gives it.
pub const USAGE_ERROR: u8 = 2;
/// No client connected to the lab: nothing was judged.
pub const NO_CLIENTS: u8 = 3;
/// The service behind the lab closes idle connections before the
/// balancer in front of it would (`--lb-idle-timeout`), or its check was
/// cut short.
pub const SERVICE_FAILS: u8 = 4;

/// One part of the run, as the closing line says it.
struct Part {
    /// The status it gives the run when it decides; `None`: it passes.
    fails: Option<u8>,
    /// Said when it decides (after "FAIL"), or, for the clients, when
    /// everything passes (after "pass").
    lead: String,
    /// Said after the part that decided.
    follow: String,
}

/// The parts of `report`, in the order they decide.
fn parts(report: &RunReport) -> Vec<Part> {
    let mut parts = Vec::new();
    if report.command_status != 0 {
        let status = u8::try_from(report.command_status)
            .ok()
            .filter(|&status| status != 0)
            .unwrap_or(1);
        parts.push(Part {
            fails: Some(status),
            lead: format!(
                "(COMMAND's status {}): COMMAND failed",
                report.command_status
            ),
            follow: String::new(),
        });
    }
    parts.push(clients_part(report));
    parts.extend(service_part(report));
    parts
}

/// The guard's exit status for `report`.
pub fn status(report: &RunReport) -> u8 {
    parts(report)
        .iter()
        .find_map(|part| part.fails)
        .unwrap_or(PASS)
}

/// The last line of the table: pass or FAIL, what decided, and what the
/// other parts found, in one sentence.
pub fn closing_line(report: &RunReport) -> String {
    let parts = parts(report);
    let deciding = parts.iter().position(|part| part.fails.is_some());
    let (word, lead) = match deciding {
        Some(at) => ("FAIL", at),
        None => ("pass", 0),
    };
    let mut said = vec![format!("{word} {}", parts[lead].lead)];
    said.extend(
        parts
            .iter()
            .enumerate()
            .filter(|&(at, _)| at != lead)
            .map(|(_, part)| part.follow.clone()),
    );
    format!("keepalive-server lab: {}\n", said.join("; "))
}

/// The clients' part: none came, or their verdicts under `--fail-on`.
fn clients_part(report: &RunReport) -> Part {
    if report.clients.is_empty() {
        let nothing = "no client connected, so nothing was judged";
        let point = format!(
            "point the client under test at {URL_VARIABLE} ({})",
            report.lab_url
        );
        return match report.allow_no_clients {
            false => Part {
                fails: Some(NO_CLIENTS),
                lead: format!(
                    "(status {NO_CLIENTS}): {nothing}: {point}, or pass --allow-no-clients"
                ),
                follow: format!("no client connected either: {point}"),
            },
            true => Part {
                fails: None,
                lead: format!("(--allow-no-clients): {nothing}"),
                follow: "no client connected (--allow-no-clients)".into(),
            },
        };
    }
    let judged = clients_judged(report);
    match report.clients_pass {
        true => Part {
            fails: None,
            follow: format!("the clients alone would pass {judged}"),
            lead: judged,
        },
        false => Part {
            fails: Some(CLIENTS_FAIL),
            follow: format!("the clients fail too {judged}"),
            lead: judged,
        },
    }
}

/// "(--fail-on at-risk): 1 client would race the server".
fn clients_judged(report: &RunReport) -> String {
    let count = |verdict| {
        report
            .clients
            .iter()
            .filter(|c| c.verdict == verdict)
            .count()
    };
    let racing = count(GuardVerdict::Race) + count(GuardVerdict::AtRisk);
    let unsettled = count(GuardVerdict::Inconclusive);
    let mut said = Vec::new();
    if racing > 0 {
        said.push(match report.clients_pass {
            true => format!("{racing} client{} at risk, reported only", plural(racing)),
            false => format!("{racing} client{} would race the server", plural(racing)),
        });
    }
    if unsettled > 0 {
        said.push(format!(
            "{unsettled} client{} inconclusive{}",
            plural(unsettled),
            match report.fail_on == "inconclusive" {
                true => "",
                false => ", reported only",
            }
        ));
    }
    format!(
        "(--fail-on {}){}{}",
        report.fail_on,
        if said.is_empty() { "" } else { ": " },
        said.join(", ")
    )
}

/// The other hop's part, when it was checked.
fn service_part(report: &RunReport) -> Option<Part> {
    let hop = report.lb_hop.as_ref()?;
    let behind = format!(
        "the service behind the lab ({}) against a {:.1} s balancer",
        hop.upstream,
        hop.hop.lb_idle_timeout_ms as f64 / 1e3
    );
    Some(if hop.closes_first() {
        let setting = hop
            .hop
            .setting
            .map_or_else(String::new, |setting| format!(" (raise its {setting})"));
        Part {
            fails: Some(SERVICE_FAILS),
            lead: format!(
                "(status {SERVICE_FAILS}): {behind}: it closes idle connections first{setting}"
            ),
            follow: format!("{behind}: it closes first too (status {SERVICE_FAILS} alone)"),
        }
    } else if hop.inconclusive() {
        let cut = "its check was cut short: inconclusive, not a pass";
        Part {
            fails: Some(SERVICE_FAILS),
            lead: format!("(status {SERVICE_FAILS}): {behind}: {cut}"),
            follow: format!("{behind}: {cut} too (status {SERVICE_FAILS} alone)"),
        }
    } else {
        Part {
            fails: None,
            lead: String::new(),
            follow: format!("{behind}: ok"),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guard::other_hop::verdict::tests::hop_closing_after;
    use crate::guard::table::tests::{client, run};

    /// Every combination of COMMAND, clients, `--allow-no-clients` and the
    /// other hop: the line's verdict word agrees with the status, and the
    /// line is one.
    #[test]
    fn the_closing_line_and_the_status_always_agree() {
        let hops = [
            None,
            Some(hop_closing_after(3000.0, false)),
            Some(hop_closing_after(1000.0, false)),
            Some(hop_closing_after(1000.0, true)),
        ];
        for command_status in [0, 1, 3] {
            for clients in [vec![], vec![client(GuardVerdict::Ok)]] {
                // A run without clients has none failing.
                for clients_pass in [true, clients.is_empty()] {
                    for allow_no_clients in [false, true] {
                        for lb_hop in &hops {
                            let mut report = run(clients.clone(), clients_pass);
                            report.command_status = command_status;
                            report.allow_no_clients = allow_no_clients;
                            report.lb_hop = lb_hop.clone();
                            let line = closing_line(&report);
                            let status = status(&report);
                            let case = format!(
                                "{command_status} {} {clients_pass} {allow_no_clients} {:?}: {line}",
                                clients.len(),
                                lb_hop.as_ref().map(|h| h.hop.verdict)
                            );
                            assert_eq!(line.matches('\n').count(), 1, "{case}");
                            assert_eq!(status == PASS, line.contains(": pass"), "{case}");
                            assert_eq!(status != PASS, line.contains(": FAIL"), "{case}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_service_fails_apart_from_the_clients_with_its_own_status() {
        let mut report = run(vec![client(GuardVerdict::Ok)], true);
        report.lb_hop = Some(hop_closing_after(1000.0, false));
        assert_eq!(status(&report), SERVICE_FAILS);
        let line = closing_line(&report);
        assert!(
            line.contains("FAIL (status 4): the service behind the lab (http://s/) against a 2.0 s balancer: it closes idle connections first")
                && line.contains("the clients alone would pass (--fail-on at-risk)"),
            "{line}"
        );
        report.lb_hop = Some(hop_closing_after(1000.0, true));
        assert_eq!(status(&report), SERVICE_FAILS, "cut short is not a pass");
        assert!(closing_line(&report).contains("cut short: inconclusive, not a pass"));
        report.lb_hop = Some(hop_closing_after(3000.0, false));
        assert_eq!(status(&report), PASS);
        let line = closing_line(&report);
        assert!(
            line.contains("pass (--fail-on at-risk); the service behind the lab")
                && line.ends_with(": ok\n"),
            "{line}"
        );
        report.clients_pass = false;
        report.clients = vec![client(GuardVerdict::Race)];
        report.lb_hop = Some(hop_closing_after(1000.0, false));
        assert_eq!(status(&report), CLIENTS_FAIL, "the clients decide first");
        assert!(closing_line(&report).contains("it closes first too (status 4 alone)"));
    }

    #[test]
    fn the_commands_failure_wins_then_no_clients_then_the_clients() {
        let mut report = run(vec![client(GuardVerdict::Race)], false);
        assert_eq!(status(&report), CLIENTS_FAIL);
        report.command_status = 3;
        assert_eq!(status(&report), 3);
        report.command_status = 143;
        assert_eq!(status(&report), 143);
        report.command_status = 256;
        assert_eq!(status(&report), 1);
        let mut empty = run(Vec::new(), true);
        assert_eq!(status(&empty), NO_CLIENTS);
        empty.allow_no_clients = true;
        assert_eq!(status(&empty), PASS);
        empty.allow_no_clients = false;
        empty.command_status = 5;
        assert_eq!(status(&empty), 5);
    }

    #[test]
    fn no_clients_names_the_variable_and_the_way_out() {
        let line = closing_line(&run(Vec::new(), true));
        assert!(
            line.contains("FAIL (status 3): no client connected")
                && line.contains("KAS_LAB_URL (http://127.0.0.1:4000/)")
                && line.contains("--allow-no-clients"),
            "{line}"
        );
    }

    #[test]
    fn a_failed_command_leads_and_the_clients_follow() {
        let mut report = run(vec![client(GuardVerdict::Inconclusive)], true);
        report.command_status = 1;
        let line = closing_line(&report);
        assert!(
            line.starts_with("keepalive-server lab: FAIL (COMMAND's status 1): COMMAND failed; the clients alone would pass (--fail-on at-risk): 1 client inconclusive"),
            "{line}"
        );
        let mut report = run(vec![client(GuardVerdict::Race)], false);
        report.command_status = 1;
        assert!(
            closing_line(&report)
                .contains("the clients fail too (--fail-on at-risk): 1 client would race"),
            "{}",
            closing_line(&report)
        );
    }
}
