"""`--auth verify`: SigV4 signatures from boto3 checked against --credentials keys (and
[[credentials]] in a config file): the right secret works in the key's account, a wrong secret,
an unknown key and an unsigned request are refused with AWS's 403s, and presigned URLs made
by botocore are accepted."""

import json
import urllib.parse
import uuid

import pytest
from botocore import UNSIGNED
from botocore.auth import SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from sqsim_helpers import EXPECT_PROTOCOL, check_error, queue_attrs, receive_one
from sqsim_process import running, run_to_exit

KEY, SECRET, KEY_ACCOUNT = "AKIDTEST", "secret", "123456789012"
TOKEN = "admin-token-for-the-auth-tests"
PLAIN_KEY, PLAIN_SECRET = "AKIDPLAIN", "plain-secret"
MISMATCH = (
    "The request signature we calculated does not match the signature you provided. Check your "
    "AWS Secret Access Key and signing method. Consult the service documentation for details."
)


@pytest.fixture(scope="module")
def srv():
    with running(
        "--auth",
        "verify",
        "--credentials",
        f"{KEY}:{SECRET}:{KEY_ACCOUNT}",
        "--credentials",
        f"{PLAIN_KEY}:{PLAIN_SECRET}",
        "--admin-token",
        TOKEN,
        token=TOKEN,
    ) as p:
        yield p


@pytest.fixture
def good(srv):
    return srv.client(key=KEY, secret=SECRET)


def qname():
    return "auth-" + uuid.uuid4().hex[:10]


def refused(call, code, **kwargs):
    with pytest.raises(ClientError) as info:
        call(**kwargs)
    return check_error(info.value, code, 403)


def test_the_right_secret_works_in_the_keys_account(srv, good):
    name = qname()
    url = good.create_queue(QueueName=name)["QueueUrl"]
    assert url == f"{srv.endpoint}/{KEY_ACCOUNT}/{name}"
    assert queue_attrs(good, url, "QueueArn")["QueueArn"] == f"arn:aws:sqs:us-east-1:{KEY_ACCOUNT}:{name}"
    good.send_message(QueueUrl=url, MessageBody="signed")
    assert receive_one(good, url)["Body"] == "signed"
    assert url in good.list_queues(QueueNamePrefix=name)["QueueUrls"]
    assert good.get_queue_url(QueueName=name)["QueueUrl"] == url
    [row] = [q for q in srv.admin("GET", "/_sqsim/stats")["queues"] if q["name"] == name]
    assert (row["account"], row["region"]) == (KEY_ACCOUNT, "us-east-1")

    # The region still comes from the signature's scope.
    west = srv.client(key=KEY, secret=SECRET, region="eu-west-1")
    west_url = west.create_queue(QueueName=name)["QueueUrl"]
    assert queue_attrs(west, west_url, "QueueArn")["QueueArn"] == (
        f"arn:aws:sqs:eu-west-1:{KEY_ACCOUNT}:{name}"
    )


def test_a_key_without_an_account_uses_the_default_one(srv):
    plain = srv.client(key=PLAIN_KEY, secret=PLAIN_SECRET)
    name = qname()
    url = plain.create_queue(QueueName=name)["QueueUrl"]
    assert url == f"{srv.endpoint}/000000000000/{name}"


def test_a_wrong_secret_is_signature_does_not_match(srv, good):
    name = qname()
    good.create_queue(QueueName=name)
    bad = srv.client(key=KEY, secret="not-the-secret")
    err = refused(bad.list_queues, "SignatureDoesNotMatch")
    assert err.response["Error"]["Message"] == MISMATCH
    refused(bad.get_queue_url, "SignatureDoesNotMatch", QueueName=name)
    # Another key's secret does not do either.
    refused(srv.client(key=KEY, secret=PLAIN_SECRET).list_queues, "SignatureDoesNotMatch")


def test_an_unknown_key_is_invalid_client_token_id(srv):
    err = refused(srv.client(key="AKIDNOBODY", secret=SECRET).list_queues, "InvalidClientTokenId")
    assert err.response["Error"]["Message"] == "The security token included in the request is invalid."


def test_an_unsigned_boto3_request_is_missing_authentication_token(srv):
    anonymous = srv.client(signature_version=UNSIGNED)
    refused(anonymous.list_queues, "MissingAuthenticationToken")


def test_an_unsigned_query_post_is_missing_authentication_token(srv):
    status, headers, body = srv.http(
        "POST",
        "/",
        b"Action=ListQueues&Version=2012-11-05",
        {"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert status == 403, body
    text = body.decode()
    assert "<Code>MissingAuthenticationToken</Code>" in text, text
    assert "<Type>Sender</Type>" in text, text


def test_an_unsigned_json_post_is_missing_authentication_token(srv):
    status, headers, body = srv.http(
        "POST",
        "/",
        b"{}",
        {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.ListQueues"},
    )
    assert status == 403, body
    assert headers["x-amzn-query-error"] == "MissingAuthenticationToken;Sender"
    assert json.loads(body)["__type"].endswith("#MissingAuthenticationTokenException")


def test_admin_endpoints_need_no_signature(srv):
    assert srv.admin("GET", "/_sqsim/health") == {"status": "ok"}


@pytest.mark.skipif(
    EXPECT_PROTOCOL == "json",
    reason=(
        "botocore cannot presign SQS over AWS JSON: it signs the content-type, x-amz-target and "
        "x-amzn-query-mode headers and moves the JSON body into the query string, so the URL is "
        "not usable on its own; the SigV4QueryAuth test below covers presigning in this run"
    ),
)
def test_a_generate_presigned_url_post_is_accepted(srv, good):
    name = qname()
    url = good.create_queue(QueueName=name)["QueueUrl"]
    presigned = good.generate_presigned_url(
        "get_queue_url", Params={"QueueName": name}, ExpiresIn=300
    )
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(presigned).query)
    assert query["X-Amz-Credential"][0].startswith(f"{KEY}/")
    # SQS's query operations are POSTs; botocore signs the presigned request as one.
    status, _, body = srv.http("POST", presigned[len(srv.endpoint):], b"")
    assert status == 200, body
    assert f"<QueueUrl>{url}</QueueUrl>" in body.decode()


def presign_get(srv, params, secret=SECRET, expires=300):
    """A GET presigned with botocore's SigV4QueryAuth (the signer generate_presigned_url uses);
    returns the path and query to request."""
    query = urllib.parse.urlencode({**params, "Version": "2012-11-05"})
    request = AWSRequest(method="GET", url=f"{srv.endpoint}/?{query}")
    SigV4QueryAuth(Credentials(KEY, secret), "sqs", "us-east-1", expires=expires).add_auth(request)
    assert "X-Amz-Signature=" in request.url
    return request.url[len(srv.endpoint):]


def test_a_sigv4_query_auth_presigned_get_is_accepted(srv, good):
    name = qname()
    url = good.create_queue(QueueName=name)["QueueUrl"]
    status, _, body = srv.http("GET", presign_get(srv, {"Action": "GetQueueUrl", "QueueName": name}))
    assert status == 200, body
    assert f"<QueueUrl>{url}</QueueUrl>" in body.decode()


def test_a_presigned_get_with_a_wrong_secret_is_refused(srv, good):
    name = qname()
    good.create_queue(QueueName=name)
    path = presign_get(srv, {"Action": "GetQueueUrl", "QueueName": name}, secret="wrong")
    status, _, body = srv.http("GET", path)
    assert status == 403, body
    assert "<Code>SignatureDoesNotMatch</Code>" in body.decode()


def test_the_config_file_can_turn_verification_on(tmp_path):
    path = tmp_path / "auth.toml"
    path.write_text(
        '[server]\nauth = "verify"\n\n'
        '[[credentials]]\naccess_key = "AKIDFILE"\nsecret_key = "file-secret"\n'
        'account_id = "222222222222"\n'
    )
    with running("--config", str(path)) as p:
        c = p.client(key="AKIDFILE", secret="file-secret")
        assert c.create_queue(QueueName="from-file")["QueueUrl"] == (
            f"{p.endpoint}/222222222222/from-file"
        )
        refused(p.client(key="AKIDFILE", secret="nope").list_queues, "SignatureDoesNotMatch")
        refused(p.client(key=KEY, secret=SECRET).list_queues, "InvalidClientTokenId")


def test_verify_without_keys_or_with_a_bad_key_will_not_start():
    out = run_to_exit("--auth", "verify")
    assert out.returncode == 2, out
    assert "--auth verify needs at least one key" in out.stderr
    out = run_to_exit("--auth", "verify", "--credentials", "AKID:secret:12")
    assert out.returncode == 2, out
    assert "--credentials must be ACCESS_KEY:SECRET[:ACCOUNT_ID]" in out.stderr
    assert "sqsim listening" not in out.stdout


def test_a_presigned_url_runs_only_the_action_it_was_signed_for(srv, good):
    """A presigned URL signs its query (the action) and the host only: an X-Amz-Target
    header added by whoever holds the URL would choose the JSON protocol's action instead
    (a read-only URL turned into a purge or a delete), so it must be signed too."""
    name = qname()
    url = good.create_queue(QueueName=name)["QueueUrl"]
    good.send_message(QueueUrl=url, MessageBody="keep me")
    path = presign_get(srv, {"Action": "GetQueueAttributes", "QueueUrl": url, "AttributeName.1": "All"})
    for action in ("ReceiveMessage", "PurgeQueue", "DeleteQueue"):
        status, _, body = srv.http(
            "GET", path, headers={"X-Amz-Target": f"AmazonSQS.{action}",
                                  "Content-Type": "application/x-amz-json-1.0"}
        )
        assert status == 403, (action, body)
        assert b"X-Amz-Target is not among" in body, body
    assert queue_attrs(good, url, "ApproximateNumberOfMessages")["ApproximateNumberOfMessages"] == "1"
    # The URL itself still does what it was signed for.
    status, _, body = srv.http("GET", path)
    assert status == 200 and b"<Name>QueueArn</Name>" in body, body


def test_the_verified_credential_alone_names_the_account(srv, good):
    """A request acts as the account of the credential whose signature was verified: a
    second `Credential=` in the Authorization header, or a query parameter whose value
    looks like one, cannot make a key without an account act as another account."""
    from botocore.auth import SigV4Auth

    name = qname()
    good.create_queue(QueueName=name)
    # Signed by the key without an account (the default one), with a decoy credential
    # naming the keyed account put first.
    req = AWSRequest(
        method="POST", url=f"{srv.endpoint}/", data=json.dumps({"QueueNamePrefix": name}),
        headers={"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.ListQueues"},
    )
    SigV4Auth(Credentials(PLAIN_KEY, PLAIN_SECRET), "sqs", "us-east-1").add_auth(req)
    auth = req.headers["Authorization"]
    day = auth.split("Credential=")[1].split("/")[1]
    decoy = f"Credential={KEY_ACCOUNT}/{day}/us-east-1/sqs/aws4_request, "
    headers = dict(req.headers)
    headers["Authorization"] = auth.replace("AWS4-HMAC-SHA256 ", f"AWS4-HMAC-SHA256 {decoy}", 1)
    status, _, body = srv.http("POST", "/", req.body, headers)
    assert status in (400, 403), body
    assert name.encode() not in body, body
    # Presigned, with a decoy parameter (sent unencoded, first) naming the keyed account.
    query = urllib.parse.urlencode({"Action": "ListQueues", "QueueNamePrefix": name, "Version": "2012-11-05"})
    decoy_param = f"X-Amz-Credential={KEY_ACCOUNT}/{day}/us-east-1/sqs/aws4_request"
    signed = AWSRequest(method="GET", url=f"{srv.endpoint}/?Decoy={urllib.parse.quote(decoy_param, safe='')}&{query}")
    SigV4QueryAuth(Credentials(PLAIN_KEY, PLAIN_SECRET), "sqs", "us-east-1", expires=300).add_auth(signed)
    path = signed.url[len(srv.endpoint):]
    raw = path.replace(f"Decoy={urllib.parse.quote(decoy_param, safe='')}", f"Decoy={decoy_param}", 1)
    assert raw != path
    for p in (path, raw):
        status, _, body = srv.http("GET", p)
        # Verified as the key without an account: its (empty) listing, not the keyed one's.
        assert status == 200, body
        assert name.encode() not in body, body
