//! DeleteMessage.

use serde::Deserialize;

use crate::api::{receipt_error, required, Context, Empty};
use crate::error::SqsError;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Input {
    pub queue_url: Option<String>,
    pub receipt_handle: Option<String>,
}

pub fn handle(ctx: &Context, input: Input) -> Result<Empty, SqsError> {
    let queue = ctx.queue(input.queue_url.as_deref())?;
    let handle = required(&input.receipt_handle, "ReceiptHandle")?;
    queue
        .delete_message(handle, ctx.engine.now_ms())
        .map_err(|e| receipt_error(e, handle, 0))?;
    Ok(Empty {})
}
