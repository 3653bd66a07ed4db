//! Which queue a request is about, before it runs: in cluster mode the request goes to the
//! node that serves that queue's shard. Only the members that name a queue are read.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

use crate::engine::QueueId;
use crate::protocol::{Action, Params};

use super::Context;

/// What a request addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// One queue (which may not exist).
    Queue(QueueId),
    /// Queues anywhere (ListQueues): any node answers, asking the others.
    Everywhere,
    /// No queue can be told (a member missing or malformed): any node answers, with the
    /// error the action gives.
    Nowhere,
}

/// The queue `action` with `params` addresses, as `ctx` resolves names.
pub(crate) fn target(ctx: &Context, action: Action, params: &Params) -> Target {
    let id = match action {
        Action::ListQueues => return Target::Everywhere,
        Action::CreateQueue => params
            .string_member("QueueName")
            .map(|name| ctx.own_queue_id(&name)),
        Action::GetQueueUrl => params.string_member("QueueName").map(|name| QueueId {
            account: params
                .string_member("QueueOwnerAWSAccountId")
                .filter(|a| !a.is_empty())
                .unwrap_or_else(|| ctx.account.clone()),
            ..ctx.own_queue_id(&name)
        }),
        Action::StartMessageMoveTask | Action::ListMessageMoveTasks => params
            .string_member("SourceArn")
            .and_then(|arn| QueueId::from_arn(&arn)),
        Action::CancelMessageMoveTask => params
            .string_member("TaskHandle")
            .and_then(|h| STANDARD.decode(h).ok())
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|doc| doc["sourceArn"].as_str().and_then(QueueId::from_arn)),
        _ => ctx.queue_id(params.queue_url_hint().as_deref()).ok(),
    };
    id.map_or(Target::Nowhere, Target::Queue)
}
