// sqsim as a test double from the JS SDKs: --auth verify (right and wrong secret), an
// injected ThrottlingException that the SDK's retry logic absorbs, the admin clock waking a
// long poll, reset and peek. Each describe block starts its own sqsim with the flags it needs.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import * as sqs from '@aws-sdk/client-sqs';

import { ACCOUNT, REGION, awsV2, startServer } from './helpers.mjs';

function v3(endpoint, { key = 'AKIDTEST', secret = 'test-secret', maxAttempts = 1 } = {}) {
  return new sqs.SQSClient({
    endpoint,
    region: REGION,
    credentials: { accessKeyId: key, secretAccessKey: secret },
    maxAttempts,
  });
}

function v2(endpoint, { key = 'AKIDTEST', secret = 'test-secret', maxRetries = 0 } = {}) {
  const AWS = awsV2();
  return new AWS.SQS({
    endpoint,
    region: REGION,
    credentials: new AWS.Credentials({ accessKeyId: key, secretAccessKey: secret }),
    maxRetries,
    // Retries start after ~100 ms instead of v2's default 100 ms * 2^n with jitter.
    retryDelayOptions: { base: 50 },
  });
}

const peekPath = (url) => `/_sqsim/peek?queue_url=${encodeURIComponent(url)}`;

/** Resolves to 'pending' if `promise` has not settled after `ms`. */
async function stateAfter(promise, ms) {
  let timer;
  const pending = new Promise((r) => {
    timer = setTimeout(() => r('pending'), ms);
  });
  const settled = promise.then(
    () => 'resolved',
    () => 'rejected',
  );
  const state = await Promise.race([settled, pending]);
  clearTimeout(timer);
  return state;
}

describe('--auth verify', () => {
  let server;
  before(async () => {
    server = await startServer(['--auth', 'verify', '--credentials', 'AKIDTEST:test-secret:123456789012'], {
      isolated: true,
    });
  });
  after(async () => {
    await server?.stop();
  });

  it('v3: the right secret works in the key account', async () => {
    const c = v3(server.endpoint);
    const out = await c.send(new sqs.CreateQueueCommand({ QueueName: 'signed-v3' }));
    assert.equal(out.QueueUrl, `${server.endpoint}/123456789012/signed-v3`);
    await c.send(new sqs.SendMessageCommand({ QueueUrl: out.QueueUrl, MessageBody: 'ok' }));
    const got = await c.send(new sqs.ReceiveMessageCommand({ QueueUrl: out.QueueUrl }));
    assert.deepEqual(
      got.Messages.map((m) => m.Body),
      ['ok'],
    );
    c.destroy();
  });

  it('v3: a wrong secret is SignatureDoesNotMatch (403), an unknown key InvalidClientTokenId', async () => {
    const bad = v3(server.endpoint, { secret: 'wrong' });
    await assert.rejects(bad.send(new sqs.ListQueuesCommand({})), (err) => {
      assert.equal(err.$metadata.httpStatusCode, 403, String(err));
      assert.equal(err.Code, 'SignatureDoesNotMatch', `${err.name}: ${err.message}`);
      assert.match(err.message, /^The request signature we calculated does not match/);
      return true;
    });
    bad.destroy();
    const nobody = v3(server.endpoint, { key: 'AKIDNOBODY' });
    await assert.rejects(nobody.send(new sqs.ListQueuesCommand({})), (err) => {
      assert.equal(err.$metadata.httpStatusCode, 403, String(err));
      assert.equal(err.Code, 'InvalidClientTokenId', `${err.name}: ${err.message}`);
      return true;
    });
    nobody.destroy();
  });

  it('v2: the right secret works, a wrong one is refused', async () => {
    const out = await v2(server.endpoint).createQueue({ QueueName: 'signed-v2' }).promise();
    assert.equal(out.QueueUrl, `${server.endpoint}/123456789012/signed-v2`);
    await assert.rejects(v2(server.endpoint, { secret: 'wrong' }).listQueues({}).promise(), (err) => {
      assert.equal(err.statusCode, 403, String(err));
      assert.equal(err.code, 'SignatureDoesNotMatch', String(err));
      return true;
    });
  });

  it('an unsigned request is MissingAuthenticationToken', async () => {
    const res = await fetch(`${server.endpoint}/`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-amz-json-1.0', 'x-amz-target': 'AmazonSQS.ListQueues' },
      body: '{}',
    });
    assert.equal(res.status, 403);
    assert.equal(res.headers.get('x-amzn-query-error'), 'MissingAuthenticationToken;Sender');
  });
});

describe('test controls', () => {
  let server;
  before(async () => {
    server = await startServer([], { isolated: true });
  });
  after(async () => {
    await server?.stop();
  });

  async function fresh() {
    assert.deepEqual(await server.admin('POST', '/_sqsim/reset', {}), { reset: 'all' });
    return v3(server.endpoint);
  }

  it('v3 retries an injected ThrottlingException, then succeeds', async () => {
    const plain = await fresh();
    const { QueueUrl } = await plain.send(new sqs.CreateQueueCommand({ QueueName: 'flaky' }));
    const { id } = await server.admin('POST', '/_sqsim/faults', {
      action: 'SendMessage',
      queue: 'flaky',
      error: 'ThrottlingException',
      count: 2,
    });
    const retrying = v3(server.endpoint, { maxAttempts: 3 });
    const out = await retrying.send(new sqs.SendMessageCommand({ QueueUrl, MessageBody: 'eventually' }));
    assert.ok(out.MessageId);
    assert.equal(out.$metadata.attempts, 3, 'two throttled attempts, then success');
    const [rule] = (await server.admin('GET', '/_sqsim/faults')).faults.filter((f) => f.id === id);
    assert.equal(rule.hits, 2);
    assert.equal(rule.remaining, 0);
    const peeked = await server.admin('GET', peekPath(QueueUrl));
    assert.deepEqual(
      peeked.messages.map((m) => m.body),
      ['eventually'],
    );

    // Without retries the throttle itself is the error.
    await server.admin('POST', '/_sqsim/faults', {
      action: 'SendMessage',
      queue: 'flaky',
      error: 'ThrottlingException',
      count: 1,
    });
    await assert.rejects(plain.send(new sqs.SendMessageCommand({ QueueUrl, MessageBody: 'x' })), (err) => {
      assert.equal(err.Code ?? err.name, 'ThrottlingException', `${err.name}: ${err.message}`);
      assert.equal(err.$metadata.httpStatusCode, 400);
      assert.equal(err.$metadata.attempts, 1);
      return true;
    });
    retrying.destroy();
    plain.destroy();
  });

  it('v2 retries an injected ThrottlingException, then succeeds', async () => {
    const c = await fresh();
    const { QueueUrl } = await c.send(new sqs.CreateQueueCommand({ QueueName: 'flaky-v2' }));
    const { id } = await server.admin('POST', '/_sqsim/faults', {
      action: 'SendMessage',
      queue: 'flaky-v2',
      error: 'ThrottlingException',
      count: 2,
    });
    const request = v2(server.endpoint, { maxRetries: 2 }).sendMessage({ QueueUrl, MessageBody: 'v2' });
    const out = await request.promise();
    assert.ok(out.MessageId);
    assert.equal(request.response.retryCount, 2);
    const [rule] = (await server.admin('GET', '/_sqsim/faults')).faults.filter((f) => f.id === id);
    assert.equal(rule.hits, 2);
    c.destroy();
  });

  it('a clock advance wakes a waiting long poll', async () => {
    const c = await fresh();
    const { QueueUrl } = await c.send(new sqs.CreateQueueCommand({ QueueName: 'wake' }));
    await c.send(new sqs.SendMessageCommand({ QueueUrl, MessageBody: 'm' }));
    const first = await c.send(new sqs.ReceiveMessageCommand({ QueueUrl, VisibilityTimeout: 3600 }));
    assert.equal(first.Messages.length, 1);

    const poller = v3(server.endpoint);
    const poll = poller.send(new sqs.ReceiveMessageCommand({ QueueUrl, WaitTimeSeconds: 20 }));
    assert.equal(await stateAfter(poll, 500), 'pending', 'the long poll waits: nothing is visible');
    const advancedAt = Date.now();
    await server.admin('POST', '/_sqsim/clock', { advance_seconds: 3600 });
    const got = await poll;
    assert.ok(Date.now() - advancedAt < 2000, 'woke at the advance, not at the 20 s timeout');
    assert.deepEqual(
      got.Messages.map((m) => m.Body),
      ['m'],
    );
    assert.equal(got.Messages[0].MessageId, first.Messages[0].MessageId);
    poller.destroy();
    c.destroy();
  });

  it('reset leaves no queues and no faults', async () => {
    const c = await fresh();
    const { QueueUrl } = await c.send(new sqs.CreateQueueCommand({ QueueName: 'gone' }));
    await c.send(new sqs.SendMessageCommand({ QueueUrl, MessageBody: 'old' }));
    await server.admin('POST', '/_sqsim/faults', { action: 'ListQueues', error: 'ThrottlingException' });
    await assert.rejects(c.send(new sqs.ListQueuesCommand({})));

    assert.deepEqual(await server.admin('POST', '/_sqsim/reset', {}), { reset: 'all' });
    assert.deepEqual(await server.admin('GET', '/_sqsim/faults'), { faults: [] });
    const listed = await c.send(new sqs.ListQueuesCommand({}));
    assert.deepEqual(listed.QueueUrls ?? [], []);
    const again = await c.send(new sqs.CreateQueueCommand({ QueueName: 'gone' }));
    assert.equal(again.QueueUrl, QueueUrl);
    const got = await c.send(new sqs.ReceiveMessageCommand({ QueueUrl }));
    assert.deepEqual(got.Messages ?? [], [], 'the old message went with the reset');
    c.destroy();
  });

  it('peek shows every state and changes nothing', async () => {
    const c = await fresh();
    const { QueueUrl } = await c.send(new sqs.CreateQueueCommand({ QueueName: 'peeked' }));
    await c.send(new sqs.SendMessageCommand({ QueueUrl, MessageBody: 'a' }));
    await c.send(new sqs.SendMessageCommand({ QueueUrl, MessageBody: 'b', DelaySeconds: 60 }));
    await c.send(new sqs.SendMessageCommand({ QueueUrl, MessageBody: 'c' }));
    const taken = await c.send(new sqs.ReceiveMessageCommand({ QueueUrl }));
    assert.equal(taken.Messages.length, 1);

    const first = await server.admin('GET', peekPath(QueueUrl));
    const second = await server.admin('GET', peekPath(QueueUrl));
    assert.deepEqual(first, second, 'peeking twice sees the same thing');
    assert.equal(first.queue, `arn:aws:sqs:${REGION}:${ACCOUNT}:peeked`);
    const states = Object.fromEntries(first.messages.map((m) => [m.body, m.state]));
    assert.equal(states.b, 'delayed');
    assert.equal(states[taken.Messages[0].Body], 'in_flight');
    assert.deepEqual(Object.values(states).sort(), ['delayed', 'in_flight', 'visible']);

    const visible = Object.keys(states).find((b) => states[b] === 'visible');
    const next = await c.send(
      new sqs.ReceiveMessageCommand({ QueueUrl, MessageSystemAttributeNames: ['ApproximateReceiveCount'] }),
    );
    assert.equal(next.Messages[0].Body, visible);
    assert.equal(next.Messages[0].Attributes.ApproximateReceiveCount, '1', 'peek did not count as a receive');
    c.destroy();
  });
});
