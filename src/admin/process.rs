//! The standard `process_*` metrics, read from /proc/self on a scrape
//! (what the Prometheus client libraries export): resident memory, open
//! descriptors, CPU time and start time. Linux only; elsewhere (or if
//! /proc is unreadable) the figures are left out rather than made up.

use std::fs;

/// The process's figures at one scrape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessFigures {
    pub resident_memory_bytes: u64,
    pub open_fds: u64,
    pub max_fds: Option<u64>,
    pub cpu_seconds: f64,
    /// Since the Unix epoch.
    pub start_time_seconds: f64,
}

/// Reads the figures, or `None` where /proc is not there to read.
pub fn read() -> Option<ProcessFigures> {
    let stat = fs::read_to_string("/proc/self/stat").ok()?;
    let boot_time = boot_time(&fs::read_to_string("/proc/stat").ok()?)?;
    let stat = parse_stat(&stat)?;
    let ticks = rustix::param::clock_ticks_per_second() as f64;
    let open_fds = fs::read_dir("/proc/self/fd").ok()?.count() as u64;
    let max_fds = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    Some(ProcessFigures {
        resident_memory_bytes: stat.rss_pages * rustix::param::page_size() as u64,
        open_fds,
        max_fds,
        cpu_seconds: (stat.utime + stat.stime) as f64 / ticks,
        start_time_seconds: boot_time as f64 + stat.start_ticks as f64 / ticks,
    })
}

/// The fields of /proc/self/stat used here (proc(5)).
#[derive(Debug, PartialEq, Eq)]
struct Stat {
    utime: u64,
    stime: u64,
    start_ticks: u64,
    rss_pages: u64,
}

/// Parses /proc/PID/stat. The command name (field 2) is in parentheses
/// and may itself hold spaces or parentheses, so fields are counted from
/// the last `)`.
fn parse_stat(text: &str) -> Option<Stat> {
    let after_name = &text[text.rfind(')')? + 1..];
    // Field 3 (state) is the first after the name.
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    Some(Stat {
        utime: field(14)?,
        stime: field(15)?,
        start_ticks: field(22)?,
        rss_pages: field(24)?,
    })
}

/// `btime` from /proc/stat: boot time in seconds since the epoch.
fn boot_time(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|value| value.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        let line = "1234 (a (weird) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 \
                    250 50 0 0 20 0 3 0 98765 123456789 2048 18446744073709551615";
        assert_eq!(
            parse_stat(line),
            Some(Stat {
                utime: 250,
                stime: 50,
                start_ticks: 98765,
                rss_pages: 2048
            })
        );
        assert_eq!(
            boot_time("cpu 1 2\nbtime 1700000000\n"),
            Some(1_700_000_000)
        );
    }

    #[test]
    fn this_process_has_memory_descriptors_and_a_start_time() {
        let figures = read().expect("/proc is readable on Linux");
        assert!(figures.resident_memory_bytes > 0);
        assert!(figures.open_fds >= 3, "{figures:?}");
        assert!(figures.start_time_seconds > 1_600_000_000.0, "{figures:?}");
    }
}
