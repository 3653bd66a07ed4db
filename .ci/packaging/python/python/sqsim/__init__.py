"""sqsim for Python: the `sqsim` server binary this wheel installs, `Server` to run it from
code, and a pytest plugin (fixtures `sqsim` and `sqs`, see `sqsim.pytest_plugin`)."""

from ._server import Server, ServerError, binary

__all__ = ["Server", "ServerError", "binary"]
