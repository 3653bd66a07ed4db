//! DeleteQueue: removes a queue with whatever it still holds.

use serde::Deserialize;

use crate::api::{Context, Empty};
use crate::error::SqsError;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct Input {
    pub queue_url: Option<String>,
}

pub(crate) fn handle(ctx: &Context, input: Input) -> Result<Empty, SqsError> {
    let queue = ctx.queue(input.queue_url.as_deref())?;
    if !ctx.engine.delete_queue(&queue.id) {
        return Err(SqsError::no_queue());
    }
    Ok(Empty {})
}
