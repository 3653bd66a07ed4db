//! The outboxes' tests: dead letters and moved messages cross shards once, whatever
//! is delivered again, restarted or removed, and outboxes go once nothing adds to them.

use super::*;
use crate::engine::redrive::RedrivePolicy;
use crate::engine::{Clock, EngineSettings, NewMessage, ReceiveRequest};
use crate::store::memory::MemoryStore;

fn q(r: &str, a: &str, n: &str) -> QueueId {
    QueueId {
        region: r.into(),
        account: a.into(),
        name: n.into(),
    }
}

fn id(name: &str) -> QueueId {
    q("us-east-1", "000000000000", name)
}

/// A shard's engine on `store`, serving the queues whose names start with `prefix`.
fn shard(clock: &Arc<Clock>, store: &MemoryStore, prefix: &'static str) -> Engine {
    let (e, _) = Engine::open_on_clock(
        Arc::clone(clock),
        EngineSettings::default(),
        Arc::new(store.reopen()),
    )
    .unwrap();
    e.set_home(Home {
        name: format!("shard-{prefix}"),
        serves: Box::new(move |id| id.name.starts_with(prefix)),
    });
    e
}

/// A queue `name` of `e` with the default settings.
fn plain(e: &Engine, name: &str) -> Arc<Queue> {
    e.create_queue(id(name), QueueSettings::default())
        .unwrap()
        .0
}

fn receive(e: &Engine, name: &str) -> crate::engine::receive::ReceiveOutcome {
    let req = ReceiveRequest {
        max_messages: 10,
        visibility_timeout: Some(0),
        max_in_flight: 1000,
        attempt_id: None,
        short_poll: false,
    };
    e.receive(&e.queue(&id(name)).unwrap(), req, e.now_ms())
        .unwrap()
}

/// A source in shard "a" whose dead-letter queue is in shard "b", with one message that
/// was received once: the next receive dead-letters it into the outbox.
fn poisoned(a: &Engine, b: &Engine) -> Arc<Queue> {
    let dlq = plain(b, "b-dlq");
    let settings = QueueSettings {
        redrive_policy: Some(RedrivePolicy {
            raw: RedrivePolicy::document(&dlq.arn, 1),
            dead_letter_target: id("b-dlq"),
            max_receive_count: 1,
        }),
        ..QueueSettings::default()
    };
    let src = a.create_queue(id("a-src"), settings).unwrap().0;
    let m = NewMessage {
        body: "poison".into(),
        ..NewMessage::default()
    };
    src.send(m, a.now_ms()).unwrap();
    assert_eq!(receive(a, "a-src").messages.len(), 1);
    dlq
}

#[test]
fn a_dead_letter_crosses_shards_once_however_often_it_is_delivered() {
    let clock = Arc::new(Clock::starting_at(1_800_000_000_000));
    let (sa, sb) = (MemoryStore::new(), MemoryStore::new());
    let (a, b) = (shard(&clock, &sa, "a"), shard(&clock, &sb, "b"));
    let dlq = poisoned(&a, &b);
    let out = receive(&a, "a-src");
    assert!(out.messages.is_empty());
    let (seq, outbox) = out.forwarded.expect("dead-lettered into an outbox");
    assert!(outbox.holds_up_to(seq));
    // Hidden: no listing shows the outbox, and the source no longer holds the message.
    assert_eq!(a.list_queues("us-east-1", "000000000000", "").len(), 1);
    assert_eq!(a.outboxes().len(), 1);
    assert_eq!(a.queue(&id("a-src")).unwrap().stored(a.now_ms()), 0);

    let parcel = a.parcel_of(&outbox).expect("a parcel");
    assert_eq!(b.take_parcel(Parcel::decode(&parcel.body).unwrap()), Ok(1));
    // Delivered again (the source failed over before it recorded the delivery): nothing
    // new arrives, also after the target recovers from its log.
    assert_eq!(b.take_parcel(Parcel::decode(&parcel.body).unwrap()), Ok(0));
    let b2 = shard(&clock, &sb, "b");
    assert_eq!(b2.take_parcel(Parcel::decode(&parcel.body).unwrap()), Ok(0));
    b2.compact().unwrap();
    let b3 = shard(&clock, &sb, "b");
    assert_eq!(b3.take_parcel(Parcel::decode(&parcel.body).unwrap()), Ok(0));
    assert_eq!(b3.queue(&id("b-dlq")).unwrap().stored(b3.now_ms()), 1);

    a.parcel_delivered(&outbox, &parcel);
    assert!(!outbox.holds_up_to(seq));
    assert!(a.outboxes().is_empty());
    // Empty, it stays: the next receive may dead-letter into it.
    assert_eq!(a.outboxes_where(|_, _| true).len(), 1);
    let got = receive(&b, "b-dlq").messages;
    assert_eq!(got.len(), 1);
    assert_eq!(&*got[0].payload.body, "poison");
    assert_eq!(got[0].receive_count, 2);
    let source = a.queue(&id("a-src")).unwrap().arn.clone();
    assert_eq!(
        got[0].payload.dead_letter_source_arn(),
        Some(source.as_str())
    );
    assert_eq!(dlq.stored(b.now_ms()), 1);
    // A parcel for a queue the engine does not serve is sent elsewhere.
    assert_eq!(
        a.take_parcel(Parcel::decode(&parcel.body).unwrap()),
        Err(Refusal::NotHere)
    );
}

#[test]
fn an_outbox_survives_a_restart_and_returns_what_a_gone_target_refuses() {
    let clock = Arc::new(Clock::starting_at(1_800_000_000_000));
    let (sa, sb) = (MemoryStore::new(), MemoryStore::new());
    let (a, b) = (shard(&clock, &sa, "a"), shard(&clock, &sb, "b"));
    poisoned(&a, &b);
    receive(&a, "a-src");
    // The source shard fails over with the dead letter in its outbox.
    let a2 = shard(&clock, &sa, "a");
    let outbox = a2.outboxes().pop().expect("the outbox recovered");
    let parcel = a2.parcel_of(&outbox).unwrap();
    assert!(b.delete_queue(&id("b-dlq")));
    assert_eq!(
        b.take_parcel(Parcel::decode(&parcel.body).unwrap()),
        Err(Refusal::Gone)
    );
    // The target is gone: the message goes back to its source, unchanged.
    a2.return_outbox(&outbox, &parcel.route);
    assert!(a2.outboxes().is_empty());
    let src = a2.queue(&id("a-src")).unwrap();
    assert_eq!(src.stored(a2.now_ms()), 1);
    let a3 = shard(&clock, &sa, "a");
    assert!(a3.outboxes().is_empty());
    assert_eq!(a3.queue(&id("a-src")).unwrap().stored(a3.now_ms()), 1);
    assert!(matches!(Parcel::decode(b"\xff"), Err(Refusal::Invalid(_))));
}

/// A move task's outbox goes once it is empty and the task's runner has ended — not
/// while the runner may still add to it — also when its last entries leave after that
/// (a cancelled task); the removal is recorded, so a restart does not bring it back.
#[test]
fn a_finished_move_tasks_outboxes_go_once_empty() {
    use crate::engine::moves::task::{self as move_task, TaskStatus};
    let rt = crate::store::suite::runtime();
    let clock = Arc::new(Clock::starting_at(1_800_000_000_000));
    let (sa, sb) = (MemoryStore::new(), MemoryStore::new());
    let (a, b) = (Arc::new(shard(&clock, &sa, "a")), shard(&clock, &sb, "b"));
    let dest = plain(&b, "b-dest");
    let dlq = plain(&a, "a-dlq");
    let send = |n: usize| {
        for _ in 0..n {
            let m = NewMessage {
                body: "moved".into(),
                ..NewMessage::default()
            };
            dlq.send(m, a.now_ms()).unwrap();
        }
    };
    let registered = |e: &Engine| e.outboxes_where(|_, _| true).len();
    // What a courier does: every outbox's entries to the target, then delivered here.
    let deliver = || {
        for o in a.outboxes() {
            while let Some(parcel) = a.parcel_of(&o) {
                b.take_parcel(Parcel::decode(&parcel.body).unwrap())
                    .unwrap();
                a.parcel_delivered(&o, &parcel);
            }
        }
    };
    // Lets the task's runner go on until `done` holds (at most a second).
    let run_until = |done: &dyn Fn() -> bool| {
        rt.block_on(async {
            for _ in 0..1000 {
                if done() {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            panic!("the task did not get there");
        })
    };

    send(3);
    let task = rt.block_on(async {
        move_task::start(&a, Arc::clone(&dlq), Some(id("b-dest")), None).unwrap()
    });
    run_until(&|| dlq.stored(a.now_ms()) == 0);
    assert_eq!(registered(&a), 1);
    deliver();
    // Empty, but the runner (waiting for the arrivals) has not ended: it stays.
    assert_eq!(registered(&a), 1);
    run_until(&|| task.status().0 == TaskStatus::Completed && registered(&a) == 0);
    assert_eq!((task.moved(), dest.stored(b.now_ms())), (3, 3));

    // At one message a second on a clock that stands still: one goes, then the task
    // waits; cancelled, its runner ends with that one still in the outbox.
    send(2);
    let slow = rt.block_on(async {
        move_task::start(&a, Arc::clone(&dlq), Some(id("b-dest")), Some(1)).unwrap()
    });
    run_until(&|| dlq.stored(a.now_ms()) == 1);
    assert!(slow.request_cancel());
    run_until(&|| slow.status().0 == TaskStatus::Cancelled);
    run_until(&|| !a.runner_under_way(&slow.task_id));
    assert_eq!(registered(&a), 1);
    deliver();
    assert_eq!(registered(&a), 0);
    assert_eq!((slow.moved(), dest.stored(b.now_ms())), (1, 4));

    // A task that ended with an entry in its outbox and is then no longer listed: pruned
    // by ten newer tasks of its source (to a queue of its own shard, so no outbox of
    // theirs), or its source deleted. Its outbox goes once delivered all the same.
    let local = id("a-local");
    a.create_queue(local.clone(), QueueSettings::default())
        .unwrap();
    let slow_task = |name: &str| {
        let source = plain(&a, name);
        for _ in 0..2 {
            source.send(NewMessage::default(), a.now_ms()).unwrap();
        }
        let t = rt.block_on(async {
            move_task::start(&a, Arc::clone(&source), Some(id("b-dest")), Some(1)).unwrap()
        });
        run_until(&|| source.stored(a.now_ms()) == 1);
        assert!(t.request_cancel());
        run_until(&|| !a.runner_under_way(&t.task_id));
        (source, t)
    };
    let (pruned_source, pruned) = slow_task("a-pruned");
    for _ in 0..10 {
        let t = rt.block_on(async {
            move_task::start(&a, Arc::clone(&pruned_source), Some(local.clone()), None).unwrap()
        });
        run_until(&|| !a.runner_under_way(&t.task_id));
    }
    let listed = |t: &move_task::MoveTask| {
        a.move_tasks_of(&pruned_source.arn)
            .iter()
            .any(|l| l.task_id == t.task_id)
    };
    assert!(!listed(&pruned), "the eleventh task back is pruned");
    let (gone_source, _) = slow_task("a-gone");
    assert!(a.delete_queue(&gone_source.id));
    assert_eq!(registered(&a), 2);
    deliver();
    assert_eq!(
        registered(&a),
        0,
        "delivered, the unlisted tasks' outboxes go"
    );
    assert_eq!(dest.stored(b.now_ms()), 6);
    // Recovered from the log: no outbox comes back.
    assert_eq!(registered(&shard(&clock, &sa, "a")), 0);
}

/// A dead-letter outbox goes once its origin queue is gone and it is empty: at once
/// when the origin goes with nothing in it, else once its last entry is delivered; the
/// removal is recorded, so a restart does not bring it back. While the origin lives it
/// stays, empty or not.
#[test]
fn a_dead_letter_outbox_goes_once_its_origin_is_gone_and_it_is_empty() {
    let clock = Arc::new(Clock::starting_at(1_800_000_000_000));
    let (sa, sb) = (MemoryStore::new(), MemoryStore::new());
    let (a, b) = (shard(&clock, &sa, "a"), shard(&clock, &sb, "b"));
    let registered = |e: &Engine| e.outboxes_where(|_, _| true).len();
    poisoned(&a, &b);
    let (_, first) = receive(&a, "a-src").forwarded.expect("dead-lettered");
    // A second source towards the same dead-letter queue, its dead letter delivered.
    let second = a
        .create_queue(id("a-other"), a.queue(&id("a-src")).unwrap().settings())
        .unwrap()
        .0;
    second.send(NewMessage::default(), a.now_ms()).unwrap();
    receive(&a, "a-other");
    let (_, other) = receive(&a, "a-other").forwarded.expect("dead-lettered");
    let deliver = |o: &Arc<Queue>| {
        let parcel = a.parcel_of(o).expect("a parcel");
        assert_eq!(b.take_parcel(Parcel::decode(&parcel.body).unwrap()), Ok(1));
        a.parcel_delivered(o, &parcel);
    };
    deliver(&other);
    assert_eq!(
        registered(&a),
        2,
        "empty or not, they stay while their origins live"
    );
    // A source that no longer names the dead-letter queue: its empty outbox goes at the
    // next look (a start, a takeover, a runner's end), and comes back with the policy.
    let policy = second.settings().redrive_policy;
    let set_policy = |p: Option<RedrivePolicy>| {
        second
            .update_settings(a.now_ms(), |s| {
                s.redrive_policy = p;
                Ok::<_, ()>(())
            })
            .unwrap()
    };
    set_policy(None);
    a.retire_finished_outboxes();
    assert!(other.is_deleted());
    assert_eq!(registered(&a), 1);
    set_policy(policy);
    second.send(NewMessage::default(), a.now_ms()).unwrap();
    receive(&a, "a-other");
    let (_, other) = receive(&a, "a-other").forwarded.expect("dead-lettered");
    deliver(&other);
    assert_eq!(registered(&a), 2);

    // Deleted with its outbox empty: the outbox goes with it.
    assert!(a.delete_queue(&id("a-other")));
    assert!(other.is_deleted());
    assert_eq!(registered(&a), 1);
    // Deleted with its dead letter still in the outbox: it goes once delivered.
    assert!(a.delete_queue(&id("a-src")));
    assert_eq!(registered(&a), 1);
    deliver(&first);
    assert!(first.is_deleted());
    assert_eq!(registered(&a), 0);
    assert_eq!(b.queue(&id("b-dlq")).unwrap().stored(b.now_ms()), 3);
    assert_eq!(registered(&shard(&clock, &sa, "a")), 0);
}

/// An outbox removed for good leaves its uid behind: a shard started again on a clock
/// that stands still (a frozen test clock) issues uids above it, from its log and from
/// its snapshot alike. Were one issued again, a new outbox would carry the old one's
/// name at the target, whose mark would take its first entries for ones delivered.
#[test]
fn a_removed_outboxs_uid_is_never_issued_again() {
    let clock = Arc::new(Clock::starting_at(1_800_000_000_000));
    clock.freeze();
    let (sa, sb) = (MemoryStore::new(), MemoryStore::new());
    let (a, b) = (shard(&clock, &sa, "a"), shard(&clock, &sb, "b"));
    poisoned(&a, &b);
    let settings = a.queue(&id("a-src")).unwrap().settings();
    let mut outboxes = Vec::new();
    // One dead letter from `source` delivered, then the source deleted (its outbox goes).
    let round = |e: &Engine, source: &str, outboxes: &mut Vec<u64>| {
        if e.queue(&id(source)).is_none() {
            let q = e.create_queue(id(source), settings.clone()).unwrap().0;
            q.send(NewMessage::default(), e.now_ms()).unwrap();
            receive(e, source);
        }
        let (_, o) = receive(e, source).forwarded.expect("dead-lettered");
        let parcel = e.parcel_of(&o).expect("a parcel");
        assert_eq!(
            b.take_parcel(Parcel::decode(&parcel.body).unwrap()),
            Ok(1),
            "{source}'s dead letter taken as new"
        );
        e.parcel_delivered(&o, &parcel);
        assert!(e.delete_queue(&id(source)));
        assert!(o.is_deleted());
        outboxes.push(o.uid);
    };
    round(&a, "a-src", &mut outboxes);
    // Started again from its log, then from a snapshot.
    let a2 = shard(&clock, &sa, "a");
    round(&a2, "a-two", &mut outboxes);
    a2.compact().unwrap();
    let a3 = shard(&clock, &sa, "a");
    round(&a3, "a-three", &mut outboxes);
    assert!(outboxes.windows(2).all(|w| w[0] < w[1]), "{outboxes:?}");
    assert_eq!(b.queue(&id("b-dlq")).unwrap().stored(b.now_ms()), 3);
}

/// An outbox sealed by its removal takes nothing more: a dead letter that found it just
/// before comes back to be sent through the outbox made in its place. One holding
/// something is not sealed.
#[test]
fn a_sealed_outbox_refuses_what_comes_after() {
    let clock = Arc::new(Clock::starting_at(1_800_000_000_000));
    let store = MemoryStore::new();
    let a = shard(&clock, &store, "a");
    let src = plain(&a, "a-src");
    let holder = plain(&a, "a-holder");
    src.send(NewMessage::default(), a.now_ms()).unwrap();
    let now = a.now_ms();
    assert!(holder.seal_if_empty());
    let back = holder
        .accept_open(src.take_for_move(1, now), Transfer::Restore, now)
        .expect_err("a sealed queue takes nothing");
    assert_eq!((back.len(), holder.stored(now)), (1, 0));
    let open = plain(&a, "a-open");
    assert!(open.accept_open(back, Transfer::Restore, now).is_ok());
    assert!(!open.seal_if_empty());
    assert!(!open.is_deleted());
    assert_eq!(open.stored(now), 1);
}

#[test]
fn a_route_is_read_back_from_its_outbox_name() {
    let task = "0b7a3c1e-5d2f-4e8a-9c6b-1f2e3d4c5b6a".to_string();
    for via in [Via::DeadLetter, Via::Move { task }] {
        let route = Route {
            via,
            origin: q("us-east-1", "000000000000", "orders"),
            target: q("eu-west-1", "111111111111", "orders-dlq.fifo"),
        };
        let id = route.outbox_id();
        assert!(is_hidden(&id.name));
        assert_eq!(id.account, "000000000000");
        assert_eq!(Route::of(&id), Some(route));
    }
    assert_eq!(Route::of(&q("r", "a", "orders")), None);
    assert_eq!(Route::of(&q("r", "a", "~xx~a~b~c~d")), None);
    assert_eq!(Route::of(&q("r", "a", "~dl~a~b~c~d~e")), None);
}

/// A kill at any point of a dead letter's trip across shards — into the outbox, delivered,
/// its origin deleted, the outbox removed — leaves it in exactly one place once the
/// restarted shard's courier has run: the source, or the dead-letter queue, never both,
/// never neither; and an outbox whose origin is gone does not outlive the restart (also
/// one the kill caught between its sealing and its removal's record). Both orders: the
/// origin deleted after the delivery, and while the dead letter is still in the outbox.
#[test]
fn a_dead_letter_arrives_once_at_every_crash_point_of_its_trip() {
    for delete_first in [false, true] {
        let clock = Arc::new(Clock::starting_at(1_800_000_000_000));
        clock.freeze();
        let (sa, sb) = (MemoryStore::lagging(), MemoryStore::new());
        let (a, b) = (shard(&clock, &sa, "a"), shard(&clock, &sb, "b"));
        poisoned(&a, &b);
        sa.flush();
        let mut crash_points = 0;
        // Every prefix of what the source shard appended but had not made durable.
        let mut crash_here = |step: &str| {
            for keep in 0..=sa.not_durable() {
                let (sa2, sb2) = (sa.crashed_keeping(keep), sb.crashed());
                let a2 = Arc::new(shard(&clock, &sa2, "a"));
                let b2 = shard(&clock, &sb2, "b");
                // What a node taking the shard over runs, then its courier until done.
                crate::engine::moves::task::resume(&a2);
                while let Some(o) = a2.outboxes().pop() {
                    let parcel = a2.parcel_of(&o).expect("a parcel");
                    sa2.flush();
                    b2.take_parcel(Parcel::decode(&parcel.body).unwrap())
                        .unwrap();
                    a2.parcel_delivered(&o, &parcel);
                }
                let now = a2.now_ms();
                let source = a2.queue(&id("a-src"));
                let at = (
                    source.as_ref().map_or(0, |q| q.stored(now)),
                    b2.queue(&id("b-dlq")).unwrap().stored(now),
                );
                let what = format!("delete first {delete_first}, {step}, keep {keep}");
                assert!(at == (1, 0) || at == (0, 1), "{what}: {at:?}");
                let left = a2.outboxes_where(|_, _| true).len();
                // While the origin lives its (empty) outbox may stay; once it is gone, no.
                assert!(
                    left <= usize::from(source.is_some()),
                    "{what}: {left} outboxes"
                );
                // Its removals are recorded: a restart does not bring an outbox back.
                sa2.flush();
                let a3 = shard(&clock, &sa2, "a");
                assert_eq!(a3.outboxes_where(|_, _| true).len(), left, "{what}");
                crash_points += 1;
            }
        };
        crash_here("received once");
        let (_, outbox) = receive(&a, "a-src").forwarded.expect("dead-lettered");
        crash_here("dead-lettered");
        let deliver = || {
            let parcel = a.parcel_of(&outbox).expect("a parcel");
            sa.flush();
            assert_eq!(b.take_parcel(Parcel::decode(&parcel.body).unwrap()), Ok(1));
            a.parcel_delivered(&outbox, &parcel);
        };
        if delete_first {
            assert!(a.delete_queue(&id("a-src")));
            assert!(!outbox.is_deleted(), "it still holds the dead letter");
            crash_here("origin deleted");
            deliver();
        } else {
            deliver();
            crash_here("delivered");
            assert!(a.delete_queue(&id("a-src")));
        }
        assert!(outbox.is_deleted());
        crash_here("outbox removed");
        sa.flush();
        crash_here("all durable");
        assert!(crash_points >= 8, "{crash_points} crash points");
    }
}

/// A parcel that names an outbox as its target or origin is no courier's (a peer's bug, or
/// a forged one): it is refused as for a queue that does not exist, and no hidden queue
/// takes anything from it.
#[test]
fn a_parcel_naming_an_outbox_is_refused() {
    let clock = Arc::new(Clock::starting_at(1_800_000_000_000));
    let (sa, sb) = (MemoryStore::new(), MemoryStore::new());
    let (a, b) = (shard(&clock, &sa, "a"), shard(&clock, &sb, "b"));
    poisoned(&a, &b);
    let (_, outbox) = receive(&a, "a-src").forwarded.expect("dead-lettered");
    let parcel = a.parcel_of(&outbox).expect("a parcel");
    // An engine serving every name, with a hidden queue of the outbox's name.
    let any = shard(&clock, &MemoryStore::new(), "");
    plain(&any, "b-dlq");
    let hidden = any
        .create_queue(outbox.id.clone(), QueueSettings::default())
        .unwrap()
        .0;
    let forged = |f: &dyn Fn(&mut Route)| {
        let mut p = Parcel::decode(&parcel.body).unwrap();
        f(&mut p.route);
        any.take_parcel(p)
    };
    assert_eq!(
        forged(&|r| r.target = outbox.id.clone()),
        Err(Refusal::Gone)
    );
    assert_eq!(
        forged(&|r| r.origin = outbox.id.clone()),
        Err(Refusal::Gone)
    );
    assert_eq!(hidden.stored(any.now_ms()), 0);
    // The parcel as the courier sent it is taken.
    assert_eq!(forged(&|_| {}), Ok(1));
}
