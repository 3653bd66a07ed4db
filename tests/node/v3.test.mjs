// AWS SDK for JavaScript v3 (@aws-sdk/client-sqs) against sqsim: the shared suite plus
// v3-only checks (typed exception classes, error metadata, paginators, binary types).

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import * as sqs from '@aws-sdk/client-sqs';

import { ACCOUNT, startServer, uniqueName, v3Client } from './helpers.mjs';
import { ERR, defineSharedTests } from './suite.mjs';

let server;
let client;
let second;

before(async () => {
  server = await startServer();
  client = await v3Client(server.endpoint);
  second = await v3Client(server.endpoint);
});

after(async () => {
  client?.destroy();
  second?.destroy();
  await server?.stop();
});

function callWith(c) {
  return (op, input) => {
    const Command = sqs[`${op}Command`];
    assert.ok(Command, `no v3 command for ${op}`);
    return c.send(new Command(input));
  };
}

/** v3 errors: `name` is the JSON shape, `Code` the query code (x-amzn-query-error). */
async function assertError(promise, exp) {
  await assert.rejects(promise, (err) => {
    const seen = `${err.name} / ${err.Code} / ${err.$metadata?.httpStatusCode}: ${err.message}`;
    assert.equal(err.name, exp.v3Name ?? exp.shape, `error name (${seen})`);
    assert.equal(err.Code, exp.code, `error Code (${seen})`);
    assert.equal(err.$metadata?.httpStatusCode, exp.status, `HTTP status (${seen})`);
    assert.equal(err.$fault, 'client', `fault (${seen})`);
    assert.equal(err.Type, 'Sender', `Type (${seen})`);
    if (typeof exp.message === 'string') assert.equal(err.message, exp.message);
    else if (exp.message instanceof RegExp) assert.match(err.message, exp.message);
    return true;
  });
}

describe('JS SDK v3', () => {
  defineSharedTests(() => ({
    server,
    call: callWith(client),
    otherCaller: () => callWith(second),
    assertError,
    assertOmitted(out, key) {
      assert.equal(out[key], undefined, `${key} should be absent`);
    },
  }));

  describe('v3 specifics', () => {
    it('nonexistent queue: typed exception with name, Code, status and request id', async () => {
      const QueueUrl = server.queueUrl(uniqueName('nope'));
      const err = await client.send(new sqs.GetQueueAttributesCommand({ QueueUrl, AttributeNames: ['All'] })).then(
        () => assert.fail('expected an error'),
        (e) => e,
      );
      assert.ok(err instanceof sqs.QueueDoesNotExist, `got ${err.constructor.name}`);
      assert.ok(err instanceof sqs.SQSServiceException);
      assert.equal(err.name, 'QueueDoesNotExist');
      assert.equal(err.Code, 'AWS.SimpleQueueService.NonExistentQueue');
      assert.equal(err.Type, 'Sender');
      assert.equal(err.message, 'The specified queue does not exist.');
      assert.equal(err.$metadata.httpStatusCode, 400);
      assert.match(err.$metadata.requestId, /^[0-9a-f-]{36}$/);
      assert.equal(err.$retryable, undefined);
    });

    it('maps modeled errors to their exception classes', async () => {
      const QueueName = uniqueName('typed');
      const { QueueUrl } = await client.send(new sqs.CreateQueueCommand({ QueueName, Attributes: { DelaySeconds: '1' } }));
      const cases = [
        [new sqs.CreateQueueCommand({ QueueName, Attributes: { DelaySeconds: '2' } }), sqs.QueueNameExists],
        [new sqs.GetQueueAttributesCommand({ QueueUrl, AttributeNames: ['Nope'] }), sqs.InvalidAttributeName],
        [new sqs.SetQueueAttributesCommand({ QueueUrl, Attributes: { VisibilityTimeout: '-1' } }), sqs.InvalidAttributeValue],
        [new sqs.DeleteMessageCommand({ QueueUrl, ReceiptHandle: 'garbage' }), sqs.ReceiptHandleIsInvalid],
        [new sqs.SendMessageCommand({ QueueUrl, MessageBody: '\u0000' }), sqs.InvalidMessageContents],
        [new sqs.SendMessageBatchCommand({ QueueUrl, Entries: [] }), sqs.EmptyBatchRequest],
        [new sqs.DeleteMessageBatchCommand({ QueueUrl, Entries: [{ Id: 'a', ReceiptHandle: 'h' }, { Id: 'a', ReceiptHandle: 'h' }] }), sqs.BatchEntryIdsNotDistinct],
      ];
      for (const [command, Exception] of cases) {
        await assert.rejects(client.send(command), (e) => {
          assert.ok(e instanceof Exception, `${command.constructor.name}: got ${e.name}, want ${Exception.name}`);
          return true;
        });
      }
      await client.send(new sqs.PurgeQueueCommand({ QueueUrl }));
      await assert.rejects(client.send(new sqs.PurgeQueueCommand({ QueueUrl })), sqs.PurgeQueueInProgress);
    });

    it('really verifies body MD5s, so the round-trip tests check our digests', async () => {
      const { QueueUrl } = await client.send(new sqs.CreateQueueCommand({ QueueName: uniqueName('v3md5') }));
      const tampering = await v3Client(server.endpoint);
      try {
        // Runs inside the SDK's MD5 check (an initialize-step middleware) and corrupts the digest.
        tampering.middlewareStack.add(
          (next) => async (args) => {
            const result = await next(args);
            if (result.output.MD5OfMessageBody) result.output.MD5OfMessageBody = '0'.repeat(32);
            if (result.output.Messages) for (const m of result.output.Messages) m.MD5OfBody = '0'.repeat(32);
            return result;
          },
          { step: 'deserialize', name: 'tamperMd5' },
        );
        await assert.rejects(tampering.send(new sqs.SendMessageCommand({ QueueUrl, MessageBody: 'x' })), /MD5|checksum/i);
        await assert.rejects(tampering.send(new sqs.ReceiveMessageCommand({ QueueUrl })), /MD5|checksum/i);
      } finally {
        tampering.destroy();
      }
    });

    it('paginateListQueues walks every page', async () => {
      const prefix = uniqueName('v3pg');
      const names = Array.from({ length: 7 }, (_, i) => `${prefix}-${String(i).padStart(2, '0')}`);
      for (const QueueName of names) await client.send(new sqs.CreateQueueCommand({ QueueName }));
      const pages = [];
      for await (const page of sqs.paginateListQueues({ client, pageSize: 3 }, { QueueNamePrefix: prefix })) {
        pages.push(page.QueueUrls);
      }
      assert.deepEqual(pages.map((p) => p.length), [3, 3, 1]);
      assert.deepEqual(pages.flat(), names.map((n) => server.queueUrl(n)));
    });

    it('returns Binary attributes as Uint8Array and String values as strings', async () => {
      const { QueueUrl } = await client.send(new sqs.CreateQueueCommand({ QueueName: uniqueName('v3bin') }));
      const bytes = new Uint8Array([0, 255, 10, 13, 128]);
      await client.send(
        new sqs.SendMessageCommand({
          QueueUrl,
          MessageBody: 'bin',
          MessageAttributes: {
            B: { DataType: 'Binary', BinaryValue: bytes },
            N: { DataType: 'Number', StringValue: '3.14' },
          },
        }),
      );
      const out = await client.send(new sqs.ReceiveMessageCommand({ QueueUrl, MessageAttributeNames: ['All'] }));
      const m = out.Messages[0];
      assert.ok(m.MessageAttributes.B.BinaryValue instanceof Uint8Array);
      assert.deepEqual([...m.MessageAttributes.B.BinaryValue], [...bytes]);
      assert.equal(m.MessageAttributes.B.StringValue, undefined);
      assert.equal(m.MessageAttributes.N.StringValue, '3.14');
      assert.equal(out.$metadata.httpStatusCode, 200);
    });

    it('GetQueueUrl resolves the URL the client then uses for QueueUrl operations', async () => {
      const QueueName = uniqueName('v3url');
      await client.send(new sqs.CreateQueueCommand({ QueueName }));
      const { QueueUrl } = await client.send(new sqs.GetQueueUrlCommand({ QueueName }));
      assert.equal(QueueUrl, `${server.endpoint}/${ACCOUNT}/${QueueName}`);
      const sent = await client.send(new sqs.SendMessageCommand({ QueueUrl, MessageBody: 'via url' }));
      assert.ok(sent.MessageId);
    });
  });
});

