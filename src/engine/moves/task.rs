//! Message move tasks: moving messages out of a dead-letter queue, back to the queues they came
//! from or to one destination, at an optional rate counted on the engine's clock. Each task
//! runs as a background tokio task; the engine keeps their records for listing.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::engine::ids::QueueId;
use crate::engine::journal::change::{Change, TaskRecord};
use crate::engine::journal::MoveCount;
use tokio::sync::Notify;

use super::{Destination, Via};
use crate::engine::queue::Queue;
use crate::engine::receive::Transfer;
use crate::engine::{wait, Engine};

/// How many messages one step moves at most when no rate is set.
const UNLIMITED_STEP: usize = 500;
/// How long a finished task waits for what it sent through outboxes to arrive.
const OUTBOX_WAIT: Duration = Duration::from_secs(30);
/// How many tasks of one source are kept: ListMessageMoveTasks shows the newest ten at most
/// (AWS: "the most recent message movement tasks (up to 10)"), so older ones, all ended,
/// are seen by nobody and go (see [`prune`]).
const KEPT_PER_SOURCE: usize = 10;

/// Where a task is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TaskStatus {
    Running,
    Cancelling,
    Cancelled,
    Completed,
    Failed,
}

/// Why a task failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TaskFailure {
    /// The source, or a queue messages were to go to, no longer exists.
    QueueGone,
}

/// One move task.
#[derive(Debug)]
pub(crate) struct MoveTask {
    pub task_id: String,
    pub source_arn: String,
    pub destination_arn: Option<String>,
    pub max_per_second: Option<u32>,
    pub started_ms: u64,
    /// The source's size when the task started.
    pub to_move: u64,
    moved: AtomicU64,
    cancel: AtomicBool,
    /// Wakes the task's runner when it is cancelled.
    woken: Notify,
    state: Mutex<(TaskStatus, Option<TaskFailure>)>,
}

impl MoveCount for MoveTask {
    /// Counts `n` more messages moved: called where their arrival is recorded.
    fn count_moved(&self, n: u64) {
        self.moved.fetch_add(n, Ordering::AcqRel);
    }

    fn record(&self) -> TaskRecord {
        MoveTask::record(self)
    }
}

impl MoveTask {
    /// Messages moved so far.
    pub(crate) fn moved(&self) -> u64 {
        self.moved.load(Ordering::Acquire)
    }

    /// The status and, when FAILED, the reason.
    pub(crate) fn status(&self) -> (TaskStatus, Option<TaskFailure>) {
        *self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set(&self, engine: &Engine, status: TaskStatus, reason: Option<TaskFailure>) {
        *self.state.lock().unwrap_or_else(|p| p.into_inner()) = (status, reason);
        engine.record_task(self);
    }

    /// The task as a durable store records it.
    pub(crate) fn record(&self) -> TaskRecord {
        let (status, failure) = self.status();
        TaskRecord {
            task_id: self.task_id.clone(),
            source_arn: self.source_arn.clone(),
            destination_arn: self.destination_arn.clone(),
            max_per_second: self.max_per_second,
            started_ms: self.started_ms,
            to_move: self.to_move,
            moved: self.moved(),
            status: match status {
                TaskStatus::Running => 0,
                TaskStatus::Cancelling => 1,
                TaskStatus::Cancelled => 2,
                TaskStatus::Completed => 3,
                TaskStatus::Failed => 4,
            },
            queue_gone: failure == Some(TaskFailure::QueueGone),
        }
    }

    /// A task as recorded before a restart.
    pub(crate) fn from_record(r: TaskRecord) -> MoveTask {
        let status = match r.status {
            0 => TaskStatus::Running,
            1 => TaskStatus::Cancelling,
            2 => TaskStatus::Cancelled,
            3 => TaskStatus::Completed,
            _ => TaskStatus::Failed,
        };
        MoveTask {
            task_id: r.task_id,
            source_arn: r.source_arn,
            destination_arn: r.destination_arn,
            max_per_second: r.max_per_second,
            started_ms: r.started_ms,
            to_move: r.to_move,
            moved: AtomicU64::new(r.moved),
            cancel: AtomicBool::new(status == TaskStatus::Cancelling),
            woken: Notify::new(),
            state: Mutex::new((status, r.queue_gone.then_some(TaskFailure::QueueGone))),
        }
    }

    /// A queue the task sends messages to is gone: it fails, unless it already ended.
    pub(crate) fn fail_queue_gone(&self, engine: &Engine) {
        self.transition(engine, |status| {
            matches!(status, TaskStatus::Running | TaskStatus::Cancelling)
                .then_some((TaskStatus::Failed, Some(TaskFailure::QueueGone)))
        });
    }

    /// Moves the task to the state `next` gives for its current one, if any, in one step
    /// (the courier and the task's own loop may both conclude it).
    fn transition(
        &self,
        engine: &Engine,
        next: impl FnOnce(TaskStatus) -> Option<(TaskStatus, Option<TaskFailure>)>,
    ) {
        let changed = {
            let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
            match next(st.0) {
                Some(to) => {
                    *st = to;
                    true
                }
                None => false,
            }
        };
        if changed {
            engine.record_task(self);
        }
    }

    /// Asks a running task to stop; false if it is not running.
    pub(crate) fn request_cancel(&self) -> bool {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.0 != TaskStatus::Running {
            return false;
        }
        st.0 = TaskStatus::Cancelling;
        self.cancel.store(true, Ordering::Release);
        self.woken.notify_one();
        true
    }
}

/// Why a task could not start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StartError {
    /// Another task on this source is still running.
    AlreadyRunning,
}

/// Starts a task moving messages out of `source`. `destination` is `None` to send each
/// message back to the queue it was dead-lettered from; it may be served by another shard
/// (cluster mode), which the messages then reach through an outbox.
pub(crate) fn start(
    engine: &Arc<Engine>,
    source: Arc<Queue>,
    destination: Option<QueueId>,
    max_per_second: Option<u32>,
) -> Result<Arc<MoveTask>, StartError> {
    let now = engine.now_ms();
    let task = {
        let mut tasks = engine.move_tasks.lock().unwrap_or_else(|p| p.into_inner());
        let running = tasks.iter().any(|t| {
            t.source_arn == source.arn
                && matches!(t.status().0, TaskStatus::Running | TaskStatus::Cancelling)
        });
        if running {
            return Err(StartError::AlreadyRunning);
        }
        let task = Arc::new(MoveTask {
            task_id: uuid::Uuid::new_v4().to_string(),
            source_arn: source.arn.clone(),
            destination_arn: destination.as_ref().map(QueueId::arn),
            max_per_second,
            started_ms: now,
            to_move: source.stored(now) as u64,
            moved: AtomicU64::new(0),
            cancel: AtomicBool::new(false),
            woken: Notify::new(),
            state: Mutex::new((TaskStatus::Running, None)),
        });
        tasks.push(Arc::clone(&task));
        prune(&mut tasks);
        let lsn = engine.journal().record(&[Change::MoveTask(task.record())]);
        engine.registry_changed(lsn);
        task
    };
    spawn_runner(engine, &task, source, destination);
    Ok(task)
}

/// Drops every source's tasks older than its newest [`KEPT_PER_SOURCE`]: without this a
/// server that runs for months keeps every task it ever ran, in memory and in every
/// snapshot. Only one task per source runs at a time, and it is the newest, so those
/// dropped have ended. Not recorded: out of every listing either way, they may come back
/// with a restart that reads them from the log, and go again at its [`resume`]. A task
/// dropped records nothing more (an arrival counts only for a task that is listed), so a
/// restart never reads one back as new.
fn prune(tasks: &mut Vec<Arc<MoveTask>>) {
    let keep: Vec<bool> = {
        let mut newer: std::collections::HashMap<&str, usize> = Default::default();
        let mut keep: Vec<bool> = tasks
            .iter()
            .rev()
            .map(|t| {
                let n = newer.entry(t.source_arn.as_str()).or_default();
                *n += 1;
                *n <= KEPT_PER_SOURCE
            })
            .collect();
        keep.reverse();
        keep
    };
    let mut keep = keep.into_iter();
    tasks.retain(|_| keep.next().unwrap_or(true));
}

/// Starts again the tasks a restart interrupted (durable mode): a running task goes on
/// from the count it had reached, a cancelling one ends cancelled, and one whose queues are
/// gone fails.
pub(crate) fn resume(engine: &Arc<Engine>) {
    let tasks: Vec<Arc<MoveTask>> = {
        let mut tasks = engine.move_tasks.lock().unwrap_or_else(|p| p.into_inner());
        prune(&mut tasks);
        tasks.clone()
    };
    for task in tasks {
        match task.status().0 {
            TaskStatus::Cancelling => task.set(engine, TaskStatus::Cancelled, None),
            TaskStatus::Running => {
                let source = QueueId::from_arn(&task.source_arn).and_then(|id| engine.queue(&id));
                let destination = task.destination_arn.as_deref().map(QueueId::from_arn);
                match (source, destination) {
                    (Some(s), None) => spawn_runner(engine, &task, s, None),
                    (Some(s), Some(Some(d))) => spawn_runner(engine, &task, s, Some(d)),
                    _ => task.set(engine, TaskStatus::Failed, Some(TaskFailure::QueueGone)),
                }
            }
            _ => {}
        }
    }
    // Tasks that ended (before the restart, or just now), listed or not: the outboxes they
    // left empty go now.
    engine.retire_finished_outboxes();
}

/// Runs `task` to its end ([`steps`]) in the background; then, unless the engine is
/// shutting down (the task stays running, to be resumed), its outboxes that are empty go:
/// nothing adds to them any more (those still holding entries go once delivered:
/// `Engine::parcel_delivered`). The one place a runner starts.
fn spawn_runner(
    engine: &Arc<Engine>,
    task: &Arc<MoveTask>,
    source: Arc<Queue>,
    destination: Option<QueueId>,
) {
    engine.runners().insert(task.task_id.clone());
    let (engine, task) = (Arc::clone(engine), Arc::clone(task));
    tokio::spawn(async move {
        steps(&engine, &task, &source, destination).await;
        if !engine.is_shutting_down() {
            // Before the outboxes are looked at: a parcel delivered meanwhile retires its
            // outbox itself ([`Engine::parcel_delivered`]).
            engine.runners().remove(&task.task_id);
            engine.retire_finished_outboxes();
        }
    });
}

impl Engine {
    /// Whether a runner of task `task_id` is under way (started and not ended; a task
    /// recovered from the log has none until [`resume`] starts one). Kept by the engine,
    /// not the task: a task pruned from the list may still have a runner ending.
    pub(crate) fn runner_under_way(&self, task_id: &str) -> bool {
        self.runners().contains(task_id)
    }

    fn runners(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<String>> {
        self.live_runners.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The task's steps, until it completes, fails, is cancelled or the engine shuts down.
async fn steps(
    engine: &Arc<Engine>,
    task: &Arc<MoveTask>,
    source: &Arc<Queue>,
    destination: Option<QueueId>,
) {
    // Cluster mode: the outboxes this task sends through to other shards (those a restart
    // left with entries, and each it fills from now on).
    let mut outboxes = engine.task_outboxes(&source.id, &task.task_id);
    loop {
        if engine.is_shutting_down() {
            // Stays RUNNING: in durable mode the next start resumes it.
            return;
        }
        if task.status().0 == TaskStatus::Failed {
            // A destination elsewhere turned out to be gone (see `Engine::return_outbox`).
            return;
        }
        if task.cancel.load(Ordering::Acquire) {
            task.set(engine, TaskStatus::Cancelled, None);
            return;
        }
        if source.is_deleted() {
            task.set(engine, TaskStatus::Failed, Some(TaskFailure::QueueGone));
            return;
        }
        let now = engine.now_ms();
        // Messages on their way through outboxes (cluster mode) count once they arrive.
        let moving: usize = outboxes.iter().map(|o| o.stored(now)).sum();
        let moved = task.moved() + moving as u64;
        if moved >= task.to_move {
            complete(engine, task, &outboxes).await;
            return;
        }
        let allowance = match task.max_per_second {
            // The first message goes at once, then `rate` per second of clock time.
            Some(rate) => {
                let elapsed = now.saturating_sub(task.started_ms);
                (elapsed * rate as u64 / 1000 + 1).saturating_sub(moved) as usize
            }
            None => UNLIMITED_STEP,
        };
        let allowance = allowance.min((task.to_move - moved) as usize);
        if allowance == 0 {
            // The next message is due once the clock shows `moved` of them allowed.
            let rate = task.max_per_second.unwrap_or(1).max(1) as u64;
            let due = task.started_ms + (moved * 1000).div_ceil(rate);
            wait::until_clock(engine, source, &task.woken, due).await;
            continue;
        }
        let batch = source.take_for_move(allowance, now);
        if batch.is_empty() {
            // Nothing visible is left to move.
            complete(engine, task, &outboxes).await;
            return;
        }
        // The count goes up, and is recorded, with each arrival (`Queue::accept_moved`): a
        // restart finds exactly what arrived counted.
        let to = destination.as_ref();
        if let Some(reason) = deliver(engine, task, source, to, batch, now, &mut outboxes) {
            task.set(engine, TaskStatus::Failed, Some(reason));
            return;
        }
        tokio::task::yield_now().await;
    }
}

/// Marks `task` completed once the messages it sent through outboxes (cluster mode) have
/// arrived, or after [`OUTBOX_WAIT`]: a client that sees COMPLETED finds them there (and
/// the count includes them). A task that failed meanwhile stays failed.
async fn complete(engine: &Engine, task: &MoveTask, outboxes: &[Arc<Queue>]) {
    for o in outboxes {
        wait::delivered(o, o.last_seq(), OUTBOX_WAIT).await;
    }
    task.transition(engine, |status| match status {
        TaskStatus::Running => Some((TaskStatus::Completed, None)),
        TaskStatus::Cancelling => Some((TaskStatus::Cancelled, None)),
        _ => None,
    });
}

/// Hands moved messages to their destinations, counting them for `task` as they arrive
/// (those for another shard once they arrive there, through an outbox, added to
/// `outboxes`). Messages whose destination is gone go back to the source, and the failure
/// reason is returned.
fn deliver(
    engine: &Engine,
    task: &Arc<MoveTask>,
    source: &Queue,
    destination: Option<&QueueId>,
    batch: Vec<crate::engine::receive::Taken>,
    now: u64,
    outboxes: &mut Vec<Arc<Queue>>,
) -> Option<TaskFailure> {
    // Each message's destination: the task's, or the queue it was dead-lettered from.
    let mut by_target: Vec<(QueueId, Vec<crate::engine::receive::Taken>)> = Vec::new();
    let mut failed = Vec::new();
    for m in batch {
        let target = match destination {
            Some(d) => Some(d.clone()),
            None => m
                .message
                .payload
                .dead_letter_source_arn()
                .and_then(QueueId::from_arn),
        };
        match target {
            Some(t) => match by_target.iter_mut().find(|(id, _)| *id == t) {
                Some((_, group)) => group.push(m),
                None => by_target.push((t, vec![m])),
            },
            None => failed.push(m),
        }
    }
    for (target, group) in by_target {
        let via = Via::Move {
            task: task.task_id.clone(),
        };
        match engine.destination(&source.id, &target, via) {
            Destination::Local(q) => {
                q.accept_moved(group, task, now);
                // Their removal from the source is logged with their arrival here.
                source.changed_at(q.last_lsn());
            }
            // Counted once they arrive (`Engine::parcel_delivered`).
            Destination::Outbox(o) => {
                o.accept(group, Transfer::Restore, now);
                source.changed_at(o.last_lsn());
                engine.outbox_filled();
                if !outboxes.iter().any(|x| Arc::ptr_eq(x, &o)) {
                    outboxes.push(o);
                }
            }
            Destination::Gone => failed.extend(group),
        }
    }
    if failed.is_empty() {
        return None;
    }
    source.accept(failed, Transfer::Restore, now);
    Some(TaskFailure::QueueGone)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::durable::replay::tests::{engine_on, id};
    use crate::engine::QueueSettings;
    use crate::store::memory::MemoryStore;

    /// A source keeps its newest ten tasks (all ListMessageMoveTasks can show); older ones
    /// go, and a restart that reads them back from the log drops them again.
    #[test]
    fn a_source_keeps_its_newest_ten_tasks() {
        let rt = crate::store::suite::runtime();
        let store = MemoryStore::new();
        let engine = Arc::new(engine_on(&store));
        let dlq = engine
            .create_queue(id("dlq"), QueueSettings::default())
            .unwrap()
            .0;
        let other = engine
            .create_queue(id("other-dlq"), QueueSettings::default())
            .unwrap()
            .0;
        let dest = id("dest");
        engine
            .create_queue(dest.clone(), QueueSettings::default())
            .unwrap();
        // Each on an empty source: completed as soon as its runner looks.
        let run = |source: &Arc<Queue>| {
            rt.block_on(async {
                let t = start(&engine, Arc::clone(source), Some(dest.clone()), None).unwrap();
                while t.status().0 != TaskStatus::Completed {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                t.task_id.clone()
            })
        };
        let started: Vec<String> = (0..13).map(|_| run(&dlq)).collect();
        let kept = run(&other);
        let ids = |e: &Engine, arn: &str| -> Vec<String> {
            e.move_tasks_of(arn)
                .iter()
                .map(|t| t.task_id.clone())
                .collect()
        };
        let newest: Vec<String> = started.iter().rev().take(10).cloned().collect();
        assert_eq!(ids(&engine, &dlq.arn), newest);
        assert_eq!(ids(&engine, &other.arn), std::slice::from_ref(&kept));
        drop(engine);

        // The log holds all fourteen; the restart reads them and keeps the same.
        let again = Arc::new(engine_on(&store));
        assert_eq!(ids(&again, &dlq.arn).len(), 13);
        rt.block_on(async { resume(&again) });
        assert_eq!(ids(&again, &dlq.arn), newest);
        assert_eq!(ids(&again, &other.arn), [kept]);
    }
}
