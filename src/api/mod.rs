//! The SQS actions: each handler takes a typed input, validates it, calls the engine and
//! builds a typed output. This is the only layer that knows both the wire names and the
//! engine; it never touches HTTP.

pub(crate) mod access;
pub(crate) mod actions;
pub(crate) mod attributes;
pub(crate) mod batch;
mod condition;
pub(crate) mod context;
pub(crate) mod message_attributes;
pub(crate) mod queue_url;
pub(crate) mod target;

use serde::Serialize;

use crate::engine::journal::{self, Pending};
use crate::engine::EngineError;
use crate::error::{ErrorCode, SqsError};
use crate::protocol::{Action, Params, Reply, Shape, XmlResult, XmlWriter};
pub(crate) use context::Context;

/// The reply of actions that return nothing: `{}` in JSON, no `Result` element in XML.
#[derive(Debug, Serialize)]
pub(crate) struct Empty {}

impl XmlResult for Empty {
    fn write_xml(&self, _: &mut XmlWriter) {}
    const SHAPE: Option<&'static Shape> = None;
}

fn boxed<T: Reply + 'static>(r: Result<T, SqsError>) -> Result<Box<dyn Reply>, SqsError> {
    r.map(|v| Box::new(v) as Box<dyn Reply>)
}

/// Runs one action: its reply, which may go out only once what it relies on is kept.
pub(crate) async fn dispatch(
    ctx: &Context,
    action: Action,
    params: Params,
) -> Pending<Result<Box<dyn Reply>, SqsError>> {
    journal::track(run(ctx, action, params)).await
}

/// The action's handler. Those that wait (a long poll, another node's answer) run boxed:
/// inline, the largest would set the size of every request's future, copied each time it
/// moves.
async fn run(ctx: &Context, action: Action, params: Params) -> Result<Box<dyn Reply>, SqsError> {
    use actions::*;
    use Action::*;
    if changes(action) {
        ctx.engine.admit_change().map_err(engine_error)?;
    }
    match action {
        CreateQueue => boxed(Box::pin(create_queue::handle(ctx, params.parse()?)).await),
        GetQueueUrl => boxed(get_queue_url::handle(ctx, params.parse()?)),
        ListQueues => boxed(Box::pin(list_queues::handle(ctx, params.parse()?)).await),
        DeleteQueue => boxed(delete_queue::handle(ctx, params.parse()?)),
        GetQueueAttributes => boxed(get_queue_attributes::handle(ctx, params.parse()?)),
        SetQueueAttributes => {
            boxed(Box::pin(set_queue_attributes::handle(ctx, params.parse()?)).await)
        }
        PurgeQueue => boxed(purge_queue::handle(ctx, params.parse()?)),
        SendMessage => boxed(send_message::handle(ctx, params.parse()?)),
        SendMessageBatch => boxed(send_message_batch::handle(ctx, params.parse()?)),
        ReceiveMessage => boxed(Box::pin(receive_message::handle(ctx, params.parse()?)).await),
        DeleteMessage => boxed(delete_message::handle(ctx, params.parse()?)),
        DeleteMessageBatch => boxed(delete_message_batch::handle(ctx, params.parse()?)),
        ChangeMessageVisibility => boxed(change_message_visibility::handle(ctx, params.parse()?)),
        ChangeMessageVisibilityBatch => boxed(change_message_visibility_batch::handle(
            ctx,
            params.parse()?,
        )),
        TagQueue => boxed(tags::tag(ctx, params.parse()?)),
        UntagQueue => boxed(tags::untag(ctx, params.parse()?)),
        ListQueueTags => boxed(tags::list(ctx, params.parse()?)),
        ListDeadLetterSourceQueues => {
            boxed(Box::pin(list_dead_letter_source_queues::handle(ctx, params.parse()?)).await)
        }
        StartMessageMoveTask => {
            boxed(Box::pin(message_move_tasks::start(ctx, params.parse()?)).await)
        }
        ListMessageMoveTasks => boxed(message_move_tasks::list(ctx, params.parse()?)),
        CancelMessageMoveTask => boxed(message_move_tasks::cancel(ctx, params.parse()?)),
        AddPermission => boxed(permissions::add(ctx, params.parse()?)),
        RemovePermission => boxed(permissions::remove(ctx, params.parse()?)),
    }
}

/// Whether `action` may record a change (a receive does: its deliveries are recorded).
fn changes(action: Action) -> bool {
    use Action::*;
    !matches!(
        action,
        GetQueueUrl
            | ListQueues
            | GetQueueAttributes
            | ListQueueTags
            | ListDeadLetterSourceQueues
            | ListMessageMoveTasks
    )
}

/// The error for an engine failure on a receipt handle.
pub(crate) fn receipt_error(err: EngineError, handle: &str, timeout: i64) -> SqsError {
    match err {
        EngineError::ReceiptHandleInvalid => SqsError::new(
            ErrorCode::ReceiptHandleIsInvalid,
            format!("The input receipt handle \"{handle}\" is not a valid receipt handle."),
        ),
        EngineError::ReceiptHandleExpired => {
            SqsError::invalid_value(handle, "ReceiptHandle", "The receipt handle has expired.")
        }
        EngineError::MessageNotAvailable => SqsError::invalid_value(
            handle,
            "ReceiptHandle",
            "Message does not exist or is not available for visibility timeout change.",
        ),
        EngineError::VisibilityCapExceeded { max_s } => SqsError::invalid_value(
            timeout,
            "VisibilityTimeout",
            &format!(
                "Total VisibilityTimeout for the message is beyond the limit [{max_s} seconds]"
            ),
        ),
        other => engine_error(other),
    }
}

/// The error for an engine failure that needs no request context.
pub(crate) fn engine_error(err: EngineError) -> SqsError {
    match err {
        EngineError::MessageTooLong { limit } => SqsError::invalid(format!(
            "One or more parameters are invalid. Reason: Message must be shorter than {limit} bytes."
        )),
        EngineError::QueueDeletedRecently => SqsError::new(
            ErrorCode::QueueDeletedRecently,
            "You must wait 60 seconds after deleting a queue before you can create another with the same name.",
        ),
        EngineError::OverLimit => SqsError::new(
            ErrorCode::OverLimit,
            "The maximum number of in flight messages has been reached for this queue.",
        ),
        // AWS's words for it vary and are undocumented; this is the one SDK docs quote.
        EngineError::Throttled => {
            SqsError::new(ErrorCode::RequestThrottled, "Request is throttled.")
        }
        // 503 ServiceUnavailable: retried with backoff by every SDK, so producers slow down
        // until consumers make room instead of failing for good.
        EngineError::StoreFull { limit } => SqsError::new(
            ErrorCode::ServiceUnavailable,
            format!(
                "Service is unable to handle request: what sqsim holds for its clients (messages, FIFO deduplication memory, queues with their settings and tags) reached its memory limit ({limit} bytes, --max-stored-bytes). Receive and delete messages, delete queues, or raise the limit."
            ),
        ),
        EngineError::Backlog { bytes } => SqsError::new(
            ErrorCode::ServiceUnavailable,
            format!(
                "Service is unable to handle request: the disk refuses writes and {bytes} bytes of changes wait to be written; retry later."
            ),
        ),
        EngineError::TooManyLongPolls { max } => SqsError::new(
            ErrorCode::ServiceUnavailable,
            format!("Too many long polls are waiting ({max}); retry later."),
        ),
        other => SqsError::new(ErrorCode::InternalFailure, other.to_string()),
    }
}

/// Realism's throughput quotas: takes one call of `family` on `queue`, or the
/// RequestThrottled error SQS answers past its quota.
pub(crate) fn admit(
    ctx: &Context,
    queue: &crate::engine::Queue,
    family: crate::engine::realism::Family,
) -> Result<(), SqsError> {
    queue
        .admit(family, ctx.engine.now_ms())
        .map_err(engine_error)
}

/// Checks that an optional integer member, when given, lies in `min..=max`; `reason` is the
/// InvalidParameterValue text AWS gives for this member.
pub(crate) fn check_range(
    value: Option<i64>,
    name: &str,
    min: i64,
    max: i64,
    reason: &str,
) -> Result<Option<i64>, SqsError> {
    match value {
        Some(v) if v < min || v > max => Err(SqsError::invalid_value(v, name, reason)),
        other => Ok(other),
    }
}

/// Checks that a required string member is present and non-empty.
pub(crate) fn required<'a>(value: &'a Option<String>, name: &str) -> Result<&'a str, SqsError> {
    match value.as_deref() {
        Some(v) if !v.is_empty() => Ok(v),
        _ => Err(SqsError::missing(name)),
    }
}
