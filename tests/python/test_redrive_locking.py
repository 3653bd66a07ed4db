"""RedrivePolicy checks that look at another queue's settings while the source queue is being
updated: a queue naming itself, and two queues naming each other at the same time. Whatever
the answer (accepted or InvalidParameterValue; the reference does not say), the server must
answer, and keep answering. Each test runs its own sqsim so that a hang cannot take the
session server (and every later test) down with it."""

import threading

import pytest
from botocore.exceptions import ClientError, ReadTimeoutError

from sqsim_helpers import check_error, queue_arn, queue_attrs, redrive_policy
from sqsim_process import running

#: How long one request may take before it counts as a hang.
ANSWER_TIMEOUT_S = 5


@pytest.fixture
def private_client():
    """make() -> a boto3 client of a private sqsim process (read timeout ANSWER_TIMEOUT_S)."""
    with running() as server:

        def make():
            return server.client(
                retries={"max_attempts": 1, "mode": "standard"},
                read_timeout=ANSWER_TIMEOUT_S,
                connect_timeout=ANSWER_TIMEOUT_S,
            )

        yield make


def set_policy(client, url, policy):
    """SetQueueAttributes(RedrivePolicy); True if accepted, False if InvalidParameterValue.
    Fails the test if the server does not answer."""
    try:
        client.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": policy})
        return True
    except ClientError as e:
        check_error(e, "InvalidParameterValue")
        return False
    except ReadTimeoutError:
        pytest.fail(
            f"SetQueueAttributes(RedrivePolicy={policy}) got no answer in {ANSWER_TIMEOUT_S} s "
            "(server hang)"
        )


def test_redrive_policy_naming_the_queue_itself_is_answered(private_client):
    client = private_client()
    url = client.create_queue(QueueName="selfish")["QueueUrl"]
    policy = redrive_policy(queue_arn(client, url), 3)
    accepted = set_policy(client, url, policy)
    # The queue still answers, and reports what was decided.
    attrs = queue_attrs(client, url)
    assert attrs.get("RedrivePolicy") == (policy if accepted else None)
    client.send_message(QueueUrl=url, MessageBody="still alive")
    assert client.list_queues()["QueueUrls"] == [url]


def test_two_queues_naming_each_other_concurrently(private_client):
    client = private_client()
    a = client.create_queue(QueueName="a")["QueueUrl"]
    b = client.create_queue(QueueName="b")["QueueUrl"]
    to_b = redrive_policy(queue_arn(client, b), 3)
    to_a = redrive_policy(queue_arn(client, a), 3)
    problems = []

    def hammer(url, policy):
        c = private_client()
        for _ in range(400):
            try:
                c.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": policy})
            except ClientError as e:
                if e.response["Error"]["Code"] != "InvalidParameterValue":
                    problems.append(repr(e))
                    return
            except ReadTimeoutError:
                problems.append(f"no answer in {ANSWER_TIMEOUT_S} s")
                return

    # Two writers per direction make the interleaving that deadlocks likely.
    threads = [threading.Thread(target=hammer, args=(a, to_b)) for _ in range(2)]
    threads += [threading.Thread(target=hammer, args=(b, to_a)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not problems, (
        "SetQueueAttributes of a→b and b→a at the same time: " + "; ".join(problems)
    )
    # Both queues still answer.
    assert "QueueArn" in queue_attrs(client, a)
    assert "QueueArn" in queue_attrs(client, b)
