//! DeleteMessageBatch: each entry is deleted or fails on its own.

use serde::Deserialize;

use crate::api::batch::{check_entries, BatchResultErrorEntry, Entry, IdBatchOutput, IdEntry};
use crate::api::{receipt_error, required, Context};
use crate::error::SqsError;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct BatchEntry {
    pub id: Option<String>,
    pub receipt_handle: Option<String>,
}

impl Entry for BatchEntry {
    fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Input {
    pub queue_url: Option<String>,
    pub entries: Option<Vec<BatchEntry>>,
}

pub fn handle(ctx: &Context, input: Input) -> Result<IdBatchOutput, SqsError> {
    let queue = ctx.queue(input.queue_url.as_deref())?;
    let entries = check_entries(&input.entries, "DeleteMessageBatchRequestEntry")?;
    let now = ctx.engine.now_ms();
    let mut out = IdBatchOutput {
        successful: Vec::new(),
        failed: Vec::new(),
        entry_tag: "DeleteMessageBatchResultEntry",
    };
    for e in entries {
        let id = e.id().unwrap_or_default();
        let result = required(&e.receipt_handle, "ReceiptHandle").and_then(|h| {
            queue
                .delete_message(h, now)
                .map_err(|err| receipt_error(err, h, 0))
        });
        match result {
            Ok(()) => out.successful.push(IdEntry { id: id.to_string() }),
            Err(err) => out.failed.push(BatchResultErrorEntry::new(id, &err)),
        }
    }
    Ok(out)
}
