//! The one wire error type. [`ErrorCode`] is the table of every SQS error: its JSON shape,
//! its query-protocol code, its HTTP status and whether it is the sender's fault. The
//! protocol layer renders an [`SqsError`] in either shape from this table alone.

use std::borrow::Cow;

/// Every error sqsim can send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorCode {
    QueueDoesNotExist,
    QueueNameExists,
    QueueDeletedRecently,
    InvalidAttributeName,
    InvalidAttributeValue,
    InvalidMessageContents,
    ReceiptHandleIsInvalid,
    OverLimit,
    PurgeQueueInProgress,
    EmptyBatchRequest,
    TooManyEntriesInBatchRequest,
    BatchEntryIdsNotDistinct,
    InvalidBatchEntryId,
    BatchRequestTooLong,
    ResourceNotFound,
    RequestThrottled,
    InvalidParameterValue,
    MissingParameter,
    /// Query protocol: unknown or misplaced Action.
    InvalidAction,
    /// JSON protocol: unknown X-Amz-Target operation.
    UnknownOperation,
    /// JSON body that does not parse or has members of the wrong type.
    Serialization,
    /// Query protocol: a form or query string beyond what any SQS request can be (a key too
    /// long or too deep, too many pairs). AWS's common error, status 404 as AWS documents it.
    MalformedQueryString,
    /// The request body is larger than the server accepts.
    RequestEntityTooLarge,
    InternalFailure,
    /// Throttling as the AWS front end reports it (what SDK retry logic expects).
    Throttling,
    ServiceUnavailable,
    KmsThrottled,
    /// SigV4: the signature is wrong, or expired.
    SignatureDoesNotMatch,
    /// SigV4: unknown access key.
    InvalidClientTokenId,
    /// SigV4: no signature at all.
    MissingAuthenticationToken,
    /// SigV4: a malformed Authorization header or credential.
    IncompleteSignature,
    /// Another account's queue without a grant (AddPermission or the queue's Policy), or a
    /// request a browser sent from a page of another origin.
    AccessDenied,
}

/// One row of the error table.
struct Row {
    json_type: &'static str,
    query_code: &'static str,
    status: u16,
}

impl ErrorCode {
    fn row(self) -> Row {
        use ErrorCode::*;
        let (json_type, query_code, status) = match self {
            QueueDoesNotExist => (
                "com.amazonaws.sqs#QueueDoesNotExist",
                "AWS.SimpleQueueService.NonExistentQueue",
                400,
            ),
            QueueNameExists => (
                "com.amazonaws.sqs#QueueNameExists",
                "QueueAlreadyExists",
                400,
            ),
            QueueDeletedRecently => (
                "com.amazonaws.sqs#QueueDeletedRecently",
                "AWS.SimpleQueueService.QueueDeletedRecently",
                400,
            ),
            InvalidAttributeName => (
                "com.amazonaws.sqs#InvalidAttributeName",
                "InvalidAttributeName",
                400,
            ),
            InvalidAttributeValue => (
                "com.amazonaws.sqs#InvalidAttributeValue",
                "InvalidAttributeValue",
                400,
            ),
            InvalidMessageContents => (
                "com.amazonaws.sqs#InvalidMessageContents",
                "InvalidMessageContents",
                400,
            ),
            ReceiptHandleIsInvalid => (
                "com.amazonaws.sqs#ReceiptHandleIsInvalid",
                "ReceiptHandleIsInvalid",
                404,
            ),
            OverLimit => ("com.amazonaws.sqs#OverLimit", "OverLimit", 403),
            PurgeQueueInProgress => (
                "com.amazonaws.sqs#PurgeQueueInProgress",
                "AWS.SimpleQueueService.PurgeQueueInProgress",
                403,
            ),
            EmptyBatchRequest => (
                "com.amazonaws.sqs#EmptyBatchRequest",
                "AWS.SimpleQueueService.EmptyBatchRequest",
                400,
            ),
            TooManyEntriesInBatchRequest => (
                "com.amazonaws.sqs#TooManyEntriesInBatchRequest",
                "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
                400,
            ),
            BatchEntryIdsNotDistinct => (
                "com.amazonaws.sqs#BatchEntryIdsNotDistinct",
                "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
                400,
            ),
            InvalidBatchEntryId => (
                "com.amazonaws.sqs#InvalidBatchEntryId",
                "AWS.SimpleQueueService.InvalidBatchEntryId",
                400,
            ),
            BatchRequestTooLong => (
                "com.amazonaws.sqs#BatchRequestTooLong",
                "AWS.SimpleQueueService.BatchRequestTooLong",
                400,
            ),
            ResourceNotFound => (
                "com.amazonaws.sqs#ResourceNotFoundException",
                "ResourceNotFoundException",
                404,
            ),
            RequestThrottled => (
                "com.amazonaws.sqs#RequestThrottled",
                "RequestThrottled",
                403,
            ),
            InvalidParameterValue => (
                "com.amazon.coral.service#InvalidParameterValueException",
                "InvalidParameterValue",
                400,
            ),
            MissingParameter => (
                "com.amazon.coral.service#MissingRequiredParameterException",
                "MissingParameter",
                400,
            ),
            InvalidAction => (
                "com.amazon.coral.service#InvalidActionException",
                "InvalidAction",
                400,
            ),
            UnknownOperation => (
                "com.amazon.coral.service#UnknownOperationException",
                "UnknownOperationException",
                400,
            ),
            Serialization => (
                "com.amazon.coral.service#SerializationException",
                "SerializationException",
                400,
            ),
            MalformedQueryString => (
                "com.amazon.coral.service#MalformedQueryStringException",
                "MalformedQueryString",
                404,
            ),
            RequestEntityTooLarge => (
                "com.amazon.coral.service#RequestEntityTooLargeException",
                "RequestEntityTooLarge",
                413,
            ),
            InternalFailure => (
                "com.amazon.coral.service#InternalFailure",
                "InternalFailure",
                500,
            ),
            Throttling => (
                "com.amazon.coral.availability#ThrottlingException",
                "ThrottlingException",
                400,
            ),
            ServiceUnavailable => (
                "com.amazon.coral.availability#ServiceUnavailableException",
                "ServiceUnavailable",
                503,
            ),
            KmsThrottled => (
                "com.amazonaws.sqs#KmsThrottled",
                "KMS.ThrottlingException",
                400,
            ),
            SignatureDoesNotMatch => (
                "com.amazon.coral.service#InvalidSignatureException",
                "SignatureDoesNotMatch",
                403,
            ),
            InvalidClientTokenId => (
                "com.amazon.coral.service#UnrecognizedClientException",
                "InvalidClientTokenId",
                403,
            ),
            MissingAuthenticationToken => (
                "com.amazon.coral.service#MissingAuthenticationTokenException",
                "MissingAuthenticationToken",
                403,
            ),
            IncompleteSignature => (
                "com.amazon.coral.service#IncompleteSignatureException",
                "IncompleteSignature",
                400,
            ),
            AccessDenied => (
                "com.amazon.coral.service#AccessDeniedException",
                "AccessDenied",
                403,
            ),
        };
        Row {
            json_type,
            query_code,
            status,
        }
    }

    /// `__type` of the JSON error body.
    pub(crate) fn json_type(self) -> &'static str {
        self.row().json_type
    }

    /// `<Code>` in a query error, and the first half of `x-amzn-query-error`.
    pub(crate) fn query_code(self) -> &'static str {
        self.row().query_code
    }

    /// The HTTP status.
    pub(crate) fn status(self) -> u16 {
        self.row().status
    }

    /// `Sender` for client faults, `Receiver` for server faults.
    pub(crate) fn fault(self) -> &'static str {
        if self.status() >= 500 {
            "Receiver"
        } else {
            "Sender"
        }
    }
}

/// An error as it goes on the wire.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code:?}: {message}")]
pub(crate) struct SqsError {
    pub code: ErrorCode,
    pub message: Cow<'static, str>,
}

impl SqsError {
    /// An error with a message.
    pub(crate) fn new(code: ErrorCode, message: impl Into<Cow<'static, str>>) -> SqsError {
        SqsError {
            code,
            message: message.into(),
        }
    }

    /// `MissingParameter`: "The request must contain the parameter X."
    pub(crate) fn missing(parameter: &str) -> SqsError {
        SqsError::new(
            ErrorCode::MissingParameter,
            format!("The request must contain the parameter {parameter}."),
        )
    }

    /// `InvalidParameterValue` with free text.
    pub(crate) fn invalid(message: impl Into<Cow<'static, str>>) -> SqsError {
        SqsError::new(ErrorCode::InvalidParameterValue, message)
    }

    /// `InvalidParameterValue`: "Value V for parameter P is invalid. Reason: R"
    pub(crate) fn invalid_value(
        value: impl std::fmt::Display,
        parameter: &str,
        reason: &str,
    ) -> SqsError {
        SqsError::invalid(format!(
            "Value {value} for parameter {parameter} is invalid. Reason: {reason}"
        ))
    }

    /// `QueueDoesNotExist`.
    pub(crate) fn no_queue() -> SqsError {
        SqsError::new(
            ErrorCode::QueueDoesNotExist,
            "The specified queue does not exist.",
        )
    }

    /// `InternalFailure` (500), worded as AWS words it.
    pub(crate) fn internal() -> SqsError {
        SqsError::new(
            ErrorCode::InternalFailure,
            "We encountered an internal error. Please try again.",
        )
    }

    /// An error to inject by name (admin fault API): `None` for unknown names.
    pub(crate) fn injected(name: &str) -> Option<SqsError> {
        let (code, message) = match name {
            "ThrottlingException" | "Throttling" => (ErrorCode::Throttling, "Rate exceeded"),
            "RequestThrottled" => (ErrorCode::RequestThrottled, "Request is throttled."),
            "InternalError" | "InternalFailure" => return Some(SqsError::internal()),
            "ServiceUnavailable" => (
                ErrorCode::ServiceUnavailable,
                "The service is unavailable. Please try again shortly.",
            ),
            "OverLimit" => (
                ErrorCode::OverLimit,
                "The maximum number of in flight messages has been reached for this queue.",
            ),
            "KmsThrottled" => (
                ErrorCode::KmsThrottled,
                "The request was denied due to request throttling.",
            ),
            _ => return None,
        };
        Some(SqsError::new(code, message))
    }

    /// The message as the query protocol words it (AWS words one error differently there).
    pub(crate) fn query_message(&self) -> &str {
        match self.code {
            ErrorCode::QueueDoesNotExist => {
                "The specified queue does not exist for this wsdl version."
            }
            _ => &self.message,
        }
    }
}
