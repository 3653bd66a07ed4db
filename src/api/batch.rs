//! What the three batch actions share: whole-request entry checks and the `Failed` entries.

use serde::Serialize;

use crate::error::{ErrorCode, SqsError};
use crate::protocol::{Empty, Member, Shape, XmlWriter};

/// Most entries a batch may hold.
pub(crate) const MAX_ENTRIES: usize = 10;
/// Most payload bytes a SendMessageBatch may carry in total.
pub(crate) const MAX_BATCH_BYTES: usize = 1_048_576;

/// An entry of a batch request.
pub(crate) trait Entry {
    fn id(&self) -> Option<&str>;
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 80
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Checks entry count, ids and their distinctness; returns the entries.
/// `entry_name` is e.g. `SendMessageBatchRequestEntry`.
pub(crate) fn check_entries<'a, E: Entry>(
    entries: &'a Option<Vec<E>>,
    entry_name: &str,
) -> Result<&'a [E], SqsError> {
    let entries = entries.as_deref().unwrap_or_default();
    if entries.is_empty() {
        return Err(SqsError::new(
            ErrorCode::EmptyBatchRequest,
            format!("There should be at least one {entry_name} in the request."),
        ));
    }
    if entries.len() > MAX_ENTRIES {
        return Err(SqsError::new(
            ErrorCode::TooManyEntriesInBatchRequest,
            format!(
                "Maximum number of entries per request are {MAX_ENTRIES}. You have sent {}.",
                entries.len()
            ),
        ));
    }
    // At most ten ids: comparing each with the ones before beats hashing them.
    for (i, e) in entries.iter().enumerate() {
        let id = e.id().unwrap_or_default();
        if !valid_id(id) {
            return Err(SqsError::new(
                ErrorCode::InvalidBatchEntryId,
                "A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.",
            ));
        }
        if entries[..i]
            .iter()
            .any(|p| p.id().unwrap_or_default() == id)
        {
            return Err(SqsError::new(
                ErrorCode::BatchEntryIdsNotDistinct,
                format!("Id {id} repeated."),
            ));
        }
    }
    Ok(entries)
}

/// One failed entry of a batch.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct BatchResultErrorEntry {
    pub id: String,
    pub sender_fault: bool,
    pub code: &'static str,
    pub message: String,
}

impl BatchResultErrorEntry {
    /// The failure of entry `id` with `err`.
    pub(crate) fn new(id: &str, err: &SqsError) -> BatchResultErrorEntry {
        BatchResultErrorEntry {
            id: id.to_string(),
            sender_fault: err.code.fault() == "Sender",
            code: err.code.query_code(),
            message: err.message.to_string(),
        }
    }
}

/// `<BatchResultErrorEntry>` elements.
pub(crate) fn write_failed(w: &mut XmlWriter, failed: &[BatchResultErrorEntry]) {
    for f in failed {
        w.open("BatchResultErrorEntry");
        w.elem("Id", &f.id);
        w.elem("SenderFault", if f.sender_fault { "true" } else { "false" });
        w.elem("Code", f.code);
        w.elem("Message", &f.message);
        w.close("BatchResultErrorEntry");
    }
}

/// An `{Id}` success entry (DeleteMessageBatch, ChangeMessageVisibilityBatch).
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct IdEntry {
    pub id: String,
}

/// The output of DeleteMessageBatch and ChangeMessageVisibilityBatch.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct IdBatchOutput {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub successful: Vec<IdEntry>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<BatchResultErrorEntry>,
    /// e.g. `DeleteMessageBatchResultEntry`.
    #[serde(skip)]
    pub entry_tag: &'static str,
}

impl IdBatchOutput {
    /// Applies `apply` to each entry; each succeeds or fails on its own.
    pub(crate) fn collect<E: Entry>(
        entry_tag: &'static str,
        entries: &[E],
        mut apply: impl FnMut(&E) -> Result<(), SqsError>,
    ) -> IdBatchOutput {
        let mut out = IdBatchOutput {
            successful: Vec::new(),
            failed: Vec::new(),
            entry_tag,
        };
        for e in entries {
            let id = e.id().unwrap_or_default();
            match apply(e) {
                Ok(()) => out.successful.push(IdEntry { id: id.to_string() }),
                Err(err) => out.failed.push(BatchResultErrorEntry::new(id, &err)),
            }
        }
        out
    }
}

impl crate::protocol::XmlResult for IdBatchOutput {
    fn write_xml(&self, w: &mut XmlWriter) {
        for s in &self.successful {
            w.open(self.entry_tag);
            w.elem("Id", &s.id);
            w.close(self.entry_tag);
        }
        write_failed(w, &self.failed);
    }
    const SHAPE: Option<&'static Shape> = Some(&Shape::Struct(&[
        FAILED,
        Member::new(
            "Successful",
            Shape::List(&Shape::Struct(&[Member::scalar("Id")]), Empty::List),
        ),
    ]));
}

/// A batch result's `Failed` list. Unconfirmed (no capture of a batch reply in this
/// rendering): the public member names, `SenderFault` a boolean, `[]` when empty.
pub(crate) const FAILED: Member = Member::new(
    "Failed",
    Shape::List(
        &Shape::Struct(&[
            Member::scalar("Code"),
            Member::scalar("Id"),
            Member::scalar("Message"),
            Member::scalar("SenderFault"),
        ]),
        Empty::List,
    ),
);
