"""Resolves localhost.localstack.cloud and its subdomains to 127.0.0.1, as LocalStack's public
DNS record does, in Python processes started with this directory on PYTHONPATH (the aws CLI
of test_compat_localstack.py). Does nothing unless SQSIM_TEST_LOCALSTACK_DNS=1."""

import os
import socket

if os.environ.get("SQSIM_TEST_LOCALSTACK_DNS") == "1":
    _getaddrinfo = socket.getaddrinfo

    def _loopback_getaddrinfo(host, *args, **kwargs):
        name = host.decode() if isinstance(host, bytes) else host
        if isinstance(name, str):
            name = name.rstrip(".").lower()
            if name == "localhost.localstack.cloud" or name.endswith(".localhost.localstack.cloud"):
                host = "127.0.0.1"
        return _getaddrinfo(host, *args, **kwargs)

    socket.getaddrinfo = _loopback_getaddrinfo
