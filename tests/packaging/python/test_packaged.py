# pytest with the plugin `pip install sqsim` brings: the `sqsim` fixture is one server for the
# session, `sqs` a boto3 client on an empty server for each test.


def test_a_message_comes_back_after_its_visibility_timeout(sqs, sqsim):
    url = sqs.create_queue(QueueName="jobs")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="hello")
    first = sqs.receive_message(QueueUrl=url, VisibilityTimeout=60)["Messages"][0]
    assert "Messages" not in sqs.receive_message(QueueUrl=url)

    sqsim.advance(60)  # the server's clock moves; the test does not sleep

    again = sqs.receive_message(QueueUrl=url)["Messages"][0]
    assert again["MessageId"] == first["MessageId"]


def test_peek_shows_a_message_without_receiving_it(sqs, sqsim):
    url = sqs.create_queue(QueueName="jobs")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="hello", DelaySeconds=30)

    [message] = sqsim.peek("jobs")
    assert (message["body"], message["state"], message["receive_count"]) == ("hello", "delayed", 0)
