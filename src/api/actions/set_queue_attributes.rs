//! SetQueueAttributes: validates all attributes first, then applies them at once.

use std::collections::HashMap;

use serde::Deserialize;

use crate::api::attributes::apply;
use crate::api::{engine_error, Context, Empty};
use crate::error::SqsError;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct Input {
    pub queue_url: Option<String>,
    pub attributes: Option<HashMap<String, String>>,
}

pub(crate) async fn handle(ctx: &Context, input: Input) -> Result<Empty, SqsError> {
    let queue = ctx.queue(input.queue_url.as_deref())?;
    let attrs = input
        .attributes
        .ok_or_else(|| SqsError::missing("Attributes"))?;
    if attrs.is_empty() {
        return Ok(Empty {});
    }
    // Validate first, on a copy: checking the dead-letter target reads another queue, and
    // no queue lock may be held while taking another one.
    let current = queue.settings();
    let mut candidate = current.clone();
    let fifo = candidate.fifo_queue;
    apply(&mut candidate, &attrs, fifo)?;
    // A larger Policy or redrive document is memory too (--max-stored-bytes).
    let growth = crate::engine::queue_footprint(&candidate, [])
        .saturating_sub(crate::engine::queue_footprint(&current, []));
    ctx.engine.admit_bytes(growth).map_err(engine_error)?;
    if attrs.contains_key("RedrivePolicy") {
        ctx.check_redrive(&queue.id, &candidate).await?;
    }
    // Then apply the already-validated attributes to the current settings under the lock, so
    // a concurrent change to other attributes is not lost.
    queue.update_settings(ctx.engine.now_ms(), |settings| {
        apply(settings, &attrs, fifo)
    })?;
    Ok(Empty {})
}
