"""Celery against sqsim: a real application's worker with its SQS broker (kombu's transport:
boto3 to send and manage queues, pycurl for its asynchronous receive and delete, whose
default agent is `Mozilla/5.0 (compatible; pycurl)`). sqsim's browser guard once took that
agent for a browser and refused every call, so no task ever ran."""

import os
import subprocess
import sys
import textwrap
import time

from sqsim_process import running

APP = textwrap.dedent(
    """
    import os
    from pathlib import Path

    from celery import Celery

    app = Celery("tasks", broker=os.environ["BROKER_URL"])
    app.conf.broker_transport_options = {
        "region": "us-east-1",
        "is_secure": False,
        "queue_name_prefix": "celery-test-",
        "polling_interval": 0.2,
        "wait_time_seconds": 1,
    }
    app.conf.worker_hijack_root_logger = False


    @app.task(name="tasks.record")
    def record(n):
        Path(os.environ["DONE_DIR"], str(n)).write_text(str(n * n))
    """
)


def test_a_celery_worker_runs_tasks_sent_through_sqsim(tmp_path):
    # The agent the worker's receives and deletes are sent with (what the guard refused).
    from kombu.asynchronous.http.curl import DEFAULT_USER_AGENT

    assert DEFAULT_USER_AGENT.startswith("Mozilla/")
    (tmp_path / "tasks.py").write_text(APP)
    done = tmp_path / "done"
    done.mkdir()
    with running() as srv:
        env = {
            "BROKER_URL": f"sqs://test:test@127.0.0.1:{srv.port}",
            "DONE_DIR": str(done),
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        env = {**os.environ, **env}
        sender = subprocess.run(
            [sys.executable, "-c", "import tasks\nfor n in range(5): tasks.record.delay(n)"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            timeout=60,
        )
        assert sender.returncode == 0, sender.stderr.decode()
        log = open(tmp_path / "worker.log", "wb")
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "tasks", "worker", "--pool", "solo", "--loglevel", "info"],
            cwd=tmp_path,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        sqs = srv.client()

        def counts():
            urls = sqs.list_queues(QueueNamePrefix="celery-test-celery").get("QueueUrls", [])
            if not urls:
                return None
            attrs = sqs.get_queue_attributes(QueueUrl=urls[0], AttributeNames=["All"])["Attributes"]
            return attrs["ApproximateNumberOfMessages"], attrs["ApproximateNumberOfMessagesNotVisible"]

        try:
            # Every task ran, and was deleted once done (kombu acknowledges after the task
            # returns): the queue is empty, nothing is in flight.
            deadline = time.time() + 60
            while time.time() < deadline and worker.poll() is None:
                if len(list(done.iterdir())) == 5 and counts() == ("0", "0"):
                    break
                time.sleep(0.2)
        finally:
            worker.terminate()
            worker.wait(timeout=30)
            log.close()
        worker_log = (tmp_path / "worker.log").read_text(errors="replace")
        assert sorted(p.name for p in done.iterdir()) == ["0", "1", "2", "3", "4"], worker_log
        assert [(done / str(n)).read_text() for n in range(5)] == ["0", "1", "4", "9", "16"]
        assert counts() == ("0", "0"), worker_log
        for refusal in ("AccessDenied", "Forbidden", "refuses requests"):
            assert refusal not in worker_log, worker_log
