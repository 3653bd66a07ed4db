//! Everything a handler needs to know about the request besides its input: the engine, the
//! protocol, the caller's namespace and how to spell queue URLs.

use std::sync::Arc;

use crate::engine::{Engine, Queue, QueueId, QueueSettings};
use crate::error::{ErrorCode, SqsError};
use crate::protocol::{Action, Protocol};

use super::attributes::check_redrive_against;
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
    /// In cluster mode, where queues of other shards are listed; `None`: `engine` has them
    /// all.
    pub directory: Option<Arc<dyn Directory>>,
    /// The action being run (`SendMessageBatch`): what another account's queue must grant.
    pub action: Action,
    /// Whether `account` was proven by a signature (`--auth verify`): then another
    /// account's queue answers only what its Policy grants ([`super::access`]).
    pub verified: bool,
}

/// Which queues a listing wants.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct QueueFilter {
    pub region: String,
    pub account: String,
    pub prefix: String,
    /// Only queues whose RedrivePolicy names this queue.
    pub dead_letter_target: Option<QueueId>,
}

impl QueueFilter {
    /// The queues whose RedrivePolicy names `target` (in its namespace).
    pub(crate) fn dead_letter_sources_of(target: &QueueId) -> QueueFilter {
        QueueFilter {
            region: target.region.clone(),
            account: target.account.clone(),
            prefix: String::new(),
            dead_letter_target: Some(target.clone()),
        }
    }

    /// The ids of `engine`'s queues that pass, sorted by name.
    pub(crate) fn apply(&self, engine: &Engine) -> Vec<QueueId> {
        let queues = match &self.dead_letter_target {
            Some(target) => engine.dead_letter_sources(target),
            None => engine.list_queues(&self.region, &self.account, &self.prefix),
        };
        queues.into_iter().map(|q| q.id.clone()).collect()
    }
}

/// A future that lists queues.
pub(crate) type Listing<'a> = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Vec<QueueId>, SqsError>> + Send + 'a>,
>;

/// A future that reads one queue's settings (`None`: no such queue).
pub(crate) type Lookup<'a> = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Option<QueueSettings>, SqsError>> + Send + 'a>,
>;

/// Every queue of a cluster, wherever it is served (implemented by the server).
pub(crate) trait Directory: Send + Sync + std::fmt::Debug {
    /// The ids of the queues that pass `filter`, in any order.
    fn queues(&self, filter: QueueFilter) -> Listing<'_>;
    /// The settings of queue `id`, asked of the node serving it.
    fn settings_of(&self, id: QueueId) -> Lookup<'_>;
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

    /// The id of the queue a request addresses: its QueueUrl, or else the request path.
    pub(crate) fn queue_id(&self, queue_url: Option<&str>) -> Result<QueueId, SqsError> {
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
        Ok(QueueId {
            region: region.to_string(),
            account: r.account.unwrap_or(&self.account).to_string(),
            name: r.name.to_string(),
        })
    }

    /// The queue a request addresses: its QueueUrl, or else the request path; another
    /// account's only as far as it grants this action.
    pub(crate) fn queue(&self, queue_url: Option<&str>) -> Result<Arc<Queue>, SqsError> {
        let id = self.queue_id(queue_url)?;
        match self.engine.queue(&id) {
            // Realism: a queue created less than a second ago is not known everywhere yet.
            Some(q) if !q.is_propagating(self.engine.now_ms()) => {
                self.authorize(&q)?;
                Ok(q)
            }
            _ => Err(SqsError::no_queue()),
        }
    }

    /// Whether this caller may run this action on `queue`: always its own; another
    /// account's (under `--auth verify`) only as far as the queue's Policy grants it.
    pub(crate) fn authorize(&self, queue: &Queue) -> Result<(), SqsError> {
        if !self.verified || queue.id.account == self.account {
            return Ok(());
        }
        queue.with_settings(|s| self.authorize_on(&queue.arn, s.policy.as_deref(), self.action))
    }

    /// Whether this caller may do `action` to the queue at `arn` (of another account,
    /// served anywhere) whose Policy is `policy`: what an action on one queue needs on a
    /// second one (StartMessageMoveTask sends to its destination).
    pub(crate) fn authorize_on(
        &self,
        arn: &str,
        policy: Option<&str>,
        action: Action,
    ) -> Result<(), SqsError> {
        let owner = QueueId::from_arn(arn).map(|id| id.account);
        if !self.verified || owner.as_deref() == Some(self.account.as_str()) {
            return Ok(());
        }
        let req = super::access::Request {
            account: &self.account,
            action,
            resource: arn,
            now_ms: self.engine.now_ms(),
        };
        match super::access::decide(policy, &req) {
            super::access::Decision::Allow => Ok(()),
            d => Err(super::access::denied(&req, d)),
        }
    }

    /// The ids of every queue that passes `filter`, sorted by name: from the cluster's
    /// directory, or from this engine.
    pub(crate) async fn list(&self, filter: QueueFilter) -> Result<Vec<QueueId>, SqsError> {
        let mut ids = match &self.directory {
            Some(d) => d.queues(filter).await?,
            None => filter.apply(&self.engine),
        };
        ids.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(ids)
    }

    /// The settings of queue `id` (`None`: no such queue), wherever it is served.
    pub(crate) async fn settings_of(
        &self,
        id: &QueueId,
    ) -> Result<Option<QueueSettings>, SqsError> {
        match &self.directory {
            Some(d) if !self.engine.serves(id) => d.settings_of(id.clone()).await,
            _ => Ok(self.engine.queue_settings(id)),
        }
    }

    /// Checks the RedrivePolicy in `settings` (the source's, as they are about to be)
    /// against its dead-letter queue, wherever that is served.
    pub(crate) async fn check_redrive(
        &self,
        source: &QueueId,
        settings: &QueueSettings,
    ) -> Result<(), SqsError> {
        let target = match &settings.redrive_policy {
            Some(p) if p.dead_letter_target != *source => {
                self.settings_of(&p.dead_letter_target).await?
            }
            _ => None,
        };
        check_redrive_against(source, settings, target.as_ref())
    }

    /// Whether the request was sent to a queue URL rather than to the service root.
    pub(crate) fn path_names_queue(&self) -> bool {
        self.path.trim_matches('/').contains('/')
    }

    /// The query protocol refuses queue-less actions sent to a queue URL.
    pub(crate) fn require_service_endpoint(&self) -> Result<(), SqsError> {
        if self.protocol == Protocol::Query && self.path_names_queue() {
            return Err(SqsError::new(
                ErrorCode::InvalidAction,
                format!("The action {} is not valid for this endpoint.", self.action),
            ));
        }
        Ok(())
    }
}
