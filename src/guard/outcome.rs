//! The run's one verdict: the guard's exit status and the closing line
//! that says it, both read from the same [`RunReport`], so they cannot
//! disagree (a run whose COMMAND failed never closes on "pass").
//!
//! What decides, in order: COMMAND's own status when it failed (its test
//! failures stay its own); then a run no client reached ([`NO_CLIENTS`],
//! as pytest's 5 for "no tests collected", unless `--allow-no-clients`);
//! then a client that fails under `--fail-on` ([`CLIENTS_FAIL`]); else
//! [`PASS`]. The closing line leads with what decided and names the
//! rest after it ("the clients alone would pass"), so it reads as one
//! sentence, never as two verdicts.

use super::run::URL_VARIABLE;
use super::table::{RunReport, plural};
use crate::guard::judge::GuardVerdict;

/// Every client passed (or none came, under `--allow-no-clients`).
pub const PASS: u8 = 0;
/// A client would race the server (or is at risk, or inconclusive, as
/// `--fail-on` says).
pub const CLIENTS_FAIL: u8 = 1;
/// A usage error, as clap gives it.
pub const USAGE_ERROR: u8 = 2;
/// No client connected to the lab: nothing was judged.
pub const NO_CLIENTS: u8 = 3;

/// The guard's exit status for `report`.
pub fn status(report: &RunReport) -> u8 {
    if report.command_status != 0 {
        return u8::try_from(report.command_status)
            .ok()
            .filter(|&status| status != 0)
            .unwrap_or(1);
    }
    if no_clients_fail(report) {
        NO_CLIENTS
    } else if !report.clients_pass {
        CLIENTS_FAIL
    } else {
        PASS
    }
}

/// Whether the run fails because no client came.
fn no_clients_fail(report: &RunReport) -> bool {
    report.clients.is_empty() && !report.allow_no_clients
}

/// The last line of the table: pass or FAIL, what decided, and what the
/// other parts found, in one sentence.
pub fn closing_line(report: &RunReport) -> String {
    let clients = clients_clause(report);
    let said = if report.command_status != 0 {
        let also = match (&clients, no_clients_fail(report) || !report.clients_pass) {
            (Clause::NoClients(text), _) => format!("{text} either"),
            (Clause::Judged(text), true) => format!("the clients fail too {text}"),
            (Clause::Judged(text), false) => format!("the clients alone would pass {text}"),
        };
        format!(
            "FAIL (COMMAND's status {}): COMMAND failed; {also}",
            report.command_status
        )
    } else {
        match clients {
            Clause::NoClients(text) if no_clients_fail(report) => {
                format!(
                    "FAIL (status {NO_CLIENTS}): {text}: point the client under test at \
                     {URL_VARIABLE} ({}), or pass --allow-no-clients",
                    report.lab_url
                )
            }
            Clause::NoClients(text) => format!("pass (--allow-no-clients): {text}"),
            Clause::Judged(text) if report.clients_pass => format!("pass {text}"),
            Clause::Judged(text) => format!("FAIL {text}"),
        }
    };
    format!("keepalive-server lab: {said}\n")
}

/// What the clients part says, without its verdict word.
enum Clause {
    /// No client came: "no client connected, nothing was judged".
    NoClients(&'static str),
    /// "(--fail-on at-risk): 1 client would race the server".
    Judged(String),
}

fn clients_clause(report: &RunReport) -> Clause {
    if report.clients.is_empty() {
        return Clause::NoClients("no client connected, so nothing was judged");
    }
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
    Clause::Judged(format!(
        "(--fail-on {}){}{}",
        report.fail_on,
        if said.is_empty() { "" } else { ": " },
        said.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guard::table::tests::{client, run};

    /// Every combination of COMMAND, clients and `--allow-no-clients`:
    /// the line's verdict word agrees with the status, and the line is one.
    #[test]
    fn the_closing_line_and_the_status_always_agree() {
        for command_status in [0, 1, 3] {
            for clients in [vec![], vec![client(GuardVerdict::Ok)]] {
                // A run without clients has none failing.
                for clients_pass in [true, clients.is_empty()] {
                    for allow_no_clients in [false, true] {
                        let mut report = run(clients.clone(), clients_pass);
                        report.command_status = command_status;
                        report.allow_no_clients = allow_no_clients;
                        let line = closing_line(&report);
                        let status = status(&report);
                        let case = format!(
                            "{command_status} {clients:?} {clients_pass} {allow_no_clients}: {line}"
                        );
                        assert_eq!(line.matches('\n').count(), 1, "{case}");
                        assert_eq!(status == PASS, line.contains(": pass"), "{case}");
                        assert_eq!(status != PASS, line.contains(": FAIL"), "{case}");
                    }
                }
            }
        }
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
