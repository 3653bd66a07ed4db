//! ListQueues: the caller's queues in this region, by name prefix, in pages.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::api::context::QueueFilter;
use crate::api::{check_range, Context};
use crate::engine::QueueId;
use crate::error::SqsError;
use crate::protocol::{Empty, Member, Shape, XmlResult, XmlWriter};

/// Most URLs one ListQueues reply holds.
const MAX_RESULTS: i64 = 1000;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct Input {
    pub queue_name_prefix: Option<String>,
    pub next_token: Option<String>,
    pub max_results: Option<i64>,
}

/// A page of queue URLs (ListQueues; ListDeadLetterSourceQueues spells the list differently).
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct Output {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub queue_urls: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_token: Option<String>,
}

impl XmlResult for Output {
    fn write_xml(&self, w: &mut XmlWriter) {
        write_url_page(w, &self.queue_urls, self.next_token.as_deref());
    }
    /// Captured from AWS: `queueUrls` and an internal member that is always null. With no
    /// queue to list, the captures disagree: `"queueUrls":[]` in the newer one (localstack
    /// issue 3715, 2021), null in an older one (AWS.jl pull request 127, 2020); sqsim follows
    /// the newer, which is also what ListDeadLetterSourceQueues sends.
    const SHAPE: Option<&'static Shape> = Some(&Shape::Struct(&[
        Member::scalar("NextExclusiveStartQueueName"),
        Member::scalar("NextToken"),
        Member {
            from: "QueueUrls",
            name: "queueUrls",
            shape: Shape::List(&Shape::Scalar, Empty::List),
        },
    ]));
}

/// A page of queue URLs in XML (both listing actions spell it the same there).
pub(crate) fn write_url_page(w: &mut XmlWriter, urls: &[String], next_token: Option<&str>) {
    for u in urls {
        w.elem("QueueUrl", u);
    }
    w.opt("NextToken", next_token);
}

/// Validates MaxResults (1–1000 when given).
pub(crate) fn check_max_results(max: Option<i64>) -> Result<Option<usize>, SqsError> {
    let max = check_range(
        max,
        "MaxResults",
        1,
        MAX_RESULTS,
        "MaxResults must be an integer between 1 and 1000.",
    )?;
    Ok(max.map(|n| n as usize))
}

/// Pages `queues` (sorted by name) after the token's name and returns the page's URLs; the
/// token is only issued when the caller gave MaxResults, as AWS does.
pub(crate) fn paginate(
    ctx: &Context,
    queues: Vec<QueueId>,
    next_token: Option<&str>,
    max: Option<usize>,
) -> Result<(Vec<String>, Option<String>), SqsError> {
    let after = match next_token.filter(|t| !t.is_empty()) {
        None => None,
        Some(t) => Some(
            STANDARD
                .decode(t)
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .ok_or_else(|| SqsError::invalid("Invalid NextToken value."))?,
        ),
    };
    let limit = max.unwrap_or(MAX_RESULTS as usize);
    let mut rest = queues
        .iter()
        .filter(|q| after.as_ref().is_none_or(|a| q.name > *a))
        .peekable();
    let mut page = Vec::new();
    let mut last = None;
    while page.len() < limit {
        match rest.next() {
            Some(q) => {
                page.push(ctx.queue_url(q));
                last = Some(&q.name);
            }
            None => break,
        }
    }
    let more = rest.peek().is_some();
    let token = match (max, more, last) {
        (Some(_), true, Some(last)) => Some(STANDARD.encode(last)),
        _ => None,
    };
    Ok((page, token))
}

pub(crate) async fn handle(ctx: &Context, input: Input) -> Result<Output, SqsError> {
    ctx.require_service_endpoint()?;
    let max = check_max_results(input.max_results)?;
    let queues = ctx
        .list(QueueFilter {
            region: ctx.region.clone(),
            account: ctx.account.clone(),
            prefix: input.queue_name_prefix.unwrap_or_default(),
            dead_letter_target: None,
        })
        .await?;
    let (queue_urls, next_token) = paginate(ctx, queues, input.next_token.as_deref(), max)?;
    Ok(Output {
        queue_urls,
        next_token,
    })
}
