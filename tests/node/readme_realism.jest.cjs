// The realism example from docs/realism.md: a consumer that drains a queue with one short poll
// passes against sqsim's exact default and fails under --realism aws, as it would against
// SQS; polling until a long poll comes back empty works under both.
const { spawn } = require("node:child_process");
const { once } = require("node:events");
const {
  SQSClient, CreateQueueCommand, SendMessageCommand, ReceiveMessageCommand,
} = require("@aws-sdk/client-sqs");

const BODIES = Array.from({ length: 10 }, (_, i) => `order-${i}`);

async function start(flags) {
  const server = spawn(process.env.SQSIM_BIN ?? "sqsim", ["--port", "0", ...flags]);
  const [line] = await once(server.stdout, "data"); // "sqsim listening on http://127.0.0.1:PORT"
  const endpoint = line.toString().split("\n")[0].trim().split(" ").pop();
  const sqs = new SQSClient({
    endpoint, region: "us-east-1",
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
  });
  const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: "orders" }));
  // SQS asks for a second between creating a queue and using it; move the clock.
  await fetch(`${endpoint}/_sqsim/clock`, {
    method: "POST", body: JSON.stringify({ advance_seconds: 1 }),
  });
  for (const MessageBody of BODIES) {
    await sqs.send(new SendMessageCommand({ QueueUrl, MessageBody }));
  }
  return { server, sqs, QueueUrl };
}

async function drainWithOneShortPoll({ sqs, QueueUrl }) { // the bug
  const got = await sqs.send(new ReceiveMessageCommand({ QueueUrl, MaxNumberOfMessages: 10 }));
  return (got.Messages ?? []).map((m) => m.Body);
}

async function drainUntilEmpty({ sqs, QueueUrl }) { // the fix
  const bodies = [];
  for (;;) {
    const got = await sqs.send(new ReceiveMessageCommand({
      QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
    }));
    if (!got.Messages?.length) return bodies;
    bodies.push(...got.Messages.map((m) => m.Body));
  }
}

describe.each([
  ["exact", []],
  ["realism", ["--realism", "aws", "--seed", "7"]],
])("%s", (mode, flags) => {
  let q;
  beforeEach(async () => { q = await start(flags); });
  afterEach(() => q.server.kill());

  test("one short poll misses messages under realism", async () => {
    const drained = await drainWithOneShortPoll(q);
    if (mode === "exact") {
      expect(drained).toEqual(BODIES); // passes against an exact emulator...
    } else {
      expect(drained.length).toBeLessThan(BODIES.length); // ...and misses messages, as on SQS
    }
  });

  test("polling until empty gets everything", async () => {
    expect((await drainUntilEmpty(q)).sort()).toEqual([...BODIES].sort());
  });
});
