//! The console's search on a big queue: `--backlog` messages (a million by default) queued,
//! then `/_sqsim/peek` pages with a filter timed one after another (median of five):
//! a term no message holds (one page scans its full budget of 100,000 messages), a term
//! every message holds (the first page of 50 comes at once), and the whole queue searched
//! page by page (what "search further" to the end costs).

use std::time::{Duration, Instant};

use crate::client::{Conn, Proto};
use crate::scenarios::{self, Target};

/// A filtered peek of `url`; the page's `scanned` and `next_offset`.
async fn page(conn: &mut Conn, url: &str, filter: &str, offset: u64) -> (u64, Option<u64>) {
    let path = format!(
        "/_sqsim/peek?queue_url={}&{filter}&offset={offset}&limit=50",
        urlencode(url)
    );
    let reply = conn.get_json(&path).await.expect("a peek answer");
    (
        reply["scanned"].as_u64().expect("scanned"),
        reply["next_offset"].as_u64(),
    )
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The median of the timings, in milliseconds.
fn median_ms(mut times: Vec<Duration>) -> f64 {
    times.sort();
    times[times.len() / 2].as_secs_f64() * 1000.0
}

/// Five timings of one filtered page from the start.
async fn first_page(conn: &mut Conn, url: &str, filter: &str) -> Vec<Duration> {
    let mut times = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        let (scanned, _) = page(conn, url, filter, 0).await;
        assert!(scanned > 0, "the page examined messages");
        times.push(start.elapsed());
    }
    times
}

/// Five timings of a search through the whole queue of `n`, page after page.
async fn whole_queue(conn: &mut Conn, url: &str, n: usize) -> Vec<Duration> {
    let mut times = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        let (mut offset, mut scanned) = (Some(0), 0);
        while let Some(o) = offset {
            let (s, next) = page(conn, url, "q=no-such-text", o).await;
            scanned += s;
            offset = next;
        }
        assert_eq!(scanned as usize, n, "the pages cover the queue");
        times.push(start.elapsed());
    }
    times
}

/// Queues `n` messages on `t` and times the searches; their figures go to `facts`.
pub(crate) async fn run(t: &Target, n: usize, facts: &mut Vec<(String, String)>) {
    eprintln!("[sqsim] search: queueing {n}");
    let url = scenarios::create_queue(t, Proto::Json, "bench-search", false).await;
    scenarios::prefill(t, Proto::Json, &url, n, 8).await;
    let mut conn = Conn::connect(&t.addr).await.expect("connect");
    let miss = median_ms(first_page(&mut conn, &url, "q=no-such-text").await);
    let first = median_ms(first_page(&mut conn, &url, "q=-").await);
    let whole = median_ms(whole_queue(&mut conn, &url, n).await);
    facts.push((
        format!("search_{n}_miss_page_ms (100,000 scanned)"),
        format!("{miss:.1}"),
    ));
    facts.push((
        format!("search_{n}_first_page_ms (50 found)"),
        format!("{first:.1}"),
    ));
    facts.push((format!("search_{n}_whole_queue_ms"), format!("{whole:.1}")));
    scenarios::delete_queue(t, Proto::Json, &url).await;
}
