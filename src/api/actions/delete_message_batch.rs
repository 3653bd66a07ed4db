//! DeleteMessageBatch: each entry is deleted or fails on its own.

use serde::Deserialize;

use crate::api::batch::{check_entries, Entry, IdBatchOutput};
use crate::api::Context;
use crate::error::SqsError;

use super::delete_message::delete;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct BatchEntry {
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
pub(crate) struct Input {
    pub queue_url: Option<String>,
    pub entries: Option<Vec<BatchEntry>>,
}

pub(crate) fn handle(ctx: &Context, input: Input) -> Result<IdBatchOutput, SqsError> {
    let queue = ctx.queue(input.queue_url.as_deref())?;
    crate::api::admit(ctx, &queue, crate::engine::realism::Family::Delete)?;
    let entries = check_entries(&input.entries, "DeleteMessageBatchRequestEntry")?;
    let now = ctx.engine.now_ms();
    Ok(IdBatchOutput::collect(
        "DeleteMessageBatchResultEntry",
        entries,
        |e| delete(&queue, &e.receipt_handle, now),
    ))
}
