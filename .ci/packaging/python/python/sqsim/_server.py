"""`Server`: one sqsim process on a free loopback port, and the test controls (`/_sqsim/…`)
as methods, so a test never writes a URL or sleeps."""

import json
import os
import shutil
import subprocess
import sysconfig
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, List, Optional

# What sqsim prints first on stdout once it accepts connections.
_LISTEN_PREFIX = "sqsim listening on "
_STARTUP_TIMEOUT_S = 20.0
_STOP_TIMEOUT_S = 5.0


class ServerError(RuntimeError):
    """sqsim did not start, or a test control answered with an error."""


def binary() -> str:
    """The sqsim binary: `SQSIM_BINARY_PATH` when set, else the one this wheel installed
    (the environment's scripts directory, or the user scheme's), else `sqsim` on the PATH."""
    explicit = os.environ.get("SQSIM_BINARY_PATH")
    if explicit:
        return explicit
    exe = "sqsim" + (sysconfig.get_config_var("EXE") or "")
    # The scripts directory of this interpreter's environment is where pip put the binary;
    # looked at first so a different `sqsim` earlier on the PATH cannot shadow it.
    schemes = [None, f"{os.name}_user"]
    for scheme in schemes:
        try:
            scripts = sysconfig.get_path("scripts", scheme) if scheme else sysconfig.get_path("scripts")
        except KeyError:
            continue
        candidate = os.path.join(scripts, exe)
        if os.path.isfile(candidate):
            return candidate
    found = shutil.which("sqsim")
    if found:
        return found
    raise ServerError(
        "the sqsim binary was not found: reinstall the wheel (pip install --force-reinstall sqsim) "
        "or set SQSIM_BINARY_PATH"
    )


class Server:
    """An sqsim process on 127.0.0.1 and a free port; `args` are extra flags
    (`Server("--realism", "aws")`). Use it as a context manager, or `start()` / `stop()`."""

    def __init__(
        self,
        *args: str,
        binary_path: Optional[str] = None,
        env: Optional[Dict[str, str]] = None,
        startup_timeout: float = _STARTUP_TIMEOUT_S,
    ):
        self.args: List[str] = list(args)
        self.binary_path = binary_path
        self.env = env
        self.startup_timeout = startup_timeout
        self.endpoint: Optional[str] = None
        self._proc: Optional[subprocess.Popen] = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> "Server":
        """Starts sqsim and returns once it accepts connections (its listen line)."""
        if self._proc is not None:
            return self
        env = dict(os.environ)
        env.update(self.env or {})
        command = [self.binary_path or binary(), "--port", "0", *self.args]
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
            errors="replace",
        )
        self._proc = proc
        ready = threading.Event()
        stderr_tail: List[str] = []

        def read_stdout():
            # The listen line first; everything after (the banner) is only drained, so the
            # pipe never fills and blocks the server.
            for line in proc.stdout:
                if self.endpoint is None and line.startswith(_LISTEN_PREFIX):
                    self.endpoint = line[len(_LISTEN_PREFIX):].strip()
                    ready.set()
            ready.set()

        def read_stderr():
            for line in proc.stderr:
                # Kept for the error a failed start raises; not echoed, so a test run's
                # output holds the tests' own lines only.
                stderr_tail.append(line)
                del stderr_tail[:-40]

        threading.Thread(target=read_stdout, daemon=True).start()
        threading.Thread(target=read_stderr, daemon=True).start()
        if not ready.wait(self.startup_timeout) or self.endpoint is None:
            self.stop()
            raise ServerError(
                f"sqsim did not start ({' '.join(command)}; exit code {proc.returncode}):\n"
                + "".join(stderr_tail)
            )
        return self

    def stop(self) -> None:
        """Stops sqsim (SIGTERM, then SIGKILL after 5 s). Calling it twice is harmless."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def __enter__(self) -> "Server":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- clients and test controls -----------------------------------------------------------

    def client(self, **kwargs: Any):
        """A boto3 SQS client for this server (region us-east-1, credentials test/test);
        keyword arguments go to `boto3.client` and win over those."""
        try:
            import boto3
        except ImportError as e:  # an extra, not a dependency: `pip install "sqsim[boto3]"`
            raise ServerError('Server.client() needs boto3: pip install "sqsim[boto3]"') from e
        options = {
            "endpoint_url": self._endpoint(),
            "region_name": "us-east-1",
            "aws_access_key_id": "test",
            "aws_secret_access_key": "test",
        }
        options.update(kwargs)
        return boto3.client("sqs", **options)

    def reset(self) -> None:
        """Removes every queue, message, move task and fault: an empty server."""
        self._control("POST", "reset", {})

    def advance(self, seconds: float) -> None:
        """Moves the server's clock forward: visibility timeouts, delays, retention and
        deduplication windows pass without sleeping."""
        self._control("POST", "clock", {"advance_seconds": seconds})

    def freeze(self) -> None:
        """Stops the server's clock until `unfreeze()` (only `advance` moves it)."""
        self._control("POST", "clock", {"freeze": True})

    def unfreeze(self) -> None:
        """Lets the server's clock run with real time again."""
        self._control("POST", "clock", {"freeze": False})

    def peek(self, queue: str) -> List[Dict[str, Any]]:
        """Every message of `queue` (a name in the default account, or a queue URL) with its
        state (`visible`, `in_flight`, `delayed`), receive count and attributes — without
        receiving anything or changing any count."""
        messages: List[Dict[str, Any]] = []
        offset: Optional[int] = 0
        while offset is not None:
            query = urllib.parse.urlencode({"queue_url": queue, "offset": offset})
            page = self._control("GET", f"peek?{query}")
            messages.extend(page["messages"])
            offset = page.get("next_offset")
        return messages

    def _endpoint(self) -> str:
        if self.endpoint is None:
            raise ServerError("the server is not running: call start() or use `with Server()`")
        return self.endpoint

    def _control(self, method: str, path: str, body: Optional[dict] = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"{self._endpoint()}/_sqsim/{path}", data=data, method=method)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return json.load(resp)
        except urllib.error.HTTPError as e:
            raise ServerError(f"{method} /_sqsim/{path}: {e.code} {e.read().decode(errors='replace')}") from None
