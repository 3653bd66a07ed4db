//! ChangeMessageVisibilityBatch: each entry changes or fails on its own.

use serde::Deserialize;

use crate::api::batch::{check_entries, Entry, IdBatchOutput};
use crate::api::Context;
use crate::error::SqsError;

use super::change_message_visibility::change;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct BatchEntry {
    pub id: Option<String>,
    pub receipt_handle: Option<String>,
    pub visibility_timeout: Option<i64>,
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
    let entries = check_entries(&input.entries, "ChangeMessageVisibilityBatchRequestEntry")?;
    let now = ctx.engine.now_ms();
    Ok(IdBatchOutput::collect(
        "ChangeMessageVisibilityBatchResultEntry",
        entries,
        |e| change(&queue, &e.receipt_handle, e.visibility_timeout, now),
    ))
}
