"""The single-node server built without cluster mode and the worker (`cargo build
--no-default-features`, no NATS client, no AWS SDK): it serves SQS in memory and on disk, and
says plainly what it was built without. `make test-minimal` builds it, copies it to
target/minimal, and runs this file, and a few of tests/python's files, against it."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import sqsim_process  # noqa: E402


def test_it_serves_sqs_in_memory():
    with sqsim_process.running() as srv:
        c = srv.client()
        url = c.create_queue(QueueName="minimal")["QueueUrl"]
        c.send_message(QueueUrl=url, MessageBody="hello")
        got = c.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
        assert [m["Body"] for m in got] == ["hello"]


def test_durable_mode_keeps_messages_across_a_restart(tmp_path):
    flags = ("--data-dir", str(tmp_path / "data"))
    with sqsim_process.running(*flags) as srv:
        c = srv.client()
        url = c.create_queue(QueueName="kept")["QueueUrl"]
        c.send_message(QueueUrl=url, MessageBody="survives")
    with sqsim_process.running(*flags) as srv:
        c = srv.client()
        url = c.get_queue_url(QueueName="kept")["QueueUrl"]
        got = c.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
        assert [m["Body"] for m in got] == ["survives"]


def test_cluster_mode_is_refused_with_the_reason():
    done = sqsim_process.run_to_exit("--cluster", "nats://127.0.0.1:1")
    assert done.returncode != 0
    assert "built without cluster mode" in done.stderr, done.stderr


def test_the_worker_command_is_absent():
    done = sqsim_process.run_to_exit("worker", "--help", host=None, port=None)
    assert done.returncode == 2
    assert "unrecognized subcommand 'worker'" in done.stderr, done.stderr


def test_a_config_declaring_workers_is_refused_with_the_reason(tmp_path):
    config = tmp_path / "sqsim.toml"
    config.write_text(
        '[queues.jobs]\n\n[[workers]]\nname = "app"\nqueues = ["jobs"]\n'
        'http_url = "http://127.0.0.1:1/"\n'
    )
    done = sqsim_process.run_to_exit("--config", str(config))
    assert done.returncode != 0
    assert "cargo feature `worker`" in done.stderr, done.stderr
