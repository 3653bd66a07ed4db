//! ChangeMessageVisibility: a new timeout for a received message, counted from now and
//! capped at 12 hours after the receive that issued the handle.

use serde::Deserialize;

use crate::api::{check_range, receipt_error, required, Context, Empty};
use crate::engine::settings::MAX_VISIBILITY_TIMEOUT_S;
use crate::engine::Queue;
use crate::error::SqsError;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct Input {
    pub queue_url: Option<String>,
    pub receipt_handle: Option<String>,
    pub visibility_timeout: Option<i64>,
}

/// Validates and applies one visibility change (shared with the batch action).
pub(crate) fn change(
    queue: &Queue,
    handle: &Option<String>,
    timeout: Option<i64>,
    now_ms: u64,
) -> Result<(), SqsError> {
    let handle = required(handle, "ReceiptHandle")?;
    let timeout = timeout.ok_or_else(|| SqsError::missing("VisibilityTimeout"))?;
    check_range(
        Some(timeout),
        "VisibilityTimeout",
        0,
        MAX_VISIBILITY_TIMEOUT_S as i64,
        "VisibilityTimeout must be an integer between 0 and 43200",
    )?;
    queue
        .change_visibility(handle, timeout as u32, now_ms)
        .map_err(|e| receipt_error(e, handle, timeout))
}

pub(crate) fn handle(ctx: &Context, input: Input) -> Result<Empty, SqsError> {
    let queue = ctx.queue(input.queue_url.as_deref())?;
    change(
        &queue,
        &input.receipt_handle,
        input.visibility_timeout,
        ctx.engine.now_ms(),
    )?;
    Ok(Empty {})
}
