//! `sqsim-soak`: the soak behind `make soak`. It starts sqsim (in memory, or durable with
//! `--durable`) or drives `--endpoint`, and runs `--clients` SDK clients for `--seconds`
//! over a standard, a fair and a FIFO queue and two DLQ-wired ones (standard and FIFO, each
//! with its DLQ): batch and single sends, short and long polls, deletes, visibility changes
//! and releases, consumers that fail. An oracle checks every answer as it comes and
//! everything left after a final drain; the server's RSS is sampled every second and must
//! stay flat. Exit 0 only with zero violations, no server error or unanswered call, enough
//! traffic on every queue and flat memory; 1 otherwise; 2 if the run could not be set up.

mod body;
mod oracle;
mod report;
#[path = "../shared/rng.rs"]
mod rng;
#[path = "../shared/rss.rs"]
mod rss;
mod server;
mod workload;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;

use body::QueueKind;
use oracle::Oracle;
use rng::Rng;
use server::{RssSamples, Server};
use workload::{Ctx, Stats, MAX_RECEIVES};

/// Soak sqsim with many SDK clients and check every answer against an oracle.
#[derive(Debug, Parser)]
#[command(name = "sqsim-soak")]
struct Args {
    /// Seconds of traffic (the drain that follows is not counted).
    #[arg(long, default_value_t = 600)]
    seconds: u64,
    /// Client tasks, split between producers and consumers of the queues (at least 12).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(12..))]
    clients: u32,
    /// Start sqsim durable (`--data-dir` in a temporary directory, `--sync fsync`).
    #[arg(long, conflicts_with = "endpoint")]
    durable: bool,
    /// Seed of the workload's random choices (printed; random when not given).
    #[arg(long)]
    seed: Option<u64>,
    /// The sqsim binary to start.
    #[arg(long, default_value = "target/debug/sqsim")]
    bin: PathBuf,
    /// Drive this running server (http://host:port) instead of starting one.
    #[arg(long)]
    endpoint: Option<String>,
    /// With --endpoint: the server's process id, to sample its RSS.
    #[arg(long, requires = "endpoint")]
    pid: Option<u32>,
}

/// How long the drain may take once traffic stops: the longest hold (6 s) many times over;
/// a message still missing after this is lost.
const DRAIN_LIMIT: Duration = Duration::from_secs(60);

/// Producers and consumers per queue.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Split {
    pub queue: QueueKind,
    pub producers: u32,
    pub consumers: u32,
}

/// Splits `clients` over the queues: one consumer per 32 clients for each DLQ (at least
/// one), the rest evenly over the five queues that are sent to, a third of each share
/// producing (consumers also wait for expiries, so they need the larger share). At least
/// 12 clients, so that every queue has a consumer.
fn split(clients: u32) -> Vec<Split> {
    let per_dlq = (clients / 32).max(1);
    let sent_to = QueueKind::SENT_TO.len() as u32;
    let rest = clients - per_dlq * QueueKind::DLQS.len() as u32;
    let mut out: Vec<Split> = QueueKind::SENT_TO
        .iter()
        .enumerate()
        .map(|(i, &queue)| {
            let share = rest / sent_to + u32::from((i as u32) < rest % sent_to);
            let producers = (share / 3).max(1);
            Split {
                queue,
                producers,
                consumers: share - producers,
            }
        })
        .collect();
    for queue in QueueKind::DLQS {
        out.push(Split {
            queue,
            producers: 0,
            consumers: per_dlq,
        });
    }
    out
}

fn main() -> ExitCode {
    let args = Args::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sqsim-soak: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match rt.block_on(run(args)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("sqsim-soak: {e}");
            ExitCode::from(2)
        }
    }
}

async fn run(args: Args) -> Result<bool, String> {
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let mut server = match &args.endpoint {
        Some(e) => Server::external(e, args.pid),
        None => Server::spawn(&args.bin, args.durable)?,
    };
    let mode = match (&args.endpoint, args.durable) {
        (Some(_), _) => "external",
        (None, true) => "durable",
        (None, false) => "memory",
    };
    eprintln!(
        "sqsim-soak: {mode}, {} clients, {} s, seed {seed}, server {}",
        args.clients, args.seconds, server.endpoint
    );
    let sqs = workload::client(&server.endpoint);
    let tag = std::process::id().to_string();
    let queues = workload::create_queues(&sqs, &tag).await?;
    let ctx = Arc::new(Ctx {
        sqs,
        queues,
        oracle: Oracle::new(MAX_RECEIVES),
        stats: Stats::default(),
        stop_producers: AtomicBool::new(false),
        draining: AtomicBool::new(false),
        stop_consumers: AtomicBool::new(false),
    });

    let plan = split(args.clients);
    let (mut producers, mut consumers) = (Vec::new(), Vec::new());
    let (mut next_producer, mut next_consumer) = (0u32, 0usize);
    for s in &plan {
        for _ in 0..s.producers {
            let rng = Rng::new(seed, next_producer as u64);
            producers.push(tokio::spawn(workload::producer(
                ctx.clone(),
                s.queue,
                next_producer,
                rng,
            )));
            next_producer += 1;
        }
        for _ in 0..s.consumers {
            let rng = Rng::new(seed, 1_000_000 + next_consumer as u64);
            consumers.push(tokio::spawn(workload::consumer::consumer(
                ctx.clone(),
                s.queue,
                next_consumer,
                rng,
            )));
            next_consumer += 1;
        }
    }

    let rss = Arc::new(Mutex::new(RssSamples::default()));
    let stop_rss = Arc::new(AtomicBool::new(false));
    if let Some(pid) = server.pid {
        tokio::spawn(server::sample_rss(pid, rss.clone(), stop_rss.clone()));
    }

    let started = Instant::now();
    let traffic = Duration::from_secs(args.seconds);
    let every = if args.seconds <= 60 { 5 } else { 30 };
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut ticks = 0u64;
    while started.elapsed() < traffic {
        tick.tick().await;
        ticks += 1;
        ctx.oracle.retire();
        if ticks.is_multiple_of(every) {
            report::progress(&ctx, started.elapsed(), server.pid);
        }
    }
    ctx.stop_producers.store(true, Ordering::Relaxed);
    for p in producers {
        let _ = p.await;
    }
    stop_rss.store(true, Ordering::Relaxed);
    let traffic_secs = started.elapsed().as_secs_f64();
    let in_traffic = ctx.oracle.figures();

    // The drain: consumers delete all they get (released and expired messages come back)
    // until every message sent is deleted and the server counts every queue empty.
    ctx.draining.store(true, Ordering::Relaxed);
    let drain_start = Instant::now();
    let mut drained = false;
    while drain_start.elapsed() < DRAIN_LIMIT {
        tokio::time::sleep(Duration::from_millis(500)).await;
        ctx.oracle.retire();
        if ctx.oracle.unsettled() > 0 {
            continue;
        }
        let mut empty = true;
        for q in QueueKind::ALL {
            empty &= workload::queued(&ctx.sqs, ctx.queues.url(q)).await == Some(0);
        }
        if empty {
            drained = true;
            break;
        }
    }
    let drain_secs = drain_start.elapsed().as_secs_f64();
    ctx.stop_consumers.store(true, Ordering::Relaxed);
    for c in consumers {
        let _ = c.await;
    }
    for q in QueueKind::ALL {
        match workload::queued(&ctx.sqs, ctx.queues.url(q)).await {
            Some(0) => {}
            Some(n) => ctx.oracle.report(
                "left-in-queue",
                format!("{q} still holds {n} messages after the drain"),
            ),
            None => ctx.oracle.report(
                "left-in-queue",
                format!("{q}: GetQueueAttributes failed after the drain"),
            ),
        }
    }
    ctx.oracle.finish();
    if let Some(status) = server.exited() {
        ctx.oracle.report(
            "server-exited",
            format!("sqsim exited during the soak ({status})"),
        );
    }

    let samples = rss.lock().map(|s| s.clone()).unwrap_or_default();
    let verdict = samples.verdict(traffic_secs);
    let pass = report::summary(&report::Run {
        ctx: &ctx,
        mode,
        clients: args.clients,
        seed,
        plan: &plan,
        traffic_secs,
        in_traffic: &in_traffic,
        drain_secs,
        drained,
        rss: verdict.as_ref(),
        rss_sampled: server.pid.is_some(),
    });
    if args.endpoint.is_some() {
        for q in QueueKind::ALL {
            let _ = ctx
                .sqs
                .delete_queue()
                .queue_url(ctx.queues.url(q))
                .send()
                .await;
        }
    }
    drop(server);
    Ok(pass)
}
