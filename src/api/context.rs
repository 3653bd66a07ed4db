//! Everything a handler needs to know about the request besides its input: the engine, the
//! protocol, the caller's namespace and how to spell queue URLs.

use std::sync::Arc;

use crate::engine::{Engine, Queue, QueueId};
use crate::error::{ErrorCode, SqsError};
use crate::protocol::Protocol;

use super::queue_url;

/// Per-request context.
#[derive(Debug)]
pub(crate) struct Context {
    pub engine: Arc<Engine>,
    pub protocol: Protocol,
    /// From the SigV4 credential scope, else the server default.
    pub region: String,
    /// The caller's account: for URL-less actions and bare queue names.
    pub account: String,
    /// SenderId of messages this request sends (the account, shared by all of them).
    pub sender_id: Arc<str>,
    /// `scheme://host[:port]` that queue URLs start with.
    pub base_url: String,
    /// The request path; query and JSON requests may address a queue by it.
    pub path: String,
    /// An `X-Amzn-Trace-Id` header, stored as AWSTraceHeader on sends.
    pub trace_header: Option<String>,
    pub request_id: String,
    /// Every queue is in `region`, whatever region a queue URL names (an ElasticMQ config:
    /// one namespace, as ElasticMQ has).
    pub single_region: bool,
}

impl Context {
    /// The URL of a queue, as this caller should see it.
    pub(crate) fn queue_url(&self, id: &QueueId) -> String {
        format!("{}/{}/{}", self.base_url, id.account, id.name)
    }

    /// The id a queue of this name would have in the caller's namespace.
    pub(crate) fn own_queue_id(&self, name: &str) -> QueueId {
        QueueId {
            region: self.region.clone(),
            account: self.account.clone(),
            name: name.to_string(),
        }
    }

    /// The queue a request addresses: its QueueUrl, or else the request path.
    pub(crate) fn queue(&self, queue_url: Option<&str>) -> Result<Arc<Queue>, SqsError> {
        let url = match queue_url.filter(|u| !u.is_empty()) {
            Some(u) => u,
            None if self.path_names_queue() => self.path.as_str(),
            None => return Err(SqsError::missing("QueueUrl")),
        };
        let r = queue_url::parse(url).ok_or_else(SqsError::no_queue)?;
        let region = match r.region {
            Some(named) if !self.single_region => named,
            _ => &self.region,
        };
        let id = QueueId {
            region: region.to_string(),
            account: r.account.unwrap_or(&self.account).to_string(),
            name: r.name.to_string(),
        };
        match self.engine.queue(&id) {
            // Realism: a queue created less than a second ago is not known everywhere yet.
            Some(q) if !q.is_propagating(self.engine.now_ms()) => Ok(q),
            _ => Err(SqsError::no_queue()),
        }
    }

    /// Whether the request was sent to a queue URL rather than to the service root.
    pub(crate) fn path_names_queue(&self) -> bool {
        self.path.trim_matches('/').contains('/')
    }

    /// The query protocol refuses queue-less actions sent to a queue URL.
    pub(crate) fn require_service_endpoint(&self, action: &str) -> Result<(), SqsError> {
        if self.protocol == Protocol::Query && self.path_names_queue() {
            return Err(SqsError::new(
                ErrorCode::InvalidAction,
                format!("The action {action} is not valid for this endpoint."),
            ));
        }
        Ok(())
    }
}
