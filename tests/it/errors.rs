//! Every error the core actions can raise, sent as a raw request in both protocols: the
//! query code, HTTP status, `x-amzn-query-error` header and JSON `__type` must match the
//! reference table, and the XML `ErrorResponse` must carry the same code.

use crate::common;

use common::{json, query, query_at, raw, raw_url, start, RawResponse};
use serde_json::{json, Value};
use sqsim::Server;

struct Case {
    what: &'static str,
    action: &'static str,
    json: Value,
    query: Vec<(String, String)>,
    code: &'static str,
    status: u16,
    json_type: &'static str,
    /// Expected message, when the reference pins it.
    message: Option<&'static str>,
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const IPV: &str = "com.amazon.coral.service#InvalidParameterValueException";
const MISSING: &str = "com.amazon.coral.service#MissingRequiredParameterException";

fn cases() -> Vec<Case> {
    let q = raw_url("e");
    let missing = raw_url("missing");
    let mut v = Vec::new();
    let mut add = |what, action, json, query: &[(&str, &str)], code, status, json_type, message| {
        v.push(Case {
            what,
            action,
            json,
            query: pairs(query),
            code,
            status,
            json_type,
            message,
        })
    };
    add(
        "unknown queue",
        "SendMessage",
        json!({"QueueUrl": missing, "MessageBody": "x"}),
        &[("QueueUrl", &missing), ("MessageBody", "x")],
        "AWS.SimpleQueueService.NonExistentQueue",
        400,
        "com.amazonaws.sqs#QueueDoesNotExist",
        None,
    );
    add(
        "missing MessageBody",
        "SendMessage",
        json!({"QueueUrl": q}),
        &[("QueueUrl", &q)],
        "MissingParameter",
        400,
        MISSING,
        Some("The request must contain the parameter MessageBody."),
    );
    add(
        "empty MessageBody",
        "SendMessage",
        json!({"QueueUrl": q, "MessageBody": ""}),
        &[("QueueUrl", &q), ("MessageBody", "")],
        "MissingParameter",
        400,
        MISSING,
        Some("The request must contain the parameter MessageBody."),
    );
    add(
        "missing QueueName",
        "CreateQueue",
        json!({}),
        &[],
        "MissingParameter",
        400,
        MISSING,
        Some("The request must contain the parameter QueueName."),
    );
    add(
        "missing ReceiptHandle",
        "DeleteMessage",
        json!({"QueueUrl": q}),
        &[("QueueUrl", &q)],
        "MissingParameter",
        400,
        MISSING,
        Some("The request must contain the parameter ReceiptHandle."),
    );
    add(
        "bad queue name",
        "CreateQueue",
        json!({"QueueName": "bad name!"}),
        &[("QueueName", "bad name!")],
        "InvalidParameterValue",
        400,
        IPV,
        None,
    );
    add(
        "FIFO name without FifoQueue",
        "CreateQueue",
        json!({"QueueName": "x.fifo"}),
        &[("QueueName", "x.fifo")],
        "InvalidParameterValue",
        400,
        IPV,
        None,
    );
    add(
        "FifoQueue=false on a standard queue",
        "CreateQueue",
        json!({"QueueName": "std", "Attributes": {"FifoQueue": "false"}}),
        &[
            ("QueueName", "std"),
            ("Attribute.1.Name", "FifoQueue"),
            ("Attribute.1.Value", "false"),
        ],
        "InvalidAttributeName",
        400,
        "com.amazonaws.sqs#InvalidAttributeName",
        Some("Unknown Attribute FifoQueue."),
    );
    add(
        "DeduplicationScope on a standard queue",
        "CreateQueue",
        json!({"QueueName": "std2", "Attributes": {"DeduplicationScope": "queue"}}),
        &[
            ("QueueName", "std2"),
            ("Attribute.1.Name", "DeduplicationScope"),
            ("Attribute.1.Value", "queue"),
        ],
        "InvalidAttributeName",
        400,
        "com.amazonaws.sqs#InvalidAttributeName",
        Some("You can specify the DeduplicationScope only when FifoQueue is set to true."),
    );
    add(
        "attribute out of range",
        "SetQueueAttributes",
        json!({"QueueUrl": q, "Attributes": {"VisibilityTimeout": "43201"}}),
        &[
            ("QueueUrl", &q),
            ("Attribute.1.Name", "VisibilityTimeout"),
            ("Attribute.1.Value", "43201"),
        ],
        "InvalidAttributeValue",
        400,
        "com.amazonaws.sqs#InvalidAttributeValue",
        Some("Invalid value for the parameter VisibilityTimeout."),
    );
    add(
        "read-only attribute",
        "SetQueueAttributes",
        json!({"QueueUrl": q, "Attributes": {"QueueArn": "x"}}),
        &[
            ("QueueUrl", &q),
            ("Attribute.1.Name", "QueueArn"),
            ("Attribute.1.Value", "x"),
        ],
        "InvalidAttributeName",
        400,
        "com.amazonaws.sqs#InvalidAttributeName",
        Some("Unknown Attribute QueueArn."),
    );
    add(
        "unknown attribute name",
        "GetQueueAttributes",
        json!({"QueueUrl": q, "AttributeNames": ["Foobar"]}),
        &[("QueueUrl", &q), ("AttributeName.1", "Foobar")],
        "InvalidAttributeName",
        400,
        "com.amazonaws.sqs#InvalidAttributeName",
        Some("Unknown Attribute Foobar."),
    );
    add(
        "both SSE kinds",
        "SetQueueAttributes",
        json!({"QueueUrl": q, "Attributes": {"KmsMasterKeyId": "alias/x", "SqsManagedSseEnabled": "true"}}),
        &[("QueueUrl", &q), ("Attribute.1.Name", "KmsMasterKeyId"), ("Attribute.1.Value", "alias/x"),
          ("Attribute.2.Name", "SqsManagedSseEnabled"), ("Attribute.2.Value", "true")],
        "InvalidAttributeName",
        400,
        "com.amazonaws.sqs#InvalidAttributeName",
        Some("You can use one type of server-side encryption (SSE) at one time. You can either enable KMS SSE or SQS SSE."),
    );
    add(
        "different attributes for an existing name",
        "CreateQueue",
        json!({"QueueName": "e", "Attributes": {"DelaySeconds": "7"}}),
        &[("QueueName", "e"), ("Attribute.1.Name", "DelaySeconds"), ("Attribute.1.Value", "7")],
        "QueueAlreadyExists",
        400,
        "com.amazonaws.sqs#QueueNameExists",
        Some("A queue already exists with the same name and a different value for attribute DelaySeconds"),
    );
    add(
        "invalid body characters",
        "SendMessage",
        json!({"QueueUrl": q, "MessageBody": "a\u{8}b"}),
        &[("QueueUrl", &q), ("MessageBody", "a\u{8}b")],
        "InvalidMessageContents",
        400,
        "com.amazonaws.sqs#InvalidMessageContents",
        None,
    );
    add(
        "per-message delay out of range",
        "SendMessage",
        json!({"QueueUrl": q, "MessageBody": "x", "DelaySeconds": 901}),
        &[
            ("QueueUrl", &q),
            ("MessageBody", "x"),
            ("DelaySeconds", "901"),
        ],
        "InvalidParameterValue",
        400,
        IPV,
        None,
    );
    add(
        "empty string attribute value",
        "SendMessage",
        json!({"QueueUrl": q, "MessageBody": "x", "MessageAttributes": {"ErrorDetails": {"DataType": "String", "StringValue": ""}}}),
        &[("QueueUrl", &q), ("MessageBody", "x"), ("MessageAttribute.1.Name", "ErrorDetails"),
          ("MessageAttribute.1.Value.DataType", "String"), ("MessageAttribute.1.Value.StringValue", "")],
        "InvalidParameterValue",
        400,
        IPV,
        Some("Message (user) attribute 'ErrorDetails' must contain a non-empty value of type 'String'."),
    );
    add(
        "deduplication id on a standard queue",
        "SendMessage",
        json!({"QueueUrl": q, "MessageBody": "x", "MessageDeduplicationId": "d"}),
        &[("QueueUrl", &q), ("MessageBody", "x"), ("MessageDeduplicationId", "d")],
        "InvalidParameterValue",
        400,
        IPV,
        Some("Value d for parameter MessageDeduplicationId is invalid. Reason: The request includes a parameter that is not valid for this queue type."),
    );
    add(
        "MaxNumberOfMessages 11",
        "ReceiveMessage",
        json!({"QueueUrl": q, "MaxNumberOfMessages": 11}),
        &[("QueueUrl", &q), ("MaxNumberOfMessages", "11")],
        "InvalidParameterValue",
        400,
        IPV,
        Some("Value 11 for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided."),
    );
    add(
        "WaitTimeSeconds 21",
        "ReceiveMessage",
        json!({"QueueUrl": q, "WaitTimeSeconds": 21}),
        &[("QueueUrl", &q), ("WaitTimeSeconds", "21")],
        "InvalidParameterValue",
        400,
        IPV,
        Some("Value 21 for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided."),
    );
    add(
        "WaitTimeSeconds -1",
        "ReceiveMessage",
        json!({"QueueUrl": q, "WaitTimeSeconds": -1}),
        &[("QueueUrl", &q), ("WaitTimeSeconds", "-1")],
        "InvalidParameterValue",
        400,
        IPV,
        Some("Value -1 for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided."),
    );
    add(
        "receive VisibilityTimeout out of range",
        "ReceiveMessage",
        json!({"QueueUrl": q, "VisibilityTimeout": 43201}),
        &[("QueueUrl", &q), ("VisibilityTimeout", "43201")],
        "InvalidParameterValue",
        400,
        IPV,
        None,
    );
    add(
        "garbage receipt handle on delete",
        "DeleteMessage",
        json!({"QueueUrl": q, "ReceiptHandle": "garbage"}),
        &[("QueueUrl", &q), ("ReceiptHandle", "garbage")],
        "ReceiptHandleIsInvalid",
        404,
        "com.amazonaws.sqs#ReceiptHandleIsInvalid",
        Some("The input receipt handle \"garbage\" is not a valid receipt handle."),
    );
    add(
        "garbage receipt handle on visibility change",
        "ChangeMessageVisibility",
        json!({"QueueUrl": q, "ReceiptHandle": "garbage", "VisibilityTimeout": 5}),
        &[
            ("QueueUrl", &q),
            ("ReceiptHandle", "garbage"),
            ("VisibilityTimeout", "5"),
        ],
        "ReceiptHandleIsInvalid",
        404,
        "com.amazonaws.sqs#ReceiptHandleIsInvalid",
        None,
    );
    add(
        "visibility change out of range",
        "ChangeMessageVisibility",
        json!({"QueueUrl": q, "ReceiptHandle": "garbage", "VisibilityTimeout": 43201}),
        &[
            ("QueueUrl", &q),
            ("ReceiptHandle", "garbage"),
            ("VisibilityTimeout", "43201"),
        ],
        "InvalidParameterValue",
        400,
        IPV,
        None,
    );
    add(
        "ListQueues MaxResults 0",
        "ListQueues",
        json!({"MaxResults": 0}),
        &[("MaxResults", "0")],
        "InvalidParameterValue",
        400,
        IPV,
        None,
    );
    let f = raw_url("e.fifo");
    add(
        "FIFO send without MessageGroupId",
        "SendMessage",
        json!({"QueueUrl": f, "MessageBody": "x", "MessageDeduplicationId": "d"}),
        &[
            ("QueueUrl", &f),
            ("MessageBody", "x"),
            ("MessageDeduplicationId", "d"),
        ],
        "MissingParameter",
        400,
        MISSING,
        Some("The request must contain the parameter MessageGroupId."),
    );
    add(
        "FIFO send without a deduplication id",
        "SendMessage",
        json!({"QueueUrl": f, "MessageBody": "x", "MessageGroupId": "g"}),
        &[("QueueUrl", &f), ("MessageBody", "x"), ("MessageGroupId", "g")],
        "InvalidParameterValue",
        400,
        IPV,
        Some("The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly"),
    );
    add(
        "FIFO batch with an entry lacking MessageGroupId",
        "SendMessageBatch",
        json!({"QueueUrl": f, "Entries": [{"Id": "a", "MessageBody": "x", "MessageDeduplicationId": "d"}]}),
        &[
            ("QueueUrl", &f),
            ("SendMessageBatchRequestEntry.1.Id", "a"),
            ("SendMessageBatchRequestEntry.1.MessageBody", "x"),
            ("SendMessageBatchRequestEntry.1.MessageDeduplicationId", "d"),
        ],
        "InvalidParameterValue",
        400,
        IPV,
        Some("The request must contain the parameter MessageGroupId."),
    );
    add(
        "FIFO per-message delay",
        "SendMessage",
        json!({"QueueUrl": f, "MessageBody": "x", "MessageGroupId": "g", "MessageDeduplicationId": "d", "DelaySeconds": 2}),
        &[("QueueUrl", &f), ("MessageBody", "x"), ("MessageGroupId", "g"), ("MessageDeduplicationId", "d"), ("DelaySeconds", "2")],
        "InvalidParameterValue",
        400,
        IPV,
        Some("Value 2 for parameter DelaySeconds is invalid. Reason: The request include parameter that is not valid for this queue type."),
    );
    add(
        "invalid MessageGroupId",
        "SendMessage",
        json!({"QueueUrl": f, "MessageBody": "x", "MessageGroupId": "a b", "MessageDeduplicationId": "d"}),
        &[("QueueUrl", &f), ("MessageBody", "x"), ("MessageGroupId", "a b"), ("MessageDeduplicationId", "d")],
        "InvalidParameterValue",
        400,
        IPV,
        Some("Value a b for parameter MessageGroupId is invalid. Reason: MessageGroupId can only include alphanumeric and punctuation characters. 1 to 128 in length."),
    );
    add(
        "changing the queue type",
        "SetQueueAttributes",
        json!({"QueueUrl": f, "Attributes": {"FifoQueue": "false"}}),
        &[("QueueUrl", &f), ("Attribute.1.Name", "FifoQueue"), ("Attribute.1.Value", "false")],
        "InvalidAttributeValue",
        400,
        "com.amazonaws.sqs#InvalidAttributeValue",
        Some("Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported."),
    );
    add(
        "perMessageGroupId throughput without messageGroup scope",
        "SetQueueAttributes",
        json!({"QueueUrl": f, "Attributes": {"FifoThroughputLimit": "perMessageGroupId"}}),
        &[
            ("QueueUrl", &f),
            ("Attribute.1.Name", "FifoThroughputLimit"),
            ("Attribute.1.Value", "perMessageGroupId"),
        ],
        "InvalidAttributeValue",
        400,
        "com.amazonaws.sqs#InvalidAttributeValue",
        None,
    );
    for (action, entry) in [
        ("SendMessageBatch", "SendMessageBatchRequestEntry"),
        ("DeleteMessageBatch", "DeleteMessageBatchRequestEntry"),
        (
            "ChangeMessageVisibilityBatch",
            "ChangeMessageVisibilityBatchRequestEntry",
        ),
    ] {
        let _ = entry;
        add(
            "empty batch",
            action,
            json!({"QueueUrl": q, "Entries": []}),
            &[("QueueUrl", &q)],
            "AWS.SimpleQueueService.EmptyBatchRequest",
            400,
            "com.amazonaws.sqs#EmptyBatchRequest",
            None,
        );
    }
    v
}

/// Batch cases, built with loops.
fn batch_cases() -> Vec<Case> {
    let q = raw_url("e");
    let mut v = Vec::new();
    let entries = |n: usize, id: &dyn Fn(usize) -> String, body: &str| {
        let json: Vec<Value> = (0..n)
            .map(|i| json!({"Id": id(i), "MessageBody": body, "ReceiptHandle": "h", "VisibilityTimeout": 1}))
            .collect();
        let mut query = vec![("QueueUrl".to_string(), q.clone())];
        for i in 0..n {
            let p = format!("SendMessageBatchRequestEntry.{}", i + 1);
            query.push((format!("{p}.Id"), id(i)));
            query.push((format!("{p}.MessageBody"), body.to_string()));
        }
        (json, query)
    };
    let (j, qp) = entries(11, &|i| format!("m{i}"), "x");
    v.push(Case {
        what: "11 entries",
        action: "SendMessageBatch",
        json: json!({"QueueUrl": q, "Entries": j}),
        query: qp,
        code: "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
        status: 400,
        json_type: "com.amazonaws.sqs#TooManyEntriesInBatchRequest",
        message: Some("Maximum number of entries per request are 10. You have sent 11."),
    });
    let (j, qp) = entries(2, &|_| "same".to_string(), "x");
    v.push(Case {
        what: "duplicate ids",
        action: "SendMessageBatch",
        json: json!({"QueueUrl": q, "Entries": j}),
        query: qp,
        code: "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
        status: 400,
        json_type: "com.amazonaws.sqs#BatchEntryIdsNotDistinct",
        message: None,
    });
    let (j, qp) = entries(1, &|_| "bad id!".to_string(), "x");
    v.push(Case {
        what: "invalid id",
        action: "SendMessageBatch",
        json: json!({"QueueUrl": q, "Entries": j}),
        query: qp,
        code: "AWS.SimpleQueueService.InvalidBatchEntryId",
        status: 400,
        json_type: "com.amazonaws.sqs#InvalidBatchEntryId",
        message: Some("A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long."),
    });
    let big = "x".repeat(262_145);
    let (j, qp) = entries(4, &|i| format!("m{i}"), &big);
    v.push(Case {
        what: "batch too long",
        action: "SendMessageBatch",
        json: json!({"QueueUrl": q, "Entries": j}),
        query: qp,
        code: "AWS.SimpleQueueService.BatchRequestTooLong",
        status: 400,
        json_type: "com.amazonaws.sqs#BatchRequestTooLong",
        message: Some(
            "Batch requests cannot be longer than 1048576 bytes. You have sent 1048580 bytes.",
        ),
    });
    v
}

fn check_json(case: &Case, r: &RawResponse) {
    assert_eq!(r.status, case.status, "{} (JSON): {}", case.what, r.body);
    assert_eq!(
        r.header("x-amzn-query-error"),
        Some(format!("{};Sender", case.code).as_str()),
        "{} (JSON)",
        case.what
    );
    assert!(r.header("x-amzn-requestid").is_some());
    assert_eq!(r.header("content-type"), Some("application/x-amz-json-1.0"));
    let body = r.json();
    assert_eq!(body["__type"], case.json_type, "{} (JSON)", case.what);
    let message = body["message"].as_str().unwrap_or_default();
    assert!(!message.is_empty(), "{}: empty message", case.what);
    if let Some(m) = case.message {
        assert_eq!(message, m, "{} (JSON)", case.what);
    }
}

fn check_query(case: &Case, r: &RawResponse) {
    assert_eq!(r.status, case.status, "{} (query): {}", case.what, r.body);
    assert_eq!(r.header("content-type"), Some("text/xml"));
    assert!(r.header("x-amzn-requestid").is_some());
    assert!(r.body.starts_with("<?xml version=\"1.0\"?><ErrorResponse xmlns=\"http://queue.amazonaws.com/doc/2012-11-05/\"><Error><Type>Sender</Type>"), "{}", r.body);
    assert!(
        r.body.contains("<Detail/></Error><RequestId>"),
        "{}",
        r.body
    );
    assert_eq!(
        r.xml_text("Code").as_deref(),
        Some(case.code),
        "{} (query)",
        case.what
    );
    if let Some(m) = case.message {
        assert_eq!(
            r.xml_text("Message").as_deref(),
            Some(m),
            "{} (query)",
            case.what
        );
    }
}

async fn setup() -> Server {
    let server = start().await;
    let r = json(&server, "CreateQueue", &json!({"QueueName": "e"})).await;
    assert_eq!(r.status, 200);
    let r = json(
        &server,
        "CreateQueue",
        &json!({"QueueName": "e.fifo", "Attributes": {"FifoQueue": "true"}}),
    )
    .await;
    assert_eq!(r.status, 200);
    server
}

#[tokio::test]
async fn every_error_in_both_protocols() {
    let server = setup().await;
    let mut all = cases();
    all.extend(batch_cases());
    for case in &all {
        let r = json(&server, case.action, &case.json).await;
        check_json(case, &r);
        let mut q: Vec<(&str, &str)> = vec![("Action", case.action), ("Version", "2012-11-05")];
        q.extend(case.query.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let r = query(&server, &q).await;
        check_query(case, &r);
    }
}

#[tokio::test]
async fn queue_does_not_exist_is_worded_per_protocol() {
    let server = setup().await;
    let missing = raw_url("missing");
    let r = json(&server, "GetQueueAttributes", &json!({"QueueUrl": missing})).await;
    assert_eq!(r.json()["message"], "The specified queue does not exist.");
    let r = query(
        &server,
        &[("Action", "GetQueueAttributes"), ("QueueUrl", &missing)],
    )
    .await;
    assert_eq!(
        r.xml_text("Message").as_deref(),
        Some("The specified queue does not exist for this wsdl version.")
    );
}

#[tokio::test]
async fn purge_in_progress_is_403_in_both_protocols() {
    let server = setup().await;
    let q = raw_url("e");
    let r = json(&server, "PurgeQueue", &json!({"QueueUrl": q})).await;
    assert_eq!(r.status, 200);
    let r = json(&server, "PurgeQueue", &json!({"QueueUrl": q})).await;
    assert_eq!(r.status, 403);
    assert_eq!(
        r.header("x-amzn-query-error"),
        Some("AWS.SimpleQueueService.PurgeQueueInProgress;Sender")
    );
    assert_eq!(r.json()["__type"], "com.amazonaws.sqs#PurgeQueueInProgress");
    let r = query(&server, &[("Action", "PurgeQueue"), ("QueueUrl", &q)]).await;
    assert_eq!(r.status, 403);
    assert_eq!(
        r.xml_text("Code").as_deref(),
        Some("AWS.SimpleQueueService.PurgeQueueInProgress")
    );
}

#[tokio::test]
async fn over_limit_is_403_in_both_protocols() {
    let mut config = sqsim::Config::default();
    config.engine.max_in_flight = 2;
    let server = common::start_with(config).await;
    let q = raw_url("small");
    json(&server, "CreateQueue", &json!({"QueueName": "small"})).await;
    for _ in 0..3 {
        json(
            &server,
            "SendMessage",
            &json!({"QueueUrl": q, "MessageBody": "x"}),
        )
        .await;
    }
    let r = json(
        &server,
        "ReceiveMessage",
        &json!({"QueueUrl": q, "MaxNumberOfMessages": 10}),
    )
    .await;
    assert_eq!(r.json()["Messages"].as_array().unwrap().len(), 2);
    let r = json(&server, "ReceiveMessage", &json!({"QueueUrl": q})).await;
    assert_eq!(r.status, 403);
    assert_eq!(r.header("x-amzn-query-error"), Some("OverLimit;Sender"));
    assert_eq!(r.json()["__type"], "com.amazonaws.sqs#OverLimit");
    let r = query(&server, &[("Action", "ReceiveMessage"), ("QueueUrl", &q)]).await;
    assert_eq!(r.status, 403);
    assert_eq!(r.xml_text("Code").as_deref(), Some("OverLimit"));
    let r = query(
        &server,
        &[
            ("Action", "ReceiveMessage"),
            ("QueueUrl", &q),
            ("WaitTimeSeconds", "1"),
        ],
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(r.body.contains("<ReceiveMessageResult/>"), "{}", r.body);
}

#[tokio::test]
async fn query_only_errors() {
    let server = setup().await;
    let r = query(&server, &[("Action", "FooBar")]).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.xml_text("Code").as_deref(), Some("InvalidAction"));
    assert_eq!(
        r.xml_text("Message").as_deref(),
        Some("The action FooBar is not valid for this endpoint.")
    );
    let r = query_at(
        &server,
        "/000000000000/e",
        &[("Action", "CreateQueue"), ("QueueName", "z")],
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.xml_text("Code").as_deref(), Some("InvalidAction"));
    assert_eq!(
        r.xml_text("Message").as_deref(),
        Some("The action CreateQueue is not valid for this endpoint.")
    );
    let r = raw(&server, "GET", "/000000000000/e", &[], b"").await;
    assert_eq!(r.status, 404);
    assert!(r.body.contains("<UnknownOperationException/>"));
}

#[tokio::test]
async fn json_decoding_errors() {
    let server = setup().await;
    let r = raw(
        &server,
        "POST",
        "/",
        &[
            ("Content-Type", "application/x-amz-json-1.0"),
            ("X-Amz-Target", "AmazonSQS.SendMessage"),
        ],
        b"{not json",
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json()["__type"],
        "com.amazon.coral.service#SerializationException"
    );
    let r = json(&server, "NoSuchThing", &json!({})).await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json()["__type"],
        "com.amazon.coral.service#UnknownOperationException"
    );
    let r = json(
        &server,
        "ReceiveMessage",
        &json!({"QueueUrl": raw_url("e"), "MaxNumberOfMessages": "ten"}),
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json()["__type"],
        "com.amazon.coral.service#SerializationException"
    );
}

#[tokio::test]
async fn expired_fifo_handle_in_both_protocols() {
    let server = setup().await;
    let f = raw_url("e.fifo");
    let send = json!({"QueueUrl": f, "MessageBody": "x", "MessageGroupId": "g", "MessageDeduplicationId": "1"});
    assert_eq!(json(&server, "SendMessage", &send).await.status, 200);
    // Received with a zero timeout: the handle is expired at once.
    let r = json(
        &server,
        "ReceiveMessage",
        &json!({"QueueUrl": f, "VisibilityTimeout": 0}),
    )
    .await;
    let handle = r.json()["Messages"][0]["ReceiptHandle"]
        .as_str()
        .unwrap()
        .to_string();
    let expected = format!("Value {handle} for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired.");
    let r = json(
        &server,
        "DeleteMessage",
        &json!({"QueueUrl": f, "ReceiptHandle": handle}),
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.header("x-amzn-query-error"),
        Some("InvalidParameterValue;Sender")
    );
    assert_eq!(r.json()["message"], expected.as_str());
    let r = query(
        &server,
        &[
            ("Action", "DeleteMessage"),
            ("QueueUrl", &f),
            ("ReceiptHandle", &handle),
        ],
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.xml_text("Code").as_deref(), Some("InvalidParameterValue"));
    assert_eq!(r.xml_text("Message").as_deref(), Some(expected.as_str()));
}
