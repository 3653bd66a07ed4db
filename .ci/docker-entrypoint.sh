#!/bin/sh
# LocalStack's entrypoint path, which Testcontainers' LocalStack module runs: sqsim in
# LocalStack compatibility mode (port 4566, its URLs and endpoints, ready.d hooks).
# The image's own entrypoint is sqsim itself; this is for setups that call this path.
export SQSIM_COMPAT="${SQSIM_COMPAT:-localstack}"
exec /usr/local/bin/sqsim "$@"
