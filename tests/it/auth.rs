//! `--auth verify`: SigV4 checked against configured keys, for header-signed requests from
//! the Rust SDK and for presigned (query-string) requests.

use crate::common;

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use aws_sdk_sqs::config::Credentials;
use aws_sdk_sqs::error::ProvideErrorMetadata;
use common::{raw, start_with};
use sqsim::config::{AuthMode, Credential};
use sqsim::{Config, Server};

async fn verifying_server() -> Server {
    let keys = HashMap::from([
        (
            "AKIDTEST".to_string(),
            Credential::parse("AKIDTEST:good-secret").unwrap(),
        ),
        (
            "AKIDOTHER".to_string(),
            Credential::parse("AKIDOTHER:other-secret:123456789012").unwrap(),
        ),
    ]);
    start_with(Config {
        auth: AuthMode::Verify(keys),
        ..Config::default()
    })
    .await
}

fn client(server: &Server, key: &str, secret: &str) -> aws_sdk_sqs::Client {
    common::sdk_with(&server.endpoint(), "us-east-1", key, secret)
}

#[tokio::test]
async fn right_secret_works_wrong_secret_and_unknown_key_do_not() {
    let server = verifying_server().await;
    let good = client(&server, "AKIDTEST", "good-secret");
    let url = common::create(&good, "signed").await;
    common::send(&good, &url, "ok").await;

    let err = client(&server, "AKIDTEST", "wrong-secret")
        .list_queues()
        .send()
        .await
        .unwrap_err();
    assert_eq!(err.raw_response().unwrap().status().as_u16(), 403);
    let err = err.into_service_error();
    assert_eq!(err.code(), Some("SignatureDoesNotMatch"));
    assert!(err
        .message()
        .unwrap()
        .starts_with("The request signature we calculated does not match"));

    let err = client(&server, "AKIDNOBODY", "x")
        .list_queues()
        .send()
        .await
        .unwrap_err();
    assert_eq!(err.raw_response().unwrap().status().as_u16(), 403);
    assert_eq!(
        err.into_service_error().code(),
        Some("InvalidClientTokenId")
    );

    // A key with an account of its own works in that account.
    let other = client(&server, "AKIDOTHER", "other-secret");
    let theirs = common::create(&other, "signed").await;
    assert!(theirs.contains("/123456789012/signed"), "{theirs}");
}

#[tokio::test]
async fn unsigned_and_stale_requests_are_refused() {
    let server = verifying_server().await;
    let r = raw(
        &server,
        "POST",
        "/",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        b"Action=ListQueues",
    )
    .await;
    assert_eq!(r.status, 403);
    assert_eq!(
        r.xml_text("Code").as_deref(),
        Some("MissingAuthenticationToken")
    );
    let r = raw(
        &server,
        "POST",
        "/",
        &[
            ("Content-Type", "application/x-amz-json-1.0"),
            ("X-Amz-Target", "AmazonSQS.ListQueues"),
        ],
        b"{}",
    )
    .await;
    assert_eq!(r.status, 403);
    assert_eq!(
        r.header("x-amzn-query-error"),
        Some("MissingAuthenticationToken;Sender")
    );

    // Signed correctly, but 20 minutes ago.
    let old = SystemTime::now() - Duration::from_secs(20 * 60);
    let (headers, body) = sign_query_post(
        &server,
        "AKIDTEST",
        "good-secret",
        old,
        "Action=ListQueues&Version=2012-11-05",
    );
    let hdrs: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let r = raw(&server, "POST", "/", &hdrs, body.as_bytes()).await;
    assert_eq!(r.status, 403, "{}", r.body);
    assert_eq!(r.xml_text("Code").as_deref(), Some("SignatureDoesNotMatch"));
    assert!(
        r.xml_text("Message")
            .unwrap()
            .starts_with("Signature expired: "),
        "{}",
        r.body
    );

    // The same request signed now is accepted.
    let (headers, body) = sign_query_post(
        &server,
        "AKIDTEST",
        "good-secret",
        SystemTime::now(),
        "Action=ListQueues&Version=2012-11-05",
    );
    let hdrs: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let r = raw(&server, "POST", "/", &hdrs, body.as_bytes()).await;
    assert_eq!(r.status, 200, "{}", r.body);
}

/// Signs a form POST with aws-sigv4, the way older SDKs send the query protocol.
fn sign_query_post(
    server: &Server,
    key: &str,
    secret: &str,
    when: SystemTime,
    body: &str,
) -> (Vec<(String, String)>, String) {
    use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
    use aws_sigv4::sign::v4;
    let identity = Credentials::new(key, secret, None, None, "test").into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region("us-east-1")
        .name("sqs")
        .time(when)
        .settings(SigningSettings::default())
        .build()
        .unwrap()
        .into();
    let url = format!("{}/", server.endpoint());
    let host = "sqsim.test".to_string();
    let headers = vec![
        ("host".to_string(), host),
        (
            "content-type".to_string(),
            "application/x-www-form-urlencoded".to_string(),
        ),
    ];
    let signable = SignableRequest::new(
        "POST",
        &url,
        headers.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        SignableBody::Bytes(body.as_bytes()),
    )
    .unwrap();
    let (instructions, _) = sign(signable, &params).unwrap().into_parts();
    let mut out: Vec<(String, String)> = headers.into_iter().filter(|(k, _)| k != "host").collect();
    for (k, v) in instructions.headers() {
        out.push((k.to_string(), v.to_string()));
    }
    (out, body.to_string())
}

#[tokio::test]
async fn presigned_query_string_requests_are_verified() {
    use aws_sigv4::http_request::{
        sign, SignableBody, SignableRequest, SignatureLocation, SigningSettings,
    };
    use aws_sigv4::sign::v4;
    let server = verifying_server().await;
    client(&server, "AKIDTEST", "good-secret")
        .create_queue()
        .queue_name("presigned")
        .send()
        .await
        .unwrap();

    let presign = |secret: &str, expires: Duration, when: SystemTime| {
        let identity = Credentials::new("AKIDTEST", secret, None, None, "test").into();
        let mut settings = SigningSettings::default();
        settings.signature_location = SignatureLocation::QueryParams;
        settings.expires_in = Some(expires);
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region("us-east-1")
            .name("sqs")
            .time(when)
            .settings(settings)
            .build()
            .unwrap()
            .into();
        let url = "http://sqsim.test/?Action=GetQueueUrl&QueueName=presigned&Version=2012-11-05"
            .to_string();
        let signable = SignableRequest::new(
            "GET",
            &url,
            [("host", "sqsim.test")].into_iter(),
            SignableBody::UnsignedPayload,
        )
        .unwrap();
        let (instructions, _) = sign(signable, &params).unwrap().into_parts();
        let mut path = "/?Action=GetQueueUrl&QueueName=presigned&Version=2012-11-05".to_string();
        for (k, v) in instructions.params() {
            path.push_str(&format!("&{k}={}", urlencode(v)));
        }
        path
    };
    let r = raw(
        &server,
        "GET",
        &presign("good-secret", Duration::from_secs(300), SystemTime::now()),
        &[],
        b"",
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("/000000000000/presigned</QueueUrl>"));
    let r = raw(
        &server,
        "GET",
        &presign("bad-secret", Duration::from_secs(300), SystemTime::now()),
        &[],
        b"",
    )
    .await;
    assert_eq!(r.status, 403);
    assert_eq!(r.xml_text("Code").as_deref(), Some("SignatureDoesNotMatch"));

    // The same signed URLs asking for JSON (the Accept header is not signed).
    let accept_json = [("accept", "application/json")];
    let good = presign("good-secret", Duration::from_secs(300), SystemTime::now());
    let r = raw(&server, "GET", &good, &accept_json, b"").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let doc: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    let url = doc["GetQueueUrlResponse"]["GetQueueUrlResult"]["QueueUrl"]
        .as_str()
        .unwrap();
    assert!(url.ends_with("/000000000000/presigned"), "{}", r.body);
    assert_eq!(
        doc["GetQueueUrlResponse"]["ResponseMetadata"]["RequestId"].as_str(),
        r.header("x-amzn-requestid")
    );
    let bad = presign("bad-secret", Duration::from_secs(300), SystemTime::now());
    let r = raw(&server, "GET", &bad, &accept_json, b"").await;
    assert_eq!(r.status, 403);
    let doc: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(doc["Error"]["Code"], "SignatureDoesNotMatch", "{}", r.body);
    assert_eq!(doc["Error"]["Type"], "Sender");

    let stale = SystemTime::now() - Duration::from_secs(600);
    let r = raw(
        &server,
        "GET",
        &presign("good-secret", Duration::from_secs(60), stale),
        &[],
        b"",
    )
    .await;
    assert_eq!(r.status, 403);
    assert!(
        r.xml_text("Message")
            .unwrap()
            .starts_with("Signature expired"),
        "{}",
        r.body
    );
}

fn urlencode(s: &str) -> String {
    serde_urlencoded::to_string([("k", s)]).unwrap()[2..].to_string()
}
