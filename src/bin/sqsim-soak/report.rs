//! What the soak prints: a progress line now and then, and at the end a table per queue,
//! the errors, the violations by rule, the RSS verdict and one summary line that says PASS or
//! FAIL. It decides the verdict: no violation, no error that is the server's fault or went
//! unanswered, enough traffic on every queue, flat RSS.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::body::QueueKind;
use crate::oracle::Figures;
use crate::server::RssVerdict;
use crate::workload::Ctx;
use crate::Split;

/// A finished run, as the summary needs it.
pub(crate) struct Run<'a> {
    pub ctx: &'a Ctx,
    pub mode: &'a str,
    pub clients: u32,
    pub seed: u64,
    pub plan: &'a [Split],
    pub traffic_secs: f64,
    /// The oracle's totals when traffic stopped (before the drain).
    pub in_traffic: &'a Figures,
    pub drain_secs: f64,
    /// Whether the drain ended with everything deleted (rather than at its limit).
    pub drained: bool,
    pub rss: Option<&'a RssVerdict>,
    /// Whether RSS was sampled at all.
    pub rss_sampled: bool,
}

/// Messages each queue that is sent to must have sent, and deleted, per second of traffic
/// (100 per 20 s), counted when traffic stops (the drain's deletes do not count): a run whose
/// sends all failed, or whose consumers got nowhere, proves nothing. 20 s debug runs on two
/// cores under a load average of 6 (a fuzzer and builds alongside) deleted 520–1,000 per
/// queue before the drain, so this floor leaves a factor of five; the FIFO source, whose
/// groups wait behind messages left to expire, is the slowest.
const FLOOR_PER_S: f64 = 5.0;

/// One line on stderr: traffic so far.
pub(crate) fn progress(ctx: &Ctx, elapsed: Duration, pid: Option<u32>) {
    let f = ctx.oracle.figures();
    let backlog: Vec<String> = QueueKind::SENT_TO
        .iter()
        .map(|&q| format!("{q} {}", ctx.oracle.backlog(q)))
        .collect();
    let rss = pid
        .and_then(crate::rss::rss_kib)
        .map_or("-".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0));
    eprintln!(
        "[{:>5.0}s] sent {} received {} deleted {} to DLQs {}; backlog {}; RSS {rss}; errors {}; violations {}",
        elapsed.as_secs_f64(),
        f.sent.iter().sum::<u64>(),
        f.deliveries.iter().sum::<u64>(),
        f.deleted.iter().sum::<u64>(),
        f.moved_to_dlq.iter().sum::<u64>(),
        backlog.join(", "),
        ctx.stats.error_count(),
        ctx.oracle.violation_count(),
    );
}

/// Prints the summary; returns whether the run passed.
pub(crate) fn summary(run: &Run<'_>) -> bool {
    let ctx = run.ctx;
    let f = ctx.oracle.figures();
    let s = &ctx.stats;
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);

    println!(
        "\n{:<6} {:>9} {:>9} {:>10} {:>10} {:>10} {:>10}",
        "queue", "producers", "consumers", "sent", "received", "deleted", "moved in"
    );
    for p in run.plan {
        let i = p.queue.index();
        println!(
            "{:<6} {:>9} {:>9} {:>10} {:>10} {:>10} {:>10}",
            p.queue.name(),
            p.producers,
            p.consumers,
            f.sent[i],
            f.deliveries[i],
            f.deleted[i],
            if p.queue.is_dlq() {
                f.moved_to_dlq[i].to_string()
            } else {
                "-".to_string()
            }
        );
    }
    let (sent, received, deleted, moved): (u64, u64, u64, u64) = (
        f.sent.iter().sum(),
        f.deliveries.iter().sum(),
        f.deleted.iter().sum(),
        f.moved_to_dlq.iter().sum(),
    );
    println!(
        "calls: SendMessage {}, SendMessageBatch {}, ReceiveMessage {} short + {} long ({} empty), \
         DeleteMessage {}, DeleteMessageBatch {}, ChangeMessageVisibility {}, \
         ChangeMessageVisibilityBatch {}",
        load(&s.send_calls),
        load(&s.send_batch_calls),
        load(&s.short_polls),
        load(&s.long_polls),
        load(&s.empty_receives),
        load(&s.delete_calls),
        load(&s.delete_batch_calls),
        load(&s.change_calls),
        load(&s.change_batch_calls),
    );
    println!(
        "messages: {sent} sent ({} failed), {received} received ({} redeliveries), {deleted} \
         deleted, {moved} moved to a DLQ, {} visibility changes ({} releases); {} acts skipped \
         near the end of a hold, {} late source deletes, {} unanswered deletes, {} messages \
         unchecked after a late or racing change, {} FIFO deliveries ahead of a later message \
         held by another receive; drain {:.1} s{}",
        f.send_failed,
        f.redeliveries,
        f.visibility_changes,
        f.releases,
        load(&s.skipped_late),
        f.deleted_maybe,
        f.deletes_unknown,
        f.tainted,
        f.fifo_ahead_of_held,
        run.drain_secs,
        if run.drained { "" } else { " (limit reached)" },
    );
    if let Ok(errors) = s.errors.lock() {
        for (k, n) in errors.iter() {
            println!("errors: {k}: {n}");
        }
    }
    let unexpected = s.unexpected_count();
    if unexpected > 0 {
        println!(
            "FAIL: {unexpected} errors were the server's fault or went unanswered (5xx, \
             transport, timeout, batch entries failed without SenderFault)"
        );
    }
    let floor = (FLOOR_PER_S * run.traffic_secs).floor() as u64;
    let mut thin = Vec::new();
    let t = run.in_traffic;
    let before: Vec<String> = QueueKind::SENT_TO
        .iter()
        .map(|q| format!("{q} {}", t.deleted_of[q.index()]))
        .collect();
    println!(
        "deleted before the drain, by queue sent to: {} (floor {floor})",
        before.join(", ")
    );
    for q in QueueKind::SENT_TO {
        let (n_sent, n_deleted) = (t.sent[q.index()], t.deleted_of[q.index()]);
        if n_sent < floor || n_deleted < floor {
            thin.push(format!("{q} sent {n_sent}, deleted {n_deleted}"));
        }
    }
    if !thin.is_empty() {
        println!(
            "FAIL: too little traffic (at least {floor} messages sent and deleted per queue \
             before the drain, {FLOOR_PER_S} a second): {}",
            thin.join("; ")
        );
    }

    let violations = ctx.oracle.violations();
    let mut by_rule: BTreeMap<&str, (usize, String)> = BTreeMap::new();
    for v in &violations {
        by_rule
            .entry(v.rule)
            .or_insert_with(|| (0, format!("at {:.3}s: {}", v.at.as_secs_f64(), v.detail)))
            .0 += 1;
    }
    for (rule, (n, first)) in &by_rule {
        println!("violation {rule}: {n} (first {first})");
    }

    let (rss_text, flat) = match (run.rss, run.rss_sampled) {
        (Some(v), _) => {
            println!(
                "RSS steady {:.1}–{:.1} MiB over {:.0} s; least-squares slope {:+.1} KiB/s \
                 (limit {:.1} KiB/s: 50, or 16 MiB over a shorter window): {}",
                v.min_mib,
                v.max_mib,
                v.window_s,
                v.slope_kib_s,
                v.limit_kib_s,
                if v.flat { "flat" } else { "GROWING" }
            );
            (
                format!(
                    "{:.1}-{:.1}MiB rss_slope={:+.1}KiB/s",
                    v.min_mib, v.max_mib, v.slope_kib_s
                ),
                v.flat,
            )
        }
        (None, true) => ("too-short".to_string(), true),
        (None, false) => ("not-sampled".to_string(), true),
    };
    let pass = violations.is_empty() && flat && unexpected == 0 && thin.is_empty();
    println!(
        "SOAK {} mode={} clients={} seconds={:.0} seed={} sent={sent} received={received} \
         deleted={deleted} dlq={moved} visibility_changes={} long_polls={} short_polls={} \
         errors={} unexpected_errors={unexpected} violations={} rss={rss_text}",
        if pass { "PASS" } else { "FAIL" },
        run.mode,
        run.clients,
        run.traffic_secs,
        run.seed,
        f.visibility_changes,
        load(&s.long_polls),
        load(&s.short_polls),
        s.error_count(),
        violations.len(),
    );
    pass
}
