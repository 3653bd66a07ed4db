//! The JetStream store against a real `nats-server`: fencing, grouping, compression,
//! publishes in flight across a restart, and records a recovery must leave out.

use std::sync::atomic::Ordering;

use async_nats::jetstream::{self, stream};
use async_nats::HeaderMap;
use bytes::Bytes;

use super::*;
use crate::store::durable;
use crate::store::suite::{block_on, NatsServer};

fn recovered(s: &JetStreamStore) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    s.recover(&mut |_, r| {
        out.push(r.to_vec());
        Ok(())
    })
    .unwrap();
    out
}

/// Fencing: a writer that opened the stream before another one wrote (a paused former
/// owner, resumed after a new owner took over) cannot append: JetStream refuses its
/// publish, the append is never durable, and the store says it is no longer writable.
#[test]
fn a_stale_writer_is_refused() {
    let server = NatsServer::start();
    let old = JetStreamStore::open(&server.url, "fenced", 1).unwrap();
    recovered(&old);
    let l = old.append(b"from the old owner");
    block_on(durable(&old, l)).unwrap();

    // A new owner takes over while the old one is paused. Its recovery alone fences the
    // old one (before the new owner writes anything).
    let new = JetStreamStore::open(&server.url, "fenced", 1).unwrap();
    assert_eq!(recovered(&new), vec![b"from the old owner".to_vec()]);
    let early = old.append(b"stale write before the new owner wrote");
    let err = block_on(durable(&old, early)).expect_err("recovery must fence");
    assert!(err.to_string().contains("refused"), "{err}");
    let l = new.append(b"from the new owner");
    block_on(durable(&new, l)).unwrap();

    // The old owner tries again: refused, and stays refused.
    let late = old.append(b"late write");
    let err = block_on(durable(&old, late)).expect_err("a stale writer must be fenced");
    assert!(err.to_string().contains("refused"), "{err}");
    assert!(!old.stats().writable);
    let l = new.append(b"new owner again");
    block_on(durable(&new, l)).unwrap();

    let check = JetStreamStore::open(&server.url, "fenced", 1).unwrap();
    assert_eq!(
        recovered(&check),
        vec![
            b"from the old owner".to_vec(),
            b"from the new owner".to_vec(),
            b"new owner again".to_vec()
        ]
    );
}

/// Records queued while a publish waits for its ack go out together as one message
/// (JetStream's cost is per message), and come back one by one, each at its position —
/// also when a snapshot's position falls inside a message.
#[test]
fn records_queued_together_are_one_message_and_come_back_one_by_one() {
    let server = NatsServer::start();
    let store = JetStreamStore::open(&server.url, "grouped", 1).unwrap();
    recovered(&store);
    let record = |i: u64| format!("record {i}").into_bytes();
    let last = (0..500).map(|i| store.append(&record(i))).last().unwrap();
    block_on(durable(&store, last)).unwrap();
    assert_eq!(store.stats().appended_records, 500);
    // The fence, the first append alone (nothing else was queued yet), and the rest in
    // a few groups.
    let published = stream_state(&server.url, "grouped").messages;
    assert!(published <= 10, "500 records in {published} messages");

    // A snapshot standing for position 250, inside a group: the group stays (its later
    // records are needed), recovery starts at 250.
    store
        .snapshot(250, &mut std::iter::once(b"state at 250".to_vec()))
        .unwrap();
    let l = store.append(b"after the snapshot");
    block_on(durable(&store, l)).unwrap();
    drop(store);
    let reopened = JetStreamStore::open(&server.url, "grouped", 1).unwrap();
    let mut positions = Vec::new();
    let mut records = Vec::new();
    reopened
        .recover(&mut |lsn, r| {
            positions.push(lsn);
            records.push(r.to_vec());
            Ok(())
        })
        .unwrap();
    let mut expected = vec![b"state at 250".to_vec()];
    expected.extend((250..500).map(record));
    expected.push(b"after the snapshot".to_vec());
    assert_eq!(records, expected);
    assert_eq!(positions[0], None);
    assert_eq!(
        positions[1..],
        (250..=500).map(Some).collect::<Vec<_>>()[..]
    );
    assert_eq!(reopened.next_lsn(), 501);
}

/// What JetStream says the stream of store `name` holds.
fn stream_state(url: &str, name: &str) -> stream::State {
    block_on(async {
        let client = async_nats::connect(url).await.unwrap();
        let js = jetstream::new(client);
        let mut stream = js.get_stream(stream_of(name)).await.unwrap();
        stream.info().await.unwrap().state.clone()
    })
}

/// Publishes a raw message to `subject` of stream `name` with a message id and headers,
/// expecting the stream's last sequence: what another writer's publish looks like.
fn publish_raw(url: &str, name: &str, subject: &str, id: &str, lsn: Option<u64>, body: &[u8]) {
    publish_raw_with(url, name, subject, id, lsn, &[], body)
}

/// [`publish_raw`] with `extra` headers.
fn publish_raw_with(
    url: &str,
    name: &str,
    subject: &str,
    id: &str,
    lsn: Option<u64>,
    extra: &[(&str, &str)],
    body: &[u8],
) {
    block_on(async {
        let client = async_nats::connect(url).await.unwrap();
        let js = jetstream::new(client);
        let mut stream = js.get_stream(stream_of(name)).await.unwrap();
        let last = stream.info().await.unwrap().state.last_sequence;
        let mut headers = HeaderMap::new();
        headers.insert(async_nats::header::NATS_MESSAGE_ID, id);
        headers.insert(
            async_nats::header::NATS_EXPECTED_LAST_SEQUENCE,
            last.to_string().as_str(),
        );
        if let Some(lsn) = lsn {
            headers.insert(LSN, lsn.to_string().as_str());
        }
        for (k, v) in extra {
            headers.insert(*k, *v);
        }
        let subject = format!("sqsim.{name}.{subject}");
        let ack = js
            .publish_with_headers(subject, headers, Bytes::copy_from_slice(body))
            .await
            .unwrap();
        ack.await.unwrap();
    })
}

/// Log and snapshot messages are compressed when that pays (`store::packed`) and come
/// back whole; a message in an encoding this version does not know stops recovery
/// instead of being read as something else or skipped.
#[test]
fn compressed_messages_come_back_whole_and_an_unknown_encoding_stops_recovery() {
    let server = NatsServer::start();
    let store = JetStreamStore::open(&server.url, "packed", 1).unwrap();
    recovered(&store);
    let record = |i: u64| format!("{i:08} {}", "the same words again ".repeat(40)).into_bytes();
    let last = (0..50).map(|i| store.append(&record(i))).last().unwrap();
    block_on(durable(&store, last)).unwrap();
    let st = store.stats();
    // The records' bytes, and a length before each of those that went in groups.
    let payload: u64 = (0..50).map(|i| record(i).len() as u64).sum();
    assert!(
        (payload..=payload + 4 * 50).contains(&st.appended_bytes),
        "{st:?}"
    );
    assert!(st.stored_bytes * 4 < st.appended_bytes, "{st:?}");
    let state: Vec<Vec<u8>> = (0..3u8).map(|i| vec![b'a' + i; 64 << 10]).collect();
    store.snapshot(25, &mut state.clone().into_iter()).unwrap();
    drop(store);
    // The snapshot's 192 KiB and the log's last 25 records take a fraction of that.
    let stored = stream_state(&server.url, "packed").bytes;
    assert!(stored < 32 << 10, "{stored} bytes stored");
    let reopened = JetStreamStore::open(&server.url, "packed", 1).unwrap();
    let mut expected = state;
    expected.extend((25..50).map(record));
    assert_eq!(recovered(&reopened), expected);
    drop(reopened);

    // A writer of a newer version fences and writes a message this one cannot read.
    publish_raw(&server.url, "packed", "fence", "z-fence", None, b"");
    publish_raw_with(
        &server.url,
        "packed",
        "log",
        "z-50",
        Some(50),
        &[(CODEC, "zstd")],
        b"\x28\xb5\x2f\xfd",
    );
    let newer = JetStreamStore::open(&server.url, "packed", 1).unwrap();
    let err = newer.recover(&mut |_, _| Ok(())).unwrap_err();
    assert!(err.to_string().contains("newer"), "{err}");
}

/// While the cluster says a node that cannot read compressed messages holds shards, the
/// store writes them as they are; once it may, it compresses again; both read back.
#[test]
fn messages_are_written_uncompressed_while_compression_is_not_allowed() {
    let server = NatsServer::start();
    let allowed = Arc::new(AtomicBool::new(false));
    let store = JetStreamStore::open_cancellable(
        &server.url,
        "plain",
        1,
        Arc::default(),
        Arc::clone(&allowed),
    )
    .unwrap();
    recovered(&store);
    let record = |i: u64| format!("{i:08} {}", "alike ".repeat(100)).into_bytes();
    let write = |range: std::ops::Range<u64>| {
        let last = range.map(|i| store.append(&record(i))).last().unwrap();
        block_on(durable(&store, last)).unwrap();
        let st = store.stats();
        (st.appended_bytes, st.stored_bytes)
    };
    let (appended, stored) = write(0..20);
    assert_eq!(stored, appended, "nothing compressed while not allowed");
    allowed.store(true, Ordering::Relaxed);
    let (appended2, stored2) = write(20..40);
    assert!(
        (stored2 - stored) * 4 < appended2 - appended,
        "compressed once allowed: {} of {} bytes",
        stored2 - stored,
        appended2 - appended
    );
    drop(store);
    let reopened = JetStreamStore::open(&server.url, "plain", 1).unwrap();
    assert_eq!(
        recovered(&reopened),
        (0..40).map(record).collect::<Vec<_>>()
    );
}

/// Several writes in flight at once (the window): a publish expects the sequence of the
/// one before it, which JetStream has not acknowledged yet. Concurrent appends from many
/// threads all become durable, and come back in position order.
#[test]
fn appends_in_flight_together_are_all_kept_in_order() {
    let server = NatsServer::start();
    let store = Arc::new(JetStreamStore::open(&server.url, "window", 1).unwrap());
    recovered(&store);
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                for i in 0..200 {
                    let l = store.append(format!("t{t} r{i}").as_bytes());
                    // Every fourth waits, so that the window fills and empties.
                    if i % 4 == 0 {
                        block_on(durable(&*store, l)).unwrap();
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let last = store.next_lsn() - 1;
    block_on(durable(&*store, last)).unwrap();
    assert_eq!(store.stats().appended_records, 1_600);
    drop(store);
    let reopened = JetStreamStore::open(&server.url, "window", 1).unwrap();
    let mut positions = Vec::new();
    let mut per_thread = vec![Vec::new(); 8];
    reopened
        .recover(&mut |lsn, r| {
            positions.push(lsn.unwrap());
            let text = String::from_utf8(r.to_vec()).unwrap();
            let (t, i) = text.split_once(' ').unwrap();
            let t: usize = t[1..].parse().unwrap();
            per_thread[t].push(i[1..].parse::<u32>().unwrap());
            Ok(())
        })
        .unwrap();
    assert_eq!(positions, (0..1_600).collect::<Vec<_>>());
    for seen in per_thread {
        assert_eq!(seen, (0..200).collect::<Vec<_>>());
    }
}

/// The repair of a window: JetStream goes away (`kill -9`) while publishes are in
/// flight and comes back. Whatever the lost publishes and acks were, each is retried from
/// the first not acknowledged; every record appended is durable in the end, and comes
/// back once, in order (a retry of one that was stored is dropped by its message id).
#[test]
fn publishes_in_flight_when_jetstream_restarts_are_kept_once_in_order() {
    let mut server = NatsServer::start();
    let store = Arc::new(JetStreamStore::open(&server.url, "restart", 1).unwrap());
    recovered(&store);
    let writer = {
        let store = Arc::clone(&store);
        std::thread::spawn(move || {
            let mut last = 0;
            for i in 0..400u32 {
                last = store.append(format!("r{i}").as_bytes());
                if i % 50 == 0 {
                    std::thread::sleep(std::time::Duration::from_millis(30));
                }
                std::thread::sleep(std::time::Duration::from_micros(500));
            }
            last
        })
    };
    // The appends take over 400 ms: some are sent while the server is down.
    std::thread::sleep(std::time::Duration::from_millis(60));
    server.kill_and_restart(std::time::Duration::from_millis(300));
    let last = writer.join().unwrap();
    block_on(durable(&*store, last)).expect("every append is kept once JetStream is back");
    assert!(store.stats().writable);
    drop(store);
    let reopened = JetStreamStore::open(&server.url, "restart", 1).unwrap();
    let expected: Vec<Vec<u8>> = (0..400).map(|i| format!("r{i}").into_bytes()).collect();
    assert_eq!(recovered(&reopened), expected);
}

/// Stream `name` holding `record`, written by a store that is closed again.
fn kept_by_a_closed_store(url: &str, name: &str, record: &[u8]) {
    let store = JetStreamStore::open(url, name, 1).unwrap();
    recovered(&store);
    let l = store.append(record);
    block_on(durable(&store, l)).unwrap();
}

/// A former owner's publish that slips in after a new owner's fence (its expected
/// sequence matching the fence's slot, a publish of its own before it having been lost)
/// was never acknowledged, and neither was a record after a gap in the positions:
/// recovery leaves both out, and the store goes on from the last record that counts.
#[test]
fn a_record_after_another_writers_fence_or_after_a_gap_is_not_recovered() {
    let server = NatsServer::start();
    kept_by_a_closed_store(&server.url, "slip", b"kept");
    // A new owner (writer "b") fences; the old one ("a") slips a record in after it.
    publish_raw(&server.url, "slip", "fence", "b-fence", None, b"");
    publish_raw(&server.url, "slip", "log", "a-2", Some(2), b"stale");
    // The new owner writes position 1, then (after a lost publish) position 3.
    publish_raw(&server.url, "slip", "log", "b-1", Some(1), b"new owner");
    publish_raw(&server.url, "slip", "log", "b-3", Some(3), b"after a gap");
    let reopened = JetStreamStore::open(&server.url, "slip", 1).unwrap();
    assert_eq!(
        recovered(&reopened),
        vec![b"kept".to_vec(), b"new owner".to_vec()]
    );
    assert_eq!(reopened.next_lsn(), 2);
    let l = reopened.append(b"next");
    block_on(durable(&reopened, l)).unwrap();
    assert_eq!(l, 2);
    drop(reopened);
    let again = JetStreamStore::open(&server.url, "slip", 1).unwrap();
    assert_eq!(
        recovered(&again),
        vec![b"kept".to_vec(), b"new owner".to_vec(), b"next".to_vec()]
    );

    // Another writer's record right after a fence, at the very position that follows:
    // only the fence's writer may continue the log.
    kept_by_a_closed_store(&server.url, "fenced-slot", b"kept");
    publish_raw(&server.url, "fenced-slot", "fence", "b-fence", None, b"");
    publish_raw(&server.url, "fenced-slot", "log", "a-1", Some(1), b"stale");
    let reopened = JetStreamStore::open(&server.url, "fenced-slot", 1).unwrap();
    assert_eq!(recovered(&reopened), vec![b"kept".to_vec()]);
    assert_eq!(reopened.next_lsn(), 1);
}
