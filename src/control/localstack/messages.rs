//! LocalStack's SQS developer endpoint, `/_aws/sqs/messages`: every message of a queue as a
//! ReceiveMessage reply, without receiving any (no receive count, visibility or first
//! receive changes). The queue comes from the path (`/_aws/sqs/messages/<region>/<account>/
//! <name>`) or a `QueueUrl` parameter; `ShowInvisible` and `ShowDelayed` add in-flight and
//! delayed messages, each marked with `IsVisible` / `IsDelayed`. A plain request gets XML,
//! or with `Accept: application/json` the XML as LocalStack converts it (xmltodict: one
//! message is an object, not a list); an SDK pointed here (query or JSON protocol) gets
//! its ReceiveMessage reply.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{Request, Response, StatusCode};
use serde_json::{json, Value};

use super::super::queue_of;
use crate::api::actions::receive_message::Output;
use crate::control::Plane;
use crate::engine::message::{Delivery, ReceivedMessage};
use crate::engine::QueueId;
use crate::http::respond;
use crate::http::RequestBody;
use crate::protocol::{self, query_json, ForeignError, Protocol, RawRequest, Render};

/// The receipt handle LocalStack gives every listed message: it deletes nothing.
const BACKDOOR_HANDLE: &str = "SQS/BACKDOOR/ACCESS";

/// How the request asked: as an SDK call in one of the protocols, or a plain GET/POST.
enum Asked {
    Sdk(Render),
    Plain { json: bool },
}

pub(crate) async fn handle(state: &Plane, req: Request<RequestBody>) -> Response<Full<Bytes>> {
    let request_id = uuid::Uuid::new_v4().to_string();
    let (parts, body) = req.into_parts();
    let header = |n: &str| crate::http::header(&parts.headers, n);
    let body = match Limited::new(body, state.config.max_body_bytes)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let content_type = header("content-type")
        .unwrap_or_default()
        .to_ascii_lowercase();
    let accept = header("accept");
    let sdk = content_type.contains("x-amz-") || parts.headers.contains_key("x-amz-target");
    let form = content_type.contains("x-www-form-urlencoded");
    // Parameters from the query string and a form body alike (Flask's `request.values`).
    let mut values: Vec<(String, String)> =
        serde_urlencoded::from_str(parts.uri.query().unwrap_or_default()).unwrap_or_default();
    if form {
        values.extend(
            serde_urlencoded::from_bytes::<Vec<(String, String)>>(&body).unwrap_or_default(),
        );
    }
    let get = |k: &str| values.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let flag =
        |k: &str| get(k).is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "true" | "1"));
    let (show_invisible, show_delayed) = (flag("ShowInvisible"), flag("ShowDelayed"));

    let mut queue_url = get("QueueUrl");
    let asked = if sdk || (form && get("Action").is_some()) {
        let decoded = protocol::decode(RawRequest {
            is_get: parts.method == hyper::Method::GET,
            target: header("x-amz-target"),
            content_type: header("content-type"),
            accept,
            uri_query: parts.uri.query(),
            body: body.clone(),
        });
        let decoded = match decoded {
            Ok(d) => d,
            Err(protocol::DecodeError::NoAction) => {
                return respond(protocol::encode_no_action(), &request_id)
            }
            Err(protocol::DecodeError::Error(render, e)) => {
                return respond(protocol::encode_error(render, &request_id, &e), &request_id)
            }
        };
        if decoded.action != protocol::Action::ReceiveMessage {
            return foreign(
                Asked::Sdk(decoded.render),
                &request_id,
                400,
                "InvalidRequest",
                Some("This endpoint only accepts ReceiveMessage calls"),
            );
        }
        if decoded.protocol == Protocol::Json {
            queue_url = decoded.params.queue_url_hint();
        }
        Asked::Sdk(decoded.render)
    } else {
        Asked::Plain {
            json: accept.is_some_and(query_json::accepts_json),
        }
    };

    // The queue: from the path, else from QueueUrl.
    let rest = parts.uri.path()[super::DEVELOPER_PREFIX.len()..].trim_matches('/');
    let queue = if !rest.is_empty() {
        let segments: Vec<&str> = rest.split('/').collect();
        match segments[..] {
            [region, account, name] => state.engine.queue(&QueueId {
                region: region.to_string(),
                account: account.to_string(),
                name: name.to_string(),
            }),
            _ => return foreign(asked, &request_id, 404, "InvalidAddress", None),
        }
    } else {
        match queue_url.as_deref().filter(|u| !u.is_empty()) {
            None => None,
            Some(url) if crate::api::queue_url::parse(url).is_none() => {
                return foreign(asked, &request_id, 404, "InvalidAddress", None)
            }
            Some(url) => queue_of(state, url, None),
        }
    };
    let Some(queue) = queue else {
        return foreign(
            asked,
            &request_id,
            400,
            "AWS.SimpleQueueService.NonExistentQueue",
            None,
        );
    };

    let (all, _) = queue.peek_page(state.engine.now_ms(), 0, usize::MAX, u64::MAX);
    // LocalStack's order: in-flight messages, then visible ones, then delayed ones.
    let rank = |d: &Delivery| match d {
        Delivery::InFlight { .. } => 0,
        Delivery::Visible => 1,
        Delivery::Delayed { .. } => 2,
    };
    let mut listed: Vec<_> = all
        .into_iter()
        .filter(|m| match m.delivery {
            Delivery::Visible => true,
            Delivery::InFlight { .. } => show_invisible,
            Delivery::Delayed { .. } => show_delayed,
        })
        .collect();
    listed.sort_by_key(|m| rank(&m.delivery));
    let output = Output::listing(listed.into_iter().map(|m| {
        let mut extra = Vec::new();
        if show_invisible {
            let visible = !matches!(m.delivery, Delivery::InFlight { .. });
            extra.push(("IsVisible", visible.to_string()));
        }
        if show_delayed {
            let delayed = matches!(m.delivery, Delivery::Delayed { .. });
            extra.push(("IsDelayed", delayed.to_string()));
        }
        let message = ReceivedMessage {
            payload: m.payload,
            receipt_handle: BACKDOOR_HANDLE.to_string(),
            receive_count: m.receive_count,
            first_receive_ms: m.first_receive_ms.unwrap_or(0),
        };
        (message, extra)
    }));
    match asked {
        Asked::Sdk(render) => respond(
            protocol::encode_reply(
                render,
                protocol::Action::ReceiveMessage,
                &request_id,
                &output,
            ),
            &request_id,
        ),
        Asked::Plain { json: false } => respond(
            protocol::encode_reply(
                Render::Xml,
                protocol::Action::ReceiveMessage,
                &request_id,
                &output,
            ),
            &request_id,
        ),
        Asked::Plain { json: true } => {
            let mut aws_json = Vec::new();
            protocol::Reply::write_json(&output, &mut aws_json);
            let aws_json: Value = serde_json::from_slice(&aws_json).unwrap_or(Value::Null);
            json_reply(
                StatusCode::OK,
                json!({"ReceiveMessageResponse": {
                    "ReceiveMessageResult": xmltodict_result(&aws_json),
                    "ResponseMetadata": {"RequestId": request_id},
                }}),
            )
        }
    }
}

/// A LocalStack error in the way the request asked.
fn foreign(
    asked: Asked,
    request_id: &str,
    status: u16,
    code: &'static str,
    message: Option<&str>,
) -> Response<Full<Bytes>> {
    let e = ForeignError {
        status,
        code,
        fault: "Sender",
        message,
    };
    let render = match asked {
        Asked::Sdk(render) => render,
        Asked::Plain { json: false } => Render::Xml,
        Asked::Plain { json: true } => {
            let mut error = json!({"Code": code, "Type": "Sender"});
            if let Some(m) = message {
                error["Message"] = json!(m);
            }
            return json_reply(
                StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST),
                json!({"ErrorResponse": {"Error": error, "RequestId": request_id}}),
            );
        }
    };
    respond(
        protocol::encode_foreign_error(render, request_id, e),
        request_id,
    )
}

fn json_reply(status: StatusCode, body: Value) -> Response<Full<Bytes>> {
    super::python_json(status, &body)
}

/// The AWS JSON ReceiveMessage result rebuilt as xmltodict reads the XML one: `Message`
/// elements (an object when there is one), `Attribute` and `MessageAttribute` as
/// name/value elements, and `null` for an empty result.
fn xmltodict_result(aws: &Value) -> Value {
    let messages = aws["Messages"].as_array().cloned().unwrap_or_default();
    let converted: Vec<Value> = messages
        .iter()
        .map(|m| {
            let mut out = serde_json::Map::new();
            for key in ["MessageId", "ReceiptHandle", "MD5OfBody", "Body"] {
                if let Some(v) = m.get(key) {
                    out.insert(key.to_string(), v.clone());
                }
            }
            // A JSON map becomes repeated <Element><Name/><Value/></Element>s in XML.
            let mut elements = |map: &str, element: &str| {
                if let Some(attrs) = m[map].as_object() {
                    let list = attrs
                        .iter()
                        .map(|(k, v)| json!({"Name": k, "Value": v}))
                        .collect();
                    out.insert(element.into(), one_or_many(list));
                }
            };
            elements("Attributes", "Attribute");
            elements("MessageAttributes", "MessageAttribute");
            if let Some(md5) = m.get("MD5OfMessageAttributes") {
                out.insert("MD5OfMessageAttributes".into(), md5.clone());
            }
            Value::Object(out)
        })
        .collect();
    if converted.is_empty() {
        Value::Null
    } else {
        json!({"Message": one_or_many(converted)})
    }
}

fn one_or_many(mut list: Vec<Value>) -> Value {
    if list.len() == 1 {
        list.remove(0)
    } else {
        Value::Array(list)
    }
}
