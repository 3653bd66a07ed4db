#!/usr/bin/env bash
# Smoke test of sqsim with the `aws` CLI found on PATH (the Makefile puts .venv/bin first).
# Starts $SQSIM_BIN on a free port, runs the common SQS commands against it, checks their
# output with python3, and prints "cli smoke: N passed, M failed". Exits non-zero on failure.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/../.." && pwd)"
SQSIM_BIN="${SQSIM_BIN:-$REPO/target/debug/sqsim}"

if [[ ! -x "$SQSIM_BIN" ]]; then
    echo "cli smoke: SQSIM_BIN '$SQSIM_BIN' is not executable" >&2
    exit 2
fi
command -v aws >/dev/null || { echo "cli smoke: no aws CLI on PATH" >&2; exit 2; }
command -v python3 >/dev/null || { echo "cli smoke: no python3 on PATH" >&2; exit 2; }

WORK="$(mktemp -d)"
SERVER_PID=""
cleanup() {
    if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

# --- start the server ---------------------------------------------------------------------
"$SQSIM_BIN" --host 127.0.0.1 --port 0 >"$WORK/stdout" 2>"$WORK/stderr" &
SERVER_PID=$!

ENDPOINT=""
for _ in $(seq 1 200); do
    if line="$(grep -m1 -E '^sqsim listening on http://' "$WORK/stdout" 2>/dev/null)"; then
        ENDPOINT="${line#sqsim listening on }"
        break
    fi
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.05
done
if [[ -z "$ENDPOINT" ]]; then
    echo "cli smoke: sqsim did not start" >&2
    cat "$WORK/stderr" >&2 || true
    exit 1
fi
for _ in $(seq 1 200); do
    if python3 - "$ENDPOINT" <<'EOF' 2>/dev/null; then break; fi
import json, sys, urllib.request
with urllib.request.urlopen(sys.argv[1] + "/_sqsim/health", timeout=1) as r:
    assert json.load(r)["status"] == "ok"
EOF
    sleep 0.05
done

# --- an isolated, dummy-credential aws CLI -------------------------------------------------
export AWS_ACCESS_KEY_ID=test
export AWS_SECRET_ACCESS_KEY=test
export AWS_DEFAULT_REGION=us-east-1
export AWS_CONFIG_FILE="$WORK/aws-config"
export AWS_SHARED_CREDENTIALS_FILE="$WORK/aws-credentials"
export AWS_PAGER=""
unset AWS_PROFILE AWS_SESSION_TOKEN AWS_ENDPOINT_URL AWS_ENDPOINT_URL_SQS || true

sqs() {
    aws --endpoint-url "$ENDPOINT" --output json sqs "$@"
}

PASSED=0
FAILED=0

pass() { PASSED=$((PASSED + 1)); echo "ok   - $1"; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL - $1" >&2; }

# check NAME ACTUAL EXPECTED
check() {
    if [[ "$2" == "$3" ]]; then
        pass "$1"
    else
        fail "$1: expected [$3], got [$2]"
    fi
}

# jget JSON EXPR: evaluates a Python expression over the parsed document `d`. Never fails:
# a missing key prints "<error: ...>", which then fails the check that uses it.
jget() {
    python3 -c 'import json, sys
try:
    d = json.loads(sys.argv[1]) if sys.argv[1].strip() else {}
    v = eval(sys.argv[2], {"d": d})
    print(v if isinstance(v, str) else json.dumps(v, sort_keys=True))
except Exception as e:
    print(f"<error: {type(e).__name__}: {e}>")' "$1" "$2"
}

# run NAME CMD...: runs a command that must succeed; its stdout goes to $OUT.
run() {
    local name="$1"
    shift
    if OUT="$("$@" 2>"$WORK/err")"; then
        pass "$name exits 0"
    else
        OUT=""
        fail "$name exited non-zero: $(cat "$WORK/err")"
    fi
}

md5() { python3 -c 'import hashlib, sys; print(hashlib.md5(sys.argv[1].encode()).hexdigest())' "$1"; }

QUEUE="cli-smoke-$$-$RANDOM"
BODY='hello "cli" & <xml> é'

# --- create-queue ---------------------------------------------------------------------------
run "create-queue" sqs create-queue --queue-name "$QUEUE" --attributes VisibilityTimeout=45
QURL="$(jget "$OUT" 'd.get("QueueUrl", "")')"
check "create-queue returns the queue URL" "$QURL" "$ENDPOINT/000000000000/$QUEUE"

run "get-queue-url" sqs get-queue-url --queue-name "$QUEUE"
check "get-queue-url finds the queue" "$(jget "$OUT" 'd.get("QueueUrl")')" "$QURL"

# --- send-message with message attributes -----------------------------------------------------
run "send-message" sqs send-message --queue-url "$QURL" --message-body "$BODY" \
    --message-attributes '{"Foo":{"DataType":"String","StringValue":"Bar"},"Num":{"DataType":"Number.int","StringValue":"42"}}'
check "send-message MD5OfMessageBody" "$(jget "$OUT" 'd.get("MD5OfMessageBody")')" "$(md5 "$BODY")"
# MD5 of {Foo: String "Bar", Num: Number.int "42"} by the algorithm of the reference §5.3.
check "send-message MD5OfMessageAttributes" \
    "$(jget "$OUT" 'd.get("MD5OfMessageAttributes")')" "fcb2922367b62b399a7714d33e5f2405"
SENT_ID="$(jget "$OUT" 'd.get("MessageId", "")')"
check "send-message returns a MessageId" "$(jget "$OUT" 'len(d.get("MessageId", "")) == 36')" "true"

# --- receive-message ----------------------------------------------------------------------------
run "receive-message" sqs receive-message --queue-url "$QURL" \
    --attribute-names All --message-attribute-names All --max-number-of-messages 10
check "receive-message returns one message" "$(jget "$OUT" 'len(d.get("Messages", []))')" "1"
check "received body round-trips" "$(jget "$OUT" 'd["Messages"][0]["Body"]')" "$BODY"
check "received MessageId matches" "$(jget "$OUT" 'd["Messages"][0]["MessageId"]')" "$SENT_ID"
check "received MD5OfBody" "$(jget "$OUT" 'd["Messages"][0]["MD5OfBody"]')" "$(md5 "$BODY")"
check "received string attribute" \
    "$(jget "$OUT" 'd["Messages"][0]["MessageAttributes"]["Foo"]')" \
    '{"DataType": "String", "StringValue": "Bar"}'
check "received custom-type attribute" \
    "$(jget "$OUT" 'd["Messages"][0]["MessageAttributes"]["Num"]')" \
    '{"DataType": "Number.int", "StringValue": "42"}'
check "received ApproximateReceiveCount" \
    "$(jget "$OUT" 'd["Messages"][0]["Attributes"]["ApproximateReceiveCount"]')" "1"
check "received SenderId" "$(jget "$OUT" 'd["Messages"][0]["Attributes"]["SenderId"]')" "000000000000"
HANDLE="$(jget "$OUT" 'd["Messages"][0]["ReceiptHandle"]')"

run "receive-message while in flight" sqs receive-message --queue-url "$QURL"
check "in-flight message is invisible" "$(jget "$OUT" 'len(d.get("Messages", []))')" "0"

# --- change-message-visibility ------------------------------------------------------------------
run "change-message-visibility" sqs change-message-visibility --queue-url "$QURL" \
    --receipt-handle "$HANDLE" --visibility-timeout 0
run "receive-message after visibility 0" sqs receive-message --queue-url "$QURL" --attribute-names ApproximateReceiveCount
check "message is visible again" "$(jget "$OUT" 'len(d.get("Messages", []))')" "1"
check "ApproximateReceiveCount is 2" \
    "$(jget "$OUT" 'd["Messages"][0]["Attributes"]["ApproximateReceiveCount"]')" "2"
HANDLE="$(jget "$OUT" 'd["Messages"][0]["ReceiptHandle"]')"

if sqs change-message-visibility --queue-url "$QURL" --receipt-handle garbage \
    --visibility-timeout 10 >/dev/null 2>"$WORK/err"; then
    fail "change-message-visibility with a garbage handle should fail"
else
    check "garbage handle is ReceiptHandleIsInvalid" \
        "$(grep -c 'ReceiptHandleIsInvalid' "$WORK/err" || true)" "1"
fi

# --- delete-message -------------------------------------------------------------------------------
run "delete-message" sqs delete-message --queue-url "$QURL" --receipt-handle "$HANDLE"

# --- get-queue-attributes --------------------------------------------------------------------------
run "get-queue-attributes" sqs get-queue-attributes --queue-url "$QURL" --attribute-names All
check "queue is empty after delete" \
    "$(jget "$OUT" '[d["Attributes"][k] for k in ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed")]')" \
    '["0", "0", "0"]'
check "VisibilityTimeout from create-queue" "$(jget "$OUT" 'd["Attributes"]["VisibilityTimeout"]')" "45"
check "QueueArn" "$(jget "$OUT" 'd["Attributes"]["QueueArn"]')" "arn:aws:sqs:us-east-1:000000000000:$QUEUE"

# --- purge-queue ------------------------------------------------------------------------------------
for i in 1 2 3; do
    run "send-message $i before purge" sqs send-message --queue-url "$QURL" --message-body "purge me $i"
done
run "get-queue-attributes before purge" sqs get-queue-attributes --queue-url "$QURL" \
    --attribute-names ApproximateNumberOfMessages
check "three messages before purge" "$(jget "$OUT" 'd["Attributes"]["ApproximateNumberOfMessages"]')" "3"
run "purge-queue" sqs purge-queue --queue-url "$QURL"
run "get-queue-attributes after purge" sqs get-queue-attributes --queue-url "$QURL" \
    --attribute-names ApproximateNumberOfMessages
check "no messages after purge" "$(jget "$OUT" 'd["Attributes"]["ApproximateNumberOfMessages"]')" "0"
if sqs purge-queue --queue-url "$QURL" >/dev/null 2>"$WORK/err"; then
    fail "a second purge within 60 s should fail"
else
    check "second purge is PurgeQueueInProgress" \
        "$(grep -c 'AWS.SimpleQueueService.PurgeQueueInProgress' "$WORK/err" || true)" "1"
fi

# --- delete-queue -------------------------------------------------------------------------------------
run "delete-queue" sqs delete-queue --queue-url "$QURL"
if sqs get-queue-url --queue-name "$QUEUE" >/dev/null 2>"$WORK/err"; then
    fail "get-queue-url after delete-queue should fail"
else
    check "deleted queue is NonExistentQueue" \
        "$(grep -c 'AWS.SimpleQueueService.NonExistentQueue' "$WORK/err" || true)" "1"
fi

# --- FIFO queue -----------------------------------------------------------------------------------
FIFO="cli-smoke-$$-$RANDOM.fifo"
run "create-queue (FIFO)" sqs create-queue --queue-name "$FIFO" \
    --attributes FifoQueue=true,ContentBasedDeduplication=true
FURL="$(jget "$OUT" 'd.get("QueueUrl", "")')"
check "FIFO create-queue returns the queue URL" "$FURL" "$ENDPOINT/000000000000/$FIFO"

run "send-message (FIFO) first" sqs send-message --queue-url "$FURL" \
    --message-body "fifo first" --message-group-id grp
SEQ1="$(jget "$OUT" 'd.get("SequenceNumber", "")')"
FID1="$(jget "$OUT" 'd.get("MessageId", "")')"
check "FIFO send-message returns a decimal SequenceNumber" \
    "$(jget "$OUT" 'd.get("SequenceNumber", "").isdigit()')" "true"
run "send-message (FIFO) second" sqs send-message --queue-url "$FURL" \
    --message-body "fifo second" --message-group-id grp
SEQ2="$(jget "$OUT" 'd.get("SequenceNumber", "")')"
check "FIFO SequenceNumbers increase" \
    "$(python3 -c 'import sys; print(int(sys.argv[2]) > int(sys.argv[1]))' "$SEQ1" "$SEQ2" 2>&1)" "True"
run "send-message (FIFO) duplicate" sqs send-message --queue-url "$FURL" \
    --message-body "fifo first" --message-group-id grp
check "FIFO duplicate returns the original MessageId" "$(jget "$OUT" 'd.get("MessageId")')" "$FID1"

run "receive-message (FIFO)" sqs receive-message --queue-url "$FURL" \
    --attribute-names All --max-number-of-messages 10
check "FIFO messages arrive in send order, once each" \
    "$(jget "$OUT" '[m["Body"] for m in d.get("Messages", [])]')" '["fifo first", "fifo second"]'
check "FIFO received SequenceNumbers" \
    "$(jget "$OUT" '[m["Attributes"]["SequenceNumber"] for m in d["Messages"]]')" "[\"$SEQ1\", \"$SEQ2\"]"
check "FIFO received MessageGroupId" \
    "$(jget "$OUT" '[m["Attributes"]["MessageGroupId"] for m in d["Messages"]]')" '["grp", "grp"]'
check "FIFO content-based MessageDeduplicationId" \
    "$(jget "$OUT" 'd["Messages"][0]["Attributes"]["MessageDeduplicationId"]')" \
    "$(python3 -c 'import hashlib, sys; print(hashlib.sha256(sys.argv[1].encode()).hexdigest())' "fifo first")"

if sqs send-message --queue-url "$FURL" --message-body "no group" >/dev/null 2>"$WORK/err"; then
    fail "FIFO send-message without --message-group-id should fail"
else
    check "FIFO send without group is MissingParameter" \
        "$(grep -c 'MissingParameter' "$WORK/err" || true)" "1"
fi
run "delete-queue (FIFO)" sqs delete-queue --queue-url "$FURL"

echo "cli smoke: $PASSED passed, $FAILED failed"
[[ "$FAILED" -eq 0 ]]
