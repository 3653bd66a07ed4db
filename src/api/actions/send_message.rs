//! SendMessage, and the message checks SendMessageBatch entries share.

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::api::message_attributes::{check_body, convert, MessageAttributeValueInput};
use crate::api::{engine_error, Context};
use crate::engine::digest::Digest16;
use crate::engine::{NewMessage, SendReceipt};
use crate::error::SqsError;
use crate::protocol::{AsStr, Member, Shape, XmlResult, XmlWriter};

/// Longest per-message delay.
pub(crate) const MAX_DELAY_SECONDS: i64 = 900;

/// SendMessage's input; also the shape of one SendMessageBatch entry (which adds `Id`).
#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct MessageInput {
    pub queue_url: Option<String>,
    pub id: Option<String>,
    pub message_body: Option<String>,
    pub delay_seconds: Option<i64>,
    pub message_attributes: Option<HashMap<String, MessageAttributeValueInput>>,
    pub message_system_attributes: Option<HashMap<String, MessageAttributeValueInput>>,
    pub message_deduplication_id: Option<String>,
    pub message_group_id: Option<String>,
}

impl crate::api::batch::Entry for MessageInput {
    fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }
}

impl MessageInput {
    /// Body and attribute bytes as sent, for the batch-wide size limit.
    pub(crate) fn wire_size(&self) -> usize {
        let attrs = self.message_attributes.iter().flatten().map(|(n, v)| {
            let value = match (&v.string_value, &v.binary_value) {
                (Some(s), _) => s.len(),
                (None, Some(b)) => b.trim_end_matches('=').len() * 3 / 4,
                _ => 0,
            };
            n.len() + v.data_type.as_deref().map_or(0, str::len) + value
        });
        self.message_body.as_deref().map_or(0, str::len) + attrs.sum::<usize>()
    }
}

/// Checks a MessageGroupId or MessageDeduplicationId.
pub(crate) fn check_fifo_id(value: &str, parameter: &str) -> Result<(), SqsError> {
    let ok = !value.is_empty() && value.len() <= 128 && value.bytes().all(|b| b.is_ascii_graphic());
    if ok {
        Ok(())
    } else {
        Err(SqsError::invalid_value(
            value,
            parameter,
            &format!(
                "{parameter} can only include alphanumeric and punctuation characters. 1 to 128 in length."
            ),
        ))
    }
}

/// What FIFO sends need to know about the queue.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QueueKind {
    pub fifo: bool,
    pub content_based_deduplication: bool,
}

impl QueueKind {
    /// The kind of `queue`.
    pub(crate) fn of(queue: &crate::engine::Queue) -> QueueKind {
        queue.with_settings(|s| QueueKind {
            fifo: s.fifo_queue,
            content_based_deduplication: s.content_based_deduplication,
        })
    }
}

/// The FIFO send errors that fail a whole batch rather than one entry.
pub(crate) fn check_fifo_ids(kind: QueueKind, input: &MessageInput) -> Result<(), SqsError> {
    if !kind.fifo {
        return Ok(());
    }
    if input.message_group_id.is_none() {
        return Err(SqsError::missing("MessageGroupId"));
    }
    if input.message_deduplication_id.is_none() && !kind.content_based_deduplication {
        return Err(SqsError::invalid(
            "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly",
        ));
    }
    Ok(())
}

/// Validates one message and turns it into what the engine stores.
pub(crate) fn build_message(
    ctx: &Context,
    kind: QueueKind,
    mut input: MessageInput,
) -> Result<NewMessage, SqsError> {
    let body = match input.message_body.take() {
        Some(b) if !b.is_empty() => b,
        _ => return Err(SqsError::missing("MessageBody")),
    };
    let fifo = kind.fifo;
    let delay_seconds = match input.delay_seconds {
        None => None,
        // On FIFO queues only the queue's delay applies; an explicit 0 is accepted.
        Some(0) if fifo => None,
        Some(d) if fifo => {
            return Err(SqsError::invalid_value(
                d,
                "DelaySeconds",
                "The request include parameter that is not valid for this queue type.",
            ))
        }
        Some(d) if (0..=MAX_DELAY_SECONDS).contains(&d) => Some(d as u32),
        Some(d) => {
            return Err(SqsError::invalid_value(
                d,
                "DelaySeconds",
                "DelaySeconds must be >= 0 and <= 900.",
            ))
        }
    };
    check_fifo_ids(kind, &input)?;
    check_body(&body)?;
    let attributes = convert(input.message_attributes, false)?;
    let system_attributes = convert(input.message_system_attributes, true)?;
    if let Some(g) = &input.message_group_id {
        check_fifo_id(g, "MessageGroupId")?;
    }
    if let Some(d) = &input.message_deduplication_id {
        if !fifo {
            return Err(SqsError::invalid_value(
                d,
                "MessageDeduplicationId",
                "The request includes a parameter that is not valid for this queue type.",
            ));
        }
        check_fifo_id(d, "MessageDeduplicationId")?;
    }
    let deduplication_id = match input.message_deduplication_id {
        None if fifo => Some(content_hash(&body)),
        other => other,
    };
    let aws_trace_header = system_attributes
        .iter()
        .find(|(n, _)| n == "AWSTraceHeader")
        .and_then(|(_, v)| match &v.data {
            crate::engine::AttributeData::String(s) => Some(s.clone()),
            crate::engine::AttributeData::Binary(_) => None,
        })
        .or_else(|| ctx.trace_header.clone());
    Ok(NewMessage {
        body,
        attributes,
        system_attributes,
        sender_id: Arc::clone(&ctx.sender_id),
        aws_trace_header,
        delay_seconds,
        group_id: input.message_group_id,
        deduplication_id,
    })
}

/// Content-based deduplication id: lowercase hex SHA-256 of the body.
fn content_hash(body: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(body.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What SendMessage returns (and each SendMessageBatchResultEntry besides its Id).
#[derive(Debug)]
pub(crate) struct Output {
    pub md5_of_message_body: Digest16,
    pub md5_of_message_attributes: Option<Digest16>,
    pub md5_of_message_system_attributes: Option<Digest16>,
    pub message_id: uuid::Uuid,
    pub sequence_number: Option<String>,
}

impl Serialize for Output {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("MD5OfMessageBody", &AsStr(self.md5_of_message_body))?;
        if let Some(v) = self.md5_of_message_attributes {
            m.serialize_entry("MD5OfMessageAttributes", &AsStr(v))?;
        }
        if let Some(v) = self.md5_of_message_system_attributes {
            m.serialize_entry("MD5OfMessageSystemAttributes", &AsStr(v))?;
        }
        m.serialize_entry("MessageId", &AsStr(self.message_id))?;
        if let Some(v) = &self.sequence_number {
            m.serialize_entry("SequenceNumber", v)?;
        }
        m.end()
    }
}

impl From<SendReceipt> for Output {
    fn from(r: SendReceipt) -> Output {
        Output {
            md5_of_message_body: r.md5_of_body,
            md5_of_message_attributes: r.md5_of_attributes,
            md5_of_message_system_attributes: r.md5_of_system_attributes,
            message_id: r.message_id,
            sequence_number: r.sequence_number,
        }
    }
}

impl Output {
    /// The result members, shared with SendMessageBatchResultEntry.
    pub(crate) fn write_members(&self, w: &mut XmlWriter) {
        let mut id = uuid::Uuid::encode_buffer();
        w.elem_raw(
            "MessageId",
            self.message_id.hyphenated().encode_lower(&mut id),
        );
        let mut hex = [0u8; 32];
        w.elem_raw(
            "MD5OfMessageBody",
            self.md5_of_message_body.encode(&mut hex),
        );
        if let Some(v) = &self.md5_of_message_attributes {
            w.elem_raw("MD5OfMessageAttributes", v.encode(&mut hex));
        }
        if let Some(v) = &self.md5_of_message_system_attributes {
            w.elem_raw("MD5OfMessageSystemAttributes", v.encode(&mut hex));
        }
        w.opt("SequenceNumber", self.sequence_number.as_deref());
    }
}

impl XmlResult for Output {
    fn write_xml(&self, w: &mut XmlWriter) {
        self.write_members(w);
    }
    const SHAPE: Option<&'static Shape> = Some(&SENT);
}

/// A sent message's members, as captured from AWS (also a SendMessageBatch entry's, with
/// its `Id`).
pub(crate) static SENT: Shape = Shape::Struct(&SENT_MEMBERS);
const SENT_MEMBERS: [Member; 5] = [
    Member::scalar("MD5OfMessageAttributes"),
    Member::scalar("MD5OfMessageBody"),
    Member::scalar("MD5OfMessageSystemAttributes"),
    Member::scalar("MessageId"),
    Member::scalar("SequenceNumber"),
];
/// A SendMessageBatch success entry: the sent members and its `Id`.
pub(crate) static SENT_ENTRY: Shape = Shape::Struct(&{
    let [a, b, c, d, e] = SENT_MEMBERS;
    [Member::scalar("Id"), a, b, c, d, e]
});

pub(crate) fn handle(ctx: &Context, mut input: MessageInput) -> Result<Output, SqsError> {
    let queue = ctx.queue(input.queue_url.take().as_deref())?;
    crate::api::admit(ctx, &queue, crate::engine::realism::Family::Send)?;
    let msg = build_message(ctx, QueueKind::of(&queue), input)?;
    ctx.engine.admit_stored([&msg]).map_err(engine_error)?;
    let receipt = queue.send(msg, ctx.engine.now_ms()).map_err(engine_error)?;
    Ok(receipt.into())
}
