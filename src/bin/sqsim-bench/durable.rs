//! Durable-mode figures beside in-memory ones, in the same run: send, cycle and single
//! against sqsim in memory, with `--sync fsync` and with `--sync os`, each its own fresh
//! process, measured in turn round after round (a machine that slows down during the run
//! weighs on every variant alike); the median of the rounds counts. Then the data
//! directory's size after the steady cycle runs, and the time a killed sqsim takes to come
//! back serving with a large backlog.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::client::{Api, Conn, Proto};
use crate::scenarios::{self, Target};
use crate::{rss_kib, spawn_sqsim_args, Spawned};

const ROUNDS: usize = 3;
const VARIANTS: [&str; 3] = ["memory", "fsync", "os"];
const CASES: [&str; 3] = ["send", "cycle", "single"];

fn data_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sqsim-bench-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn spawn(bin: &Path, variant: &str, dir: &Path) -> Spawned {
    let dir = dir.display().to_string();
    match variant {
        "memory" => spawn_sqsim_args(bin, &[], ""),
        sync => spawn_sqsim_args(bin, &["--data-dir", &dir, "--sync", sync], ""),
    }
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

fn median(xs: &[f64]) -> f64 {
    let mut xs = xs.to_vec();
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Runs the comparison and the recovery measurement; prints its lines and adds its facts.
pub(crate) async fn run(
    bin: &Path,
    dur: Duration,
    conns: usize,
    backlog: usize,
    facts: &mut Vec<(String, String)>,
) {
    let dirs: Vec<PathBuf> = VARIANTS.iter().map(|v| data_dir(v)).collect();
    let servers: Vec<Spawned> = VARIANTS
        .iter()
        .zip(&dirs)
        .map(|(v, d)| spawn(bin, v, d))
        .collect();
    for s in &servers {
        scenarios::wait_ready(&s.addr, Duration::from_secs(30)).await;
    }
    let mut rates = vec![Vec::new(); VARIANTS.len() * CASES.len()];
    for round in 0..ROUNDS {
        eprintln!("[durable] round {}/{ROUNDS}", round + 1);
        for (v, (name, s)) in VARIANTS.iter().zip(&servers).enumerate() {
            let t = Target {
                name: format!("sqsim-{name}"),
                addr: s.addr.clone(),
            };
            for (c, case) in CASES.iter().enumerate() {
                let o = match *case {
                    "send" => scenarios::send(&t, Proto::Json, 32, dur, 1, "bench").await,
                    "cycle" => {
                        let q = format!("durable-cycle-{round}");
                        let url = scenarios::create_queue(&t, Proto::Json, &q, false).await;
                        let o =
                            scenarios::cycle(&t, Proto::Json, &url, conns, dur, 0, "cycle").await;
                        scenarios::delete_queue(&t, Proto::Json, &url).await;
                        o
                    }
                    _ => scenarios::single(&t, Proto::Json, conns, dur).await,
                };
                rates[v * CASES.len() + c].push(o.messages_per_s);
            }
        }
    }
    println!("\ndurable mode: median msgs/s of {ROUNDS} interleaved rounds (JSON), and the share of in-memory sqsim");
    for (c, case) in CASES.iter().enumerate() {
        let memory = median(&rates[c]);
        for (v, name) in VARIANTS.iter().enumerate() {
            let m = median(&rates[v * CASES.len() + c]);
            println!("{case:<7} {name:<7} {m:>10.0}  {:.3}", m / memory);
            facts.push((
                format!("durable_{case}_{name}_msgs_per_s"),
                format!("{m:.0}"),
            ));
            facts.push((
                format!("durable_{case}_{name}_share"),
                format!("{:.3}", m / memory),
            ));
        }
    }
    drop(servers);
    steady(bin, dur * 4, conns, facts).await;
    recovery(bin, backlog, facts).await;
    for d in dirs {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// A long send/receive/delete cycle in fsync mode (the default compaction threshold): how
/// large the data directory is at the end, against the bytes that went through the log.
async fn steady(bin: &Path, dur: Duration, conns: usize, facts: &mut Vec<(String, String)>) {
    let dir = data_dir("steady");
    let s = spawn(bin, "fsync", &dir);
    scenarios::wait_ready(&s.addr, Duration::from_secs(30)).await;
    let t = Target {
        name: "sqsim-fsync".into(),
        addr: s.addr.clone(),
    };
    eprintln!("[durable] steady cycle for {dur:?}");
    let url = scenarios::create_queue(&t, Proto::Json, "steady", false).await;
    let o = scenarios::cycle(&t, Proto::Json, &url, conns, dur, 0, "steady").await;
    let moved = (o.messages_per_s * dur.as_secs_f64()) as u64;
    let stats = admin_stats(&s.addr).await;
    let store = &stats["store"];
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let size = dir_bytes(&dir);
    println!(
        "steady: {moved} messages through a {dur:?} fsync cycle; data dir {:.1} MiB at the end \
         ({} snapshots written, {:.1} MiB of log and {:.1} MiB of snapshot now)",
        mib(size),
        store["snapshots"],
        mib(store["log_bytes"].as_u64().unwrap_or(0)),
        mib(store["snapshot_bytes"].as_u64().unwrap_or(0)),
    );
    facts.push(("durable_steady_messages".into(), moved.to_string()));
    facts.push((
        "durable_steady_data_dir_mib".into(),
        format!("{:.1}", mib(size)),
    ));
    facts.push((
        "durable_steady_snapshots".into(),
        store["snapshots"].to_string(),
    ));
    drop(s);
    let _ = std::fs::remove_dir_all(dir);
}

async fn admin_stats(addr: &str) -> serde_json::Value {
    let Ok(mut c) = Conn::connect(addr).await else {
        return serde_json::Value::Null;
    };
    c.get_json("/_sqsim/stats").await.unwrap_or_default()
}

/// Queues `backlog` messages in durable mode, kills sqsim (SIGKILL) and measures the time
/// from starting it again to its first answer, then checks the count.
async fn recovery(bin: &Path, backlog: usize, facts: &mut Vec<(String, String)>) {
    let dir = data_dir("recovery");
    let s = spawn(bin, "os", &dir);
    scenarios::wait_ready(&s.addr, Duration::from_secs(30)).await;
    let t = Target {
        name: "sqsim-os".into(),
        addr: s.addr.clone(),
    };
    eprintln!("[durable] queueing {backlog} for the recovery run");
    let url = scenarios::create_queue(&t, Proto::Json, "recovery", false).await;
    scenarios::prefill(&t, Proto::Json, &url, backlog, 8).await;
    if let Some(kib) = rss_kib(s.child.id()) {
        facts.push((
            format!("durable_rss_after_{backlog}_queued_mib"),
            format!("{:.1}", kib as f64 / 1024.0),
        ));
    }
    drop(s);
    facts.push((
        format!("durable_data_dir_mib_with_{backlog}_queued"),
        format!("{:.1}", dir_bytes(&dir) as f64 / (1 << 20) as f64),
    ));
    let started = Instant::now();
    let s = spawn(bin, "os", &dir);
    let ready = scenarios::wait_ready(&s.addr, Duration::from_secs(120)).await;
    let took = started.elapsed();
    let count = queued(&s.addr, &url).await;
    println!(
        "recovery: {backlog} queued messages back and serving in {:.0} ms ({count:?} counted after)",
        took.as_secs_f64() * 1000.0
    );
    if ready.is_some() {
        facts.push((
            format!("durable_recovery_ms_{backlog}_queued"),
            format!("{:.0}", took.as_secs_f64() * 1000.0),
        ));
    }
    facts.push((
        "durable_recovered_count".into(),
        count.map_or("-".into(), |c| c.to_string()),
    ));
    drop(s);
    let _ = std::fs::remove_dir_all(dir);
}

/// ApproximateNumberOfMessages of `url`.
async fn queued(addr: &str, url: &str) -> Option<u64> {
    let mut c = Conn::connect(addr).await.ok()?;
    let (_, body) = c.send(&Api(Proto::Json).queue_size(url)).await.ok()?;
    let v: serde_json::Value = serde_json::from_slice(&body).ok()?;
    v["Attributes"]["ApproximateNumberOfMessages"]
        .as_str()?
        .parse()
        .ok()
}
