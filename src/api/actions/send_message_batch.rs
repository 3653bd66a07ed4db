//! SendMessageBatch: whole-request checks first, then each entry succeeds or fails alone.

use serde::Deserialize;

use crate::api::batch::{
    check_entries, write_failed, BatchResultErrorEntry, FAILED, MAX_BATCH_BYTES,
};
use crate::api::{engine_error, Context};
use crate::engine::EngineError;
use crate::error::{ErrorCode, SqsError};
use crate::protocol::{json_str, Empty, Member, Reply, Shape, XmlWriter};

use super::send_message::{
    build_message, check_fifo_ids, MessageInput, Output as SendOutput, QueueKind, SENT_ENTRY,
};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct Input {
    pub queue_url: Option<String>,
    pub entries: Option<Vec<MessageInput>>,
}

/// One SendMessageBatchResultEntry: the Id and what SendMessage would have returned.
#[derive(Debug)]
pub(crate) struct ResultEntry {
    pub id: String,
    pub sent: SendOutput,
}

/// The reply. Written by hand rather than through serde: it is the hottest reply there is,
/// and every string in a successful entry is an id, a digest or a number.
#[derive(Debug)]
pub(crate) struct Output {
    pub successful: Vec<ResultEntry>,
    pub failed: Vec<BatchResultErrorEntry>,
}

impl Reply for Output {
    fn write_json(&self, out: &mut Vec<u8>) {
        out.push(b'{');
        if !self.successful.is_empty() {
            out.reserve(self.successful.len() * 192);
            out.extend_from_slice(b"\"Successful\":[");
            for (i, e) in self.successful.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(b"{\"Id\":");
                json_str(out, &e.id);
                let o = &e.sent;
                let mut hex = [0u8; 32];
                raw_field(
                    out,
                    "MD5OfMessageBody",
                    o.md5_of_message_body.encode(&mut hex),
                );
                if let Some(d) = &o.md5_of_message_attributes {
                    raw_field(out, "MD5OfMessageAttributes", d.encode(&mut hex));
                }
                if let Some(d) = &o.md5_of_message_system_attributes {
                    raw_field(out, "MD5OfMessageSystemAttributes", d.encode(&mut hex));
                }
                let mut id = uuid::Uuid::encode_buffer();
                raw_field(
                    out,
                    "MessageId",
                    o.message_id.hyphenated().encode_lower(&mut id),
                );
                if let Some(n) = &o.sequence_number {
                    // Sequence numbers are digits only.
                    raw_field(out, "SequenceNumber", n);
                }
                out.push(b'}');
            }
            out.push(b']');
        }
        if !self.failed.is_empty() {
            if !self.successful.is_empty() {
                out.push(b',');
            }
            out.extend_from_slice(b"\"Failed\":");
            // Serializing plain structs into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut *out, &self.failed);
        }
        out.push(b'}');
    }

    fn write_xml(&self, w: &mut XmlWriter) {
        for e in &self.successful {
            w.open("SendMessageBatchResultEntry");
            w.elem("Id", &e.id);
            e.sent.write_members(w);
            w.close("SendMessageBatchResultEntry");
        }
        write_failed(w, &self.failed);
    }

    fn shape(&self) -> Option<&'static Shape> {
        Some(&RESULT)
    }
}

static RESULT: Shape = Shape::Struct(&[
    FAILED,
    Member::new("Successful", Shape::List(&SENT_ENTRY, Empty::List)),
]);

/// `,"name":"value"` for values that never need escaping (digests, ids, digits).
fn raw_field(out: &mut Vec<u8>, name: &str, value: &str) {
    out.extend_from_slice(b",\"");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\":\"");
    out.extend_from_slice(value.as_bytes());
    out.push(b'"');
}

pub(crate) fn handle(ctx: &Context, input: Input) -> Result<Output, SqsError> {
    let queue = ctx.queue(input.queue_url.as_deref())?;
    crate::api::admit(ctx, &queue, crate::engine::realism::Family::Send)?;
    check_entries(&input.entries, "SendMessageBatchRequestEntry")?;
    let entries = input.entries.unwrap_or_default();
    let total: usize = entries.iter().map(MessageInput::wire_size).sum();
    if total > MAX_BATCH_BYTES {
        return Err(SqsError::new(
            ErrorCode::BatchRequestTooLong,
            format!(
                "Batch requests cannot be longer than {MAX_BATCH_BYTES} bytes. You have sent {total} bytes."
            ),
        ));
    }
    let kind = QueueKind::of(&queue);
    for e in &entries {
        // A missing group or deduplication id fails the whole FIFO batch, and as
        // InvalidParameterValue even where a single send says MissingParameter.
        check_fifo_ids(kind, e).map_err(|err| SqsError::invalid(err.message))?;
    }
    let mut failed = Vec::new();
    let mut ids = Vec::with_capacity(entries.len());
    let mut messages = Vec::with_capacity(entries.len());
    for mut entry in entries {
        let id = entry.id.take().unwrap_or_default();
        match build_message(ctx, kind, entry) {
            Ok(m) => {
                ids.push(id);
                messages.push(m);
            }
            Err(e) => failed.push(BatchResultErrorEntry::new(&id, &e)),
        }
    }
    ctx.engine
        .admit_stored(&messages)
        .map_err(crate::api::engine_error)?;
    let results = queue.send_batch(messages, ctx.engine.now_ms());
    let mut successful = Vec::with_capacity(results.len());
    for (id, result) in ids.into_iter().zip(results) {
        match result {
            Ok(r) => successful.push(ResultEntry { id, sent: r.into() }),
            Err(EngineError::MessageTooLong { limit }) => {
                // AWS words this one differently inside a batch.
                let e = SqsError::invalid(format!(
                    "One or more parameters cannot be validated. Reason: Message must be shorter than {limit} bytes."
                ));
                failed.push(BatchResultErrorEntry::new(&id, &e));
            }
            Err(e) => failed.push(BatchResultErrorEntry::new(&id, &engine_error(e))),
        }
    }
    Ok(Output { successful, failed })
}
