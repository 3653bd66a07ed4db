//! GetQueueUrl: looks a name up in the caller's account, or in QueueOwnerAWSAccountId's.

use serde::Deserialize;

use crate::api::{required, Context};
use crate::engine::QueueId;
use crate::error::SqsError;

use super::create_queue::QueueUrlOutput;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct Input {
    pub queue_name: Option<String>,
    #[serde(rename = "QueueOwnerAWSAccountId")]
    pub queue_owner_aws_account_id: Option<String>,
}

pub(crate) fn handle(ctx: &Context, input: Input) -> Result<QueueUrlOutput, SqsError> {
    let name = required(&input.queue_name, "QueueName")?;
    let account = input
        .queue_owner_aws_account_id
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| ctx.account.clone());
    let id = QueueId {
        region: ctx.region.clone(),
        account,
        name: name.to_string(),
    };
    let queue = ctx.engine.queue(&id).ok_or_else(SqsError::no_queue)?;
    // Another account's queue that grants this caller nothing: as if it did not exist, as
    // AWS answers ("does not exist or you do not have access to it").
    ctx.authorize(&queue).map_err(|_| SqsError::no_queue())?;
    Ok(QueueUrlOutput {
        queue_url: ctx.queue_url(&queue.id),
    })
}
