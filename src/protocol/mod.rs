//! Bytes in, bytes out, for both SQS wire protocols: AWS JSON 1.0 (`X-Amz-Target`) and the
//! query protocol (form-encoded `Action=`, XML replies). No queue logic lives here.

pub(crate) mod action;
pub(crate) mod form;
mod member;
pub(crate) mod query;
pub(crate) mod query_json;
pub(crate) mod xml;

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{ErrorCode, SqsError};
pub(crate) use action::Action;
pub(crate) use query_json::{Empty, Member, Shape};
pub(crate) use xml::XmlWriter;

/// The XML namespace of every query-protocol reply.
pub(crate) const XML_NAMESPACE: &str = "http://queue.amazonaws.com/doc/2012-11-05/";
/// Content-Type of JSON requests and replies.
pub(crate) const JSON_CONTENT_TYPE: &str = "application/x-amz-json-1.0";
/// Content-Type of query-protocol replies.
pub(crate) const XML_CONTENT_TYPE: &str = "text/xml";
/// Content-Type of query-protocol replies rendered as JSON.
pub(crate) const QUERY_JSON_CONTENT_TYPE: &str = "application/json";

/// Which wire protocol a request used; replies go back in the same one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    Json,
    Query,
}

/// How a reply is written: JSON 1.0 requests get JSON 1.0, query requests get XML unless
/// they ask for the JSON rendering of the query reply (see [`query_json`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Render {
    Json,
    Xml,
    QueryJson,
}

impl Render {
    /// The rendering of a query request with this `Accept` header and `ContentType`
    /// parameter.
    pub(crate) fn of_query(accept: Option<&str>, content_type_param: Option<&str>) -> Render {
        if content_type_param.is_some_and(|c| c.eq_ignore_ascii_case("JSON"))
            || accept.is_some_and(query_json::accepts_json)
        {
            Render::QueryJson
        } else {
            Render::Xml
        }
    }
}

/// A request's input members, not yet typed.
#[derive(Debug)]
pub(crate) enum Params {
    /// The JSON body, deserialized straight into the typed input.
    Json(Bytes),
    /// Query pairs already rebuilt into the JSON input shape.
    Query(query::Shaped),
}

impl Params {
    /// Deserializes the typed input of an action.
    pub(crate) fn parse<T: DeserializeOwned>(self) -> Result<T, SqsError> {
        match self {
            Params::Json(body) => {
                let body: &[u8] = if body.iter().all(u8::is_ascii_whitespace) {
                    b"{}"
                } else {
                    &body
                };
                serde_json::from_slice(body)
                    .map_err(|e| SqsError::new(ErrorCode::Serialization, e.to_string()))
            }
            Params::Query(shaped) => T::deserialize(shaped).map_err(|e| query::decode_error(&e)),
        }
    }
}

impl Params {
    /// The QueueUrl member, if the request has one (for fault rules and cluster routing).
    pub(crate) fn queue_url_hint(&self) -> Option<String> {
        self.string_member("QueueUrl")
    }

    /// A top-level string member of the input (a second look at a JSON body, which skips
    /// the other members without building them).
    pub(crate) fn string_member(&self, member: &str) -> Option<String> {
        match self {
            Params::Query(shaped) => match shaped.get(member)? {
                query::Shaped::Str(s) => Some(s.clone()),
                _ => None,
            },
            Params::Json(body) => member::string_member(body, member),
        }
    }
}

/// A request whose protocol and action are known.
#[derive(Debug)]
pub(crate) struct Decoded {
    pub protocol: Protocol,
    pub render: Render,
    pub action: Action,
    pub params: Params,
}

/// Why a request could not be decoded far enough to name an action.
#[derive(Debug)]
pub(crate) enum DecodeError {
    /// A query request with no `Action` at all: AWS answers 404 `<UnknownOperationException/>`.
    NoAction,
    /// Anything else, rendered as given.
    Error(Render, SqsError),
}

/// The parts of an HTTP request the decoder looks at.
pub(crate) struct RawRequest<'a> {
    pub is_get: bool,
    pub target: Option<&'a str>,
    pub content_type: Option<&'a str>,
    pub accept: Option<&'a str>,
    pub uri_query: Option<&'a str>,
    pub body: Bytes,
}

/// Works out the protocol and action of a request. An action SQS does not have is refused
/// here, once its parameters are known to be well-formed (as SQS orders the two checks).
pub(crate) fn decode(req: RawRequest<'_>) -> Result<Decoded, DecodeError> {
    if let Some(target) = req.target {
        let action = target
            .strip_prefix("AmazonSQS.")
            .filter(|a| !a.is_empty())
            .ok_or_else(|| {
                DecodeError::Error(
                    Render::Json,
                    SqsError::new(ErrorCode::UnknownOperation, String::new()),
                )
            })?;
        let action = Action::parse(action, Protocol::Json)
            .map_err(|e| DecodeError::Error(Render::Json, e))?;
        return Ok(Decoded {
            protocol: Protocol::Json,
            render: Render::Json,
            action,
            params: Params::Json(req.body),
        });
    }
    let mut pairs: Vec<form::Pair<'_>> = match req.uri_query {
        Some(q) => form::parse(q.as_bytes()),
        None => Vec::new(),
    };
    let form_body = !req.is_get
        && req
            .content_type
            .is_none_or(|ct| ct.starts_with("application/x-www-form-urlencoded"));
    if form_body && !req.body.is_empty() {
        let body = form::parse(&req.body);
        pairs.extend(body);
    }
    let param = |name: &str| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v);
    let render = Render::of_query(req.accept, param("ContentType").map(|v| &**v));
    query::check_bounds(&pairs).map_err(|e| DecodeError::Error(render, e))?;
    let Some(name) = param("Action").map(|v| v.to_string()) else {
        return Err(DecodeError::NoAction);
    };
    let shaped = query::shape_input(pairs).map_err(|e| DecodeError::Error(render, e))?;
    let action =
        Action::parse(&name, Protocol::Query).map_err(|e| DecodeError::Error(render, e))?;
    Ok(Decoded {
        protocol: Protocol::Query,
        render,
        action,
        params: Params::Query(shaped),
    })
}

/// An action's output, renderable in both protocols.
pub(crate) trait Reply: Send {
    /// The JSON body.
    fn write_json(&self, out: &mut Vec<u8>);
    /// The children of `<{Action}Result>`.
    fn write_xml(&self, w: &mut XmlWriter);
    /// The shape of the `{Action}Result` member; `None` for actions whose reply has none.
    fn shape(&self) -> Option<&'static Shape>;
}

/// How an output type writes its XML result and what shape its result has; its JSON
/// comes from `Serialize`.
pub(crate) trait XmlResult {
    /// The children of `<{Action}Result>`.
    fn write_xml(&self, w: &mut XmlWriter);
    /// The shape of the result; `None` for actions that return nothing.
    const SHAPE: Option<&'static Shape>;
}

impl<T: Serialize + XmlResult + Send> Reply for T {
    fn write_json(&self, out: &mut Vec<u8>) {
        // Serializing plain structs of strings and numbers into a Vec cannot fail.
        let _ = serde_json::to_writer(out, self);
    }
    fn write_xml(&self, w: &mut XmlWriter) {
        XmlResult::write_xml(self, w)
    }
    fn shape(&self) -> Option<&'static Shape> {
        T::SHAPE
    }
}

/// Serializes any `Display` value as a string (ids and digests kept in binary form).
pub(crate) struct AsStr<T>(pub T);

impl<T: std::fmt::Display> Serialize for AsStr<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

/// Writes `s` as a JSON string. Ids, digests and numbers need no escaping and are copied
/// as they are; anything else goes through serde_json.
pub(crate) fn json_str(out: &mut Vec<u8>, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        // Serializing a string into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, s);
    }
}

/// A reply ready for HTTP.
#[derive(Debug)]
pub(crate) struct Encoded {
    pub status: u16,
    pub content_type: &'static str,
    /// `x-amzn-query-error` for JSON errors.
    pub query_error: Option<String>,
    /// For an error, its AWS code (the query protocol's spelling), for logs.
    pub error: Option<&'static str>,
    pub body: Vec<u8>,
}

/// Renders a successful reply.
pub(crate) fn encode_reply(
    render: Render,
    action: Action,
    request_id: &str,
    reply: &dyn Reply,
) -> Encoded {
    match render {
        Render::Json => {
            // A full SendMessageBatch or ReceiveMessage reply fits without regrowing.
            let mut body = Vec::with_capacity(4096);
            reply.write_json(&mut body);
            Encoded {
                status: 200,
                content_type: JSON_CONTENT_TYPE,
                query_error: None,
                error: None,
                body,
            }
        }
        Render::QueryJson => {
            let result = reply.shape().map(|shape| {
                let mut json = Vec::with_capacity(4096);
                reply.write_json(&mut json);
                let value = serde_json::from_slice(&json).unwrap_or_default();
                query_json::render(Some(&value), shape)
            });
            Encoded {
                status: 200,
                content_type: QUERY_JSON_CONTENT_TYPE,
                query_error: None,
                error: None,
                body: query_json::reply(action.name(), request_id, result),
            }
        }
        Render::Xml => {
            let mut w = XmlWriter::with_capacity(4096);
            w.raw("<?xml version=\"1.0\"?><");
            w.raw(action.name());
            w.raw("Response xmlns=\"");
            w.raw(XML_NAMESPACE);
            w.raw("\">");
            if reply.shape().is_some() {
                // Written in place; an empty result becomes `<{Action}Result/>` afterwards.
                w.raw("<");
                w.raw(action.name());
                w.raw("Result>");
                let start = w.len();
                reply.write_xml(&mut w);
                if w.len() == start {
                    w.truncate(start - 1);
                    w.raw("/>");
                } else {
                    w.raw("</");
                    w.raw(action.name());
                    w.raw("Result>");
                }
            }
            w.raw("<ResponseMetadata><RequestId>");
            w.raw(request_id);
            w.raw("</RequestId></ResponseMetadata></");
            w.raw(action.name());
            w.raw("Response>");
            Encoded {
                status: 200,
                content_type: XML_CONTENT_TYPE,
                query_error: None,
                error: None,
                body: w.into_bytes(),
            }
        }
    }
}

/// Renders an error in the protocol's shape.
pub(crate) fn encode_error(render: Render, request_id: &str, err: &SqsError) -> Encoded {
    let code = err.code;
    render_error(
        render,
        request_id,
        &ErrorParts {
            status: code.status(),
            json_type: code.json_type(),
            query_code: code.query_code(),
            fault: code.fault(),
            message: Some(&err.message),
            query_message: Some(err.query_message()),
        },
    )
}

/// An error outside SQS's table, in the same wire shapes: what a LocalStack-compatible
/// endpoint answers (its own codes, or another service's `InternalFailure`). A `None`
/// message is left out, as LocalStack leaves out an empty one.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ForeignError<'a> {
    pub status: u16,
    pub code: &'static str,
    pub fault: &'static str,
    pub message: Option<&'a str>,
}

/// Renders a [`ForeignError`] in the protocol's shape.
pub(crate) fn encode_foreign_error(
    render: Render,
    request_id: &str,
    e: ForeignError<'_>,
) -> Encoded {
    render_error(
        render,
        request_id,
        &ErrorParts {
            status: e.status,
            json_type: e.code,
            query_code: e.code,
            fault: e.fault,
            message: e.message,
            query_message: e.message,
        },
    )
}

/// What every error reply is made of.
struct ErrorParts<'a> {
    status: u16,
    json_type: &'a str,
    query_code: &'static str,
    fault: &'a str,
    message: Option<&'a str>,
    /// The message in query replies (AWS words a few differently there).
    query_message: Option<&'a str>,
}

fn render_error(render: Render, request_id: &str, e: &ErrorParts<'_>) -> Encoded {
    let mut encoded = match render {
        Render::Json => {
            #[derive(Serialize)]
            struct Body<'a> {
                #[serde(rename = "__type")]
                kind: &'a str,
                #[serde(skip_serializing_if = "Option::is_none")]
                message: Option<&'a str>,
            }
            let body = serde_json::to_vec(&Body {
                kind: e.json_type,
                message: e.message,
            })
            .unwrap_or_default();
            Encoded {
                status: e.status,
                content_type: JSON_CONTENT_TYPE,
                query_error: Some(format!("{};{}", e.query_code, e.fault)),
                error: None,
                body,
            }
        }
        Render::QueryJson => Encoded {
            status: e.status,
            content_type: QUERY_JSON_CONTENT_TYPE,
            query_error: None,
            error: None,
            body: query_json::error(
                e.query_code,
                e.query_message.unwrap_or_default(),
                e.fault,
                request_id,
            ),
        },
        Render::Xml => {
            let mut w = XmlWriter::with_capacity(384);
            w.raw("<?xml version=\"1.0\"?><ErrorResponse xmlns=\"");
            w.raw(XML_NAMESPACE);
            w.raw("\"><Error>");
            w.elem("Type", e.fault);
            w.elem("Code", e.query_code);
            if let Some(m) = e.query_message {
                w.elem("Message", m);
            }
            w.raw("<Detail/></Error>");
            w.elem("RequestId", request_id);
            w.raw("</ErrorResponse>");
            Encoded {
                status: e.status,
                content_type: XML_CONTENT_TYPE,
                query_error: None,
                error: None,
                body: w.into_bytes(),
            }
        }
    };
    encoded.error = Some(e.query_code);
    encoded
}

/// The reply to a query request that names no action at all.
pub(crate) fn encode_no_action() -> Encoded {
    Encoded {
        status: 404,
        content_type: XML_CONTENT_TYPE,
        query_error: None,
        error: Some("UnknownOperationException"),
        body: b"<UnknownOperationException/>".to_vec(),
    }
}
