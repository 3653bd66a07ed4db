//! `sqsim-bench`: the load generator behind `make bench`. It starts sqsim (or uses any
//! endpoint), a canned-reply floor server for the HTTP ceiling and, when given, a peer such as
//! moto, runs the same scenarios against each on one core, and prints one table plus JSON.

mod client;
mod durable;
mod floor;
#[path = "../shared/rng.rs"]
#[allow(dead_code)] // the soak's weighted choices and ranges; the bench draws bits only
mod rng;
#[path = "../shared/rss.rs"]
mod rss;
mod scenarios;
mod search;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;

use client::Proto;
use rss::rss_kib;
use scenarios::{Outcome, Target};

/// Load generator for sqsim and other SQS endpoints.
#[derive(Debug, Parser)]
#[command(name = "sqsim-bench")]
struct Args {
    /// Benchmark this endpoint (host:port or http://host:port) instead of starting sqsim.
    #[arg(long)]
    endpoint: Option<String>,
    /// The sqsim binary to start (default: next to this one).
    #[arg(long)]
    sqsim_bin: Option<PathBuf>,
    /// A moto_server (or other peer) to compare with, e.g. http://127.0.0.1:5000.
    #[arg(long)]
    moto: Option<String>,
    /// Connections of the single and cycle scenarios (the cycle adds half as many producers
    /// to this many consumers).
    #[arg(long, default_value_t = 8)]
    connections: usize,
    /// Connection counts the send scenario tries; each target is reported at its best, so
    /// every server is compared at the concurrency that suits it.
    #[arg(long, value_delimiter = ',', default_values_t = [8, 32, 64])]
    send_connections: Vec<usize>,
    /// Queues the send scenario spreads its connections over (more than one spreads a
    /// cluster's shards over its nodes).
    #[arg(long, default_value_t = 1)]
    send_queues: usize,
    /// What the send scenario's queue names start with (`bench`): load generators run side
    /// by side against one cluster each take their own.
    #[arg(long, default_value = "bench")]
    queue_prefix: String,
    /// Runs of the send scenario per connection count; the median counts, which keeps one
    /// lucky or unlucky run (this is a shared 2-core machine) from deciding a ratio.
    #[arg(long, default_value_t = 3)]
    send_repeats: usize,
    /// What message bodies hold after their send time (padded, random, json): what a
    /// compressing store saves depends on it.
    #[arg(long, value_enum, default_value = "padded")]
    bodies: scenarios::Bodies,
    /// Seconds per throughput scenario.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Messages queued before the large backlog run.
    #[arg(long, default_value_t = 1_000_000)]
    backlog: usize,
    /// Skip the floor server.
    #[arg(long)]
    no_floor: bool,
    /// Run only these scenarios (send, cycle, single, latency, fifo, backlog, search); default all.
    /// A name that is none of them (e.g. `--only ablation`) runs none, leaving only
    /// `--ablation` and `--durable`.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Protocols to run against sqsim (json, query); default both.
    #[arg(long, value_delimiter = ',')]
    protocols: Vec<String>,
    /// Also measure what sqsim's hand-written SIMD paths buy and what its per-request
    /// metrics and log line cost: send and single against sqsim with each SIMD path switched
    /// off (`SQSIM_NO_SIMD`) and with metrics off (`SQSIM_NO_METRICS`), interleaved with
    /// sqsim as it is. `--only ablation` runs nothing else.
    #[arg(long)]
    ablation: bool,
    /// Rounds of the ablation; the median counts.
    #[arg(long, default_value_t = 15)]
    ablation_rounds: usize,
    /// The ablation's variants besides sqsim as it is (no-md5, no-form, scalar, no-metrics,
    /// control: a second sqsim as it is); default all.
    #[arg(long, value_delimiter = ',')]
    ablation_variants: Vec<String>,
    /// Adds this sqsim binary (say, a build from before a change) to the ablation as the
    /// variant `baseline`: its share is what the change costs, measured in the same run.
    #[arg(long)]
    baseline_bin: Option<PathBuf>,
    /// Also compare durable mode (`--sync fsync` and `--sync os`) with in-memory sqsim, and
    /// time a restart with `--backlog` messages queued.
    #[arg(long)]
    durable: bool,
    /// Where to write the JSON results.
    #[arg(long, default_value = "bench-results.json")]
    json: PathBuf,
}

fn addr_of(endpoint: &str) -> String {
    endpoint
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string()
}

struct Spawned {
    child: Child,
    addr: String,
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sqsim_bin(args: &Args) -> PathBuf {
    args.sqsim_bin.clone().unwrap_or_else(|| {
        let me = std::env::current_exe().expect("own path");
        me.with_file_name("sqsim")
    })
}

/// The ablation's variants: a name and the environment that switches something off — a
/// SIMD path as `SQSIM_NO_SIMD` names it (see `src/simd.rs`), or the per-request metrics and
/// request log (`SQSIM_NO_METRICS`, see `src/control/metrics`) — or, for `control`, nothing:
/// a second sqsim as it is, whose share shows how far the machine's noise alone moves one.
const ABLATIONS: &[(&str, &str, &str)] = &[
    ("no-md5", "SQSIM_NO_SIMD", "md5"),
    ("no-form", "SQSIM_NO_SIMD", "form"),
    ("scalar", "SQSIM_NO_SIMD", "all"),
    ("no-metrics", "SQSIM_NO_METRICS", "1"),
    ("control", "SQSIM_NO_METRICS", "0"),
];

fn spawn_sqsim(bin: &Path) -> Spawned {
    spawn_sqsim_env(bin, &[], &[])
}

/// sqsim with `extra` flags and `SQSIM_NO_SIMD=no_simd`.
fn spawn_sqsim_args(bin: &Path, extra: &[&str], no_simd: &str) -> Spawned {
    spawn_sqsim_env(bin, extra, &[("SQSIM_NO_SIMD", no_simd)])
}

/// sqsim with `extra` flags and `env` set (and every ablation switch not in `env` unset, so
/// the caller's environment cannot change what is measured).
fn spawn_sqsim_env(bin: &Path, extra: &[&str], env: &[(&str, &str)]) -> Spawned {
    let mut cmd = Command::new(bin);
    for (_, var, _) in ABLATIONS {
        cmd.env_remove(var);
    }
    let mut child = cmd
        .args(["--host", "127.0.0.1", "--port", "0", "--log-level", "warn"])
        .args(extra)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
    let mut line = String::new();
    let stdout = child.stdout.take().expect("stdout");
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("listening line");
    let addr = line
        .trim()
        .rsplit("http://")
        .next()
        .expect("address")
        .to_string();
    Spawned { child, addr }
}

fn fmt_opt(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.2}"))
}

fn main() {
    let args = Args::parse();
    scenarios::set_bodies(args.bodies);
    // One core for the generator: a single-threaded runtime.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(run(args));
}

async fn run(args: Args) {
    let dur = Duration::from_secs_f64(args.seconds);
    // The send scenario is repeated per connection count, so each run is shorter.
    let send_dur = dur.mul_f64(0.6);
    let wanted = |name: &str| args.only.is_empty() || args.only.iter().any(|o| o == name);
    let mut results: Vec<Outcome> = Vec::new();
    let mut facts: Vec<(String, String)> = Vec::new();

    let bin = sqsim_bin(&args);
    let mut spawned = None;
    let sqsim_addr = match &args.endpoint {
        Some(e) => addr_of(e),
        None => {
            // Startup: exec to the first successful request, best of five.
            let mut times = Vec::new();
            for _ in 0..5 {
                let start = Instant::now();
                let s = spawn_sqsim(&bin);
                scenarios::wait_ready(&s.addr, Duration::from_secs(10))
                    .await
                    .expect("sqsim ready");
                times.push(start.elapsed());
            }
            times.sort();
            facts.push((
                "startup_ms (exec to first 200, median of 5)".into(),
                format!("{:.2}", times[2].as_secs_f64() * 1000.0),
            ));
            let s = spawn_sqsim(&bin);
            scenarios::wait_ready(&s.addr, Duration::from_secs(10)).await;
            if let Some(kib) = rss_kib(s.child.id()) {
                facts.push(("rss_idle_mib".into(), format!("{:.1}", kib as f64 / 1024.0)));
            }
            let a = s.addr.clone();
            spawned = Some(s);
            a
        }
    };
    let sqsim = Target {
        name: "sqsim".into(),
        addr: sqsim_addr,
    };

    let mut targets = vec![sqsim.clone()];
    if !args.no_floor {
        let addr = floor::start(2).expect("floor server");
        targets.push(Target {
            name: "floor".into(),
            addr: addr.to_string(),
        });
    }
    if let Some(m) = &args.moto {
        targets.push(Target {
            name: "moto".into(),
            addr: addr_of(m),
        });
    }

    for t in &targets {
        // moto is compared in JSON only; the floor speaks both, so each protocol of sqsim has
        // its own ceiling.
        let protos: &[Proto] = if t.name == "moto" {
            &[Proto::Json]
        } else {
            &[Proto::Json, Proto::Query]
        };
        let protos = protos
            .iter()
            .filter(|p| args.protocols.is_empty() || args.protocols.iter().any(|n| n == p.name()));
        for &p in protos {
            let conns = args.connections;
            if wanted("send") {
                let mut tries = Vec::new();
                for &c in &args.send_connections {
                    eprintln!("[{}] send/{} on {c} connections", t.name, p.name());
                    let mut runs = Vec::new();
                    for _ in 0..args.send_repeats.max(1) {
                        runs.push(
                            scenarios::send(
                                t,
                                p,
                                c,
                                send_dur,
                                args.send_queues,
                                &args.queue_prefix,
                            )
                            .await,
                        );
                    }
                    tries.extend(scenarios::median_of(runs));
                }
                if let Some(best) = scenarios::best_of(tries) {
                    results.push(best);
                }
            }
            if wanted("cycle") {
                eprintln!("[{}] cycle/{}", t.name, p.name());
                let name = format!("bench-cycle-{}", p.name());
                let url = scenarios::create_queue(t, p, &name, false).await;
                results.push(scenarios::cycle(t, p, &url, conns, dur, 0, "cycle").await);
                scenarios::delete_queue(t, p, &url).await;
            }
            if wanted("single") {
                eprintln!("[{}] single/{}", t.name, p.name());
                results.push(scenarios::single(t, p, conns, dur).await);
            }
            if t.name != "floor" && wanted("latency") {
                eprintln!("[{}] latency/{}", t.name, p.name());
                results.push(scenarios::latency(t, p, 200, Duration::from_millis(10)).await);
            }
        }
    }

    // FIFO: the cycle on a FIFO queue with 1,000 message groups.
    if wanted("fifo") {
        eprintln!("[sqsim] fifo/json");
        let url = scenarios::create_queue(&sqsim, Proto::Json, "bench-fifo.fifo", true).await;
        let mut o = scenarios::cycle(
            &sqsim,
            Proto::Json,
            &url,
            args.connections,
            dur,
            1000,
            "fifo",
        )
        .await;
        o.note = format!("1000 message groups; {}", o.note);
        results.push(o);
        scenarios::delete_queue(&sqsim, Proto::Json, &url).await;
    }

    // Backlog: the cycle rate with a small and a large queue behind it.
    let backlogs: &[(&str, usize)] = if wanted("backlog") {
        &[("backlog-1k", 1_000usize), ("backlog-large", args.backlog)]
    } else {
        &[]
    };
    for &(label, n) in backlogs {
        eprintln!("[sqsim] {label}: queueing {n}");
        let url =
            scenarios::create_queue(&sqsim, Proto::Json, &format!("bench-{label}"), false).await;
        scenarios::prefill(&sqsim, Proto::Json, &url, n, 8).await;
        if label == "backlog-large" {
            if let Some(s) = &spawned {
                if let Some(kib) = rss_kib(s.child.id()) {
                    facts.push((
                        format!("rss_after_{n}_queued_mib"),
                        format!("{:.1}", kib as f64 / 1024.0),
                    ));
                }
            }
        }
        let mut o =
            scenarios::cycle(&sqsim, Proto::Json, &url, args.connections, dur, 0, label).await;
        o.note = format!("{n} messages queued first; {}", o.note);
        results.push(o);
        scenarios::delete_queue(&sqsim, Proto::Json, &url).await;
    }

    // The console's search over a queue of `--backlog` messages.
    if wanted("search") {
        search::run(&sqsim, args.backlog, &mut facts).await;
    }

    if args.ablation && args.endpoint.is_none() {
        let variants: Vec<(&str, &str, &str)> = ABLATIONS
            .iter()
            .copied()
            .filter(|(name, _, _)| {
                args.ablation_variants.is_empty()
                    || args.ablation_variants.iter().any(|v| v == name)
            })
            .collect();
        ablation(
            &bin,
            &variants,
            args.baseline_bin.as_deref(),
            args.ablation_rounds.max(1),
            send_dur,
            &mut facts,
        )
        .await;
    }
    if args.durable && args.endpoint.is_none() {
        durable::run(&bin, send_dur, args.connections, args.backlog, &mut facts).await;
    }
    print_table(&results, &facts);
    let json = serde_json::json!({
        "machine": machine(),
        "facts": facts.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
        "results": results,
    });
    if let Err(e) = std::fs::write(
        &args.json,
        serde_json::to_string_pretty(&json).unwrap_or_default(),
    ) {
        eprintln!("cannot write {}: {e}", args.json.display());
    } else {
        eprintln!("results written to {}", args.json.display());
    }
    drop(spawned);
}

fn machine() -> serde_json::Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    serde_json::json!({"cpu": cpu, "cores": cores})
}

/// What each hand-written SIMD path buys, and what the per-request metrics cost: sqsim as
/// it is, with one SIMD path switched off, with both off, and with metrics and the request
/// log off, each its own fresh process, measured in turn round after round (so a machine
/// that slows down during the run weighs on every variant alike); the median of the rounds
/// counts, and so does the median of each round's own ratio (paired: robust when the load
/// of a shared machine swings between rounds). JSON sends never scan a form, so `no-form`
/// on JSON is the noise control; a `no-metrics` share near 1.00 means the metrics cost
/// nothing measurable.
async fn ablation(
    bin: &Path,
    switched_off: &[(&'static str, &'static str, &'static str)],
    baseline: Option<&Path>,
    rounds: usize,
    dur: Duration,
    facts: &mut Vec<(String, String)>,
) {
    const CONNS: usize = 32;
    let variants: Vec<(&str, Spawned)> = std::iter::once(("sqsim", None))
        .chain(
            switched_off
                .iter()
                .map(|&(name, var, value)| (name, Some((var, value)))),
        )
        .map(|(name, env)| {
            let env: Vec<(&str, &str)> = env.into_iter().collect();
            (name, spawn_sqsim_env(bin, &[], &env))
        })
        .chain(baseline.map(|b| ("baseline", spawn_sqsim_env(b, &[], &[]))))
        .collect();
    for (_, s) in &variants {
        scenarios::wait_ready(&s.addr, Duration::from_secs(10)).await;
    }
    let cases = [
        ("send", Proto::Json),
        ("send", Proto::Query),
        ("single", Proto::Json),
        ("single", Proto::Query),
    ];
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); variants.len() * cases.len()];
    for round in 0..rounds {
        eprintln!("[ablation] round {}/{rounds}", round + 1);
        // Each case runs on every variant back to back, so the runs compared are seconds
        // apart; every other round in reverse, so no variant always goes first.
        let mut order: Vec<usize> = (0..variants.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for (c, (scenario, p)) in cases.iter().enumerate() {
            for &v in &order {
                let (name, s) = &variants[v];
                let t = Target {
                    name: (*name).into(),
                    addr: s.addr.clone(),
                };
                let o = if *scenario == "send" {
                    scenarios::send(&t, *p, CONNS, dur / 3, 1, "bench").await
                } else {
                    scenarios::single(&t, *p, 8, dur / 3).await
                };
                rates[v * cases.len() + c].push(o.messages_per_s);
            }
        }
    }
    let median = |xs: &[f64]| {
        let mut xs = xs.to_vec();
        xs.sort_by(f64::total_cmp);
        xs[xs.len() / 2]
    };
    println!(
        "\nablation: median msgs/s of {rounds} interleaved rounds; its share of sqsim as it is \
         (SIMD and metrics on); and the median of the rounds' own shares (paired)"
    );
    for (c, (scenario, p)) in cases.iter().enumerate() {
        let base = &rates[c];
        let full = median(base);
        for (v, (name, _)) in variants.iter().enumerate() {
            let runs = &rates[v * cases.len() + c];
            let m = median(runs);
            let (lo, hi) = runs
                .iter()
                .fold((f64::MAX, 0.0f64), |(l, h), x| (l.min(*x), h.max(*x)));
            let paired: Vec<f64> = runs.iter().zip(base).map(|(x, b)| x / b).collect();
            let paired = median(&paired);
            println!(
                "{scenario:<7} {:<6} {name:<10} {m:>10.0}  {:.3}  paired {paired:.3}  (rounds {lo:.0}..{hi:.0})",
                p.name(),
                m / full
            );
            facts.push((
                format!("ablation_{scenario}_{}_{name}_share", p.name()),
                format!("{:.3}", m / full),
            ));
            facts.push((
                format!("ablation_{scenario}_{}_{name}_paired_share", p.name()),
                format!("{paired:.3}"),
            ));
        }
    }
}

fn print_table(results: &[Outcome], facts: &[(String, String)]) {
    let find = |scenario: &str, proto: &str, target: &str| {
        results
            .iter()
            .find(|o| o.scenario == scenario && o.protocol == proto && o.target == target)
            .map(|o| o.messages_per_s)
    };
    println!(
        "{:<14} {:<6} {:<7} {:>12} {:>11} {:>9} {:>9} {:>10} {:>10}",
        "scenario",
        "proto",
        "target",
        "msgs/s",
        "reqs/s",
        "p50 ms",
        "p99 ms",
        "vs floor",
        "vs moto"
    );
    for o in results {
        let ratio = |other: &str| {
            if o.target != "sqsim" || o.scenario == "latency" {
                return "-".to_string();
            }
            find(&o.scenario, o.protocol, other)
                .or_else(|| find(&o.scenario, "json", other))
                .map_or("-".into(), |v| format!("{:.2}x", o.messages_per_s / v))
        };
        println!(
            "{:<14} {:<6} {:<7} {:>12.0} {:>11.0} {:>9} {:>9} {:>10} {:>10}",
            o.scenario,
            o.protocol,
            o.target,
            o.messages_per_s,
            o.requests_per_s,
            fmt_opt(o.p50_ms),
            fmt_opt(o.p99_ms),
            ratio("floor"),
            ratio("moto"),
        );
    }
    if let (Some(small), Some(large)) = (
        find("backlog-1k", "json", "sqsim"),
        find("backlog-large", "json", "sqsim"),
    ) {
        println!("backlog: large/small rate = {:.2}", large / small);
    }
    for (k, v) in facts {
        println!("{k}: {v}");
    }
}
