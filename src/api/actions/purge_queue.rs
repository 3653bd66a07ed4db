//! PurgeQueue: drops every message; at most once a minute per queue.

use serde::Deserialize;

use crate::api::{engine_error, Context, Empty};
use crate::engine::EngineError;
use crate::error::{ErrorCode, SqsError};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct Input {
    pub queue_url: Option<String>,
}

pub(crate) fn handle(ctx: &Context, input: Input) -> Result<Empty, SqsError> {
    let queue = ctx.queue(input.queue_url.as_deref())?;
    let cooldown = ctx.engine.settings().purge_cooldown;
    queue
        .purge(ctx.engine.now_ms(), cooldown)
        .map_err(|e| match e {
            EngineError::PurgeInProgress => SqsError::new(
                ErrorCode::PurgeQueueInProgress,
                format!(
                    "Only one PurgeQueue operation on {} is allowed every 60 seconds.",
                    queue.name()
                ),
            ),
            other => engine_error(other),
        })?;
    Ok(Empty {})
}
