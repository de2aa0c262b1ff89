//! What /proc says of a process: a server started in-process is this
//! process (`/proc/self`), the built binary is a child with a pid.

/// This process's resident set, in KiB.
pub fn vm_rss_kib() -> u64 {
    vm_rss_kib_of("self")
}

/// The resident set of `process` (`"self"` or a pid), in KiB.
pub fn vm_rss_kib_of(process: &str) -> u64 {
    let path = format!("/proc/{process}/status");
    let status = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("VmRSS in {path}"))
}

/// Descriptors open in this process (an in-process server's and the test's).
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .count()
}

/// CPU time used so far (utime + stime), in clock ticks, by `process`:
/// `"self"` or a pid.
pub fn cpu_ticks(process: &str) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{process}/stat"))
        .unwrap_or_else(|e| panic!("/proc/{process}/stat: {e}"));
    // Fields after the `(comm)`: state is field 3, utime 14, stime 15.
    let after = &stat[stat.rfind(')').expect("(comm)") + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}
