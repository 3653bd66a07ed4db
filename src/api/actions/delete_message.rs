//! DeleteMessage.

use serde::Deserialize;

use crate::api::{receipt_error, required, Context, Empty};
use crate::engine::Queue;
use crate::error::SqsError;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct Input {
    pub queue_url: Option<String>,
    pub receipt_handle: Option<String>,
}

/// Validates and applies one delete (shared with the batch action).
pub(crate) fn delete(queue: &Queue, handle: &Option<String>, now_ms: u64) -> Result<(), SqsError> {
    let handle = required(handle, "ReceiptHandle")?;
    queue
        .delete_message(handle, now_ms)
        .map_err(|e| receipt_error(e, handle, 0))
}

pub(crate) fn handle(ctx: &Context, input: Input) -> Result<Empty, SqsError> {
    let queue = ctx.queue(input.queue_url.as_deref())?;
    crate::api::admit(ctx, &queue, crate::engine::realism::Family::Delete)?;
    delete(&queue, &input.receipt_handle, ctx.engine.now_ms())?;
    Ok(Empty {})
}
