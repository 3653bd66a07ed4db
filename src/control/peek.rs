//! `GET /_sqsim/peek`: a queue's stored messages with their state, without receiving them
//! or changing any count — and, given a filter, the search the console's search box runs:
//! `q` (a body substring), `id` (a MessageId substring), `attribute` (`name` or
//! `name=value`), `group` (the FIFO message group) and `state` (`visible`, `in_flight`,
//! `delayed`). A filtered page examines at most `scan` messages (at most, and by default,
//! [`SEARCH_SCAN`]; [`SEARCH_SCAN_BYTES`] of bodies) from `offset`, and says how many it examined
//! (`scanned`) and where the next page starts (`next_offset`), so a search of a million
//! messages answers in bounded time, a page at a time.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Response, StatusCode};
use serde_json::json;

use super::error::{reply, ControlError};
use super::queue_id_of;
use super::Plane;
use crate::engine::message::Delivery;
use crate::engine::search::{Budget, Filter, State};
use crate::engine::view::PeekedMessage;
use crate::engine::{AttributeData, Engine, QueueId};

/// Messages a peek returns when it gives no `limit`.
const PEEK_PAGE: usize = 1000;
/// The most a peek returns, whatever its `limit`.
const PEEK_MAX_PAGE: usize = 10_000;
/// A peek page stops once its messages pass this many bytes (at least one is returned), so
/// paging a queue of large messages never holds more than about this much at once.
const PEEK_MAX_BYTES: u64 = 16 << 20;
/// Messages a filtered page examines at most.
pub(crate) const SEARCH_SCAN: usize = 100_000;
/// Body bytes a filtered page examines at most.
const SEARCH_SCAN_BYTES: u64 = 64 << 20;

/// The query's parameters.
struct Params(Vec<(String, String)>);

impl Params {
    fn of(query: &str) -> Params {
        Params(serde_urlencoded::from_str(query).unwrap_or_default())
    }

    /// A parameter's value; an empty one counts as not given (a search form's empty box).
    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == key)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }

    fn number(&self, key: &str, default: usize) -> Result<usize, ControlError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| {
                ControlError::bad_request(format!("{key} must be a whole number, got {v:?}"))
            }),
        }
    }

    fn filter(&self) -> Result<Filter, ControlError> {
        let text = |k: &str| self.get(k).map(str::to_string);
        let state = match self.get("state") {
            None => None,
            Some(s) => Some(State::parse(s).ok_or_else(|| {
                ControlError::bad_request(format!(
                    "state must be visible, in_flight or delayed, got {s:?}"
                ))
            })?),
        };
        let attribute = self.get("attribute").map(|a| match a.split_once('=') {
            Some((name, value)) => (name.to_string(), Some(value.to_string())),
            None => (a.to_string(), None),
        });
        Ok(Filter {
            text: text("q"),
            id: text("id").map(|id| id.to_ascii_lowercase()),
            attribute,
            group: text("group"),
            state,
        })
    }
}

/// The queue `/_sqsim/peek?queue_url=…[&region=…]` names, if it names one.
pub(crate) fn peek_target(state: &Plane, query: &str) -> Option<QueueId> {
    let params = Params::of(query);
    queue_id_of(state, params.get("queue_url")?, params.get("region"))
}

/// `/_sqsim/peek`, on `engine` (in cluster mode, the engine serving the queue's shard).
pub(crate) fn peek(state: &Plane, engine: &Engine, query: &str) -> Response<Full<Bytes>> {
    match page(state, engine, query) {
        Ok(resp) => resp,
        Err(e) => e.reply(),
    }
}

fn page(
    state: &Plane,
    engine: &Engine,
    query: &str,
) -> Result<Response<Full<Bytes>>, ControlError> {
    let params = Params::of(query);
    if params.get("queue_url").is_none() {
        return Err(ControlError::bad_request("give the queue as ?queue_url=…"));
    }
    let Some(q) = peek_target(state, query).and_then(|id| engine.queue(&id)) else {
        return Err(ControlError::not_found("no such queue"));
    };
    let offset = params.number("offset", 0)?;
    let limit = params.number("limit", PEEK_PAGE)?.clamp(1, PEEK_MAX_PAGE);
    let filter = params.filter()?;
    // Unfiltered, a page examines what it returns; filtered, the scan is bounded instead.
    let (scan, scan_bytes) = if filter.is_empty() {
        (limit, u64::MAX)
    } else {
        let scan = params.number("scan", SEARCH_SCAN)?.clamp(1, SEARCH_SCAN);
        (scan, SEARCH_SCAN_BYTES)
    };
    let budget = Budget {
        messages: scan,
        bytes: scan_bytes,
        page: limit,
        page_bytes: PEEK_MAX_BYTES,
    };
    let found = q.search_page(engine.now_ms(), &filter, offset, budget);
    let messages: Vec<_> = found.messages.iter().map(message_json).collect();
    Ok(reply(
        StatusCode::OK,
        json!({
            "queue": q.arn,
            "messages": messages,
            "total": found.total,
            "offset": offset,
            "scanned": found.scanned,
            "next_offset": found.next,
        }),
    ))
}

/// One message as peek shows it: its state, counts, attributes with their types.
fn message_json(m: &PeekedMessage) -> serde_json::Value {
    let p = &m.payload;
    let (state, until) = match m.delivery {
        Delivery::Visible => ("visible", None),
        Delivery::InFlight { until_ms } => ("in_flight", Some(until_ms)),
        Delivery::Delayed { until_ms } => ("delayed", Some(until_ms)),
    };
    let attributes: serde_json::Map<String, serde_json::Value> = p
        .attributes()
        .iter()
        .map(|(n, v)| {
            let value = match &v.data {
                AttributeData::String(s) => json!({"DataType": v.data_type, "StringValue": s}),
                AttributeData::Binary(b) => {
                    json!({"DataType": v.data_type, "BinaryValue": STANDARD.encode(b)})
                }
            };
            (n.clone(), value)
        })
        .collect();
    json!({
        "message_id": p.message_id.to_string(),
        "body": p.body,
        "state": state,
        "until_ms": until,
        "receive_count": m.receive_count,
        "sent_timestamp": p.sent_ms,
        "first_receive_timestamp": m.first_receive_ms,
        "message_group_id": p.group_id.as_deref(),
        "message_deduplication_id": p.deduplication_id(),
        "sequence_number": p.sequence_number(),
        "dead_letter_source_arn": p.dead_letter_source_arn(),
        "sender_id": &*p.sender_id,
        "aws_trace_header": p.aws_trace_header(),
        "message_attributes": attributes,
    })
}
