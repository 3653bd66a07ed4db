"""Safe by default (issue 28), over raw HTTP and the SDK: loopback-only listening, the
control plane and the SQS API refusing web pages of other origins (Origin, Sec-Fetch-Site,
a browser's `<img>` GET) and foreign host names (DNS rebinding), CORS only for
`--allowed-origins`, the admin token and the console's login, `--admin off`, keys from a
file, and SigV4 that covers the body that arrived (a captured signature replayed over
another body is refused). Headless Chromium attacks from a real foreign page are in
tests/node/browser_attacks.test.mjs."""

import json
import socket
import subprocess
import time
import urllib.parse

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

import sqsim_process
from sqsim_process import running

EVIL = "http://evil.example"
BROWSER_UA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0 Safari/537.36"


def form(action, **params):
    return urllib.parse.urlencode({"Action": action, **params}).encode()


def raw(srv, method, path, body=None, headers=None):
    """One request without following redirects: (status, headers, body)."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def queue_exists(srv, name):
    status, _, body = srv.http("POST", "/", form("GetQueueUrl", QueueName=name))
    return status == 200


@pytest.fixture
def srv():
    with running() as p:
        p.client().create_queue(QueueName="victim")
        yield p


def test_it_listens_on_loopback_only_by_default():
    # No --host: sqsim's own default is under test.
    proc = sqsim_process.spawn(host=None)
    try:
        endpoint = sqsim_process.wait_ready(proc)
        assert endpoint.startswith("http://127.0.0.1:"), endpoint
        port = int(endpoint.rsplit(":", 1)[1])
        listening = subprocess.run(["ss", "-ltnH"], capture_output=True, text=True).stdout
        mine = [l.split()[3] for l in listening.splitlines() if l.split()[3].endswith(f":{port}")]
        assert "127.0.0.1:%d" % port in mine, mine
        assert all(a.startswith(("127.0.0.1:", "[::1]:")) for a in mine), mine
        if socket.has_ipv6 and any(a.startswith("[::1]") for a in mine):
            with socket.create_connection(("::1", port), timeout=2):
                pass
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_listening_beyond_loopback_without_auth_warns():
    with running("--host", "0.0.0.0") as p:
        deadline = time.monotonic() + 5
        while "listening beyond this machine" not in p.log() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "listening beyond this machine with --auth off" in p.log()
    with running() as p:
        assert "listening beyond this machine" not in p.log()


def test_control_plane_refuses_foreign_pages_and_host_names(srv):
    own = f"http://127.0.0.1:{srv.port}"
    # A form or text/plain POST from another origin (no preflight in a browser).
    status, _, body = srv.http(
        "POST", "/_sqsim/reset", b"{}", {"Origin": EVIL, "Content-Type": "text/plain"}
    )
    assert status == 403, body
    assert b"evil.example" in body and b"--allowed-origins" in body
    assert queue_exists(srv, "victim")
    # Sec-Fetch-Site: cross-site without Origin (a browser's GET from another site).
    status, _, _ = srv.http(
        "GET", "/_sqsim/stats", headers={"Sec-Fetch-Site": "cross-site", "User-Agent": BROWSER_UA}
    )
    assert status == 403
    # DNS rebinding: the page's own name in Host, same-origin as far as the browser knows.
    status, _, body = srv.http(
        "GET",
        "/_sqsim/peek?queue_url=" + urllib.parse.quote(f"{own}/000000000000/victim", safe=""),
        headers={"Host": f"evil.example:{srv.port}"},
    )
    assert status == 403 and b"--allowed-hosts" in body
    # The console's own page (same origin) and scripts (no Origin) still work.
    status, _, _ = srv.http("POST", "/_sqsim/clock", {"advance_seconds": 1}, {"Origin": own})
    assert status == 200
    status, _, _ = srv.http(
        "GET", "/_sqsim/stats", headers={"Origin": f"http://localhost:{srv.port}", "Host": f"localhost:{srv.port}"}
    )
    assert status == 200
    assert srv.admin("GET", "/_sqsim/stats")["queues"]


def test_sqs_api_refuses_pages_of_other_origins_in_both_protocols(srv):
    # A query-protocol form POST from a foreign page.
    status, headers, body = srv.http(
        "POST",
        "/",
        form("DeleteQueue", QueueUrl=f"http://127.0.0.1:{srv.port}/000000000000/victim"),
        {"Origin": EVIL, "Content-Type": "application/x-www-form-urlencoded", "User-Agent": BROWSER_UA},
    )
    assert status == 403, body
    assert b"<Code>AccessDenied</Code>" in body
    # The JSON protocol (a fetch with text/plain, which needs no preflight).
    status, headers, body = srv.http(
        "POST",
        "/",
        json.dumps({"QueueUrl": f"http://127.0.0.1:{srv.port}/000000000000/victim", "MessageBody": "planted"}).encode(),
        {
            "Origin": EVIL,
            "Content-Type": "text/plain",
            "X-Amz-Target": "AmazonSQS.SendMessage",
        },
    )
    assert status == 403
    assert json.loads(body)["__type"].endswith("AccessDeniedException")
    assert headers["x-amzn-query-error"] == "AccessDenied;Sender"
    # An <img src="…?Action=DeleteQueue…">: a GET with Sec-Fetch-Site: cross-site, no Origin.
    q = urllib.parse.urlencode({"Action": "DeleteQueue", "QueueUrl": f"http://127.0.0.1:{srv.port}/000000000000/victim"})
    status, _, _ = srv.http(
        "GET", f"/?{q}", headers={"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Dest": "image", "User-Agent": BROWSER_UA}
    )
    assert status == 403
    # The same <img> from a page on a plain-http LAN name: no Origin, no Sec-Fetch-* at all.
    status, _, _ = srv.http("GET", f"/?{q}", headers={"User-Agent": BROWSER_UA})
    assert status == 403
    assert queue_exists(srv, "victim")
    # SDKs send none of these headers, whatever Host they name: unaffected.
    sqs = srv.client()
    assert sqs.list_queues()["QueueUrls"]
    status, _, _ = srv.http("POST", "/", form("ListQueues"), {"Host": "sqs.internal:9324"})
    assert status == 200


# User agents real clients send (as each prints its own; versions as of late 2026). Kombu's
# async transport (Celery's SQS broker) is pycurl with a browser-like default agent.
REAL_CLIENT_AGENTS = {
    "kombu/pycurl (Celery)": "Mozilla/5.0 (compatible; pycurl)",
    "boto3": "Boto3/1.44.5 md/Botocore#1.44.5 ua/2.1 os/linux#6.1.0 md/arch#x86_64 lang/python#3.11.7 md/pyimpl#CPython m/Z,b cfg/retry-mode#legacy Botocore/1.44.5",
    "aws-cli": "aws-cli/1.46.3 md/Botocore#1.44.5 ua/2.1 os/linux#6.1.0 md/arch#x86_64 lang/python#3.11.7 md/pyimpl#CPython m/Z cfg/retry-mode#legacy botocore/1.44.5",
    "JavaScript v3": "aws-sdk-js/3.940.0 ua/2.1 os/linux#6.1.0 lang/js md/nodejs#20.20.2 api/sqs#3.940.0 m/E,N",
    "JavaScript v2": "aws-sdk-nodejs/2.1692.0 linux/v20.20.2 promise",
    "Java v2": "aws-sdk-java/2.40.1 md/io#sync md/http#Apache ua/2.1 os/Linux#6.1.0 lang/java#17.0.15 md/OpenJDK_64-Bit_Server_VM#17.0.15+6 md/vendor#Debian md/en_US cfg/retry-mode#legacy m/D",
    "Java v1": "aws-sdk-java/1.12.797 Linux/6.1.0 OpenJDK_64-Bit_Server_VM/17.0.15+6 java/17.0.15 vendor/Debian cfg/retry-mode/standard",
    "Go v2": "aws-sdk-go-v2/1.41.0 ua/2.1 os/linux lang/go#1.26.8 md/GOOS#linux md/GOARCH#amd64 api/sqs#1.42.0 m/E",
    "Rust": "aws-sdk-rust/1.3.10 ua/2.1 api/sqs/1.90.0 os/linux lang/rust/1.95.0",
    "curl": "curl/7.88.1",
    "requests": "python-requests/2.32.3",
    "okhttp": "okhttp/4.12.0",
    "Apache HttpClient": "Apache-HttpClient/4.5.14 (Java/17.0.15)",
    "Go net/http": "Go-http-client/1.1",
    "axios": "axios/1.7.9",
    "undici (Node fetch)": "node",
    "Postman": "PostmanRuntime/7.43.0",
    "a library copying Chrome's agent": BROWSER_UA,
}


def signed(srv, method, body, headers, query=""):
    """`body` signed as an SDK signs it (SigV4, dummy keys), with `headers` kept."""
    request = AWSRequest(method=method, url=f"http://127.0.0.1:{srv.port}/{query}", data=body, headers=headers)
    SigV4Auth(Credentials("test", "test"), "sqs", "us-east-1").add_auth(request)
    return dict(request.headers.items())


@pytest.mark.parametrize("agent", REAL_CLIENT_AGENTS.values(), ids=REAL_CLIENT_AGENTS.keys())
def test_real_clients_agents_are_served_in_both_protocols(srv, agent):
    """A user agent proves nothing: no real client is taken for a browser by its agent
    (Celery's transport sends `Mozilla/5.0 (compatible; pycurl)` and once got 403 for every
    call). Each agent signs a query POST, a query GET (kombu's presigned form) and a JSON
    call that change a queue, and a non-browser agent is served unsigned too."""
    url = f"http://127.0.0.1:{srv.port}/000000000000/victim"
    body = form("SendMessage", QueueUrl=url, MessageBody="from " + agent)
    headers = {"User-Agent": agent, "Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}
    status, _, reply = srv.http("POST", "/", body, signed(srv, "POST", body, headers))
    assert status == 200, reply
    request = AWSRequest(
        method="GET",
        url=f"http://127.0.0.1:{srv.port}/",
        params={"Action": "SendMessage", "QueueUrl": url, "MessageBody": "presigned"},
        headers={"User-Agent": agent},
    )
    from botocore.auth import SigV4QueryAuth

    SigV4QueryAuth(Credentials("test", "test"), "sqs", "us-east-1").add_auth(request)
    prepared = request.prepare()
    status, _, reply = srv.http("GET", prepared.url.split(str(srv.port), 1)[1], headers={"User-Agent": agent})
    assert status == 200, reply
    body = json.dumps({"QueueUrl": url, "MessageBody": "json"}).encode()
    headers = {"User-Agent": agent, "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.SendMessage"}
    status, _, reply = srv.http("POST", "/", body, signed(srv, "POST", body, headers))
    assert status == 200, reply
    if not agent.startswith("Mozilla/"):
        status, _, reply = srv.http("POST", "/", form("GetQueueUrl", QueueName="victim"), {"User-Agent": agent})
        assert status == 200, reply
        status, _, reply = srv.http("POST", "/", body, {**headers, "X-Amz-Target": "AmazonSQS.SendMessage"})
        assert status == 200, reply


def test_a_signature_does_not_let_a_cross_site_page_through(srv):
    """What only browsers send still marks a browser, signed or not: a page can add a forged
    Authorization header to a fetch (with a preflight sqsim refuses) but cannot drop `Origin`
    or `Sec-Fetch-*`."""
    url = f"http://127.0.0.1:{srv.port}/000000000000/victim"
    body = form("DeleteQueue", QueueUrl=url)
    base = {"User-Agent": BROWSER_UA, "Content-Type": "application/x-www-form-urlencoded"}
    for extra in ({"Origin": EVIL}, {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Dest": "image"}):
        status, _, _ = srv.http("POST", "/", body, signed(srv, "POST", body, {**base, **extra}))
        assert status == 403, extra
    assert queue_exists(srv, "victim")


def test_allowed_origins_get_cors_and_nobody_gets_a_wildcard():
    app = "http://localhost:3000"
    with running("--allowed-origins", app) as srv:
        status, headers, _ = srv.http(
            "OPTIONS",
            "/",
            headers={
                "Origin": app,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type,x-amz-target",
            },
        )
        assert status == 204
        assert headers["access-control-allow-origin"] == app
        assert "x-amz-target" in headers["access-control-allow-headers"]
        status, headers, body = srv.http(
            "POST", "/", form("ListQueues"), {"Origin": app, "User-Agent": BROWSER_UA}
        )
        assert status == 200, body
        assert headers["access-control-allow-origin"] == app
        status, headers, _ = srv.http("OPTIONS", "/", headers={"Origin": EVIL, "Access-Control-Request-Method": "POST"})
        assert status == 403
        assert "access-control-allow-origin" not in headers
    assert sqsim_process.run_to_exit("--allowed-origins", "*").returncode != 0


TOKEN = "a-long-enough-admin-token"


def test_the_admin_token_guards_the_control_plane_and_the_console_logs_in():
    with running("--admin-token", TOKEN) as srv:
        status, headers, _ = srv.http("POST", "/_sqsim/reset", b"{}")
        assert status == 401
        assert headers["www-authenticate"].startswith("Bearer")
        assert srv.http("GET", "/_sqsim/stats", headers={"Authorization": "Bearer wrong"})[0] == 401
        assert srv.http("GET", "/_sqsim/stats", headers={"Authorization": f"Bearer {TOKEN}"})[0] == 200
        assert srv.http("GET", "/metrics")[0] == 401
        # Health checks stay open; the SQS API is untouched.
        assert srv.http("GET", "/_sqsim/health")[0] == 200
        srv.client().create_queue(QueueName="q")
        # The console asks for the token, then a session cookie opens it.
        status, headers, page = srv.http("GET", "/_sqsim/console/")
        assert status == 401 and b'name="token"' in page
        own = f"http://127.0.0.1:{srv.port}"
        status, _, page = raw(
            srv, "POST", "/_sqsim/console/login", b"token=nope",
            {"Content-Type": "application/x-www-form-urlencoded", "Origin": own},
        )
        assert status == 401 and b"not the admin token" in page
        status, headers, _ = raw(
            srv, "POST", "/_sqsim/console/login", f"token={TOKEN}".encode(),
            {"Content-Type": "application/x-www-form-urlencoded", "Origin": own},
        )
        assert status == 303
        cookie = headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        pair = cookie.split(";")[0]
        assert srv.http("GET", "/_sqsim/console/", headers={"Cookie": pair})[0] == 200
        assert srv.http("GET", "/_sqsim/stats", headers={"Cookie": pair})[0] == 200
        # Signing out ends the session: the cookie (which other programs on this host may
        # have seen: browsers send it to every port) opens nothing any more.
        status, headers, _ = raw(srv, "POST", "/_sqsim/console/logout", b"", {"Cookie": pair, "Origin": own})
        assert status == 303 and "Max-Age=0" in headers["set-cookie"], headers
        assert srv.http("GET", "/_sqsim/stats", headers={"Cookie": pair})[0] == 401
        status, _, page = srv.http("GET", "/_sqsim/console/", headers={"Cookie": pair})
        assert status == 401 and b'name="token"' in page
        # A login form posted from another site is refused before the token is looked at.
        status, _, _ = raw(
            srv, "POST", "/_sqsim/console/login", f"token={TOKEN}".encode(),
            {"Content-Type": "application/x-www-form-urlencoded", "Origin": EVIL},
        )
        assert status == 403
    assert sqsim_process.run_to_exit("--admin-token", "short").returncode != 0


def test_a_browsers_icon_request_is_answered_signed_out_and_logs_nothing():
    """Every page a browser opens asks for /favicon.ico: it gets the console's icon (the
    sign-in page too: it is outside the control plane), not a failed SQS request and its
    WARN line in the log on every visit."""
    with running("--admin-token", TOKEN) as srv:
        status, headers, body = srv.http("GET", "/favicon.ico")
        assert status == 200 and headers["content-type"] == "image/svg+xml"
        assert body.startswith(b"<svg")
        status, _, page = srv.http("GET", "/_sqsim/console/")
        assert status == 401
        # An SQS error is still logged: the log works, and the icon left no line in it.
        srv.http("POST", "/", b"Action=NoSuchAction")
        log = srv.log()
        assert "request failed" in log, log
        assert "favicon" not in log and log.count("WARN") == 1, log


def test_auth_verify_prints_a_token_and_takes_admin_signatures(tmp_path):
    keys = tmp_path / "keys"
    keys.write_text(
        "# a comment\nAKIDADMIN:admin-secret:000000000000:admin\n\nAKIDUSER:user-secret:123456789012\n"
    )
    with running("--auth", "verify", "--credentials-file", str(keys)) as srv:
        # The made-up token is printed (stdout), never logged.
        assert "admin token" not in srv.log()
        assert srv.http("GET", "/_sqsim/stats")[0] == 401
        # SDK calls work with keys from the file.
        srv.client(key="AKIDUSER", secret="user-secret").create_queue(QueueName="filed")

        def signed(key, secret, method, path, body=b""):
            req = AWSRequest(method=method, url=srv.endpoint + path, data=body)
            SigV4Auth(Credentials(key, secret), "sqs", "us-east-1").add_auth(req)
            return srv.http(method, path, body or None, dict(req.headers.items()))

        assert signed("AKIDADMIN", "admin-secret", "GET", "/_sqsim/stats")[0] == 200
        status, _, body = signed("AKIDUSER", "user-secret", "GET", "/_sqsim/stats")
        assert status == 403 and b"not marked admin" in body
        assert signed("AKIDADMIN", "admin-secret", "POST", "/_sqsim/clock", b'{"advance_seconds": 1}')[0] == 200


def test_admin_off_removes_the_control_plane():
    with running("--admin", "off") as srv:
        for method, path in (("POST", "/_sqsim/reset"), ("GET", "/_sqsim/stats"), ("GET", "/_sqsim/console/"), ("GET", "/metrics")):
            assert srv.http(method, path, b"{}" if method == "POST" else None)[0] == 404, path
        assert srv.http("GET", "/_sqsim/health")[0] == 200
        srv.client().create_queue(QueueName="still-sqs")


def test_a_captured_signature_cannot_be_replayed_over_another_body(tmp_path):
    with running("--auth", "verify", "--credentials", "AKIDX:x-secret:123456789012", "--admin-token", TOKEN, token=TOKEN) as srv:
        sqs = srv.client(key="AKIDX", secret="x-secret")
        url = sqs.create_queue(QueueName="kept")["QueueUrl"]
        original = form("GetQueueAttributes", QueueUrl=url, **{"AttributeName.1": "All"})
        req = AWSRequest(method="POST", url=srv.endpoint + "/", data=original,
                         headers={"Content-Type": "application/x-www-form-urlencoded"})
        SigV4Auth(Credentials("AKIDX", "x-secret"), "sqs", "us-east-1").add_auth(req)
        headers = dict(req.headers.items())
        assert srv.http("POST", "/", original, headers)[0] == 200
        import hashlib

        # The attack: the same signature, another body, the original's hash claimed.
        swapped = form("DeleteQueue", QueueUrl=url)
        attack = {**headers, "X-Amz-Content-Sha256": hashlib.sha256(original).hexdigest()}
        status, _, body = srv.http("POST", "/", swapped, attack)
        assert status == 403, body
        assert b"SignatureDoesNotMatch" in body
        status, _, _ = srv.http("POST", "/", swapped, headers)
        assert status == 403
        assert sqs.get_queue_url(QueueName="kept")["QueueUrl"] == url
        # A signature scoped to another service is refused by name.
        req = AWSRequest(method="POST", url=srv.endpoint + "/", data=form("ListQueues"),
                         headers={"Content-Type": "application/x-www-form-urlencoded"})
        SigV4Auth(Credentials("AKIDX", "x-secret"), "s3", "us-east-1").add_auth(req)
        status, _, body = srv.http("POST", "/", form("ListQueues"), dict(req.headers.items()))
        assert status == 403 and b"scoped to correct service" in body


def test_console_pages_cannot_be_framed_or_run_foreign_scripts():
    """Every console page and asset, and the sign-in page, forbids framing (also in browsers
    that send no Sec-Fetch-* headers for the guard to refuse), type sniffing, and scripts,
    styles and images from anywhere but the console."""
    with running("--admin-token", TOKEN) as srv:
        status, headers, _ = raw(srv, "GET", "/_sqsim/console/")
        assert status == 401
        signed_in = {"Authorization": f"Bearer {TOKEN}"}
        pages = [headers] + [
            raw(srv, "GET", path, headers=signed_in)[1]
            for path in ("/_sqsim/console/", "/_sqsim/console/app.js", "/_sqsim/console/app.css")
        ]
        for h in pages:
            assert h["x-frame-options"] == "DENY", h
            assert h["x-content-type-options"] == "nosniff", h
            csp = h["content-security-policy"]
            assert "frame-ancestors 'none'" in csp and "default-src 'self'" in csp, csp
            assert "script-src" not in csp or "'unsafe-inline'" not in csp.split("script-src")[1].split(";")[0]


def test_a_link_opened_from_outside_the_browser_only_reads(srv):
    """A link clicked in a chat, a mail or a terminal reaches sqsim as a typed URL
    (`Sec-Fetch-Site: none`): it may read the SQS API, but not change a queue."""
    opened = {"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate", "User-Agent": BROWSER_UA}
    url = f"http://127.0.0.1:{srv.port}/000000000000/victim"
    srv.client().send_message(QueueUrl=url, MessageBody="keep me")
    for action in ("PurgeQueue", "DeleteQueue", "SendMessage", "ReceiveMessage"):
        q = urllib.parse.urlencode({"Action": action, "QueueUrl": url, "MessageBody": "planted"})
        status, _, body = srv.http("GET", f"/?{q}", headers=opened)
        assert status == 403 and b"AccessDenied" in body, (action, body)
        # A POST cannot come from a typed URL at all.
        status, _, _ = srv.http("POST", "/", form(action, QueueUrl=url), {**opened, "Content-Type": "application/x-www-form-urlencoded"})
        assert status == 403, action
    for action, params in (("GetQueueUrl", {"QueueName": "victim"}), ("ListQueues", {})):
        q = urllib.parse.urlencode({"Action": action, **params})
        status, _, body = srv.http("GET", f"/?{q}", headers=opened)
        assert status == 200, (action, body)
    attrs = srv.client().get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    assert attrs["Attributes"]["ApproximateNumberOfMessages"] == "1"
