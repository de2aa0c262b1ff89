//! What went wrong between the lab and the service behind it
//! (`--upstream`), told apart from the clients' verdicts: the forwarded
//! exchanges that failed on the service's side, by reason (the workers'
//! `kas_upstream_errors_total{reason}`), and the requests the lab sent
//! again after a pooled connection closed before answering
//! (`kas_upstream_retries_total`). A 502 or a 504 is the service's
//! failure, never a client's race: it is shown, and left to COMMAND's own
//! tests to fail on.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::Remote;
use crate::config::Upstream;
use crate::upstream::Failure;

/// The run's upstream failures and retries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UpstreamErrors {
    /// The service, as `--upstream` named it.
    pub url: String,
    /// Failed exchanges by reason: `refused`, `reset`, `timeout`,
    /// `bad_response`, `cut` (each there, 0 when none).
    pub errors: BTreeMap<&'static str, u64>,
    /// Requests sent again on a fresh connection.
    pub retries: u64,
}

impl UpstreamErrors {
    /// What every worker of the lab counted for `upstream`.
    pub fn read(remote: &Remote, upstream: &Upstream) -> UpstreamErrors {
        let errors = Failure::ALL
            .iter()
            .map(|&failure| {
                let count = remote.stats().map(|s| s.upstream_errors_by(failure)).sum();
                (failure.label(), count)
            })
            .collect();
        UpstreamErrors {
            url: upstream.url.clone(),
            errors,
            retries: remote.stats().map(|s| s.upstream_retries.get()).sum(),
        }
    }

    /// The table's line, when there is something to say: "upstream: 2
    /// refused (http://127.0.0.1:9): the service's failures, not a
    /// client's; 1 request sent again on a fresh connection".
    pub fn line(&self) -> Option<String> {
        let failed: Vec<String> = self
            .errors
            .iter()
            .filter(|&(_, &count)| count > 0)
            .map(|(reason, count)| format!("{count} {}", reason.replace('_', " ")))
            .collect();
        let mut said = Vec::new();
        if !failed.is_empty() {
            said.push(format!(
                "{} ({}): the service's failures (502 or 504 to the client), not a client's",
                failed.join(", "),
                self.url
            ));
        }
        if self.retries > 0 {
            said.push(format!(
                "{} request{} sent again on a fresh connection (a pooled one closed before \
                 answering)",
                self.retries,
                if self.retries == 1 { "" } else { "s" }
            ));
        }
        (!said.is_empty()).then(|| format!("  upstream: {}\n", said.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_each_reason_and_the_service_or_says_nothing() {
        let mut errors = UpstreamErrors {
            url: "http://127.0.0.1:9".into(),
            errors: Failure::ALL.iter().map(|f| (f.label(), 0)).collect(),
            retries: 0,
        };
        assert_eq!(errors.line(), None);
        errors.errors.insert("refused", 2);
        errors.errors.insert("bad_response", 1);
        errors.retries = 1;
        let line = errors.line().unwrap();
        assert!(
            line.starts_with("  upstream: 1 bad response, 2 refused (http://127.0.0.1:9)")
                && line.contains("not a client's")
                && line.contains("1 request sent again"),
            "{line}"
        );
        let json = serde_json::to_value(&errors).unwrap();
        assert_eq!(json["errors"]["refused"], 2);
        assert_eq!(json["errors"]["timeout"], 0);
    }
}
