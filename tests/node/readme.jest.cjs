// The Jest example without the package, from docs/testing.md: start sqsim once, reset it
// before each test, and move its clock instead of sleeping.
const { spawn } = require("node:child_process");
const { once } = require("node:events");
const {
  SQSClient, CreateQueueCommand, SendMessageCommand, ReceiveMessageCommand,
} = require("@aws-sdk/client-sqs");

let server, endpoint, sqs;

beforeAll(async () => {
  server = spawn(process.env.SQSIM_BIN ?? "sqsim", ["--port", "0"]);
  const [line] = await once(server.stdout, "data"); // "sqsim listening on http://127.0.0.1:PORT"
  endpoint = line.toString().split("\n")[0].trim().split(" ").pop();
  sqs = new SQSClient({
    endpoint, region: "us-east-1",
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
  });
});
afterAll(() => server.kill());

const admin = (path, body) =>
  fetch(`${endpoint}/_sqsim/${path}`, { method: "POST", body: JSON.stringify(body) });

beforeEach(() => admin("reset", {}));

test("a message comes back after its visibility timeout", async () => {
  const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: "jobs" }));
  await sqs.send(new SendMessageCommand({ QueueUrl, MessageBody: "hello" }));
  const first = await sqs.send(new ReceiveMessageCommand({ QueueUrl, VisibilityTimeout: 60 }));
  expect((await sqs.send(new ReceiveMessageCommand({ QueueUrl }))).Messages).toBeUndefined();

  await admin("clock", { advance_seconds: 60 }); // no sleep

  const again = await sqs.send(new ReceiveMessageCommand({ QueueUrl }));
  expect(again.Messages[0].MessageId).toBe(first.Messages[0].MessageId);
});
