// AWS SDK for JavaScript v2 (aws-sdk 2.1693.0, the last v2 release, which speaks AWS JSON to
// SQS) against sqsim: the shared suite plus v2-only checks (error fields, Buffer binaries).

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { startServer, uniqueName, v2Client } from './helpers.mjs';
import { defineSharedTests } from './suite.mjs';

let server;
let client;
let second;

before(async () => {
  server = await startServer();
  client = v2Client(server.endpoint);
  second = v2Client(server.endpoint);
});

after(async () => {
  await server?.stop();
});

function callWith(c) {
  return (op, input) => {
    const method = op[0].toLowerCase() + op.slice(1);
    assert.equal(typeof c[method], 'function', `no v2 method for ${op}`);
    const request = c[method](input);
    return request.promise().then((out) => {
      // Keep the raw JSON so tests can tell "omitted" from "empty" (v2 fills missing lists).
      Object.defineProperty(out, '$raw', { value: String(request.response.httpResponse.body), enumerable: false });
      return out;
    });
  };
}

/** v2 errors: `code` is the query code (x-amzn-query-error), `__type` the JSON shape. */
async function assertError(promise, exp) {
  await assert.rejects(promise, (err) => {
    const seen = `${err.code} / ${err.__type} / ${err.statusCode}: ${err.message}`;
    assert.equal(err.code, exp.code, `error code (${seen})`);
    assert.equal(err.statusCode, exp.status, `HTTP status (${seen})`);
    assert.equal(String(err.__type).split('#').pop(), exp.shape, `__type (${seen})`);
    if (typeof exp.message === 'string') assert.equal(err.message, exp.message);
    else if (exp.message instanceof RegExp) assert.match(err.message, exp.message);
    return true;
  });
}

describe('JS SDK v2', () => {
  defineSharedTests(() => ({
    server,
    call: callWith(client),
    otherCaller: () => callWith(second),
    assertError,
    assertOmitted(out, key) {
      const raw = JSON.parse(out.$raw);
      assert.ok(!(key in raw), `${key} should be absent from ${out.$raw}`);
      const v = out[key];
      assert.ok(v === undefined || (Array.isArray(v) && v.length === 0), `${key}: ${JSON.stringify(v)}`);
    },
  }));

  describe('v2 specifics', () => {
    it('nonexistent queue: err.code, err.statusCode, __type, requestId, not retryable', async () => {
      const QueueUrl = server.queueUrl(uniqueName('nope'));
      const err = await client.receiveMessage({ QueueUrl }).promise().then(
        () => assert.fail('expected an error'),
        (e) => e,
      );
      assert.equal(err.code, 'AWS.SimpleQueueService.NonExistentQueue');
      assert.equal(err.statusCode, 400);
      assert.equal(err.__type, 'com.amazonaws.sqs#QueueDoesNotExist');
      assert.equal(err.message, 'The specified queue does not exist.');
      assert.equal(err.retryable, false);
      assert.match(err.requestId, /^[0-9a-f-]{36}$/);
    });

    it('QueueAlreadyExists and ReceiptHandleIsInvalid use their query codes and statuses', async () => {
      const QueueName = uniqueName('v2codes');
      const { QueueUrl } = await client.createQueue({ QueueName, Attributes: { VisibilityTimeout: '10' } }).promise();
      await assert.rejects(client.createQueue({ QueueName, Attributes: { VisibilityTimeout: '11' } }).promise(), {
        code: 'QueueAlreadyExists',
        statusCode: 400,
      });
      await assert.rejects(client.deleteMessage({ QueueUrl, ReceiptHandle: 'garbage' }).promise(), {
        code: 'ReceiptHandleIsInvalid',
        statusCode: 404,
      });
      await client.purgeQueue({ QueueUrl }).promise();
      await assert.rejects(client.purgeQueue({ QueueUrl }).promise(), {
        code: 'AWS.SimpleQueueService.PurgeQueueInProgress',
        statusCode: 403,
      });
    });

    it('sends Buffers as Binary attributes and receives them as Buffers', async () => {
      const { QueueUrl } = await client.createQueue({ QueueName: uniqueName('v2bin') }).promise();
      const bytes = Buffer.from([0, 255, 10, 13, 128]);
      await client
        .sendMessage({ QueueUrl, MessageBody: 'bin', MessageAttributes: { B: { DataType: 'Binary', BinaryValue: bytes } } })
        .promise();
      const out = await client.receiveMessage({ QueueUrl, MessageAttributeNames: ['All'] }).promise();
      const value = out.Messages[0].MessageAttributes.B.BinaryValue;
      assert.ok(Buffer.isBuffer(value));
      assert.ok(value.equals(bytes));
    });

    it('the SDK body-MD5 check passes on receive of a batch of tricky bodies', async () => {
      assert.equal(client.config.computeChecksums, true, 'v2 verifies body MD5s only when computeChecksums is on');
      const { QueueUrl } = await client.createQueue({ QueueName: uniqueName('v2md5') }).promise();
      const bodies = ['\r', '""\r', '&quot;', 'ü\r\n', '𝄞 clef', '<x/>'];
      const sent = await client
        .sendMessageBatch({ QueueUrl, Entries: bodies.map((MessageBody, i) => ({ Id: `e${i}`, MessageBody })) })
        .promise();
      assert.equal(sent.Successful.length, bodies.length);
      const out = await client.receiveMessage({ QueueUrl, MaxNumberOfMessages: 10 }).promise();
      assert.deepEqual(out.Messages.map((m) => m.Body).sort(), [...bodies].sort());
    });
  });
});
