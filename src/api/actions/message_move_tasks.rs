//! StartMessageMoveTask, ListMessageMoveTasks and CancelMessageMoveTask.

use std::sync::Arc;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::api::context::QueueFilter;
use crate::api::{check_range, required, Context};
use crate::engine::moves::task::{self, MoveTask, StartError, TaskFailure, TaskStatus};
use crate::engine::{Queue, QueueId};
use crate::error::{ErrorCode, SqsError};
use crate::protocol::{Action, Empty, Member, Shape, XmlResult, XmlWriter};

/// Fastest rate a task may be given.
const MAX_RATE: i64 = 500;

fn not_found(parameter: &str) -> SqsError {
    SqsError::new(
        ErrorCode::ResourceNotFound,
        format!("The resource that you specified for the {parameter} parameter doesn't exist."),
    )
}

fn queue_by_arn(ctx: &Context, arn: &str, parameter: &str) -> Result<Arc<Queue>, SqsError> {
    let queue = QueueId::from_arn(arn)
        .and_then(|id| ctx.engine.queue(&id))
        .ok_or_else(|| not_found(parameter))?;
    ctx.authorize(&queue)?;
    Ok(queue)
}

/// The handle AWS gives: base64 of `{"taskId":…,"sourceArn":…}`.
fn task_handle(task: &MoveTask) -> String {
    let doc = serde_json::json!({"taskId": task.task_id, "sourceArn": task.source_arn});
    STANDARD.encode(doc.to_string())
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct StartInput {
    pub source_arn: Option<String>,
    pub destination_arn: Option<String>,
    pub max_number_of_messages_per_second: Option<i64>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct StartOutput {
    pub task_handle: String,
}

impl XmlResult for StartOutput {
    fn write_xml(&self, w: &mut XmlWriter) {
        w.elem("TaskHandle", &self.task_handle);
    }
    const SHAPE: Option<&'static Shape> = Some(&Shape::Struct(&[Member::scalar("TaskHandle")]));
}

pub(crate) async fn start(ctx: &Context, input: StartInput) -> Result<StartOutput, SqsError> {
    let source_arn = required(&input.source_arn, "SourceArn")?;
    let source = queue_by_arn(ctx, source_arn, "SourceArn")?;
    // Its sources may be served anywhere in a cluster.
    let sources = ctx
        .list(QueueFilter::dead_letter_sources_of(&source.id))
        .await?;
    if sources.is_empty() {
        return Err(SqsError::invalid(
            "Source queue must be configured as a Dead Letter Queue.",
        ));
    }
    let destination = match input.destination_arn.as_deref().filter(|d| !d.is_empty()) {
        Some(arn) => {
            let id = QueueId::from_arn(arn).ok_or_else(|| not_found("DestinationArn"))?;
            // In a cluster another shard may serve it; its messages then go through an
            // outbox.
            let settings = ctx
                .settings_of(&id)
                .await?
                .ok_or_else(|| not_found("DestinationArn"))?;
            // The task sends to it: another account's queue only as its Policy allows
            // the caller sqs:SendMessage.
            ctx.authorize_on(&id.arn(), settings.policy.as_deref(), Action::SendMessage)?;
            Some(id)
        }
        None => None,
    };
    let rate = check_range(
        input.max_number_of_messages_per_second,
        "MaxNumberOfMessagesPerSecond",
        1,
        MAX_RATE,
        "Must be between 1 and 500.",
    )?
    .map(|r| r as u32);
    let task = task::start(&ctx.engine, source, destination, rate).map_err(|e| match e {
        StartError::AlreadyRunning => SqsError::invalid(
            "There is already a task running. Only one active task is allowed for a source queue arn at a given time.",
        ),
    })?;
    Ok(StartOutput {
        task_handle: task_handle(&task),
    })
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct ListInput {
    pub source_arn: Option<String>,
    pub max_results: Option<i64>,
}

/// One ListMessageMoveTasksResultEntry.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct TaskEntry {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_handle: Option<String>,
    pub status: &'static str,
    pub source_arn: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destination_arn: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_number_of_messages_per_second: Option<u32>,
    pub approximate_number_of_messages_moved: u64,
    pub approximate_number_of_messages_to_move: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    pub started_timestamp: u64,
}

/// The wire spelling of a status.
fn status_name(status: TaskStatus) -> &'static str {
    match status {
        TaskStatus::Running => "RUNNING",
        TaskStatus::Cancelling => "CANCELLING",
        TaskStatus::Cancelled => "CANCELLED",
        TaskStatus::Completed => "COMPLETED",
        TaskStatus::Failed => "FAILED",
    }
}

/// FailureReason as AWS reports it.
fn failure_reason(failure: TaskFailure) -> String {
    match failure {
        TaskFailure::QueueGone => ErrorCode::QueueDoesNotExist.query_code().to_string(),
    }
}

impl TaskEntry {
    fn of(task: &MoveTask) -> TaskEntry {
        let (status, failure) = task.status();
        TaskEntry {
            task_handle: (status == TaskStatus::Running).then(|| task_handle(task)),
            status: status_name(status),
            source_arn: task.source_arn.clone(),
            destination_arn: task.destination_arn.clone(),
            max_number_of_messages_per_second: task.max_per_second,
            approximate_number_of_messages_moved: task.moved(),
            approximate_number_of_messages_to_move: task.to_move,
            failure_reason: failure.map(failure_reason),
            started_timestamp: task.started_ms,
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct ListOutput {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub results: Vec<TaskEntry>,
}

impl XmlResult for ListOutput {
    fn write_xml(&self, w: &mut XmlWriter) {
        for e in &self.results {
            w.open("ListMessageMoveTasksResultEntry");
            w.opt("TaskHandle", e.task_handle.as_deref());
            w.elem("Status", e.status);
            w.elem("SourceArn", &e.source_arn);
            w.opt("DestinationArn", e.destination_arn.as_deref());
            if let Some(r) = e.max_number_of_messages_per_second {
                w.elem("MaxNumberOfMessagesPerSecond", &r.to_string());
            }
            w.elem(
                "ApproximateNumberOfMessagesMoved",
                &e.approximate_number_of_messages_moved.to_string(),
            );
            w.elem(
                "ApproximateNumberOfMessagesToMove",
                &e.approximate_number_of_messages_to_move.to_string(),
            );
            w.opt("FailureReason", e.failure_reason.as_deref());
            w.elem("StartedTimestamp", &e.started_timestamp.to_string());
            w.close("ListMessageMoveTasksResultEntry");
        }
    }
    /// Unconfirmed (no capture): the public member names, counts and times as numbers.
    const SHAPE: Option<&'static Shape> = Some(&Shape::Struct(&[Member::new(
        "Results",
        Shape::List(
            &Shape::Struct(&[
                Member::scalar("ApproximateNumberOfMessagesMoved"),
                Member::scalar("ApproximateNumberOfMessagesToMove"),
                Member::scalar("DestinationArn"),
                Member::scalar("FailureReason"),
                Member::scalar("MaxNumberOfMessagesPerSecond"),
                Member::scalar("SourceArn"),
                Member::scalar("StartedTimestamp"),
                Member::scalar("Status"),
                Member::scalar("TaskHandle"),
            ]),
            Empty::List,
        ),
    )]));
}

pub(crate) fn list(ctx: &Context, input: ListInput) -> Result<ListOutput, SqsError> {
    let source_arn = required(&input.source_arn, "SourceArn")?;
    let source = queue_by_arn(ctx, source_arn, "SourceArn")?;
    let max = check_range(
        input.max_results,
        "MaxResults",
        1,
        10,
        "Must be between 1 and 10, if provided.",
    )?
    .map_or(1, |n| n as usize);
    let results = ctx
        .engine
        .move_tasks_of(&source.arn)
        .iter()
        .take(max)
        .map(|t| TaskEntry::of(t))
        .collect();
    Ok(ListOutput { results })
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct CancelInput {
    pub task_handle: Option<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct CancelOutput {
    pub approximate_number_of_messages_moved: u64,
}

impl XmlResult for CancelOutput {
    fn write_xml(&self, w: &mut XmlWriter) {
        w.elem(
            "ApproximateNumberOfMessagesMoved",
            &self.approximate_number_of_messages_moved.to_string(),
        );
    }
    const SHAPE: Option<&'static Shape> = Some(&Shape::Struct(&[Member::scalar(
        "ApproximateNumberOfMessagesMoved",
    )]));
}

pub(crate) fn cancel(ctx: &Context, input: CancelInput) -> Result<CancelOutput, SqsError> {
    let handle = required(&input.task_handle, "TaskHandle")?;
    let bad_handle = || SqsError::invalid("Value for parameter TaskHandle is invalid.");
    let doc: serde_json::Value = STANDARD
        .decode(handle)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(bad_handle)?;
    let (Some(task_id), Some(source_arn)) = (doc["taskId"].as_str(), doc["sourceArn"].as_str())
    else {
        return Err(bad_handle());
    };
    let source = queue_by_arn(ctx, source_arn, "SourceArn")?;
    let task = ctx
        .engine
        .move_tasks_of(&source.arn)
        .into_iter()
        .find(|t| t.task_id == task_id)
        .ok_or_else(|| SqsError::new(ErrorCode::ResourceNotFound, "Task does not exist."))?;
    let cancelled = task.request_cancel();
    ctx.engine.record_task(&task);
    if !cancelled {
        return Err(SqsError::invalid("Only active tasks can be cancelled."));
    }
    Ok(CancelOutput {
        approximate_number_of_messages_moved: task.moved(),
    })
}
