//! ListDeadLetterSourceQueues: the queues whose RedrivePolicy targets this one.

use serde::{Deserialize, Serialize};

use crate::api::context::QueueFilter;
use crate::api::Context;
use crate::error::SqsError;
use crate::protocol::{Empty, Member, Shape, XmlResult, XmlWriter};

use super::list_queues::{check_max_results, paginate, write_url_page};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct Input {
    pub queue_url: Option<String>,
    pub next_token: Option<String>,
    pub max_results: Option<i64>,
}

/// Unlike ListQueues, the list is always present and spelled `queueUrls`.
#[derive(Debug, Serialize)]
pub(crate) struct Output {
    #[serde(rename = "queueUrls")]
    pub queue_urls: Vec<String>,
    #[serde(rename = "NextToken", skip_serializing_if = "Option::is_none")]
    pub next_token: Option<String>,
}

impl XmlResult for Output {
    fn write_xml(&self, w: &mut XmlWriter) {
        write_url_page(w, &self.queue_urls, self.next_token.as_deref());
    }
    /// `queueUrls` is the model's own name here; that it is `[]` rather than null when
    /// empty (the member is required) is unconfirmed.
    const SHAPE: Option<&'static Shape> = Some(&Shape::Struct(&[
        Member::scalar("NextToken"),
        Member::new("queueUrls", Shape::List(&Shape::Scalar, Empty::List)),
    ]));
}

pub(crate) async fn handle(ctx: &Context, input: Input) -> Result<Output, SqsError> {
    let queue = ctx.queue(input.queue_url.as_deref())?;
    let max = check_max_results(input.max_results)?;
    let sources = ctx
        .list(QueueFilter::dead_letter_sources_of(&queue.id))
        .await?;
    let (queue_urls, next_token) = paginate(ctx, sources, input.next_token.as_deref(), max)?;
    Ok(Output {
        queue_urls,
        next_token,
    })
}
