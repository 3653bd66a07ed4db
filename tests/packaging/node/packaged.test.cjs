// The Jest example for the npm package: `startSqsim()` from "sqsim" runs the server npm
// installed; reset it before each test and move its clock instead of sleeping.
const { startSqsim } = require("sqsim");
const {
  CreateQueueCommand, SendMessageCommand, ReceiveMessageCommand,
} = require("@aws-sdk/client-sqs");

let sqsim, sqs;

beforeAll(async () => {
  sqsim = await startSqsim(); // a free port on 127.0.0.1
  sqs = sqsim.client(); // an SQSClient for it
});
afterAll(() => sqsim.stop());

beforeEach(() => sqsim.reset()); // every test starts from an empty server

test("a message comes back after its visibility timeout", async () => {
  const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: "jobs" }));
  await sqs.send(new SendMessageCommand({ QueueUrl, MessageBody: "hello" }));
  const first = await sqs.send(new ReceiveMessageCommand({ QueueUrl, VisibilityTimeout: 60 }));
  expect((await sqs.send(new ReceiveMessageCommand({ QueueUrl }))).Messages).toBeUndefined();

  await sqsim.advance(60); // no sleep

  const again = await sqs.send(new ReceiveMessageCommand({ QueueUrl }));
  expect(again.Messages[0].MessageId).toBe(first.Messages[0].MessageId);
});

test("peek shows a message's state without receiving it", async () => {
  const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: "jobs" }));
  await sqs.send(new SendMessageCommand({ QueueUrl, MessageBody: "hello", DelaySeconds: 30 }));

  const { messages } = await sqsim.peek("jobs");
  expect(messages).toMatchObject([{ body: "hello", state: "delayed", receive_count: 0 }]);

  await sqsim.advance(30);
  expect((await sqsim.peek("jobs")).messages[0].state).toBe("visible");
});
