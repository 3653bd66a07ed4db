//! The changes the engine records for a durable store, and their encoding. Each record is
//! absolute ("message K is now in flight until T, received N times"), never relative, so
//! replaying it over a state that already has it changes nothing. A frame handed to the
//! store is one or more changes back to back (postcard is self-delimiting) and is applied
//! whole: a dead-letter move's removal and arrival travel together.
//!
//! Derived state is not recorded: a delay or visibility that ran out, and retention expiry,
//! follow from the recorded deadlines and the clock.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::num::NonZeroU64;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::engine::attribute::AttributeValue;
use crate::engine::digest::Digest16;
use crate::engine::ids::{MessageKey, QueueId};
use crate::engine::message::{Delivery, Payload, PayloadExtra, StoredMessage};
use crate::engine::settings::QueueSettings;

/// Where a message is in its life, as recorded.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) enum DeliveryRecord {
    Delayed(u64),
    Visible,
    InFlight(u64),
}

impl From<Delivery> for DeliveryRecord {
    fn from(d: Delivery) -> Self {
        match d {
            Delivery::Delayed { until_ms } => DeliveryRecord::Delayed(until_ms),
            Delivery::Visible => DeliveryRecord::Visible,
            Delivery::InFlight { until_ms } => DeliveryRecord::InFlight(until_ms),
        }
    }
}

impl From<DeliveryRecord> for Delivery {
    fn from(d: DeliveryRecord) -> Self {
        match d {
            DeliveryRecord::Delayed(until_ms) => Delivery::Delayed { until_ms },
            DeliveryRecord::Visible => Delivery::Visible,
            DeliveryRecord::InFlight(until_ms) => Delivery::InFlight { until_ms },
        }
    }
}

/// A message's mutable part.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Progress {
    pub delivery: DeliveryRecord,
    pub receive_count: u32,
    pub first_receive_ms: Option<u64>,
    pub last_receive_ms: u64,
    pub redelivered: bool,
}

impl Progress {
    pub(crate) fn of(m: &StoredMessage) -> Progress {
        Progress {
            delivery: m.delivery.into(),
            receive_count: m.receive_count,
            first_receive_ms: m.first_receive_ms.map(NonZeroU64::get),
            last_receive_ms: m.last_receive_ms,
            redelivered: m.redelivered,
        }
    }

    /// Writes this progress into `m`; the caller fixes the indexes.
    pub(crate) fn apply(&self, m: &mut StoredMessage) {
        m.delivery = self.delivery.into();
        m.receive_count = self.receive_count;
        m.first_receive_ms = self.first_receive_ms.and_then(NonZeroU64::new);
        m.last_receive_ms = self.last_receive_ms;
        m.redelivered = self.redelivered;
    }
}

/// About the bytes a message's `Put` holds besides its body and attributes (ids, digests,
/// times, sender, delivery state; not the optional FIFO and trace strings).
pub(crate) const RECORD_OVERHEAD: u64 = 128;

/// A whole stored message.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct MessageRecord<'a> {
    pub message_id: [u8; 16],
    pub md5_of_body: [u8; 16],
    pub sent_ms: u64,
    pub body: Cow<'a, str>,
    pub sender_id: Cow<'a, str>,
    pub group_id: Option<Cow<'a, str>>,
    pub attributes: Cow<'a, [(String, AttributeValue)]>,
    pub md5_of_attributes: Option<[u8; 16]>,
    pub aws_trace_header: Option<Cow<'a, str>>,
    pub deduplication_id: Option<Cow<'a, str>>,
    pub sequence_number: Option<Cow<'a, str>>,
    pub dead_letter_source_arn: Option<Cow<'a, str>>,
    pub enqueued_ms: u64,
    pub progress: Progress,
}

impl<'a> MessageRecord<'a> {
    /// The record of a stored message, borrowing its text.
    pub(crate) fn of(m: &'a StoredMessage) -> MessageRecord<'a> {
        let p = &*m.payload;
        MessageRecord {
            message_id: *p.message_id.as_bytes(),
            md5_of_body: p.md5_of_body.0,
            sent_ms: p.sent_ms,
            body: Cow::Borrowed(&p.body),
            sender_id: Cow::Borrowed(&p.sender_id),
            group_id: p.group_id.as_deref().map(Cow::Borrowed),
            attributes: Cow::Borrowed(p.attributes()),
            md5_of_attributes: p.md5_of_attributes().map(|d| d.0),
            aws_trace_header: p.aws_trace_header().map(Cow::Borrowed),
            deduplication_id: p.deduplication_id().map(Cow::Borrowed),
            sequence_number: p.sequence_number().map(Cow::Borrowed),
            dead_letter_source_arn: p.dead_letter_source_arn().map(Cow::Borrowed),
            enqueued_ms: m.enqueued_ms,
            progress: Progress::of(m),
        }
    }

    /// The stored message this record describes.
    pub(crate) fn into_stored(self) -> StoredMessage {
        let extra = PayloadExtra {
            attributes: self.attributes.into_owned(),
            md5_of_attributes: self.md5_of_attributes.map(Digest16),
            aws_trace_header: self.aws_trace_header.map(Cow::into_owned),
            deduplication_id: self.deduplication_id.map(Cow::into_owned),
            sequence_number: self.sequence_number.map(Cow::into_owned),
            dead_letter_source_arn: self.dead_letter_source_arn.map(Cow::into_owned),
        };
        let mut payload = Payload::new(
            uuid::Uuid::from_bytes(self.message_id),
            self.body.into_owned(),
            Digest16(self.md5_of_body),
            Arc::from(&*self.sender_id),
            self.group_id.as_deref().map(Arc::from),
            extra,
        );
        payload.sent_ms = self.sent_ms;
        let mut m = StoredMessage {
            payload: Arc::new(payload),
            delivery: Delivery::Visible,
            enqueued_ms: self.enqueued_ms,
            receive_count: 0,
            first_receive_ms: None,
            last_receive_ms: 0,
            redelivered: false,
        };
        self.progress.apply(&mut m);
        m
    }
}

/// Counters of a queue that recovery cannot always infer from the messages left.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct QueueCounters {
    /// The `seq` the next message gets.
    pub next_seq: u64,
    /// The last FIFO sequence number handed out.
    pub last_sequence: u128,
    pub last_purge_ms: Option<u64>,
    pub last_modified_s: u64,
}

/// What a snapshot's cut position covers.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
pub(crate) enum Scope {
    /// Which queues exist, deleted-name cooldowns, resets.
    Registry,
    Clock,
    /// One queue's settings, tags, messages and FIFO windows.
    Queue(u64),
    /// Message move tasks.
    MoveTasks,
}

/// A message move task as recorded: all of it, each time it changes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct TaskRecord {
    pub task_id: String,
    pub source_arn: String,
    pub destination_arn: Option<String>,
    pub max_per_second: Option<u32>,
    pub started_ms: u64,
    pub to_move: u64,
    pub moved: u64,
    /// 0 running, 1 cancelling, 2 cancelled, 3 completed, 4 failed.
    pub status: u8,
    /// Failed because a queue is gone.
    pub queue_gone: bool,
}

impl TaskRecord {
    /// This record brought up to date by `other`, a record of the same task logged after
    /// it. Records of a task are made by different threads (its steps count what arrived,
    /// requests cancel it), each whole; since a count only goes up and a status only moves
    /// towards its end (running, cancelling, then cancelled, completed or failed), the
    /// furthest of each wins whatever order the two reached the log in.
    pub(crate) fn merge(self, other: TaskRecord) -> TaskRecord {
        TaskRecord {
            moved: self.moved.max(other.moved),
            status: self.status.max(other.status),
            queue_gone: self.queue_gone || other.queue_gone,
            ..other
        }
    }
}

/// One recorded change; see the module documentation.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Change<'a> {
    /// A queue came into being (also how a snapshot starts each queue).
    QueueCreated {
        id: Cow<'a, QueueId>,
        uid: u64,
        created_ms: u64,
        settings: Cow<'a, QueueSettings>,
    },
    /// A queue went away; with `cooldown_from`, its name stays taken for the cooldown.
    QueueDeleted {
        uid: u64,
        cooldown_from: Option<u64>,
    },
    /// A deleted name's cooldown, as a snapshot keeps it.
    Cooldown {
        id: Cow<'a, QueueId>,
        at_ms: u64,
    },
    Settings {
        uid: u64,
        settings: Cow<'a, QueueSettings>,
        last_modified_s: u64,
    },
    Tags {
        uid: u64,
        tags: Cow<'a, BTreeMap<String, String>>,
    },
    Purged {
        uid: u64,
        at_ms: u64,
    },
    /// A message entered the queue under `key`.
    Put {
        uid: u64,
        key: MessageKey,
        message: MessageRecord<'a>,
    },
    /// A message's delivery state changed (received, visibility changed, redelivered).
    Progress {
        uid: u64,
        key: MessageKey,
        progress: Progress,
    },
    Removed {
        uid: u64,
        key: MessageKey,
    },
    /// A FIFO deduplication id was seen at `at_ms`.
    Dedup {
        uid: u64,
        dedup_key: Cow<'a, str>,
        message_id: [u8; 16],
        sequence_number: Cow<'a, str>,
        at_ms: u64,
    },
    /// A FIFO receive attempt id handed out these messages at `at_ms`.
    Attempt {
        uid: u64,
        attempt_id: Cow<'a, str>,
        messages: Vec<(MessageKey, u32)>,
        at_ms: u64,
    },
    Counters {
        uid: u64,
        counters: QueueCounters,
    },
    /// Queues (of one namespace, or all) were reset.
    Reset {
        namespace: Option<(Cow<'a, str>, Cow<'a, str>)>,
    },
    Clock {
        offset_ms: i64,
        frozen_at: Option<u64>,
    },
    /// A message move task's whole state (merged into what replay knows of the task, see
    /// [`TaskRecord::merge`]). Its count travels in the frame of the arrival it counts.
    MoveTask(TaskRecord),
    /// In a snapshot taken while traffic ran: the snapshot holds every change of `scope`
    /// logged before `lsn` and none after, so replay skips that scope's older log records.
    Cut {
        scope: Scope,
        lsn: u64,
    },
    /// Cluster mode: entries of the outbox `source` up to `seq` have arrived in queue `uid`
    /// (in the frame of their `Put`s; a snapshot keeps each outbox's mark). Last in the
    /// enum, so records written before it existed still decode.
    Arrived {
        uid: u64,
        source: Cow<'a, str>,
        seq: u64,
    },
}

impl Change<'_> {
    /// Which cut decides whether a logged change is already in the snapshot.
    pub(crate) fn scope(&self) -> Scope {
        match self {
            Change::QueueCreated { .. }
            | Change::QueueDeleted { .. }
            | Change::Cooldown { .. }
            | Change::Reset { .. } => Scope::Registry,
            Change::Clock { .. } | Change::Cut { .. } => Scope::Clock,
            Change::MoveTask(_) => Scope::MoveTasks,
            Change::Settings { uid, .. }
            | Change::Tags { uid, .. }
            | Change::Purged { uid, .. }
            | Change::Put { uid, .. }
            | Change::Progress { uid, .. }
            | Change::Removed { uid, .. }
            | Change::Dedup { uid, .. }
            | Change::Attempt { uid, .. }
            | Change::Counters { uid, .. }
            | Change::Arrived { uid, .. } => Scope::Queue(*uid),
        }
    }
}

/// Appends `change` to a frame being built.
pub(crate) fn encode(frame: &mut Vec<u8>, change: &Change<'_>) {
    // Writing into a Vec cannot fail; a change that cannot be encoded is a bug.
    let taken = std::mem::take(frame);
    *frame = postcard::to_extend(change, taken).expect("engine changes always encode");
}

/// The changes of one frame, in order.
pub(crate) fn decode(mut frame: &[u8]) -> Result<Vec<Change<'_>>, String> {
    let mut out = Vec::new();
    while !frame.is_empty() {
        let (c, rest) =
            postcard::take_from_bytes::<Change<'_>>(frame).map_err(|e| e.to_string())?;
        out.push(c);
        frame = rest;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_survives_encoding_whole() {
        let attrs = vec![(
            "a".to_string(),
            AttributeValue {
                data_type: "Binary".into(),
                data: crate::engine::attribute::AttributeData::Binary(vec![0, 255]),
            },
        )];
        let mut payload = Payload::new(
            uuid::Uuid::new_v4(),
            "héllo".into(),
            Digest16([7; 16]),
            Arc::from("AIDA"),
            Some(Arc::from("g")),
            PayloadExtra {
                attributes: attrs,
                md5_of_attributes: Some(Digest16([9; 16])),
                aws_trace_header: Some("Root=1".into()),
                deduplication_id: Some("d".into()),
                sequence_number: Some("123".into()),
                dead_letter_source_arn: Some("arn:aws:sqs:r:a:q".into()),
            },
        );
        payload.sent_ms = 42;
        let m = StoredMessage {
            payload: Arc::new(payload),
            delivery: Delivery::InFlight { until_ms: 99 },
            enqueued_ms: 41,
            receive_count: 3,
            first_receive_ms: NonZeroU64::new(50),
            last_receive_ms: 60,
            redelivered: true,
        };
        let key = MessageKey {
            sent_ms: 41,
            seq: 5,
        };
        let mut frame = Vec::new();
        encode(
            &mut frame,
            &Change::Put {
                uid: 1,
                key,
                message: MessageRecord::of(&m),
            },
        );
        encode(&mut frame, &Change::Removed { uid: 1, key });
        let changes = decode(&frame).unwrap();
        assert_eq!(changes.len(), 2);
        let Some(Change::Put { message, .. }) = changes.into_iter().next() else {
            panic!("a put first")
        };
        let back = message.into_stored();
        assert_eq!(format!("{:?}", back), format!("{:?}", m));
        assert!(decode(&frame[..frame.len() - 1]).is_err());
    }

    #[test]
    fn a_plain_messages_put_holds_about_its_body_and_the_record_overhead() {
        let body = "b".repeat(256);
        let payload = Payload::new(
            uuid::Uuid::new_v4(),
            body.clone(),
            Digest16([7; 16]),
            Arc::from("AIDAIT2UOQQY3AUEKVGXU"),
            None,
            PayloadExtra::default(),
        );
        let m = StoredMessage {
            payload: Arc::new(payload),
            delivery: Delivery::InFlight {
                until_ms: 1_800_000_000_000,
            },
            enqueued_ms: 1_800_000_000_000,
            receive_count: 3,
            first_receive_ms: NonZeroU64::new(1_800_000_000_000),
            last_receive_ms: 1_800_000_000_000,
            redelivered: false,
        };
        let mut frame = Vec::new();
        let key = MessageKey {
            sent_ms: 1_800_000_000_000,
            seq: 1 << 40,
        };
        let put = Change::Put {
            uid: 1 << 40,
            key,
            message: MessageRecord::of(&m),
        };
        encode(&mut frame, &put);
        // The compactor's estimate of a snapshot rests on this figure: close, not below.
        let overhead = (frame.len() - body.len()) as u64;
        assert!(
            (RECORD_OVERHEAD * 2 / 3..=RECORD_OVERHEAD).contains(&overhead),
            "{overhead}"
        );
    }
}
