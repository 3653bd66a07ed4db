#!/usr/bin/env bash
# Smoke test of sqsim with the `aws` CLI found on PATH (the Makefile puts .venv/bin first).
# Starts $SQSIM_BIN on a free port (or uses the running sqsim at $SQSIM_TEST_ENDPOINT), runs the
# common SQS commands against it, checks their output with python3, and prints "cli smoke: N
# passed, M failed". Exits non-zero on failure.
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

# --- start the server (or use $SQSIM_TEST_ENDPOINT: a running sqsim, e.g. a cluster's gateway) --
if [[ -n "${SQSIM_TEST_ENDPOINT:-}" ]]; then
    ENDPOINT="${SQSIM_TEST_ENDPOINT%/}"
else
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

# --- dead-letter queue, redrive and message move tasks ---------------------------------------
DLQ_NAME="cli-smoke-$$-$RANDOM-dlq"
SRC_NAME="cli-smoke-$$-$RANDOM-src"
run "create-queue (DLQ)" sqs create-queue --queue-name "$DLQ_NAME"
DLQ_URL="$(jget "$OUT" 'd.get("QueueUrl", "")')"
run "create-queue (redrive source)" sqs create-queue --queue-name "$SRC_NAME"
SRC_URL="$(jget "$OUT" 'd.get("QueueUrl", "")')"
DLQ_ARN="arn:aws:sqs:us-east-1:000000000000:$DLQ_NAME"
SRC_ARN="arn:aws:sqs:us-east-1:000000000000:$SRC_NAME"

POLICY="{\"deadLetterTargetArn\":\"$DLQ_ARN\",\"maxReceiveCount\":1}"
ATTRS="$(python3 -c 'import json, sys; print(json.dumps({"RedrivePolicy": sys.argv[1]}))' "$POLICY")"
run "set-queue-attributes RedrivePolicy" sqs set-queue-attributes --queue-url "$SRC_URL" \
    --attributes "$ATTRS"
run "get-queue-attributes RedrivePolicy" sqs get-queue-attributes --queue-url "$SRC_URL" \
    --attribute-names RedrivePolicy
check "RedrivePolicy round-trips" "$(jget "$OUT" 'd["Attributes"]["RedrivePolicy"]')" "$POLICY"

# As in the aws CLI documentation's example, the count as a string: AWS returns it a number.
DOC_ATTRS="$(python3 -c 'import json, sys; print(json.dumps({"RedrivePolicy": sys.argv[1]}))' \
    "{\"deadLetterTargetArn\":\"$DLQ_ARN\",\"maxReceiveCount\":\"1\"}")"
run "set-queue-attributes RedrivePolicy (string count)" sqs set-queue-attributes \
    --queue-url "$SRC_URL" --attributes "$DOC_ATTRS"
run "get-queue-attributes RedrivePolicy (normalised)" sqs get-queue-attributes \
    --queue-url "$SRC_URL" --attribute-names RedrivePolicy
check "RedrivePolicy comes back with a numeric count" \
    "$(jget "$OUT" 'd["Attributes"]["RedrivePolicy"]')" "$POLICY"

BAD_ATTRS="$(python3 -c 'import json, sys; print(json.dumps({"RedrivePolicy": sys.argv[1]}))' \
    "{\"deadLetterTargetArn\":\"$DLQ_ARN\",\"maxReceiveCount\":0}")"
if sqs set-queue-attributes --queue-url "$SRC_URL" --attributes "$BAD_ATTRS" >/dev/null 2>"$WORK/err"; then
    fail "maxReceiveCount 0 should be refused"
else
    check "maxReceiveCount 0 is InvalidParameterValue" \
        "$(grep -c 'InvalidParameterValue' "$WORK/err" || true)" "1"
fi

run "list-dead-letter-source-queues" sqs list-dead-letter-source-queues --queue-url "$DLQ_URL"
check "list-dead-letter-source-queues finds the source" "$(jget "$OUT" 'd.get("queueUrls")')" \
    "[\"$SRC_URL\"]"
run "list-dead-letter-source-queues (not a DLQ)" sqs list-dead-letter-source-queues --queue-url "$SRC_URL"
check "a plain queue has no sources" "$(jget "$OUT" 'd.get("queueUrls")')" "[]"

for i in 1 2; do
    run "send-message $i to the redrive source" sqs send-message --queue-url "$SRC_URL" \
        --message-body "poison $i"
done
run "receive-message (first delivery)" sqs receive-message --queue-url "$SRC_URL" \
    --max-number-of-messages 10 --visibility-timeout 0
check "both messages delivered once" "$(jget "$OUT" 'len(d.get("Messages", []))')" "2"
run "receive-message (moves them)" sqs receive-message --queue-url "$SRC_URL" \
    --max-number-of-messages 10
check "the second receive returns nothing" "$(jget "$OUT" 'len(d.get("Messages", []))')" "0"
run "get-queue-attributes (DLQ)" sqs get-queue-attributes --queue-url "$DLQ_URL" \
    --attribute-names ApproximateNumberOfMessages
check "both messages are in the DLQ" "$(jget "$OUT" 'd["Attributes"]["ApproximateNumberOfMessages"]')" "2"

if sqs start-message-move-task --source-arn "$SRC_ARN" >/dev/null 2>"$WORK/err"; then
    fail "start-message-move-task on a queue that is not a DLQ should fail"
else
    check "start-message-move-task on a non-DLQ is InvalidParameterValue" \
        "$(grep -c 'InvalidParameterValue' "$WORK/err" || true)" "1"
fi
run "start-message-move-task" sqs start-message-move-task --source-arn "$DLQ_ARN"
HANDLE_DOC="$(python3 -c 'import base64, json, sys
print(json.dumps(json.loads(base64.b64decode(sys.argv[1]))["sourceArn"]))' \
    "$(jget "$OUT" 'd.get("TaskHandle", "")')" 2>&1)"
check "TaskHandle is base64 JSON naming the source" "$HANDLE_DOC" "\"$DLQ_ARN\""
# Poll (bounded) until the task is no longer RUNNING; the last listing is checked below.
for _ in $(seq 1 50); do
    OUT="$(sqs list-message-move-tasks --source-arn "$DLQ_ARN" 2>/dev/null || true)"
    [[ "$(jget "$OUT" 'd["Results"][0]["Status"]')" == "RUNNING" ]] || break
    sleep 0.1
done
run "list-message-move-tasks" sqs list-message-move-tasks --source-arn "$DLQ_ARN" --max-results 10
STATUS="$(jget "$OUT" 'd["Results"][0]["Status"]')"
check "one task listed" "$(jget "$OUT" 'len(d["Results"])')" "1"
check "move task completes" "$STATUS" "COMPLETED"
check "move task moved both" \
    "$(jget "$OUT" '[d["Results"][0][k] for k in ("ApproximateNumberOfMessagesMoved", "ApproximateNumberOfMessagesToMove", "SourceArn")]')" \
    "[2, 2, \"$DLQ_ARN\"]"
check "a finished task has no TaskHandle" "$(jget "$OUT" '"TaskHandle" in d["Results"][0]')" "false"
run "get-queue-attributes (source after redrive)" sqs get-queue-attributes --queue-url "$SRC_URL" \
    --attribute-names ApproximateNumberOfMessages
check "messages are back in the source" \
    "$(jget "$OUT" 'd["Attributes"]["ApproximateNumberOfMessages"]')" "2"

# --- add-permission / remove-permission ------------------------------------------------------
run "add-permission" sqs add-permission --queue-url "$SRC_URL" --label cli-share \
    --aws-account-ids 111122223333 --actions SendMessage ReceiveMessage
run "get-queue-attributes Policy" sqs get-queue-attributes --queue-url "$SRC_URL" \
    --attribute-names Policy
POLICY_DOC="$(jget "$OUT" 'd["Attributes"]["Policy"]')"
check "Policy statement" \
    "$(jget "$POLICY_DOC" '[d["Version"], d["Id"], [(s["Sid"], s["Principal"]["AWS"], s["Action"]) for s in d["Statement"]]]')" \
    "[\"2008-10-17\", \"$SRC_ARN/SQSDefaultPolicy\", [[\"cli-share\", \"arn:aws:iam::111122223333:root\", [\"SQS:SendMessage\", \"SQS:ReceiveMessage\"]]]]"
run "remove-permission" sqs remove-permission --queue-url "$SRC_URL" --label cli-share
run "get-queue-attributes Policy (after removal)" sqs get-queue-attributes --queue-url "$SRC_URL" \
    --attribute-names Policy
check "removing the last label removes Policy" "$(jget "$OUT" '"Policy" in d.get("Attributes", {})')" "false"
if sqs remove-permission --queue-url "$SRC_URL" --label cli-share >/dev/null 2>"$WORK/err"; then
    fail "remove-permission of an unknown label should fail"
else
    check "unknown label is InvalidParameterValue" \
        "$(grep -c 'InvalidParameterValue' "$WORK/err" || true)" "1"
fi

# --- tag-queue / list-queue-tags / untag-queue -----------------------------------------------
run "tag-queue" sqs tag-queue --queue-url "$SRC_URL" --tags team=core,Team=Other,cost=42
run "list-queue-tags" sqs list-queue-tags --queue-url "$SRC_URL"
check "list-queue-tags" "$(jget "$OUT" 'd.get("Tags")')" '{"Team": "Other", "cost": "42", "team": "core"}'
run "untag-queue" sqs untag-queue --queue-url "$SRC_URL" --tag-keys team missing
run "list-queue-tags (after untag)" sqs list-queue-tags --queue-url "$SRC_URL"
check "untag-queue removes one key" "$(jget "$OUT" 'd.get("Tags")')" '{"Team": "Other", "cost": "42"}'

run "delete-queue (redrive source)" sqs delete-queue --queue-url "$SRC_URL"
run "delete-queue (DLQ)" sqs delete-queue --queue-url "$DLQ_URL"
if sqs create-queue --queue-name "$DLQ_NAME" >/dev/null 2>"$WORK/err"; then
    fail "re-creating a just-deleted queue should fail"
else
    check "re-creating within 60 s is QueueDeletedRecently" \
        "$(grep -c 'AWS.SimpleQueueService.QueueDeletedRecently' "$WORK/err" || true)" "1"
fi

# --- batches, listing, and cancelling a move task --------------------------------------------
admin_clock() {
    python3 - "$ENDPOINT" "$1" <<'PYEOF'
import sys, urllib.request
urllib.request.urlopen(urllib.request.Request(sys.argv[1] + "/_sqsim/clock", data=sys.argv[2].encode(), method="POST"))
PYEOF
}
B_NAME="cli-batch-$$-$RANDOM"
run "create-queue (batch)" sqs create-queue --queue-name "$B_NAME"
B_URL="$(jget "$OUT" 'd["QueueUrl"]')"
run "list-queues --queue-name-prefix" sqs list-queues --queue-name-prefix "$B_NAME"
check "list-queues finds it" "$(jget "$OUT" 'd.get("QueueUrls")')" "[\"$B_URL\"]"
run "send-message-batch" sqs send-message-batch --queue-url "$B_URL" \
    --entries '[{"Id":"a","MessageBody":"one"},{"Id":"b","MessageBody":"two"},{"Id":"c","MessageBody":""}]'
check "send-message-batch: two succeed, one fails" \
    "$(jget "$OUT" '[sorted(e["Id"] for e in d.get("Successful", [])), [(e["Id"], e["Code"]) for e in d.get("Failed", [])]]')" \
    '[["a", "b"], [["c", "MissingParameter"]]]'
run "receive-message (batch)" sqs receive-message --queue-url "$B_URL" --max-number-of-messages 10
ENTRIES="$(jget "$OUT" '[{"Id": f"e{i}", "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(d["Messages"])]')"
CMV_ENTRIES="$(jget "$OUT" '[{"Id": f"e{i}", "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 120} for i, m in enumerate(d["Messages"])]')"
run "change-message-visibility-batch" sqs change-message-visibility-batch --queue-url "$B_URL" --entries "$CMV_ENTRIES"
check "change-message-visibility-batch succeeds for both" "$(jget "$OUT" 'len(d.get("Successful", []))')" "2"
run "delete-message-batch" sqs delete-message-batch --queue-url "$B_URL" --entries "$ENTRIES"
check "delete-message-batch succeeds for both" "$(jget "$OUT" 'len(d.get("Successful", []))')" "2"

# A move task at one message per second on a frozen clock, cancelled after the first.
M_DLQ="cli-mdlq-$$-$RANDOM"
run "create-queue (move DLQ)" sqs create-queue --queue-name "$M_DLQ"
M_DLQ_URL="$(jget "$OUT" 'd["QueueUrl"]')"
run "get-queue-attributes (move DLQ arn)" sqs get-queue-attributes --queue-url "$M_DLQ_URL" --attribute-names QueueArn
M_DLQ_ARN="$(jget "$OUT" 'd["Attributes"]["QueueArn"]')"
run "set-queue-attributes (redrive to move DLQ)" sqs set-queue-attributes --queue-url "$B_URL" \
    --attributes "{\"RedrivePolicy\": \"{\\\"deadLetterTargetArn\\\":\\\"$M_DLQ_ARN\\\",\\\"maxReceiveCount\\\":1}\"}"
run "send-message-batch (to move)" sqs send-message-batch --queue-url "$B_URL" \
    --entries '[{"Id":"a","MessageBody":"m1"},{"Id":"b","MessageBody":"m2"},{"Id":"c","MessageBody":"m3"}]'
run "receive-message (first delivery)" sqs receive-message --queue-url "$B_URL" --max-number-of-messages 10 --visibility-timeout 0
run "receive-message (moves to the DLQ)" sqs receive-message --queue-url "$B_URL" --max-number-of-messages 10
admin_clock '{"freeze": true}'
run "start-message-move-task (1/s)" sqs start-message-move-task --source-arn "$M_DLQ_ARN" --max-number-of-messages-per-second 1
HANDLE="$(jget "$OUT" 'd["TaskHandle"]')"
sleep 0.3
run "cancel-message-move-task" sqs cancel-message-move-task --task-handle "$HANDLE"
check "cancel reports one message moved" "$(jget "$OUT" 'd["ApproximateNumberOfMessagesMoved"]')" "1"
admin_clock '{"freeze": false}'

echo "cli smoke: $PASSED passed, $FAILED failed"
[[ "$FAILED" -eq 0 ]]
