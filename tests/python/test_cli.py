"""The command line a person meets first: `--help` grouped by topic, `sqsim health --port`,
shell completions and the man page generated from the same definitions, a start banner, and
start-up errors that say what failed and what to change."""

import shutil
import socket
import subprocess
import time
import urllib.request

import sqsim_process
from sqsim_process import run_to_exit, running


def sqsim(*args):
    """Runs a subcommand (no --host/--port added) to its end."""
    return run_to_exit(*args, host=None, port=None)


def test_help_is_grouped_by_topic():
    out = sqsim("--help").stdout
    headings = [l.rstrip(":") for l in out.splitlines() if l and not l[0].isspace() and l.endswith(":")]
    for topic in ("Server", "Security", "Durability", "Limits", "Realism", "Cluster", "Logging"):
        assert topic in headings, headings
    # Each flag under its topic.
    assert out.index("--data-dir") > out.index("Durability:") > out.index("--auth")
    assert out.index("--cluster-shards") > out.index("Cluster:")


def test_health_takes_its_port_after_the_subcommand():
    with running() as srv:
        assert sqsim("health", "--port", str(srv.port)).returncode == 0
    # Nothing listens there any more.
    out = sqsim("health", "--port", str(srv.port))
    assert out.returncode == 1 and "cannot connect" in out.stderr


def test_completions_and_the_man_page_come_from_the_flags():
    script = sqsim("completions", "bash")
    assert script.returncode == 0 and "--cluster-shards" in script.stdout
    bash = shutil.which("bash")
    checked = subprocess.run([bash, "-n"], input=script.stdout, text=True, capture_output=True)
    assert checked.returncode == 0, checked.stderr
    for shell in ("zsh", "fish"):
        out = sqsim("completions", shell)
        assert out.returncode == 0 and "sqsim" in out.stdout and "data-dir" in out.stdout
    page = sqsim("man").stdout
    assert page.startswith(".ie") and ".TH sqsim 1" in page
    assert "\\-\\-data\\-dir" in page and "durable mode" in page.lower()


def test_the_banner_names_the_mode_the_auth_and_the_console(tmp_path):
    for flags, mode in (((), "in memory"), (("--data-dir", str(tmp_path / "d")), "durable at")):
        proc = sqsim_process.spawn(*flags)
        try:
            endpoint = sqsim_process.wait_ready(proc)
            banner = proc.stdout.readline().decode()
            assert banner.startswith("sqsim "), banner
            assert mode in banner and "any credentials accepted" in banner, banner
            assert f"console {endpoint}/_sqsim/console" in banner, banner
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def test_startup_errors_say_what_failed_and_what_to_change(tmp_path):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        out = run_to_exit(port=port)
        assert out.returncode == 2
        assert f"cannot listen on 127.0.0.1:{port}: the address is in use" in out.stderr
        assert "--port 0" in out.stderr
    finally:
        taken.close()

    out = run_to_exit("--host", "no such host!")
    assert out.returncode == 2 and '--host "no such host!" is not an address' in out.stderr

    plain_file = tmp_path / "file"
    plain_file.write_text("")
    out = run_to_exit("--data-dir", str(plain_file / "data"))
    assert out.returncode == 2
    assert f"data directory {plain_file / 'data'}:" in out.stderr, out.stderr

    yaml = tmp_path / "sqsim.yaml"
    yaml.write_text("server:\n  port: 9324\n")
    out = run_to_exit("--config", str(yaml))
    assert out.returncode == 2 and "YAML is not read" in out.stderr, out.stderr


def test_a_parent_that_reads_only_the_listen_line_does_not_stop_the_server():
    """Harnesses read the listen line and close the pipe; the lines sqsim prints after it (the
    banner, the realism seed) must not fail on the closed pipe and take the server down (the
    banner did, in sqsim-bench, until the lines ignored a closed stdout)."""
    proc = sqsim_process.spawn("--realism", "aws")
    try:
        endpoint = sqsim_process.wait_ready(proc)
        proc.stdout.close()
        for _ in range(3):
            time.sleep(0.2)
            with urllib.request.urlopen(f"{endpoint}/_sqsim/health") as r:
                assert r.status == 200
        assert proc.poll() is None
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0
