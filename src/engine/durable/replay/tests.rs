//! Replay's tests: a restart finds what was acknowledged, at every crash point the store
//! suite can stop at, and the helpers other durable-mode tests start engines with.

use std::fmt::Write as _;
use std::time::Duration;

use super::*;
use crate::engine::journal::change::MessageRecord;
use crate::engine::random;
use crate::engine::receive::Transfer;
use crate::engine::redrive::RedrivePolicy;
use crate::engine::{NewMessage, QueueId, QueueSettings, ReceiveRequest};
use crate::store::memory::MemoryStore;

const T0: u64 = 1_800_000_000_000;

/// An engine recovered from (another handle on) `store`, on a frozen clock.
pub(in crate::engine) fn engine_on(store: &MemoryStore) -> Engine {
    let clock = Arc::new(Clock::starting_at(T0));
    clock.freeze();
    Engine::open(clock, EngineSettings::default(), Arc::new(store.reopen()))
        .unwrap()
        .0
}

/// A queue id in the default namespace.
pub(in crate::engine) fn id(name: &str) -> QueueId {
    QueueId {
        region: "us-east-1".into(),
        account: "000000000000".into(),
        name: name.into(),
    }
}

/// Everything recovery must reproduce, as text: queues with settings, tags, counters,
/// every message whole, FIFO windows, cooldowns and the clock.
fn fingerprint(e: &Engine) -> String {
    let now = e.now_ms();
    let mut out = format!("clock {now}\n");
    for q in e.all_queues() {
        q.stored(now);
        let st = q.lock();
        let _ = writeln!(
            out,
            "queue {:?} uid {} created {} {:?} {:?} {:?} counts {} {} {}",
            q.id,
            q.uid,
            st.created_s,
            st.settings,
            st.tags,
            st.counters(),
            st.visible,
            st.in_flight,
            st.delayed
        );
        for (key, m) in st.messages.iter() {
            let _ = writeln!(out, "  {key:?} {:?}", MessageRecord::of(m));
        }
        if let Order::Fifo(f) = &st.order {
            let mut d: Vec<String> = f
                .dedup_entries()
                .filter(|(_, exp, _)| *exp > now)
                .map(|(k, exp, o)| format!("{k} {exp} {o:?}"))
                .collect();
            d.sort();
            let mut a: Vec<String> = f
                .attempt_entries()
                .filter(|(_, at)| at.expires_ms > now)
                .map(|(k, at)| format!("{k} {at:?}"))
                .collect();
            a.sort();
            let _ = writeln!(out, "  dedup {d:?}\n  attempts {a:?}");
        }
    }
    let mut cool: Vec<String> = e
        .cooldowns()
        .iter()
        .map(|(k, v)| format!("{k:?} {v}"))
        .collect();
    cool.sort();
    let _ = writeln!(out, "cooldowns {cool:?}");
    out
}

/// Random traffic over standard, FIFO and dead-letter-wired queues.
fn random_traffic(e: &Engine, seed: u64, steps: usize) {
    let mut x = seed;
    let dlq = e
        .create_queue(id("dlq"), QueueSettings::default())
        .unwrap()
        .0;
    let src_settings = QueueSettings {
        redrive_policy: Some(RedrivePolicy {
            raw: RedrivePolicy::document(&dlq.arn, 2),
            dead_letter_target: id("dlq"),
            max_receive_count: 2,
        }),
        ..QueueSettings::default()
    };
    e.create_queue(id("src"), src_settings).unwrap();
    let fifo = QueueSettings {
        fifo_queue: true,
        ..QueueSettings::default()
    };
    e.create_queue(id("f.fifo"), fifo).unwrap();
    let names = ["dlq", "src", "f.fifo"];
    let mut handles: Vec<(&str, String)> = Vec::new();
    for step in 0..steps {
        let r = random::next(&mut x);
        let name = names[(r >> 8) as usize % names.len()];
        let Some(q) = e.queue(&id(name)) else {
            continue;
        };
        let now = e.now_ms();
        match r % 10 {
            0..=2 => {
                let m = NewMessage {
                    body: format!("m{step}"),
                    delay_seconds: (name != "f.fifo").then_some((r >> 20) as u32 % 3),
                    group_id: Some(format!("g{}", (r >> 24) % 3)),
                    deduplication_id: Some(format!("d{}", (r >> 28) % 40)),
                    ..NewMessage::default()
                };
                q.send(m, now).unwrap();
            }
            3 | 4 => {
                let req = ReceiveRequest {
                    max_messages: 1 + (r >> 16) as usize % 3,
                    visibility_timeout: Some((r >> 20) as u32 % 4),
                    max_in_flight: 1000,
                    attempt_id: r.is_multiple_of(3).then(|| format!("a{}", (r >> 30) % 4)),
                    short_poll: false,
                };
                if let Ok(out) = e.receive(&q, req, now) {
                    handles.extend(out.messages.into_iter().map(|m| (name, m.receipt_handle)));
                }
            }
            5 if !handles.is_empty() => {
                let (n, h) = handles.swap_remove((r >> 12) as usize % handles.len());
                if let Some(q) = e.queue(&id(n)) {
                    let _ = q.delete_message(&h, now);
                }
            }
            6 if !handles.is_empty() => {
                let (n, h) = &handles[(r >> 12) as usize % handles.len()];
                if let Some(q) = e.queue(&id(n)) {
                    let _ = q.change_visibility(h, (r >> 20) as u32 % 3, now);
                }
            }
            7 => e.advance_clock(Duration::from_millis((r >> 16) % 3_000)),
            8 if r.is_multiple_of(7) => {
                let _ = q.purge(now, false);
            }
            8 => {
                q.update_tags(|t| t.insert(format!("k{}", r % 5), step.to_string()));
                q.update_settings(now, |s| {
                    s.delay_seconds = (r >> 16) as u32 % 2;
                    Ok::<_, ()>(())
                })
                .unwrap();
            }
            9 if r.is_multiple_of(211) && name == "f.fifo" => {
                e.delete_queue(&q.id);
                let fifo = QueueSettings {
                    fifo_queue: true,
                    ..QueueSettings::default()
                };
                e.advance_clock(Duration::from_secs(61));
                e.create_queue(id("f.fifo"), fifo).unwrap();
            }
            _ => {}
        }
    }
}

#[test]
fn the_log_and_the_snapshot_both_rebuild_the_live_state() {
    for seed in [1u64, 7, 42, 99, 12345] {
        let store = MemoryStore::new();
        let live = engine_on(&store);
        random_traffic(&live, seed, 3_000);
        let want = fingerprint(&live);
        assert!(want.contains("m"), "traffic left messages behind");
        // From the log (this start then writes a snapshot of what it rebuilt)...
        let from_log = engine_on(&store);
        same(&fingerprint(&from_log), &want, seed, "log replay");
        // ...and from that snapshot alone.
        let from_snapshot = engine_on(&store);
        same(&fingerprint(&from_snapshot), &want, seed, "snapshot");
        // A message sent after recovery gets the key it would have had without one.
        let keys: Vec<_> = [&live, &from_snapshot]
            .iter()
            .map(|e| {
                let q = e.queue(&id("src")).unwrap();
                let body = format!("after {seed}");
                q.send(
                    NewMessage {
                        body: body.clone(),
                        ..NewMessage::default()
                    },
                    e.now_ms(),
                )
                .unwrap();
                let st = q.lock();
                let found = st.messages.iter().find(|(_, m)| *m.payload.body == *body);
                found.map(|(k, _)| k)
            })
            .collect();
        assert!(keys[0].is_some());
        assert_eq!(keys[0], keys[1], "seed {seed}");
    }
}

/// A purge and sends logged after the snapshot began but before their queue was copied
/// are in the snapshot; replaying them again would purge the sends.
#[test]
fn changes_between_a_snapshots_start_and_its_queue_copy_are_not_replayed() {
    let store = MemoryStore::new();
    let live = engine_on(&store);
    let q = live
        .create_queue(id("q"), QueueSettings::default())
        .unwrap()
        .0;
    let send = |body: &str| {
        let m = NewMessage {
            body: body.into(),
            ..NewMessage::default()
        };
        q.send(m, live.now_ms()).unwrap();
    };
    send("before");
    let started = live.begin_snapshot(&store);
    q.purge(live.now_ms(), false).unwrap();
    send("after the purge");
    let (at, frames) = started.finish(&store);
    store.snapshot(at, &mut frames.into_iter()).unwrap();
    send("after the snapshot");
    let recovered = engine_on(&store);
    same(&fingerprint(&recovered), &fingerprint(&live), 0, "cut");
    let q = recovered.queue(&id("q")).unwrap();
    assert_eq!(q.stored(recovered.now_ms()), 2);
}

#[test]
fn snapshots_taken_while_traffic_runs_lose_and_repeat_nothing() {
    for round in 0..3u64 {
        let store = MemoryStore::new();
        let live = engine_on(&store);
        random_traffic(&live, 5 + round, 0);
        let done = std::sync::atomic::AtomicBool::new(false);
        let mut compactions = 0;
        std::thread::scope(|s| {
            for t in 0..3u64 {
                let (live, done) = (&live, &done);
                s.spawn(move || {
                    random_traffic(live, 1000 * round + t + 1, 2_000 + 500 * t as usize);
                    // Snapshots stop when the first worker is done, so the last one
                    // overlapped traffic and the log after it holds the rest.
                    done.store(true, Ordering::Release);
                });
            }
            while !done.load(Ordering::Acquire) {
                live.compact().unwrap();
                compactions += 1;
            }
        });
        assert!(compactions > 1, "snapshots ran during the traffic");
        let recovered = engine_on(&store);
        same(
            &fingerprint(&recovered),
            &fingerprint(&live),
            round,
            "concurrent snapshots",
        );
    }
}

/// A dead-letter queue "dlq" and a queue "src" sending it what was received `max` times;
/// the dead-letter queue is created first (copied first by a snapshot).
fn dead_letter_pair(e: &Engine, max: u32) -> (Arc<Queue>, Arc<Queue>) {
    let dlq = e
        .create_queue(id("dlq"), QueueSettings::default())
        .unwrap()
        .0;
    let settings = QueueSettings {
        redrive_policy: Some(RedrivePolicy {
            raw: RedrivePolicy::document(&dlq.arn, max),
            dead_letter_target: id("dlq"),
            max_receive_count: max,
        }),
        ..QueueSettings::default()
    };
    let src = e.create_queue(id("src"), settings).unwrap().0;
    (dlq, src)
}

fn receive_req(visibility: u32) -> ReceiveRequest {
    ReceiveRequest {
        max_messages: 10,
        visibility_timeout: Some(visibility),
        max_in_flight: 1000,
        attempt_id: None,
        short_poll: false,
    }
}

/// Sends `bodies` to `q` and receives them once, leaving them visible (received once).
fn send_and_receive_once(e: &Engine, q: &Queue, bodies: &[&str]) {
    for body in bodies {
        let m = NewMessage {
            body: body.to_string(),
            ..NewMessage::default()
        };
        q.send(m, e.now_ms()).unwrap();
    }
    let got = e.receive(q, receive_req(0), e.now_ms()).unwrap();
    assert_eq!(got.messages.len(), bodies.len());
}

/// The bodies stored in each queue of `e`, by queue name.
fn bodies(e: &Engine) -> Vec<(String, Vec<String>)> {
    let now = e.now_ms();
    e.all_queues()
        .iter()
        .map(|q| {
            let peeked = q.peek(now);
            let bodies = peeked.iter().map(|m| m.payload.body.to_string());
            (q.id.name.clone(), bodies.collect())
        })
        .collect()
}

fn names(list: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
    list.iter()
        .map(|(q, b)| (q.to_string(), b.iter().map(|s| s.to_string()).collect()))
        .collect()
}

/// A dead letter, and a message a move task moves, leave their queue under its lock and
/// arrive in the other under its own, their removal logged with the arrival. A snapshot
/// that copies the source in between still holds them there: a crash before the arrival
/// is logged keeps them in the source, one after it finds them in the target only.
#[test]
fn a_snapshot_between_a_departure_and_its_arrival_loses_and_repeats_nothing() {
    let store = MemoryStore::new();
    let live = engine_on(&store);
    let (dlq, src) = dead_letter_pair(&live, 1);
    send_and_receive_once(&live, &src, &["poison", "also poison"]);
    // The receive that exceeds maxReceiveCount takes both out; `Engine::receive` would
    // hand them to the dead-letter queue next.
    let now = live.now_ms();
    let out = src.receive(receive_req(30), now).unwrap();
    assert!(out.messages.is_empty());
    let dead = out.dead_letters.expect("both are dead letters");
    assert_eq!(dead.messages.len(), 2);
    live.compact().unwrap();
    let before_arrival = engine_on(&store.crashed());
    assert_eq!(
        bodies(&before_arrival),
        names(&[("dlq", &[]), ("src", &["poison", "also poison"])]),
        "a crash before the arrival keeps them in their source"
    );
    dlq.accept(
        dead.messages,
        Transfer::DeadLetter {
            source_arn: &src.arn,
        },
        now,
    );
    let after_arrival = engine_on(&store.crashed());
    assert_eq!(
        bodies(&after_arrival),
        names(&[("dlq", &["poison", "also poison"]), ("src", &[])]),
        "after the arrival they are in the dead-letter queue only"
    );
    same(
        &fingerprint(&after_arrival),
        &fingerprint(&live),
        0,
        "arrival",
    );

    // The same for a move task's step, back from the dead-letter queue to a destination.
    let moving = dlq.take_for_move(1, now);
    assert_eq!(moving.len(), 1);
    live.compact().unwrap();
    let mid_move = engine_on(&store.crashed());
    assert_eq!(
        bodies(&mid_move),
        names(&[("dlq", &["poison", "also poison"]), ("src", &[])])
    );
    src.accept(moving, Transfer::Redrive, now);
    let moved = engine_on(&store.crashed());
    assert_eq!(
        bodies(&moved),
        names(&[("dlq", &["also poison"]), ("src", &["poison"])])
    );
    same(&fingerprint(&moved), &fingerprint(&live), 0, "move");
}

/// A snapshot copies the dead-letter queue, then a dead letter goes there whole (its
/// arrival logged but not yet durable), then the snapshot copies the source without it.
/// Published before the log is durable that far, a crash would lose the message: the
/// store takes a snapshot in only once everything appended before it is durable.
#[test]
fn a_snapshot_is_published_only_once_the_log_can_complete_it() {
    for publish_early in [false, true] {
        let store = MemoryStore::lagging();
        if publish_early {
            store.publish_snapshots_early();
        }
        let live = engine_on(&store);
        let (dlq, src) = dead_letter_pair(&live, 1);
        send_and_receive_once(&live, &src, &["poison"]);
        store.flush();
        let started = live.begin_snapshot(&store);
        let (at, frames) = started.finish_with(&store, |q| {
            if q.uid == src.uid {
                // Between the two queues' copies: the whole move, not yet durable.
                let now = live.now_ms();
                live.receive(&src, receive_req(30), now).unwrap();
                assert_eq!(dlq.stored(now), 1);
            }
        });
        store.snapshot(at, &mut frames.into_iter()).unwrap();
        let recovered = engine_on(&store.crashed());
        if publish_early {
            assert_eq!(
                bodies(&recovered),
                names(&[("dlq", &[]), ("src", &[])]),
                "the interleaving this test builds loses the message when the snapshot \
                 does not wait"
            );
        } else {
            assert_eq!(
                bodies(&recovered),
                names(&[("dlq", &["poison"]), ("src", &[])])
            );
            same(
                &fingerprint(&recovered),
                &fingerprint(&live),
                0,
                "published",
            );
        }
    }
}

/// A move task's count travels in the frame of the arrival it counts: whatever prefix
/// of the log a crash keeps, the count equals what arrived, and the resumed task moves
/// exactly what it had left, not the later dead letters beside them.
#[test]
fn a_move_tasks_count_matches_what_arrived_at_every_crash_point() {
    use crate::engine::moves::task::{self as move_task, TaskStatus};
    const TO_MOVE: usize = 1_200;
    const LATER: usize = 300;
    // The live engine's tasks run on one runtime, each crashed copy's on its own: a
    // step of the live task happens only when the test lets it.
    let runtime = || {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    };
    let live_rt = runtime();
    let store = MemoryStore::lagging();
    let live = Arc::new(engine_on(&store));
    let new_queue = |name: &str| {
        live.create_queue(id(name), QueueSettings::default())
            .unwrap()
            .0
    };
    let (dlq, dest) = (new_queue("dlq"), new_queue("dest"));
    let send = |n: usize, body: &str| {
        for _ in 0..n {
            let m = NewMessage {
                body: body.into(),
                ..NewMessage::default()
            };
            dlq.send(m, live.now_ms()).unwrap();
        }
    };
    send(TO_MOVE, "dead");
    let task = live_rt.block_on(async {
        move_task::start(&live, Arc::clone(&dlq), Some(dest.id.clone()), None).unwrap()
    });
    // Dead letters that arrive once the task started are not its to move.
    send(LATER, "later");
    // All acknowledged; the task's first step comes when the live runtime runs.
    store.flush();
    let running = |t: &move_task::MoveTask| {
        matches!(t.status().0, TaskStatus::Running | TaskStatus::Cancelling)
    };
    let mut crash_points = 0;
    for step in 0.. {
        for keep in 0..=store.not_durable() {
            let e = Arc::new(engine_on(&store.crashed_keeping(keep)));
            let now = e.now_ms();
            let stored = |name: &str| e.queue(&id(name)).unwrap().stored(now);
            let t = e.move_tasks_of(&dlq.arn).remove(0);
            assert_eq!(
                t.moved() as usize,
                stored("dest"),
                "step {step}, keep {keep}"
            );
            assert_eq!(stored("dlq") + stored("dest"), TO_MOVE + LATER);
            runtime().block_on(async {
                move_task::resume(&e);
                while running(&t) {
                    tokio::task::yield_now().await;
                }
            });
            let t = e.move_tasks_of(&dlq.arn).remove(0);
            assert_eq!(t.status().0, TaskStatus::Completed);
            assert_eq!(
                (t.moved() as usize, stored("dest"), stored("dlq")),
                (TO_MOVE, TO_MOVE, LATER),
                "resumed at step {step}, keep {keep}"
            );
            crash_points += 1;
        }
        if !running(&task) {
            break;
        }
        if step == 1 {
            live.compact().unwrap();
        }
        live_rt.block_on(tokio::task::yield_now());
    }
    assert_eq!(task.moved() as usize, TO_MOVE);
    assert!(crash_points > 5, "{crash_points} crash points");
}

/// Equal fingerprints, or the first line that differs.
fn same(got: &str, want: &str, seed: u64, what: &str) {
    for (i, (g, w)) in got.lines().zip(want.lines()).enumerate() {
        assert_eq!(g, w, "seed {seed}, {what}: line {i} differs");
    }
    assert_eq!(
        got.lines().count(),
        want.lines().count(),
        "seed {seed}, {what}"
    );
}

/// A FIFO queue's delay lowered or raised after its messages arrived moves them (SQS makes
/// it retroactive for FIFO queues), and each move is recorded: a restart finds every
/// message where the live queue had it.
#[test]
fn a_fifo_delay_change_is_kept_across_a_restart() {
    let store = MemoryStore::new();
    let e = engine_on(&store);
    let settings = QueueSettings {
        fifo_queue: true,
        delay_seconds: 60,
        ..QueueSettings::default()
    };
    let q = e.create_queue(id("held.fifo"), settings).unwrap().0;
    for i in 0..3 {
        let m = NewMessage {
            body: format!("m{i}"),
            group_id: Some(format!("g{i}")),
            deduplication_id: Some(format!("d{i}")),
            ..NewMessage::default()
        };
        q.send(m, e.now_ms()).unwrap();
    }
    let set_delay = |s: u32| {
        q.update_settings(e.now_ms(), |st| {
            st.delay_seconds = s;
            Ok::<_, ()>(())
        })
        .unwrap()
    };
    set_delay(0);
    assert_eq!(q.lock().visible, 3);
    same(
        &fingerprint(&engine_on(&store)),
        &fingerprint(&e),
        0,
        "lowered",
    );
    set_delay(30);
    assert_eq!(q.lock().delayed, 3);
    same(
        &fingerprint(&engine_on(&store)),
        &fingerprint(&e),
        0,
        "raised",
    );
}
