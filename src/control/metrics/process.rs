//! The standard `process_*` metrics (the names every Prometheus client library writes, so
//! dashboards for them work as they are) and `sqsim_build_info`, read from `/proc/self` at
//! scrape time. On a system without `/proc` the process figures are left out.

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::info::Info;

use super::single;

/// Clock ticks per second of `/proc`'s CPU times: `USER_HZ`, 100 on every Linux ABI.
const TICKS: f64 = 100.0;
/// Bytes per page of `/proc/self/statm`: 4 KiB on the platforms sqsim is built for.
const PAGE: u64 = 4096;

/// What `/proc/self` says of this process.
#[derive(Debug, Default, PartialEq)]
struct Figures {
    cpu_seconds: f64,
    start_time_seconds: f64,
    virtual_bytes: u64,
    resident_bytes: u64,
    open_fds: u64,
    max_fds: u64,
}

/// `/proc/self/stat`'s CPU times and start (in ticks since boot), `statm`'s sizes, the open
/// descriptors and their limit.
fn read() -> Option<Figures> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command (field 2) may hold spaces and parentheses: count from its end.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let tick = |i: usize| fields.get(i)?.parse::<f64>().ok();
    // Fields 14, 15 (utime, stime) and 22 (starttime), counted from 3 after the command.
    let cpu_seconds = (tick(11)? + tick(12)?) / TICKS;
    let started_ticks = tick(19)?;
    let boot = std::fs::read_to_string("/proc/stat").ok()?;
    let btime: f64 = boot
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let mut pages = statm.split_whitespace().map(|v| v.parse::<u64>().ok());
    let virtual_bytes = pages.next()?? * PAGE;
    let resident_bytes = pages.next()?? * PAGE;
    let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
    let max_fds = rlimit::Resource::NOFILE.get().map_or(0, |(soft, _)| soft);
    Some(Figures {
        cpu_seconds,
        start_time_seconds: btime + started_ticks / TICKS,
        virtual_bytes,
        resident_bytes,
        open_fds,
        max_fds,
    })
}

/// Writes `sqsim_build_info` and the process figures.
pub(super) fn encode(e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    single(
        e,
        "sqsim_build",
        "sqsim's version (the value is always 1).",
        Info::new([("version", env!("CARGO_PKG_VERSION"))]),
    )?;
    let Some(f) = read() else {
        return Ok(());
    };
    single(
        e,
        "process_cpu_seconds",
        "Total user and system CPU time spent in seconds.",
        ConstCounter::new(f.cpu_seconds),
    )?;
    single(
        e,
        "process_start_time_seconds",
        "Start time of the process since unix epoch in seconds.",
        ConstGauge::new(f.start_time_seconds),
    )?;
    single(
        e,
        "process_virtual_memory_bytes",
        "Virtual memory size in bytes.",
        ConstGauge::new(f.virtual_bytes as i64),
    )?;
    single(
        e,
        "process_resident_memory_bytes",
        "Resident memory size in bytes.",
        ConstGauge::new(f.resident_bytes as i64),
    )?;
    single(
        e,
        "process_open_fds",
        "Number of open file descriptors.",
        ConstGauge::new(f.open_fds as i64),
    )?;
    single(
        e,
        "process_max_fds",
        "Maximum number of open file descriptors.",
        ConstGauge::new(f.max_fds as i64),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn this_process_is_read_from_proc() {
        let f = read().expect("/proc/self");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(
            f.start_time_seconds > now - 3600.0 && f.start_time_seconds <= now + 1.0,
            "{f:?}"
        );
        assert!(
            f.resident_bytes > 1 << 20 && f.virtual_bytes >= f.resident_bytes,
            "{f:?}"
        );
        assert!(f.open_fds >= 3 && f.max_fds >= f.open_fds, "{f:?}");
        assert!(f.cpu_seconds >= 0.0);
    }
}
