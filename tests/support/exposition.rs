//! A strict reader of the Prometheus text exposition format (0.0.4), for
//! tests: every sample line parsed into name, labels and value, every
//! family checked to have `# HELP` and `# TYPE` before its samples, and
//! histograms checked to be cumulative and to end at `+Inf` = `_count`.

use std::collections::BTreeMap;

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// A parsed exposition.
#[derive(Debug, Default)]
pub struct Exposition {
    /// Family name -> its `# TYPE`.
    pub types: BTreeMap<String, String>,
    pub helps: BTreeMap<String, String>,
    pub samples: Vec<Sample>,
}

impl Exposition {
    /// Parses `text`, panicking with the line on any violation.
    pub fn parse(text: &str) -> Exposition {
        let mut out = Exposition::default();
        for line in text.lines() {
            if line.is_empty() {
                continue;
            }
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let (name, help) = rest.split_once(' ').expect(line);
                assert!(valid_name(name), "bad name: {line}");
                assert!(!help.is_empty(), "empty help: {line}");
                out.helps.insert(name.into(), help.into());
                continue;
            }
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').expect(line);
                assert!(
                    ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                    "bad type: {line}"
                );
                assert!(out.helps.contains_key(name), "TYPE before HELP: {line}");
                assert!(
                    out.types.insert(name.into(), kind.into()).is_none(),
                    "family declared twice: {line}"
                );
                continue;
            }
            assert!(!line.starts_with('#'), "stray comment: {line}");
            let sample = parse_sample(line);
            let family = out
                .family_of(&sample.name)
                .unwrap_or_else(|| panic!("no # TYPE for {line}"));
            if out.types[&family] == "counter" {
                assert!(sample.value >= 0.0, "negative counter: {line}");
            }
            out.samples.push(sample);
        }
        out.check_histograms();
        out
    }

    /// The family a sample belongs to (`x_bucket` belongs to histogram `x`).
    fn family_of(&self, name: &str) -> Option<String> {
        if self.types.contains_key(name) {
            return Some(name.into());
        }
        ["_bucket", "_sum", "_count"].iter().find_map(|suffix| {
            let base = name.strip_suffix(suffix)?;
            (self.types.get(base)? == "histogram").then(|| base.to_string())
        })
    }

    /// Each series of each histogram (one per label set besides `le`):
    /// cumulative buckets ending at `+Inf` = its `_count`, and a `_sum`.
    fn check_histograms(&self) {
        for (family, kind) in &self.types {
            if kind != "histogram" {
                continue;
            }
            let mut series: BTreeMap<Vec<(String, String)>, Vec<&Sample>> = BTreeMap::new();
            for sample in self
                .samples
                .iter()
                .filter(|s| s.name == format!("{family}_bucket"))
            {
                let key = sample
                    .labels
                    .iter()
                    .filter(|(k, _)| k.as_str() != "le")
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                series.entry(key).or_default().push(sample);
            }
            assert!(!series.is_empty(), "{family} has no buckets");
            for (labels, buckets) in series {
                let labels: Vec<(&str, &str)> = labels
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                self.check_series(family, &labels, &buckets);
            }
        }
    }

    fn check_series(&self, family: &str, labels: &[(&str, &str)], buckets: &[&Sample]) {
        let mut previous = (f64::NEG_INFINITY, 0.0);
        for bucket in buckets {
            let le = &bucket.labels["le"];
            let bound: f64 = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().expect(le)
            };
            assert!(
                bound > previous.0,
                "{family}{labels:?}: buckets out of order at {le}"
            );
            assert!(
                bucket.value >= previous.1,
                "{family}{labels:?}: not cumulative at {le}"
            );
            previous = (bound, bucket.value);
        }
        assert_eq!(
            previous.0,
            f64::INFINITY,
            "{family}{labels:?}: last bucket is not +Inf"
        );
        let count = self
            .value(&format!("{family}_count"), labels)
            .expect("a _count");
        assert_eq!(
            previous.1, count,
            "{family}{labels:?}: +Inf bucket != _count"
        );
        assert!(
            self.value(&format!("{family}_sum"), labels).is_some(),
            "{family}{labels:?}: no _sum"
        );
    }

    /// The value of the sample `name` whose labels include `labels`.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.samples
            .iter()
            .find(|s| {
                s.name == name
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|s| s.value)
    }
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// `name{k="v",...} value`, with escapes in label values.
fn parse_sample(line: &str) -> Sample {
    let name_end = line
        .find(['{', ' '])
        .unwrap_or_else(|| panic!("no value: {line}"));
    let name = &line[..name_end];
    assert!(valid_name(name), "bad metric name: {line}");
    let mut labels = BTreeMap::new();
    let bytes = line.as_bytes();
    let mut at = name_end;
    if bytes[at] == b'{' {
        at += 1;
        while bytes.get(at) != Some(&b'}') {
            let eq = line[at..]
                .find("=\"")
                .unwrap_or_else(|| panic!("bad label: {line}"))
                + at;
            let key = &line[at..eq];
            assert!(valid_name(key), "bad label name {key:?}: {line}");
            at = eq + 2;
            let mut value = String::new();
            loop {
                match bytes.get(at) {
                    Some(b'\\') => {
                        value.push(match bytes.get(at + 1) {
                            Some(b'n') => '\n',
                            Some(b'\\') => '\\',
                            Some(b'"') => '"',
                            _ => panic!("bad escape: {line}"),
                        });
                        at += 2;
                    }
                    Some(b'"') => break,
                    Some(_) => {
                        let c = line[at..].chars().next().unwrap();
                        value.push(c);
                        at += c.len_utf8();
                    }
                    None => panic!("unterminated label value: {line}"),
                }
            }
            at += 1; // the closing quote
            assert!(
                labels.insert(key.to_string(), value).is_none(),
                "repeated label: {line}"
            );
            match bytes.get(at) {
                Some(b',') => at += 1,
                Some(b'}') => {}
                _ => panic!("bad label separator: {line}"),
            }
        }
        at += 1;
    }
    let value = line[at..]
        .strip_prefix(' ')
        .unwrap_or_else(|| panic!("no space before value: {line}"));
    let value: f64 = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().unwrap_or_else(|_| panic!("bad value: {line}")),
    };
    Sample {
        name: name.into(),
        labels,
        value,
    }
}
