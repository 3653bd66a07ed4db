//! Messages as the engine stores them: an immutable payload shared with receivers, plus the
//! mutable delivery state the queue keeps beside it.

use std::sync::Arc;

use super::digest::Digest16;

/// The value of one message attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttributeData {
    /// `String` and `Number` types (and their custom subtypes).
    String(String),
    /// `Binary` types: raw bytes.
    Binary(Vec<u8>),
}

/// One message attribute: its full data type (e.g. `Number.int`) and value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttributeValue {
    pub data_type: String,
    pub data: AttributeData,
}

impl AttributeValue {
    /// Bytes this attribute counts towards the message size (data type plus value).
    pub fn size(&self) -> usize {
        self.data_type.len()
            + match &self.data {
                AttributeData::String(s) => s.len(),
                AttributeData::Binary(b) => b.len(),
            }
    }
}

/// Named attributes, sorted by name bytes (the order the MD5 digest needs).
pub type Attributes = Vec<(String, AttributeValue)>;

/// What a sender supplies; the engine adds ids and timestamps.
#[derive(Debug, Clone, Default)]
pub struct NewMessage {
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
    pub fn size(&self) -> usize {
        self.body.len()
            + self
                .attributes
                .iter()
                .map(|(n, v)| n.len() + v.size())
                .sum::<usize>()
    }
}

/// The parts of a message that never change after it was sent (a dead-letter move or a
/// redrive makes a new copy).
#[derive(Debug, Clone)]
pub struct Payload {
    pub message_id: uuid::Uuid,
    pub body: String,
    pub md5_of_body: Digest16,
    pub attributes: Attributes,
    /// MD5 over all message attributes, when there are any.
    pub md5_of_attributes: Option<Digest16>,
    pub sender_id: std::sync::Arc<str>,
    pub aws_trace_header: Option<String>,
    pub sent_ms: u64,
    pub group_id: Option<std::sync::Arc<str>>,
    pub deduplication_id: Option<String>,
    pub sequence_number: Option<String>,
    pub dead_letter_source_arn: Option<String>,
}

/// Where a stored message is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Waiting out its delay until the given time.
    Delayed { until_ms: u64 },
    /// Receivable now.
    Visible,
    /// Received and hidden until the given time.
    InFlight { until_ms: u64 },
}

/// A message in a queue.
#[derive(Debug)]
pub struct StoredMessage {
    pub payload: Arc<Payload>,
    pub delivery: Delivery,
    pub receive_count: u32,
    pub first_receive_ms: Option<u64>,
    /// When the latest receive happened (the 12-hour visibility cap counts from here).
    pub last_receive_ms: u64,
    /// Whether at-least-once mode already redelivered it after a delete.
    pub redelivered: bool,
}

/// A message as one receive hands it out.
#[derive(Debug, Clone)]
pub struct ReceivedMessage {
    pub payload: Arc<Payload>,
    pub receipt_handle: String,
    pub receive_count: u32,
    pub first_receive_ms: u64,
}

/// What a successful send reports.
#[derive(Debug, Clone)]
pub struct SendReceipt {
    pub message_id: uuid::Uuid,
    pub md5_of_body: Digest16,
    pub md5_of_attributes: Option<Digest16>,
    pub md5_of_system_attributes: Option<Digest16>,
    pub sequence_number: Option<String>,
}
