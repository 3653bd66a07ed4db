//! Messages as the engine stores them: an immutable payload shared with receivers, plus the
//! mutable delivery state the queue keeps beside it.

use std::sync::Arc;

pub(crate) use super::attribute::{AttributeData, AttributeValue, Attributes};
use super::digest::{md5, md5_of_attributes, Digest16};
use super::md5_lanes::md5_many;
use super::memory::heap;

/// What a sender supplies; the engine adds ids and timestamps.
#[derive(Debug, Clone, Default)]
pub(crate) struct NewMessage {
    pub body: String,
    /// Sorted by name.
    pub attributes: Attributes,
    /// Sorted by name; only `AWSTraceHeader` is accepted by the API.
    pub system_attributes: Attributes,
    pub sender_id: std::sync::Arc<str>,
    pub aws_trace_header: Option<String>,
    /// Per-message delay in seconds; `None` takes the queue's DelaySeconds.
    pub delay_seconds: Option<u32>,
    pub group_id: Option<String>,
    pub deduplication_id: Option<String>,
}

impl NewMessage {
    /// Body plus message attribute bytes: what MaximumMessageSize limits.
    pub(crate) fn size(&self) -> usize {
        self.body.len()
            + self
                .attributes
                .iter()
                .map(|(n, v)| n.len() + v.size())
                .sum::<usize>()
    }
}

/// A message with everything computed that does not need the queue's lock: its id, its
/// digests and the payload itself.
#[derive(Debug)]
pub(crate) struct PreparedMessage {
    pub payload: Payload,
    pub md5_of_system_attributes: Option<Digest16>,
    /// Body plus message attribute bytes: what MaximumMessageSize limits.
    pub size: usize,
    /// Per-message delay in seconds; `None` takes the queue's DelaySeconds.
    pub delay_seconds: Option<u32>,
}

impl NewMessage {
    /// Computes the id and digests; the queue adds the send time and, on FIFO queues, the
    /// sequence number.
    pub(crate) fn prepare(self) -> PreparedMessage {
        let md5_of_body = md5(self.body.as_bytes());
        self.prepare_with(md5_of_body)
    }

    /// [`NewMessage::prepare`] for a batch, digesting the bodies side by side.
    pub(crate) fn prepare_all(msgs: Vec<NewMessage>) -> Vec<PreparedMessage> {
        let bodies: Vec<&[u8]> = msgs.iter().map(|m| m.body.as_bytes()).collect();
        let digests = md5_many(&bodies);
        msgs.into_iter()
            .zip(digests)
            .map(|(m, d)| m.prepare_with(d))
            .collect()
    }

    fn prepare_with(self, md5_of_body: Digest16) -> PreparedMessage {
        let size = self.size();
        let attrs = |a: &Attributes| md5_of_attributes(a.iter().map(|(n, v)| (n.as_str(), v)));
        let md5_of_system_attributes = attrs(&self.system_attributes);
        let extra = PayloadExtra {
            md5_of_attributes: attrs(&self.attributes),
            attributes: self.attributes,
            aws_trace_header: self.aws_trace_header,
            deduplication_id: self.deduplication_id,
            sequence_number: None,
            dead_letter_source_arn: None,
        };
        PreparedMessage {
            payload: Payload::new(
                uuid::Uuid::new_v4(),
                self.body,
                md5_of_body,
                self.sender_id,
                self.group_id.as_deref().map(Arc::from),
                extra,
            ),
            md5_of_system_attributes,
            size,
            delay_seconds: self.delay_seconds,
        }
    }
}

/// The rarely present parts of a payload, kept out of line so that a plain message (a body
/// and nothing else, the common case) stays small.
#[derive(Debug, Clone, Default)]
pub(crate) struct PayloadExtra {
    pub attributes: Attributes,
    /// MD5 over all message attributes, when there are any.
    pub md5_of_attributes: Option<Digest16>,
    pub aws_trace_header: Option<String>,
    pub deduplication_id: Option<String>,
    pub sequence_number: Option<String>,
    pub dead_letter_source_arn: Option<String>,
}

impl PayloadExtra {
    fn is_empty(&self) -> bool {
        self.attributes.is_empty()
            && self.md5_of_attributes.is_none()
            && self.aws_trace_header.is_none()
            && self.deduplication_id.is_none()
            && self.sequence_number.is_none()
            && self.dead_letter_source_arn.is_none()
    }
}

/// The parts of a message that never change after it was sent (a dead-letter move or a
/// redrive makes a new copy).
#[derive(Debug, Clone)]
pub(crate) struct Payload {
    pub message_id: uuid::Uuid,
    pub md5_of_body: Digest16,
    pub sent_ms: u64,
    pub body: Box<str>,
    pub sender_id: Arc<str>,
    pub group_id: Option<Arc<str>>,
    extra: Option<Box<PayloadExtra>>,
}

impl Payload {
    /// A payload; `extra` is stored only when it holds something.
    pub(crate) fn new(
        message_id: uuid::Uuid,
        body: String,
        md5_of_body: Digest16,
        sender_id: Arc<str>,
        group_id: Option<Arc<str>>,
        extra: PayloadExtra,
    ) -> Payload {
        Payload {
            message_id,
            md5_of_body,
            sent_ms: 0,
            body: body.into_boxed_str(),
            sender_id,
            group_id,
            extra: (!extra.is_empty()).then(|| Box::new(extra)),
        }
    }

    fn extra(&self) -> Option<&PayloadExtra> {
        self.extra.as_deref()
    }

    /// Message attributes, sorted by name.
    pub(crate) fn attributes(&self) -> &[(String, AttributeValue)] {
        self.extra().map_or(&[], |e| &e.attributes)
    }

    /// MD5 over all message attributes, when there are any.
    pub(crate) fn md5_of_attributes(&self) -> Option<Digest16> {
        self.extra().and_then(|e| e.md5_of_attributes)
    }

    pub(crate) fn aws_trace_header(&self) -> Option<&str> {
        self.extra().and_then(|e| e.aws_trace_header.as_deref())
    }

    pub(crate) fn deduplication_id(&self) -> Option<&str> {
        self.extra().and_then(|e| e.deduplication_id.as_deref())
    }

    pub(crate) fn sequence_number(&self) -> Option<&str> {
        self.extra().and_then(|e| e.sequence_number.as_deref())
    }

    pub(crate) fn dead_letter_source_arn(&self) -> Option<&str> {
        self.extra()
            .and_then(|e| e.dead_letter_source_arn.as_deref())
    }

    /// Sets the FIFO sequence number (assigned under the queue's lock, after the rest).
    pub(crate) fn set_sequence_number(&mut self, n: Option<String>) {
        self.edit_extra(|e| e.sequence_number = n);
    }

    /// A copy that names (or no longer names) the queue it was dead-lettered from.
    pub(crate) fn with_dead_letter_source(&self, arn: Option<String>) -> Payload {
        let mut p = self.clone();
        p.edit_extra(|e| e.dead_letter_source_arn = arn);
        p
    }

    fn edit_extra(&mut self, f: impl FnOnce(&mut PayloadExtra)) {
        let mut extra = self.extra.take().map(|b| *b).unwrap_or_default();
        f(&mut extra);
        self.extra = (!extra.is_empty()).then(|| Box::new(extra));
    }
}

/// Where a stored message is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// Waiting out its delay until the given time.
    Delayed { until_ms: u64 },
    /// Receivable now.
    Visible,
    /// Received and hidden until the given time.
    InFlight { until_ms: u64 },
}

/// A message in a queue.
#[derive(Debug)]
pub(crate) struct StoredMessage {
    pub payload: Arc<Payload>,
    pub delivery: Delivery,
    /// When it entered this queue: retention counts from here, and it is the `sent_ms` of
    /// its [`MessageKey`](super::ids::MessageKey).
    pub enqueued_ms: u64,
    pub receive_count: u32,
    /// Kept as non-zero so the field costs no more than a plain `u64`; a first receive at
    /// clock 0 is recorded as 1 ms.
    pub first_receive_ms: Option<std::num::NonZeroU64>,
    /// When the latest receive happened (the 12-hour visibility cap counts from here).
    pub last_receive_ms: u64,
    /// Whether at-least-once mode already redelivered it after a delete.
    pub redelivered: bool,
}

impl StoredMessage {
    /// The memory it holds, as `--max-stored-bytes` counts it: see [`Payload::footprint`].
    pub(crate) fn footprint(&self) -> u64 {
        self.payload.footprint()
    }
}

/// What [`Payload::footprint`] adds to a message's own allocations: the payload and its
/// slab slot, the indexes and timers that find it, its share of a chunk (measured: 283
/// bytes of RSS for a message with a 10-byte body, of which the body's allocation is 16).
pub(crate) const MESSAGE_OVERHEAD: u64 = 256;

/// What one message attribute costs beyond its three allocations (name, data type, value):
/// its slot in the attribute list.
const ATTRIBUTE_OVERHEAD: u64 = std::mem::size_of::<(String, AttributeValue)>() as u64;

/// A message attribute's heap cost.
fn attribute_footprint(name: &str, value: &AttributeValue) -> u64 {
    let data = match &value.data {
        AttributeData::String(s) => s.len(),
        AttributeData::Binary(b) => b.len(),
    };
    ATTRIBUTE_OVERHEAD + heap(name.len()) + heap(value.data_type.len()) + heap(data)
}

/// What a message's out-of-line parts cost: the box itself and its strings.
fn extra_footprint<'a>(
    attributes: impl Iterator<Item = (&'a str, &'a AttributeValue)>,
    strings: &[Option<&str>],
) -> u64 {
    let attributes: u64 = attributes.map(|(n, v)| attribute_footprint(n, v)).sum();
    let strings: u64 = strings.iter().flatten().map(|s| heap(s.len())).sum();
    std::mem::size_of::<PayloadExtra>() as u64 + attributes + strings
}

impl Payload {
    /// The memory this payload holds: body, attributes with their real allocation costs,
    /// its out-of-line ids, and [`MESSAGE_OVERHEAD`]. (A FIFO group's own cost is the
    /// group's, counted by the queue's FIFO index.)
    pub(crate) fn footprint(&self) -> u64 {
        let extra = self.extra().map_or(0, |e| {
            extra_footprint(
                e.attributes.iter().map(|(n, v)| (n.as_str(), v)),
                &[
                    e.aws_trace_header.as_deref(),
                    e.deduplication_id.as_deref(),
                    e.sequence_number.as_deref(),
                    e.dead_letter_source_arn.as_deref(),
                ],
            )
        });
        let group = self.group_id.as_ref().map_or(0, |g| heap(g.len() + 16));
        heap(self.body.len()) + extra + group + MESSAGE_OVERHEAD
    }
}

impl NewMessage {
    /// What storing it will hold, before it is stored: its payload's
    /// [`Payload::footprint`] (a FIFO sequence number counted at its longest), and for a
    /// FIFO message the most its group and deduplication memory can add.
    pub(crate) fn footprint(&self) -> u64 {
        let has_extra = !self.attributes.is_empty()
            || self.aws_trace_header.is_some()
            || self.deduplication_id.is_some()
            || self.group_id.is_some();
        let extra = if has_extra {
            extra_footprint(
                self.attributes.iter().map(|(n, v)| (n.as_str(), v)),
                &[
                    self.aws_trace_header.as_deref(),
                    self.deduplication_id
                        .as_deref()
                        .or(self.group_id.as_ref().map(|_| DIGEST_HEX)),
                    self.group_id.as_ref().map(|_| SEQUENCE_NUMBER_TEXT),
                ],
            )
        } else {
            0
        };
        let fifo = self.group_id.as_deref().map_or(0, |group| {
            heap(group.len() + 16)
                + super::fifo::group_footprint(group)
                + super::fifo::dedup_footprint(
                    self.deduplication_id.as_deref().unwrap_or(DIGEST_HEX),
                )
        });
        heap(self.body.len()) + extra + MESSAGE_OVERHEAD + fifo
    }
}

/// A FIFO sequence number at its longest (20 digits and more), for estimates.
const SEQUENCE_NUMBER_TEXT: &str = "000000000000000000000000000000000000000";

/// A content-based deduplication id (a SHA-256 in hex), for estimates.
const DIGEST_HEX: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// A message as one receive hands it out.
#[derive(Debug, Clone)]
pub(crate) struct ReceivedMessage {
    pub payload: Arc<Payload>,
    pub receipt_handle: String,
    pub receive_count: u32,
    pub first_receive_ms: u64,
}

/// What a successful send reports.
#[derive(Debug, Clone)]
pub(crate) struct SendReceipt {
    pub message_id: uuid::Uuid,
    pub md5_of_body: Digest16,
    pub md5_of_attributes: Option<Digest16>,
    pub md5_of_system_attributes: Option<Digest16>,
    pub sequence_number: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every queued message pays for these; keep them from growing unnoticed.
    #[test]
    fn stored_messages_stay_small() {
        assert!(std::mem::size_of::<Payload>() <= 96);
        assert!(std::mem::size_of::<StoredMessage>() <= 56);
        assert_eq!(
            std::mem::size_of::<Option<StoredMessage>>(),
            std::mem::size_of::<StoredMessage>()
        );
    }

    #[test]
    fn empty_extras_are_not_stored() {
        let mut p = Payload::new(
            uuid::Uuid::nil(),
            "b".into(),
            Digest16([0; 16]),
            Arc::from("s"),
            None,
            PayloadExtra::default(),
        );
        assert!(p.extra.is_none());
        p.set_sequence_number(Some("1".into()));
        assert_eq!(p.sequence_number(), Some("1"));
        let moved = p.with_dead_letter_source(Some("arn".into()));
        assert_eq!(moved.dead_letter_source_arn(), Some("arn"));
        assert_eq!(moved.sequence_number(), Some("1"));
        let back = moved.with_dead_letter_source(None);
        assert_eq!(back.dead_letter_source_arn(), None);
        p.set_sequence_number(None);
        assert!(p.extra.is_none());
    }
}
