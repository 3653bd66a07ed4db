//! A process's resident memory, read the way both load tools (`sqsim-bench`, `sqsim-soak`)
//! sample the server they started. Included by path in each binary.

/// A process's resident set size in KiB, from `/proc/PID/status` (`None` when it is gone or
/// the system has no `/proc`).
pub(crate) fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}
