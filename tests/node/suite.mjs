// The SQS behaviour tests both SDKs run. Each test file builds an adapter around one SDK:
//   call(op, input)            -> the SDK's output for operation `op` (e.g. 'SendMessage')
//   otherCaller()              -> `call` of a second, independent client (for "another process")
//   assertError(promise, exp)  -> checks the rejection with that SDK's own error fields;
//                                 exp = { shape, code, status, message? (string|RegExp) }
//   assertOmitted(out, key)    -> the server left the empty list/map `key` out of the reply
//                                 (v2 fills missing lists with [], so it checks the raw body)
// Expected values come from /work/shared/sqs-reference.md (section numbers in comments).

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  ACCOUNT,
  REGION,
  md5Hex,
  md5OfMessageAttributes,
  normalizeAttributes,
  sha256Hex,
  sleep,
  uniqueName,
} from './helpers.mjs';

// §12 error table, as [JSON shape (the __type suffix), query code, HTTP status].
export const ERR = {
  QueueDoesNotExist: { shape: 'QueueDoesNotExist', code: 'AWS.SimpleQueueService.NonExistentQueue', status: 400 },
  QueueNameExists: { shape: 'QueueNameExists', code: 'QueueAlreadyExists', status: 400 },
  InvalidAttributeName: { shape: 'InvalidAttributeName', code: 'InvalidAttributeName', status: 400 },
  InvalidAttributeValue: { shape: 'InvalidAttributeValue', code: 'InvalidAttributeValue', status: 400 },
  InvalidMessageContents: { shape: 'InvalidMessageContents', code: 'InvalidMessageContents', status: 400 },
  ReceiptHandleIsInvalid: { shape: 'ReceiptHandleIsInvalid', code: 'ReceiptHandleIsInvalid', status: 404 },
  PurgeQueueInProgress: {
    shape: 'PurgeQueueInProgress',
    code: 'AWS.SimpleQueueService.PurgeQueueInProgress',
    status: 403,
  },
  EmptyBatchRequest: { shape: 'EmptyBatchRequest', code: 'AWS.SimpleQueueService.EmptyBatchRequest', status: 400 },
  TooManyEntriesInBatchRequest: {
    shape: 'TooManyEntriesInBatchRequest',
    code: 'AWS.SimpleQueueService.TooManyEntriesInBatchRequest',
    status: 400,
  },
  BatchEntryIdsNotDistinct: {
    shape: 'BatchEntryIdsNotDistinct',
    code: 'AWS.SimpleQueueService.BatchEntryIdsNotDistinct',
    status: 400,
  },
  InvalidBatchEntryId: {
    shape: 'InvalidBatchEntryId',
    code: 'AWS.SimpleQueueService.InvalidBatchEntryId',
    status: 400,
  },
  BatchRequestTooLong: {
    shape: 'BatchRequestTooLong',
    code: 'AWS.SimpleQueueService.BatchRequestTooLong',
    status: 400,
  },
  QueueDeletedRecently: {
    shape: 'QueueDeletedRecently',
    code: 'AWS.SimpleQueueService.QueueDeletedRecently',
    status: 400,
  },
  OverLimit: { shape: 'OverLimit', code: 'OverLimit', status: 403 },
  ResourceNotFoundException: { shape: 'ResourceNotFoundException', code: 'ResourceNotFoundException', status: 404 },
  // Unmodeled errors: v3 has no class for them and names the error after the query code.
  InvalidParameterValue: {
    shape: 'InvalidParameterValueException',
    v3Name: 'InvalidParameterValue',
    code: 'InvalidParameterValue',
    status: 400,
  },
  MissingParameter: {
    shape: 'MissingRequiredParameterException',
    v3Name: 'MissingParameter',
    code: 'MissingParameter',
    status: 400,
  },
};

const NO_QUEUE_MSG = 'The specified queue does not exist.';

/** The 23 operations of the SQS API (the botocore 1.43.11 model the reference is based on). */
export const ALL_ACTIONS = [
  'AddPermission',
  'CancelMessageMoveTask',
  'ChangeMessageVisibility',
  'ChangeMessageVisibilityBatch',
  'CreateQueue',
  'DeleteMessage',
  'DeleteMessageBatch',
  'DeleteQueue',
  'GetQueueAttributes',
  'GetQueueUrl',
  'ListDeadLetterSourceQueues',
  'ListMessageMoveTasks',
  'ListQueueTags',
  'ListQueues',
  'PurgeQueue',
  'ReceiveMessage',
  'RemovePermission',
  'SendMessage',
  'SendMessageBatch',
  'SetQueueAttributes',
  'StartMessageMoveTask',
  'TagQueue',
  'UntagQueue',
];

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const escapeRe = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

// A body that breaks naive XML/JSON handling: CR, CRLF, quotes, escapes, non-ASCII, astral.
export const TRICKY_BODY =
  'line1\r\nline2\rline3\n"double" \'single\' &quot; <tag> & \\ back\\slash \t tab ' +
  'héllo wörld ñ 日本語 Ελληνικά 🚀👍🏽 \u{10FFFF} \uE000 end\r';

/**
 * Registers the shared tests. `ctx()` returns { call, otherCaller, assertError, server }
 * once the file's `before` hook has run.
 */
export function defineSharedTests(ctx) {
  const call = (op, input) => ctx().call(op, input);
  const assertError = (p, exp) => ctx().assertError(p, exp);
  const server = () => ctx().server;
  const assertOmitted = (out, key) => ctx().assertOmitted(out, key);

  async function createQueue(prefix = 'q', Attributes, extra = {}) {
    const QueueName = uniqueName(prefix);
    const out = await call('CreateQueue', { QueueName, ...(Attributes ? { Attributes } : {}), ...extra });
    return { name: QueueName, url: out.QueueUrl };
  }

  async function attrs(url, names = ['All']) {
    const out = await call('GetQueueAttributes', { QueueUrl: url, AttributeNames: names });
    return out.Attributes;
  }

  async function receiveAll(url, extra = {}) {
    const out = await call('ReceiveMessage', { QueueUrl: url, MaxNumberOfMessages: 10, ...extra });
    return out.Messages || [];
  }

  async function counts(url) {
    const a = await attrs(url, [
      'ApproximateNumberOfMessages',
      'ApproximateNumberOfMessagesNotVisible',
      'ApproximateNumberOfMessagesDelayed',
    ]);
    return {
      visible: Number(a.ApproximateNumberOfMessages),
      inFlight: Number(a.ApproximateNumberOfMessagesNotVisible),
      delayed: Number(a.ApproximateNumberOfMessagesDelayed),
    };
  }

  describe('admin endpoints', () => {
    it('health reports ok and the clock advances', async () => {
      const h = await server().health();
      assert.equal(h.status, 200);
      // A durable server adds its store's state, a cluster node its own (joined, serving).
      assert.equal(h.body.status, 'ok', JSON.stringify(h.body));
      const before = await server().clock();
      const after = await server().advanceClock(5);
      assert.ok(after.now_ms - before.now_ms >= 5000, `clock moved ${after.now_ms - before.now_ms} ms`);
    });
  });

  describe('CreateQueue', () => {
    it('returns <endpoint>/<account>/<name> and applies the attributes', async () => {
      const Attributes = {
        DelaySeconds: '5',
        MaximumMessageSize: '2048',
        MessageRetentionPeriod: '86400',
        ReceiveMessageWaitTimeSeconds: '3',
        VisibilityTimeout: '45',
      };
      const { name, url } = await createQueue('create', Attributes);
      assert.equal(url, server().queueUrl(name));
      const a = await attrs(url);
      for (const [k, v] of Object.entries(Attributes)) assert.equal(a[k], v, k);
      assert.equal(a.QueueArn, `arn:aws:sqs:${REGION}:${ACCOUNT}:${name}`);
    });

    it('is idempotent with the same attributes, a subset, or none', async () => {
      const Attributes = { DelaySeconds: '2', VisibilityTimeout: '60' };
      const { name, url } = await createQueue('idem', Attributes);
      const again = await call('CreateQueue', { QueueName: name, Attributes });
      assert.equal(again.QueueUrl, url);
      const subset = await call('CreateQueue', { QueueName: name, Attributes: { VisibilityTimeout: '60' } });
      assert.equal(subset.QueueUrl, url);
      const bare = await call('CreateQueue', { QueueName: name });
      assert.equal(bare.QueueUrl, url);
      // Defaults spelled out explicitly are equal to the current values too.
      const defaults = await call('CreateQueue', { QueueName: name, Attributes: { MaximumMessageSize: '1048576' } });
      assert.equal(defaults.QueueUrl, url);
    });

    it('fails with QueueNameExists when a supplied attribute differs', async () => {
      const { name } = await createQueue('exists', { DelaySeconds: '2' });
      await assertError(call('CreateQueue', { QueueName: name, Attributes: { DelaySeconds: '3' } }), {
        ...ERR.QueueNameExists,
        message: 'A queue already exists with the same name and a different value for attribute DelaySeconds',
      });
    });

    it('compares with the current value after SetQueueAttributes', async () => {
      const { name, url } = await createQueue('exists2', { VisibilityTimeout: '30' });
      await call('SetQueueAttributes', { QueueUrl: url, Attributes: { VisibilityTimeout: '99' } });
      await assertError(
        call('CreateQueue', { QueueName: name, Attributes: { VisibilityTimeout: '30' } }),
        ERR.QueueNameExists,
      );
      const same = await call('CreateQueue', { QueueName: name, Attributes: { VisibilityTimeout: '99' } });
      assert.equal(same.QueueUrl, url);
    });

    it('rejects bad names and bad attribute values', async () => {
      await assertError(call('CreateQueue', { QueueName: 'has space' }), ERR.InvalidParameterValue);
      await assertError(call('CreateQueue', { QueueName: 'x'.repeat(81) }), ERR.InvalidParameterValue);
      await assertError(call('CreateQueue', { QueueName: 'dotted.name' }), ERR.InvalidParameterValue);
      await assertError(
        call('CreateQueue', { QueueName: uniqueName('badattr'), Attributes: { VisibilityTimeout: '43201' } }),
        { ...ERR.InvalidAttributeValue, message: 'Invalid value for the parameter VisibilityTimeout.' },
      );
      await assertError(
        call('CreateQueue', { QueueName: uniqueName('badattr'), Attributes: { DelaySeconds: 'soon' } }),
        { ...ERR.InvalidAttributeValue, message: 'Invalid value for the parameter DelaySeconds.' },
      );
      await assertError(
        call('CreateQueue', { QueueName: uniqueName('badattr'), Attributes: { ContentBasedDeduplication: 'true' } }),
        { ...ERR.InvalidAttributeName, message: 'Unknown Attribute ContentBasedDeduplication.' },
      );
      // FIFO name without FifoQueue=true, and FifoQueue=true without the suffix (§2).
      await assertError(call('CreateQueue', { QueueName: `${uniqueName('f')}`, Attributes: { FifoQueue: 'true' } }), ERR.InvalidParameterValue);
      await assertError(call('CreateQueue', { QueueName: `${uniqueName('f')}.fifo` }), ERR.InvalidParameterValue);
    });

    it('creates FIFO queues with their FIFO attributes', async () => {
      const QueueName = `${uniqueName('fifo')}.fifo`;
      const { QueueUrl } = await call('CreateQueue', {
        QueueName,
        Attributes: { FifoQueue: 'true', ContentBasedDeduplication: 'true' },
      });
      assert.equal(QueueUrl, server().queueUrl(QueueName));
      const a = await attrs(QueueUrl);
      assert.equal(a.FifoQueue, 'true');
      assert.equal(a.ContentBasedDeduplication, 'true');
      assert.equal(a.DeduplicationScope, 'queue');
      assert.equal(a.FifoThroughputLimit, 'perQueue');
    });

    it('accepts tags', async () => {
      const { url } = await createQueue('ctags', undefined, { tags: { team: 'core', env: 'test' } });
      const out = await call('ListQueueTags', { QueueUrl: url });
      assert.deepEqual(out.Tags, { team: 'core', env: 'test' });
    });
  });

  describe('GetQueueUrl', () => {
    it('returns the URL of an existing queue', async () => {
      const { name, url } = await createQueue('geturl');
      const out = await call('GetQueueUrl', { QueueName: name });
      assert.equal(out.QueueUrl, url);
      const owned = await call('GetQueueUrl', { QueueName: name, QueueOwnerAWSAccountId: ACCOUNT });
      assert.equal(owned.QueueUrl, url);
    });

    it('fails with QueueDoesNotExist for an unknown name', async () => {
      await assertError(call('GetQueueUrl', { QueueName: uniqueName('missing') }), {
        ...ERR.QueueDoesNotExist,
        message: NO_QUEUE_MSG,
      });
    });
  });

  describe('ListQueues', () => {
    it('filters by case-sensitive prefix', async () => {
      const prefix = uniqueName('LP');
      const urls = [];
      for (const s of ['a', 'b', 'c']) {
        urls.push((await call('CreateQueue', { QueueName: `${prefix}-${s}` })).QueueUrl);
      }
      await call('CreateQueue', { QueueName: `${uniqueName('other')}` });
      const out = await call('ListQueues', { QueueNamePrefix: prefix });
      assert.deepEqual([...out.QueueUrls].sort(), urls);
      assert.equal(out.NextToken, undefined);
      const lower = await call('ListQueues', { QueueNamePrefix: prefix.toLowerCase() });
      assertOmitted(lower, 'QueueUrls'); // prefix match is case-sensitive
      const none = await call('ListQueues', { QueueNamePrefix: 'no-such-prefix-zzz' });
      assertOmitted(none, 'QueueUrls');
    });

    it('pages with MaxResults and NextToken', async () => {
      const prefix = uniqueName('page');
      const names = ['a', 'b', 'c', 'd', 'e'].map((s) => `${prefix}-${s}`);
      for (const n of names) await call('CreateQueue', { QueueName: n });
      const pages = [];
      let NextToken;
      do {
        const out = await call('ListQueues', { QueueNamePrefix: prefix, MaxResults: 2, ...(NextToken ? { NextToken } : {}) });
        pages.push(out.QueueUrls);
        NextToken = out.NextToken;
        assert.ok(pages.length <= 5, 'pagination does not terminate');
      } while (NextToken);
      assert.deepEqual(pages.map((p) => p.length), [2, 2, 1]);
      assert.deepEqual(pages.flat(), names.map((n) => server().queueUrl(n)));
      // Exactly MaxResults left: no NextToken.
      const all = await call('ListQueues', { QueueNamePrefix: prefix, MaxResults: 5 });
      assert.equal(all.QueueUrls.length, 5);
      assert.equal(all.NextToken, undefined);
    });

    it('rejects MaxResults out of range', async () => {
      await assertError(call('ListQueues', { MaxResults: 1001 }), ERR.InvalidParameterValue);
      await assertError(call('ListQueues', { MaxResults: 0 }), ERR.InvalidParameterValue);
    });
  });

  describe('Get/SetQueueAttributes', () => {
    it('All on a new standard queue returns exactly the 12 documented attributes', async () => {
      const { name, url } = await createQueue('attrs');
      const { now_ms } = await server().clock();
      const a = await attrs(url);
      assert.deepEqual(Object.keys(a).sort(), [
        'ApproximateNumberOfMessages',
        'ApproximateNumberOfMessagesDelayed',
        'ApproximateNumberOfMessagesNotVisible',
        'CreatedTimestamp',
        'DelaySeconds',
        'LastModifiedTimestamp',
        'MaximumMessageSize',
        'MessageRetentionPeriod',
        'QueueArn',
        'ReceiveMessageWaitTimeSeconds',
        'SqsManagedSseEnabled',
        'VisibilityTimeout',
      ]);
      assert.equal(a.ApproximateNumberOfMessages, '0');
      assert.equal(a.DelaySeconds, '0');
      assert.equal(a.MaximumMessageSize, '1048576');
      assert.equal(a.MessageRetentionPeriod, '345600');
      assert.equal(a.ReceiveMessageWaitTimeSeconds, '0');
      assert.equal(a.VisibilityTimeout, '30');
      assert.equal(a.SqsManagedSseEnabled, 'true');
      assert.equal(a.QueueArn, `arn:aws:sqs:${REGION}:${ACCOUNT}:${name}`);
      assert.match(a.CreatedTimestamp, /^\d+$/);
      assert.ok(Math.abs(Number(a.CreatedTimestamp) - Math.floor(now_ms / 1000)) <= 2, 'CreatedTimestamp is epoch seconds');
    });

    it('returns only the named attributes, and none without AttributeNames', async () => {
      const { url } = await createQueue('attrs2');
      const a = await attrs(url, ['VisibilityTimeout', 'QueueArn']);
      assert.deepEqual(Object.keys(a).sort(), ['QueueArn', 'VisibilityTimeout']);
      const none = await call('GetQueueAttributes', { QueueUrl: url });
      assertOmitted(none, 'Attributes');
    });

    it('rejects unknown attribute names', async () => {
      const { url } = await createQueue('attrs3');
      await assertError(call('GetQueueAttributes', { QueueUrl: url, AttributeNames: ['Foobar'] }), {
        ...ERR.InvalidAttributeName,
        message: 'Unknown Attribute Foobar.',
      });
    });

    it('sets, reads back and clears attributes; LastModifiedTimestamp moves', async () => {
      const { name, url } = await createQueue('setattrs');
      const before = await attrs(url);
      await server().advanceClock(10);
      const policy = JSON.stringify({
        Version: '2012-10-17',
        Statement: [{ Effect: 'Allow', Principal: '*', Action: 'sqs:SendMessage', Resource: `arn:aws:sqs:${REGION}:${ACCOUNT}:${name}` }],
      });
      await call('SetQueueAttributes', {
        QueueUrl: url,
        Attributes: { VisibilityTimeout: '120', DelaySeconds: '7', Policy: policy, ReceiveMessageWaitTimeSeconds: '20' },
      });
      const after = await attrs(url);
      assert.equal(after.VisibilityTimeout, '120');
      assert.equal(after.DelaySeconds, '7');
      assert.equal(after.ReceiveMessageWaitTimeSeconds, '20');
      assert.deepEqual(JSON.parse(after.Policy), JSON.parse(policy));
      assert.equal(after.CreatedTimestamp, before.CreatedTimestamp);
      assert.ok(
        Number(after.LastModifiedTimestamp) >= Number(before.LastModifiedTimestamp) + 10,
        `LastModifiedTimestamp ${before.LastModifiedTimestamp} -> ${after.LastModifiedTimestamp}`,
      );
      await call('SetQueueAttributes', { QueueUrl: url, Attributes: { Policy: '' } });
      const cleared = await attrs(url);
      assert.equal(cleared.Policy, undefined);
    });

    it('rejects bad values, read-only and FIFO-only attributes', async () => {
      const { url } = await createQueue('setbad');
      await assertError(call('SetQueueAttributes', { QueueUrl: url, Attributes: { MessageRetentionPeriod: '59' } }), {
        ...ERR.InvalidAttributeValue,
        message: 'Invalid value for the parameter MessageRetentionPeriod.',
      });
      await assertError(
        call('SetQueueAttributes', { QueueUrl: url, Attributes: { QueueArn: 'arn:aws:sqs:us-east-1:000000000000:x' } }),
        { ...ERR.InvalidAttributeName, message: 'Unknown Attribute QueueArn.' },
      );
      await assertError(call('SetQueueAttributes', { QueueUrl: url, Attributes: { FifoQueue: 'false' } }), {
        ...ERR.InvalidAttributeName,
        message: 'Unknown Attribute FifoQueue.',
      });
      await assertError(call('SetQueueAttributes', { QueueUrl: url, Attributes: { DeduplicationScope: 'queue' } }), {
        ...ERR.InvalidAttributeName,
        message: 'You can specify the DeduplicationScope only when FifoQueue is set to true.',
      });
      assert.equal((await attrs(url, ['MessageRetentionPeriod'])).MessageRetentionPeriod, '345600');
    });

    it('counts visible, in-flight and delayed messages', async () => {
      const { url } = await createQueue('counts');
      await call('SendMessage', { QueueUrl: url, MessageBody: 'a' });
      await call('SendMessage', { QueueUrl: url, MessageBody: 'b' });
      await call('SendMessage', { QueueUrl: url, MessageBody: 'c' });
      await call('SendMessage', { QueueUrl: url, MessageBody: 'd', DelaySeconds: 60 });
      assert.deepEqual(await counts(url), { visible: 3, inFlight: 0, delayed: 1 });
      const got = await call('ReceiveMessage', { QueueUrl: url, MaxNumberOfMessages: 2 });
      assert.equal(got.Messages.length, 2);
      assert.deepEqual(await counts(url), { visible: 1, inFlight: 2, delayed: 1 });
    });
  });

  describe('SendMessage and MD5 digests', () => {
    it('round-trips a tricky body with String, Number and Binary attributes', async () => {
      const { url } = await createQueue('send');
      const binary = Buffer.from([0x00, 0x01, 0xfe, 0xff, 0x0d, 0x0a, 0x22, 0x80]);
      const MessageAttributes = {
        Str: { DataType: 'String', StringValue: 'quote " cr \r nl \n ünïcødé 😀' },
        Num: { DataType: 'Number', StringValue: '-12345.678e3' },
        'Num.custom': { DataType: 'Number.int', StringValue: '42' },
        Bin: { DataType: 'Binary', BinaryValue: binary },
        'Bin.gif': { DataType: 'Binary.gif', BinaryValue: Buffer.from('GIF89a') },
        'attr.1øßä': { DataType: 'String.label', StringValue: 'x' },
      };
      const sent = await call('SendMessage', { QueueUrl: url, MessageBody: TRICKY_BODY, MessageAttributes });
      assert.match(sent.MessageId, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      assert.equal(sent.MD5OfMessageBody, md5Hex(Buffer.from(TRICKY_BODY, 'utf8')));
      assert.equal(sent.MD5OfMessageAttributes, md5OfMessageAttributes(MessageAttributes));
      assert.equal(sent.MD5OfMessageSystemAttributes, undefined);
      assert.equal(sent.SequenceNumber, undefined);

      const [m] = await receiveAll(url, { MessageAttributeNames: ['All'] });
      assert.equal(m.MessageId, sent.MessageId);
      assert.equal(m.Body, TRICKY_BODY);
      assert.equal(m.MD5OfBody, sent.MD5OfMessageBody);
      assert.equal(m.MD5OfMessageAttributes, sent.MD5OfMessageAttributes);
      assert.deepEqual(normalizeAttributes(m.MessageAttributes), normalizeAttributes(MessageAttributes));
      assert.equal(md5OfMessageAttributes(m.MessageAttributes), sent.MD5OfMessageAttributes);
    });

    it('matches the AWS-recorded attribute digests (§5.3)', async () => {
      const { url } = await createQueue('vectors');
      const vectors = [
        [{ Foo: { DataType: 'String', StringValue: 'Bar' } }, 'ae7155c6026991b6d54b11589678bf9c'],
        [{ MyAttribute: { DataType: 'String', StringValue: 'foobar' } }, 'adb59cd4678ea5a855436b949cd07ab6'],
        [{ timestamp: { DataType: 'Number', StringValue: '1493147359900' } }, '235c5c510d26fb653d073faed50ae77c'],
        [
          {
            General: { DataType: 'String', StringValue: 'Kenobi' },
            Hello: { DataType: 'String', StringValue: 'There' },
            'Help.Me': { DataType: 'String', StringValue: 'Me' },
          },
          '4c360f3fdafd970e05fae2f149d997f5',
        ],
        [
          {
            attr1: {
              DataType: 'Binary',
              BinaryValue: Buffer.from('traceparent\x1e00-774062d6c37081a5a0b9b5b88e30627c-2d2482211f6489da-01', 'latin1'),
            },
          },
          '8cbe4db156db8a94db8b801b7addb984',
        ],
      ];
      for (const [MessageAttributes, expected] of vectors) {
        assert.equal(md5OfMessageAttributes(MessageAttributes), expected, 'test helper digest');
        const out = await call('SendMessage', { QueueUrl: url, MessageBody: 'hello', MessageAttributes });
        assert.equal(out.MD5OfMessageBody, '5d41402abc4b2a76b9719d911017c592');
        assert.equal(out.MD5OfMessageAttributes, expected, JSON.stringify(Object.keys(MessageAttributes)));
      }
    });

    it('omits MD5OfMessageAttributes without attributes and reports system attribute digests', async () => {
      const { url } = await createQueue('sysattr');
      const plain = await call('SendMessage', { QueueUrl: url, MessageBody: 'plain' });
      assert.equal(plain.MD5OfMessageAttributes, undefined);
      assert.equal(plain.MD5OfMessageBody, md5Hex('plain'));
      const trace = 'Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1';
      const out = await call('SendMessage', {
        QueueUrl: url,
        MessageBody: 'traced',
        MessageAttributes: { Foo: { DataType: 'String', StringValue: 'Bar' } },
        MessageSystemAttributes: { AWSTraceHeader: { DataType: 'String', StringValue: trace } },
      });
      assert.equal(out.MD5OfMessageSystemAttributes, '5ae4d5d7636402d80f4eb6d213245a88');
      // System attributes do not change MD5OfMessageAttributes.
      assert.equal(out.MD5OfMessageAttributes, 'ae7155c6026991b6d54b11589678bf9c');
      const msgs = await receiveAll(url, { MessageSystemAttributeNames: ['All'] });
      const traced = msgs.find((m) => m.Body === 'traced');
      const untraced = msgs.find((m) => m.Body === 'plain');
      assert.equal(traced.Attributes.AWSTraceHeader, trace);
      assert.equal(untraced.Attributes.AWSTraceHeader, undefined);
    });

    it('rejects invalid bodies and attributes', async () => {
      const { url } = await createQueue('sendbad');
      await assertError(call('SendMessage', { QueueUrl: url, MessageBody: 'nul \u0000 here' }), ERR.InvalidMessageContents);
      await assertError(call('SendMessage', { QueueUrl: url, MessageBody: 'bad \uFFFF' }), ERR.InvalidMessageContents);
      await assertError(call('SendMessage', { QueueUrl: url, MessageBody: '' }), {
        ...ERR.MissingParameter,
        message: 'The request must contain the parameter MessageBody.',
      });
      await assertError(
        call('SendMessage', {
          QueueUrl: url,
          MessageBody: 'x',
          MessageAttributes: { ErrorDetails: { DataType: 'String', StringValue: '' } },
        }),
        { ...ERR.InvalidParameterValue, message: "Message (user) attribute 'ErrorDetails' must contain a non-empty value of type 'String'." },
      );
      const eleven = Object.fromEntries(
        Array.from({ length: 11 }, (_, i) => [`a${i}`, { DataType: 'String', StringValue: 'v' }]),
      );
      await assertError(call('SendMessage', { QueueUrl: url, MessageBody: 'x', MessageAttributes: eleven }), {
        ...ERR.InvalidParameterValue,
        message: /Number of message attributes \[11\] exceeds the allowed maximum \[10\]/,
      });
      await assertError(
        call('SendMessage', { QueueUrl: url, MessageBody: 'x', MessageAttributes: { 'AWS.reserved': { DataType: 'String', StringValue: 'v' } } }),
        { ...ERR.InvalidParameterValue, message: /Invalid/i },
      );
      await assertError(call('SendMessage', { QueueUrl: url, MessageBody: 'x', DelaySeconds: 901 }), ERR.InvalidParameterValue);
      assert.deepEqual(await counts(url), { visible: 0, inFlight: 0, delayed: 0 });
    });

    it('enforces MaximumMessageSize on body plus attributes, with the limit itself allowed', async () => {
      const { url } = await createQueue('size', { MaximumMessageSize: '1024' });
      await call('SendMessage', { QueueUrl: url, MessageBody: 'x'.repeat(1024) });
      await assertError(call('SendMessage', { QueueUrl: url, MessageBody: 'x'.repeat(1025) }), {
        ...ERR.InvalidParameterValue,
        message: 'One or more parameters are invalid. Reason: Message must be shorter than 1024 bytes.',
      });
      // 1000 body + "k"(1) + "String"(6) + 20 value bytes = 1027 > 1024.
      await assertError(
        call('SendMessage', {
          QueueUrl: url,
          MessageBody: 'x'.repeat(1000),
          MessageAttributes: { k: { DataType: 'String', StringValue: 'v'.repeat(20) } },
        }),
        ERR.InvalidParameterValue,
      );
      // Multi-byte characters count in UTF-8 bytes: 342 * 3 = 1026.
      await assertError(call('SendMessage', { QueueUrl: url, MessageBody: '€'.repeat(342) }), ERR.InvalidParameterValue);
    });

    it('delays a message per DelaySeconds until the clock passes it', async () => {
      const { url } = await createQueue('delay');
      await call('SendMessage', { QueueUrl: url, MessageBody: 'later', DelaySeconds: 120 });
      assert.deepEqual(await receiveAll(url), []);
      await server().advanceClock(119);
      assert.deepEqual(await receiveAll(url), []);
      await server().advanceClock(2);
      const msgs = await receiveAll(url);
      assert.deepEqual(msgs.map((m) => m.Body), ['later']);
    });

    it('applies the queue DelaySeconds unless the message overrides it with 0', async () => {
      const { url } = await createQueue('qdelay', { DelaySeconds: '30' });
      await call('SendMessage', { QueueUrl: url, MessageBody: 'queue-delay' });
      await call('SendMessage', { QueueUrl: url, MessageBody: 'now', DelaySeconds: 0 });
      const [now] = await receiveAll(url);
      assert.equal(now.Body, 'now');
      await call('DeleteMessage', { QueueUrl: url, ReceiptHandle: now.ReceiptHandle });
      assert.deepEqual(await counts(url), { visible: 0, inFlight: 0, delayed: 1 });
      await server().advanceClock(31);
      assert.deepEqual((await receiveAll(url)).map((m) => m.Body), ['queue-delay']);
    });
  });

  describe('SendMessageBatch', () => {
    it('sends every entry and reports per-entry digests', async () => {
      const { url } = await createQueue('batch');
      const Entries = [
        { Id: 'one', MessageBody: TRICKY_BODY },
        { Id: 'two', MessageBody: 'second', MessageAttributes: { Foo: { DataType: 'String', StringValue: 'Bar' } } },
        { Id: 'three_3-x', MessageBody: 'third', DelaySeconds: 0 },
      ];
      const out = await call('SendMessageBatch', { QueueUrl: url, Entries });
      assertOmitted(out, 'Failed');
      assert.deepEqual(out.Successful.map((e) => e.Id).sort(), ['one', 'three_3-x', 'two']);
      for (const e of out.Successful) {
        const entry = Entries.find((x) => x.Id === e.Id);
        assert.equal(e.MD5OfMessageBody, md5Hex(Buffer.from(entry.MessageBody, 'utf8')));
        assert.equal(e.MD5OfMessageAttributes, md5OfMessageAttributes(entry.MessageAttributes));
        assert.ok(e.MessageId);
      }
      const msgs = await receiveAll(url, { MessageAttributeNames: ['All'] });
      assert.deepEqual(msgs.map((m) => m.Body).sort(), Entries.map((e) => e.MessageBody).sort());
      const two = msgs.find((m) => m.Body === 'second');
      assert.equal(two.MD5OfMessageAttributes, 'ae7155c6026991b6d54b11589678bf9c');
    });

    it('fails single entries without failing the request', async () => {
      const { url } = await createQueue('batchfail', { MaximumMessageSize: '1024' });
      const out = await call('SendMessageBatch', {
        QueueUrl: url,
        Entries: [
          { Id: 'ok1', MessageBody: 'fine' },
          { Id: 'badchars', MessageBody: 'bad \u0001 char' },
          { Id: 'toolong', MessageBody: 'y'.repeat(1025) },
          { Id: 'ok2', MessageBody: 'also fine' },
        ],
      });
      assert.deepEqual(out.Successful.map((e) => e.Id).sort(), ['ok1', 'ok2']);
      const failed = Object.fromEntries(out.Failed.map((f) => [f.Id, f]));
      assert.deepEqual(Object.keys(failed).sort(), ['badchars', 'toolong']);
      assert.equal(failed.badchars.SenderFault, true);
      assert.equal(failed.badchars.Code, 'InvalidMessageContents');
      assert.equal(failed.toolong.SenderFault, true);
      assert.equal(failed.toolong.Code, 'InvalidParameterValue');
      assert.equal(
        failed.toolong.Message,
        'One or more parameters cannot be validated. Reason: Message must be shorter than 1024 bytes.',
      );
      const msgs = await receiveAll(url);
      assert.deepEqual(msgs.map((m) => m.Body).sort(), ['also fine', 'fine']);
    });

    it('rejects whole requests: empty, too many, bad or repeated ids, too long', async () => {
      const { url } = await createQueue('batchreq');
      await assertError(call('SendMessageBatch', { QueueUrl: url, Entries: [] }), ERR.EmptyBatchRequest);
      const eleven = Array.from({ length: 11 }, (_, i) => ({ Id: `m${i}`, MessageBody: 'x' }));
      await assertError(call('SendMessageBatch', { QueueUrl: url, Entries: eleven }), {
        ...ERR.TooManyEntriesInBatchRequest,
        message: 'Maximum number of entries per request are 10. You have sent 11.',
      });
      await assertError(
        call('SendMessageBatch', { QueueUrl: url, Entries: [{ Id: 'a', MessageBody: 'x' }, { Id: 'a', MessageBody: 'y' }] }),
        ERR.BatchEntryIdsNotDistinct,
      );
      await assertError(call('SendMessageBatch', { QueueUrl: url, Entries: [{ Id: 'bad id!', MessageBody: 'x' }] }), {
        ...ERR.InvalidBatchEntryId,
        message:
          'A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.',
      });
      await assertError(
        call('SendMessageBatch', { QueueUrl: url, Entries: [{ Id: 'x'.repeat(81), MessageBody: 'x' }] }),
        ERR.InvalidBatchEntryId,
      );
      // 4 entries of 262144 bytes + 1 byte = 1048577 bytes in total.
      const big = 'z'.repeat(262144);
      await assertError(
        call('SendMessageBatch', {
          QueueUrl: url,
          Entries: [
            { Id: 'b1', MessageBody: big },
            { Id: 'b2', MessageBody: big },
            { Id: 'b3', MessageBody: big },
            { Id: 'b4', MessageBody: big },
            { Id: 'b5', MessageBody: 'z' },
          ],
        }),
        { ...ERR.BatchRequestTooLong, message: 'Batch requests cannot be longer than 1048576 bytes. You have sent 1048577 bytes.' },
      );
      assert.deepEqual(await counts(url), { visible: 0, inFlight: 0, delayed: 0 });
    });
  });

  describe('ReceiveMessage', () => {
    it('returns all system attributes with All', async () => {
      const { url } = await createQueue('recvall');
      await call('SendMessage', { QueueUrl: url, MessageBody: 'sys' });
      const { now_ms } = await server().clock();
      const [m] = await receiveAll(url, { MessageSystemAttributeNames: ['All'], MessageAttributeNames: ['All'] });
      assert.deepEqual(Object.keys(m.Attributes).sort(), [
        'ApproximateFirstReceiveTimestamp',
        'ApproximateReceiveCount',
        'SenderId',
        'SentTimestamp',
      ]);
      assert.equal(m.Attributes.SenderId, ACCOUNT);
      assert.equal(m.Attributes.ApproximateReceiveCount, '1');
      assert.match(m.Attributes.SentTimestamp, /^\d{13}$/);
      assert.ok(Math.abs(Number(m.Attributes.SentTimestamp) - now_ms) < 5000, 'SentTimestamp is epoch ms');
      assert.ok(Number(m.Attributes.ApproximateFirstReceiveTimestamp) >= Number(m.Attributes.SentTimestamp));
      assert.equal(m.MessageAttributes, undefined);
      assert.equal(m.MD5OfMessageAttributes, undefined);
      assert.ok(m.ReceiptHandle && m.ReceiptHandle.length > 0);
    });

    it('honours the deprecated AttributeNames and named system attributes', async () => {
      const { url } = await createQueue('recvnames');
      await call('SendMessage', { QueueUrl: url, MessageBody: 'a' });
      const [m] = await receiveAll(url, { AttributeNames: ['SenderId', 'SequenceNumber'], VisibilityTimeout: 0 });
      assert.deepEqual(m.Attributes, { SenderId: ACCOUNT });
      const [n] = await receiveAll(url, { AttributeNames: ['All'], VisibilityTimeout: 0 });
      assert.equal(n.Attributes.ApproximateReceiveCount, '2');
      const [o] = await receiveAll(url, { VisibilityTimeout: 0 });
      assert.equal(o.Attributes, undefined);
    });

    it('filters message attributes by name and prefix, with digests over the subset', async () => {
      const { url } = await createQueue('recvfilter');
      const MessageAttributes = {
        General: { DataType: 'String', StringValue: 'Kenobi' },
        Hello: { DataType: 'String', StringValue: 'There' },
        'Help.Me': { DataType: 'String', StringValue: 'Me' },
      };
      await call('SendMessage', { QueueUrl: url, MessageBody: 'filter', MessageAttributes });
      const cases = [
        [['All'], ['General', 'Hello', 'Help.Me'], '4c360f3fdafd970e05fae2f149d997f5'],
        [['.*'], ['General', 'Hello', 'Help.Me'], '4c360f3fdafd970e05fae2f149d997f5'],
        [['Hel.*'], ['Hello', 'Help.Me'], '83fee93c1bcd8b9a5a923ffacdc636c7'],
        [['General', 'Hello'], ['General', 'Hello'], 'fca026605781cb4126a1e9044df24232'],
        [['Hello'], ['Hello'], 'a311262e065454b75da111d535b8dacd'],
        [['Nope', 'AWS.x'], [], undefined],
        [[], [], undefined],
      ];
      for (const [filter, names, md5] of cases) {
        const [m] = await receiveAll(url, { MessageAttributeNames: filter, VisibilityTimeout: 0 });
        assert.equal(m.Body, 'filter');
        assert.deepEqual(Object.keys(m.MessageAttributes || {}).sort(), names, `filter ${filter}`);
        assert.equal(m.MD5OfMessageAttributes, md5, `digest for filter ${filter}`);
        if (md5) assert.equal(md5OfMessageAttributes(m.MessageAttributes), md5);
      }
    });

    it('returns nothing from an empty queue and validates its parameters', async () => {
      const { url } = await createQueue('recvempty');
      const out = await call('ReceiveMessage', { QueueUrl: url });
      assertOmitted(out, 'Messages');
      await assertError(call('ReceiveMessage', { QueueUrl: url, MaxNumberOfMessages: 11 }), {
        ...ERR.InvalidParameterValue,
        message: 'Value 11 for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.',
      });
      await assertError(call('ReceiveMessage', { QueueUrl: url, WaitTimeSeconds: 21 }), {
        ...ERR.InvalidParameterValue,
        message: 'Value 21 for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.',
      });
      await assertError(call('ReceiveMessage', { QueueUrl: url, WaitTimeSeconds: -1 }), {
        ...ERR.InvalidParameterValue,
        message: 'Value -1 for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.',
      });
      await assertError(call('ReceiveMessage', { QueueUrl: url, VisibilityTimeout: 43201 }), ERR.InvalidParameterValue);
    });

    it('returns up to MaxNumberOfMessages', async () => {
      const { url } = await createQueue('recvmax');
      const Entries = Array.from({ length: 10 }, (_, i) => ({ Id: `e${i}`, MessageBody: `body-${i}` }));
      await call('SendMessageBatch', { QueueUrl: url, Entries });
      const three = await call('ReceiveMessage', { QueueUrl: url, MaxNumberOfMessages: 3 });
      assert.equal(three.Messages.length, 3);
      const one = await call('ReceiveMessage', { QueueUrl: url });
      assert.equal(one.Messages.length, 1, 'default MaxNumberOfMessages is 1');
      const rest = await receiveAll(url);
      assert.equal(rest.length, 6);
      const bodies = [...three.Messages, ...one.Messages, ...rest].map((m) => m.Body).sort();
      assert.deepEqual(bodies, Entries.map((e) => e.MessageBody).sort());
    });

    it('long poll returns soon after a send from another client', async () => {
      const { url } = await createQueue('longpoll');
      const other = ctx().otherCaller();
      const started = Date.now();
      const pending = call('ReceiveMessage', { QueueUrl: url, WaitTimeSeconds: 20, MaxNumberOfMessages: 10 });
      await new Promise((r) => setTimeout(r, 500));
      await other('SendMessage', { QueueUrl: url, MessageBody: 'wake up' });
      const out = await pending;
      const elapsed = Date.now() - started;
      assert.deepEqual(out.Messages.map((m) => m.Body), ['wake up']);
      assert.ok(elapsed >= 400, `returned after ${elapsed} ms, before the send`);
      assert.ok(elapsed < 5000, `long poll took ${elapsed} ms after a send`);
    });

    it('long poll times out empty; the queue wait time applies when WaitTimeSeconds is absent', async () => {
      const { url } = await createQueue('longpoll2', { ReceiveMessageWaitTimeSeconds: '2' });
      let t = Date.now();
      const out = await call('ReceiveMessage', { QueueUrl: url });
      let elapsed = Date.now() - t;
      assertOmitted(out, 'Messages');
      assert.ok(elapsed >= 1900 && elapsed < 6000, `queue-level wait took ${elapsed} ms`);
      t = Date.now();
      const short = await call('ReceiveMessage', { QueueUrl: url, WaitTimeSeconds: 0 });
      elapsed = Date.now() - t;
      assertOmitted(short, 'Messages');
      assert.ok(elapsed < 1500, `WaitTimeSeconds=0 should short-poll, took ${elapsed} ms`);
    });

    it('hides received messages for the visibility timeout, then redelivers with a new handle', async () => {
      const { url } = await createQueue('vis', { VisibilityTimeout: '30' });
      await call('SendMessage', { QueueUrl: url, MessageBody: 'again' });
      const [first] = await receiveAll(url, { MessageSystemAttributeNames: ['ApproximateReceiveCount'] });
      assert.equal(first.Attributes.ApproximateReceiveCount, '1');
      assert.deepEqual(await receiveAll(url), []);
      await server().advanceClock(29);
      assert.deepEqual(await receiveAll(url), []);
      await server().advanceClock(2);
      const [second] = await receiveAll(url, { MessageSystemAttributeNames: ['ApproximateReceiveCount'] });
      assert.equal(second.MessageId, first.MessageId);
      assert.equal(second.Attributes.ApproximateReceiveCount, '2');
      assert.notEqual(second.ReceiptHandle, first.ReceiptHandle);
      // A per-receive VisibilityTimeout of 0 leaves the message visible at once.
      await server().advanceClock(31);
      const [third] = await receiveAll(url, { VisibilityTimeout: 0 });
      assert.equal(third.MessageId, first.MessageId);
      const [fourth] = await receiveAll(url);
      assert.equal(fourth.MessageId, first.MessageId);
    });
  });

  describe('DeleteMessage and DeleteMessageBatch', () => {
    it('deletes a received message for good; repeated deletes succeed', async () => {
      const { url } = await createQueue('del');
      await call('SendMessage', { QueueUrl: url, MessageBody: 'bye' });
      const [m] = await receiveAll(url);
      await call('DeleteMessage', { QueueUrl: url, ReceiptHandle: m.ReceiptHandle });
      await call('DeleteMessage', { QueueUrl: url, ReceiptHandle: m.ReceiptHandle });
      await server().advanceClock(60);
      assert.deepEqual(await receiveAll(url), []);
      assert.deepEqual(await counts(url), { visible: 0, inFlight: 0, delayed: 0 });
    });

    it('deletes with an old handle after the message was received again', async () => {
      const { url } = await createQueue('delold');
      await call('SendMessage', { QueueUrl: url, MessageBody: 'old' });
      const [a] = await receiveAll(url, { VisibilityTimeout: 0 });
      const [b] = await receiveAll(url);
      assert.notEqual(a.ReceiptHandle, b.ReceiptHandle);
      await call('DeleteMessage', { QueueUrl: url, ReceiptHandle: a.ReceiptHandle });
      assert.deepEqual(await counts(url), { visible: 0, inFlight: 0, delayed: 0 });
    });

    it('rejects a garbage receipt handle', async () => {
      const { url } = await createQueue('delbad');
      await assertError(call('DeleteMessage', { QueueUrl: url, ReceiptHandle: 'garbage' }), {
        ...ERR.ReceiptHandleIsInvalid,
        message: 'The input receipt handle "garbage" is not a valid receipt handle.',
      });
    });

    it('rejects a receipt handle from another queue', async () => {
      const a = await createQueue('dela');
      const b = await createQueue('delb');
      await call('SendMessage', { QueueUrl: a.url, MessageBody: 'mine' });
      const [m] = await receiveAll(a.url);
      await assertError(call('DeleteMessage', { QueueUrl: b.url, ReceiptHandle: m.ReceiptHandle }), ERR.ReceiptHandleIsInvalid);
      assert.deepEqual(await counts(a.url), { visible: 0, inFlight: 1, delayed: 0 });
    });

    it('batch deletes, failing bad entries alone', async () => {
      const { url } = await createQueue('delbatch');
      await call('SendMessageBatch', {
        QueueUrl: url,
        Entries: [1, 2, 3].map((i) => ({ Id: `s${i}`, MessageBody: `m${i}` })),
      });
      const msgs = await receiveAll(url);
      assert.equal(msgs.length, 3);
      const out = await call('DeleteMessageBatch', {
        QueueUrl: url,
        Entries: [
          { Id: 'd0', ReceiptHandle: msgs[0].ReceiptHandle },
          { Id: 'd1', ReceiptHandle: msgs[1].ReceiptHandle },
          { Id: 'bad', ReceiptHandle: 'garbage' },
        ],
      });
      assert.deepEqual(out.Successful.map((e) => e.Id).sort(), ['d0', 'd1']);
      assert.equal(out.Failed.length, 1);
      assert.equal(out.Failed[0].Id, 'bad');
      assert.equal(out.Failed[0].SenderFault, true);
      assert.equal(out.Failed[0].Code, 'ReceiptHandleIsInvalid');
      assert.deepEqual(await counts(url), { visible: 0, inFlight: 1, delayed: 0 });
      await server().advanceClock(31);
      assert.deepEqual((await receiveAll(url)).map((m) => m.Body), [msgs[2].Body]);
    });

    it('batch delete rejects empty, oversized and non-distinct requests', async () => {
      const { url } = await createQueue('delbatchreq');
      await assertError(call('DeleteMessageBatch', { QueueUrl: url, Entries: [] }), ERR.EmptyBatchRequest);
      const eleven = Array.from({ length: 11 }, (_, i) => ({ Id: `d${i}`, ReceiptHandle: 'h' }));
      await assertError(call('DeleteMessageBatch', { QueueUrl: url, Entries: eleven }), {
        ...ERR.TooManyEntriesInBatchRequest,
        message: 'Maximum number of entries per request are 10. You have sent 11.',
      });
      await assertError(
        call('DeleteMessageBatch', { QueueUrl: url, Entries: [{ Id: 'x', ReceiptHandle: 'a' }, { Id: 'x', ReceiptHandle: 'b' }] }),
        ERR.BatchEntryIdsNotDistinct,
      );
    });
  });

  describe('ChangeMessageVisibility', () => {
    it('extends a message from now, driven by the admin clock', async () => {
      const { url } = await createQueue('cmv');
      await call('SendMessage', { QueueUrl: url, MessageBody: 'extend' });
      const [m] = await receiveAll(url);
      await server().advanceClock(20);
      await call('ChangeMessageVisibility', { QueueUrl: url, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 100 });
      await server().advanceClock(99);
      assert.deepEqual(await receiveAll(url), [], 'still hidden 99 s after the change');
      await server().advanceClock(2);
      assert.deepEqual((await receiveAll(url)).map((x) => x.MessageId), [m.MessageId]);
    });

    it('makes a message visible at once with 0', async () => {
      const { url } = await createQueue('cmv0');
      await call('SendMessage', { QueueUrl: url, MessageBody: 'now' });
      const [m] = await receiveAll(url);
      assert.deepEqual(await receiveAll(url), []);
      await call('ChangeMessageVisibility', { QueueUrl: url, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0 });
      const [again] = await receiveAll(url, { MessageSystemAttributeNames: ['ApproximateReceiveCount'] });
      assert.equal(again.MessageId, m.MessageId);
      assert.equal(again.Attributes.ApproximateReceiveCount, '2');
    });

    it('rejects out-of-range values, the 12-hour cap, deleted messages and garbage handles', async () => {
      const { url } = await createQueue('cmvbad');
      await call('SendMessage', { QueueUrl: url, MessageBody: 'cap' });
      const [m] = await receiveAll(url);
      await assertError(
        call('ChangeMessageVisibility', { QueueUrl: url, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 43201 }),
        ERR.InvalidParameterValue,
      );
      await server().advanceClock(10);
      await assertError(
        call('ChangeMessageVisibility', { QueueUrl: url, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 43200 }),
        {
          ...ERR.InvalidParameterValue,
          message:
            'Value 43200 for parameter VisibilityTimeout is invalid. Reason: Total VisibilityTimeout for the message is beyond the limit [43200 seconds]',
        },
      );
      // Within the cap it works.
      await call('ChangeMessageVisibility', { QueueUrl: url, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 43000 });
      await assertError(
        call('ChangeMessageVisibility', { QueueUrl: url, ReceiptHandle: 'garbage', VisibilityTimeout: 10 }),
        ERR.ReceiptHandleIsInvalid,
      );
      await call('DeleteMessage', { QueueUrl: url, ReceiptHandle: m.ReceiptHandle });
      await assertError(
        call('ChangeMessageVisibility', { QueueUrl: url, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 10 }),
        {
          ...ERR.InvalidParameterValue,
          message: `Value ${m.ReceiptHandle} for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change.`,
        },
      );
    });

    it('batch changes visibility per entry', async () => {
      const { url } = await createQueue('cmvbatch');
      await call('SendMessageBatch', {
        QueueUrl: url,
        Entries: [
          { Id: 'a', MessageBody: 'show' },
          { Id: 'b', MessageBody: 'hide' },
        ],
      });
      const msgs = await receiveAll(url);
      assert.equal(msgs.length, 2);
      const show = msgs.find((m) => m.Body === 'show');
      const hide = msgs.find((m) => m.Body === 'hide');
      const out = await call('ChangeMessageVisibilityBatch', {
        QueueUrl: url,
        Entries: [
          { Id: 'show', ReceiptHandle: show.ReceiptHandle, VisibilityTimeout: 0 },
          { Id: 'hide', ReceiptHandle: hide.ReceiptHandle, VisibilityTimeout: 600 },
          { Id: 'bad', ReceiptHandle: 'garbage', VisibilityTimeout: 0 },
          { Id: 'range', ReceiptHandle: hide.ReceiptHandle, VisibilityTimeout: 50000 },
        ],
      });
      assert.deepEqual(out.Successful.map((e) => e.Id).sort(), ['hide', 'show']);
      const failed = Object.fromEntries(out.Failed.map((f) => [f.Id, f]));
      assert.deepEqual(Object.keys(failed).sort(), ['bad', 'range']);
      assert.equal(failed.bad.Code, 'ReceiptHandleIsInvalid');
      assert.equal(failed.bad.SenderFault, true);
      assert.equal(failed.range.Code, 'InvalidParameterValue');
      const visibleNow = await receiveAll(url);
      assert.deepEqual(visibleNow.map((m) => m.Body), ['show']);
      await call('DeleteMessage', { QueueUrl: url, ReceiptHandle: visibleNow[0].ReceiptHandle });
      await server().advanceClock(599);
      assert.deepEqual(await receiveAll(url), []);
      await server().advanceClock(2);
      assert.deepEqual((await receiveAll(url)).map((m) => m.Body), ['hide']);
      await assertError(call('ChangeMessageVisibilityBatch', { QueueUrl: url, Entries: [] }), ERR.EmptyBatchRequest);
    });
  });

  describe('PurgeQueue', () => {
    it('removes visible, in-flight and delayed messages, once a minute', async () => {
      const { name, url } = await createQueue('purge');
      await call('SendMessage', { QueueUrl: url, MessageBody: 'visible' });
      await call('SendMessage', { QueueUrl: url, MessageBody: 'inflight' });
      await call('SendMessage', { QueueUrl: url, MessageBody: 'delayed', DelaySeconds: 600 });
      const got = await receiveAll(url, { MaxNumberOfMessages: 1 });
      assert.equal(got.length, 1);
      assert.deepEqual(await counts(url), { visible: 1, inFlight: 1, delayed: 1 });
      await call('PurgeQueue', { QueueUrl: url });
      assert.deepEqual(await counts(url), { visible: 0, inFlight: 0, delayed: 0 });
      await call('SendMessage', { QueueUrl: url, MessageBody: 'after' });
      await assertError(call('PurgeQueue', { QueueUrl: url }), {
        ...ERR.PurgeQueueInProgress,
        message: `Only one PurgeQueue operation on ${name} is allowed every 60 seconds.`,
      });
      await server().advanceClock(700);
      assert.deepEqual((await receiveAll(url)).map((m) => m.Body), ['after'], 'messages sent after a purge are kept');
      await call('PurgeQueue', { QueueUrl: url });
      assert.deepEqual(await counts(url), { visible: 0, inFlight: 0, delayed: 0 });
    });
  });

  describe('DeleteQueue', () => {
    it('deletes a non-empty queue; it then does not exist', async () => {
      const { name, url } = await createQueue('dq');
      await call('SendMessage', { QueueUrl: url, MessageBody: 'left behind' });
      await call('DeleteQueue', { QueueUrl: url });
      await assertError(call('GetQueueUrl', { QueueName: name }), ERR.QueueDoesNotExist);
      await assertError(call('SendMessage', { QueueUrl: url, MessageBody: 'x' }), ERR.QueueDoesNotExist);
      await assertError(call('DeleteQueue', { QueueUrl: url }), ERR.QueueDoesNotExist);
      const list = await call('ListQueues', { QueueNamePrefix: name });
      assertOmitted(list, 'QueueUrls');
    });
  });

  describe('tags', () => {
    it('tags merge, keys are case-sensitive, untag ignores missing keys', async () => {
      const { url } = await createQueue('tags');
      const none = await call('ListQueueTags', { QueueUrl: url });
      assertOmitted(none, 'Tags');
      await call('TagQueue', { QueueUrl: url, Tags: { MyTag: 'one', mytag: 'two', empty: '' } });
      await call('TagQueue', { QueueUrl: url, Tags: { MyTag: 'uno', extra: 'x' } });
      assert.deepEqual((await call('ListQueueTags', { QueueUrl: url })).Tags, {
        MyTag: 'uno',
        mytag: 'two',
        empty: '',
        extra: 'x',
      });
      await call('UntagQueue', { QueueUrl: url, TagKeys: ['mytag', 'does-not-exist'] });
      assert.deepEqual((await call('ListQueueTags', { QueueUrl: url })).Tags, { MyTag: 'uno', empty: '', extra: 'x' });
      await call('UntagQueue', { QueueUrl: url, TagKeys: ['MyTag', 'empty', 'extra'] });
      assertOmitted(await call('ListQueueTags', { QueueUrl: url }), 'Tags');
    });

    it('rejects reserved keys', async () => {
      const { url } = await createQueue('tagsbad');
      await assertError(call('TagQueue', { QueueUrl: url, Tags: { 'aws:reserved': 'x' } }), ERR.InvalidParameterValue);
    });
  });

  describe('FIFO queues', () => {
    const EMPTY = { visible: 0, inFlight: 0, delayed: 0 };
    const bodies = (msgs) => msgs.map((m) => m.Body);

    async function createFifo(Attributes = {}) {
      const QueueName = `${uniqueName('fifo')}.fifo`;
      const { QueueUrl } = await call('CreateQueue', { QueueName, Attributes: { FifoQueue: 'true', ...Attributes } });
      return QueueUrl;
    }

    /** SendMessage to a FIFO queue; without `dedupId` the queue must use content-based dedup. */
    function sendFifo(QueueUrl, MessageBody, MessageGroupId, dedupId) {
      return call('SendMessage', {
        QueueUrl,
        MessageBody,
        MessageGroupId,
        ...(dedupId === undefined ? {} : { MessageDeduplicationId: dedupId }),
      });
    }

    /** §8.1: decimal strings of large numbers (the server's are about 20 digits), strictly increasing. */
    function assertIncreasingSequence(seqs) {
      for (const s of seqs) {
        assert.equal(typeof s, 'string', `SequenceNumber ${s} is a string`);
        assert.match(s, /^\d{20,}$/, `SequenceNumber ${s} is a decimal of at least 20 digits`);
      }
      for (let i = 1; i < seqs.length; i += 1) {
        assert.ok(BigInt(seqs[i]) > BigInt(seqs[i - 1]), `SequenceNumber ${seqs[i]} > ${seqs[i - 1]}`);
      }
    }

    it('SendMessage and every SendMessageBatch entry return increasing SequenceNumbers, also received', async () => {
      const QueueUrl = await createFifo();
      const s1 = await sendFifo(QueueUrl, 'm1', 'g', 'd1');
      const s2 = await sendFifo(QueueUrl, 'm2', 'g', 'd2');
      const batch = await call('SendMessageBatch', {
        QueueUrl,
        Entries: [
          { Id: 'b3', MessageBody: 'm3', MessageGroupId: 'g', MessageDeduplicationId: 'd3' },
          { Id: 'b4', MessageBody: 'm4', MessageGroupId: 'h', MessageDeduplicationId: 'd4' },
          { Id: 'b5', MessageBody: 'm5', MessageGroupId: 'g', MessageDeduplicationId: 'd5' },
        ],
      });
      assertOmitted(batch, 'Failed');
      assert.deepEqual(batch.Successful.map((e) => e.Id).sort(), ['b3', 'b4', 'b5']);
      const entry = Object.fromEntries(batch.Successful.map((e) => [e.Id, e]));
      // A batch is enqueued in entry order (§8.2), after the earlier single sends.
      const sent = { m1: s1, m2: s2, m3: entry.b3, m4: entry.b4, m5: entry.b5 };
      assertIncreasingSequence(Object.values(sent).map((o) => o.SequenceNumber));

      const msgs = await receiveAll(QueueUrl, { MessageSystemAttributeNames: ['All'] });
      assert.deepEqual(bodies(msgs).sort(), ['m1', 'm2', 'm3', 'm4', 'm5']);
      assert.deepEqual(
        bodies(msgs).filter((b) => b !== 'm4'),
        ['m1', 'm2', 'm3', 'm5'],
        'group g comes out in send order',
      );
      for (const m of msgs) {
        const s = sent[m.Body];
        assert.equal(m.MessageId, s.MessageId, m.Body);
        assert.equal(m.Attributes.SequenceNumber, s.SequenceNumber, `${m.Body} SequenceNumber`);
        assert.equal(m.Attributes.MessageGroupId, m.Body === 'm4' ? 'h' : 'g');
        assert.equal(m.Attributes.MessageDeduplicationId, `d${m.Body.slice(1)}`);
      }
    });

    it('a duplicate within 5 minutes succeeds with the original MessageId and enqueues nothing, also after a delete', async () => {
      const QueueUrl = await createFifo();
      const first = await sendFifo(QueueUrl, 'first', 'g', 'same');
      const dup = await sendFifo(QueueUrl, 'dup', 'g', 'same');
      assert.equal(dup.MessageId, first.MessageId, 'a duplicate reports the original MessageId');
      const batchDup = await call('SendMessageBatch', {
        QueueUrl,
        Entries: [{ Id: 'again', MessageBody: 'batch dup', MessageGroupId: 'g', MessageDeduplicationId: 'same' }],
      });
      assertOmitted(batchDup, 'Failed');
      assert.equal(batchDup.Successful[0].MessageId, first.MessageId);
      assert.deepEqual(await counts(QueueUrl), { ...EMPTY, visible: 1 });

      const [m] = await receiveAll(QueueUrl);
      assert.equal(m.Body, 'first');
      assert.equal(m.MessageId, first.MessageId);
      await call('DeleteMessage', { QueueUrl, ReceiptHandle: m.ReceiptHandle });
      const afterDelete = await sendFifo(QueueUrl, 'after delete', 'g', 'same');
      assert.equal(afterDelete.MessageId, first.MessageId, 'still a duplicate after the original was deleted');
      assert.deepEqual(await counts(QueueUrl), EMPTY);
      assert.deepEqual(await receiveAll(QueueUrl), []);

      await server().advanceClock(290);
      const late = await sendFifo(QueueUrl, 'late dup', 'g', 'same');
      assert.equal(late.MessageId, first.MessageId, '290 s after the first send it is still a duplicate');
      assert.deepEqual(await receiveAll(QueueUrl), []);

      await server().advanceClock(10); // 300 s after the first send: the window has closed
      const fresh = await sendFifo(QueueUrl, 'fresh', 'g', 'same');
      assert.notEqual(fresh.MessageId, first.MessageId);
      assertIncreasingSequence([first.SequenceNumber, fresh.SequenceNumber]);
      const msgs = await receiveAll(QueueUrl, { MessageSystemAttributeNames: ['MessageDeduplicationId'] });
      assert.deepEqual(bodies(msgs), ['fresh']);
      assert.equal(msgs[0].MessageId, fresh.MessageId);
      assert.equal(msgs[0].Attributes.MessageDeduplicationId, 'same');
    });

    it('content-based deduplication uses the SHA-256 of the body; an explicit id overrides it', async () => {
      const QueueUrl = await createFifo({ ContentBasedDeduplication: 'true' });
      const a = await sendFifo(QueueUrl, TRICKY_BODY, 'g');
      const b = await sendFifo(QueueUrl, TRICKY_BODY, 'g');
      assert.equal(b.MessageId, a.MessageId, 'same body twice: one message');
      const otherGroup = await sendFifo(QueueUrl, TRICKY_BODY, 'other');
      assert.equal(otherGroup.MessageId, a.MessageId, 'queue scope: the same body in another group is a duplicate');
      const explicit = await sendFifo(QueueUrl, TRICKY_BODY, 'g', 'explicit');
      assert.notEqual(explicit.MessageId, a.MessageId, 'an explicit id overrides the content hash');
      // An explicit id equal to another body's hash collides with that body sent content-based.
      const hashed = await sendFifo(QueueUrl, 'carrier', 'g', sha256Hex('another body'));
      const collides = await sendFifo(QueueUrl, 'another body', 'g');
      assert.equal(collides.MessageId, hashed.MessageId);
      assert.deepEqual(await counts(QueueUrl), { ...EMPTY, visible: 3 });

      const msgs = await receiveAll(QueueUrl, { MessageSystemAttributeNames: ['All'] });
      assert.deepEqual(bodies(msgs), [TRICKY_BODY, TRICKY_BODY, 'carrier']);
      assert.deepEqual(
        msgs.map((m) => m.Attributes.MessageDeduplicationId),
        [sha256Hex(TRICKY_BODY), 'explicit', sha256Hex('another body')],
      );
      assert.match(msgs[0].Attributes.MessageDeduplicationId, /^[0-9a-f]{64}$/);
    });

    it('DeduplicationScope messageGroup dedups per group; queue scope dedups across groups', async () => {
      const perGroup = await createFifo({ DeduplicationScope: 'messageGroup' });
      assert.equal((await attrs(perGroup, ['DeduplicationScope'])).DeduplicationScope, 'messageGroup');
      const a1 = await sendFifo(perGroup, 'a1', 'ga', 'd');
      const b1 = await sendFifo(perGroup, 'b1', 'gb', 'd');
      assert.notEqual(b1.MessageId, a1.MessageId, 'same id in another group is not a duplicate');
      assert.equal((await sendFifo(perGroup, 'a2', 'ga', 'd')).MessageId, a1.MessageId);
      assert.equal((await sendFifo(perGroup, 'b2', 'gb', 'd')).MessageId, b1.MessageId);
      assert.deepEqual(await counts(perGroup), { ...EMPTY, visible: 2 });
      assert.deepEqual(bodies(await receiveAll(perGroup)).sort(), ['a1', 'b1']);

      const queueWide = await createFifo({ DeduplicationScope: 'queue' });
      const q1 = await sendFifo(queueWide, 'q1', 'ga', 'd');
      const q2 = await sendFifo(queueWide, 'q2', 'gb', 'd');
      assert.equal(q2.MessageId, q1.MessageId, 'queue scope: the same id in another group is a duplicate');
      assert.deepEqual(bodies(await receiveAll(queueWide)), ['q1']);
    });

    it('one receive drains a group before the next: g1-m1, g1-m2, g1-m3, g2-m1', async () => {
      const QueueUrl = await createFifo({ ContentBasedDeduplication: 'true' });
      for (const [g, b] of [
        ['g1', 'g1-m1'],
        ['g2', 'g2-m1'],
        ['g1', 'g1-m2'],
        ['g1', 'g1-m3'],
      ]) {
        await sendFifo(QueueUrl, b, g);
      }
      const msgs = await receiveAll(QueueUrl, { MessageSystemAttributeNames: ['MessageGroupId', 'SequenceNumber'] });
      assert.deepEqual(bodies(msgs), ['g1-m1', 'g1-m2', 'g1-m3', 'g2-m1']);
      assert.deepEqual(
        msgs.map((m) => m.Attributes.MessageGroupId),
        ['g1', 'g1', 'g1', 'g2'],
      );
      assertIncreasingSequence(msgs.slice(0, 3).map((m) => m.Attributes.SequenceNumber));
    });

    it('locks a group while any of its messages is in flight, new sends included; deleting all unlocks it', async () => {
      const QueueUrl = await createFifo({ ContentBasedDeduplication: 'true' });
      for (const b of ['g1-m1', 'g1-m2', 'g1-m3']) await sendFifo(QueueUrl, b, 'g1');
      const inFlight = await receiveAll(QueueUrl, { MaxNumberOfMessages: 2 });
      assert.deepEqual(bodies(inFlight), ['g1-m1', 'g1-m2']);
      assert.deepEqual(await receiveAll(QueueUrl), [], 'g1 is locked while g1-m1 and g1-m2 are in flight');

      await sendFifo(QueueUrl, 'g1-m4', 'g1');
      await sendFifo(QueueUrl, 'g2-m1', 'g2');
      assert.deepEqual(bodies(await receiveAll(QueueUrl)), ['g2-m1'], 'other groups are served; g1-m4 is held back');
      assert.deepEqual(await counts(QueueUrl), { ...EMPTY, visible: 2, inFlight: 3 });

      await call('DeleteMessage', { QueueUrl, ReceiptHandle: inFlight[0].ReceiptHandle });
      assert.deepEqual(await receiveAll(QueueUrl), [], 'deleting some in-flight messages keeps g1 locked');
      await call('DeleteMessage', { QueueUrl, ReceiptHandle: inFlight[1].ReceiptHandle });
      assert.deepEqual(bodies(await receiveAll(QueueUrl)), ['g1-m3', 'g1-m4'], 'deleting all unlocks g1 at once');
    });

    it('a returning message frees its group only up to the first message still in flight', async () => {
      const QueueUrl = await createFifo({ ContentBasedDeduplication: 'true', VisibilityTimeout: '30' });
      for (const b of ['foo', 'bar', 'baz']) await sendFifo(QueueUrl, b, 'g');
      const got = await receiveAll(QueueUrl);
      assert.deepEqual(bodies(got), ['foo', 'bar', 'baz']);
      const [, bar] = got;
      await call('ChangeMessageVisibility', { QueueUrl, ReceiptHandle: bar.ReceiptHandle, VisibilityTimeout: 120 });

      await server().advanceClock(31);
      const again = await receiveAll(QueueUrl);
      assert.deepEqual(bodies(again), ['foo'], 'baz is visible again but sits behind the in-flight bar');
      assert.deepEqual(await counts(QueueUrl), { ...EMPTY, visible: 1, inFlight: 2 });

      await server().advanceClock(90); // 121 s: foo (re-received at 31 s) and bar (120 s) are back
      const all = await receiveAll(QueueUrl);
      assert.deepEqual(bodies(all), ['foo', 'bar', 'baz']);

      // Head extended, the rest made visible at once: nothing can be served (§6.2, §8.2).
      const [foo2, bar2, baz2] = all;
      await call('ChangeMessageVisibility', { QueueUrl, ReceiptHandle: foo2.ReceiptHandle, VisibilityTimeout: 300 });
      await call('ChangeMessageVisibility', { QueueUrl, ReceiptHandle: bar2.ReceiptHandle, VisibilityTimeout: 0 });
      await call('ChangeMessageVisibility', { QueueUrl, ReceiptHandle: baz2.ReceiptHandle, VisibilityTimeout: 0 });
      assert.deepEqual(await receiveAll(QueueUrl), [], 'foo at the head is in flight');
      assert.deepEqual(await counts(QueueUrl), { ...EMPTY, visible: 2, inFlight: 1 });
    });

    it('requires MessageGroupId and a deduplication id, and refuses per-message delays', async () => {
      const QueueUrl = await createFifo();
      await assertError(call('SendMessage', { QueueUrl, MessageBody: 'nogroup', MessageDeduplicationId: 'd9' }), {
        ...ERR.MissingParameter,
        message: 'The request must contain the parameter MessageGroupId.',
      });
      await assertError(call('SendMessage', { QueueUrl, MessageBody: 'nodedup', MessageGroupId: 'g' }), {
        ...ERR.InvalidParameterValue,
        message:
          'The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly',
      });
      await assertError(
        call('SendMessage', { QueueUrl, MessageBody: 'delayed', MessageGroupId: 'g', MessageDeduplicationId: 'dd', DelaySeconds: 2 }),
        {
          ...ERR.InvalidParameterValue,
          message:
            'Value 2 for parameter DelaySeconds is invalid. Reason: The request include parameter that is not valid for this queue type.',
        },
      );
      assert.deepEqual(await counts(QueueUrl), EMPTY);
    });

    it('SendMessageBatch fails as a whole when one entry lacks MessageGroupId or a deduplication id', async () => {
      const QueueUrl = await createFifo();
      await assertError(
        call('SendMessageBatch', {
          QueueUrl,
          Entries: [
            { Id: 'ok', MessageBody: 'ok', MessageGroupId: 'g', MessageDeduplicationId: 'd1' },
            { Id: 'nogroup', MessageBody: 'x', MessageDeduplicationId: 'd2' },
          ],
        }),
        { ...ERR.InvalidParameterValue, message: 'The request must contain the parameter MessageGroupId.' },
      );
      await assertError(
        call('SendMessageBatch', {
          QueueUrl,
          Entries: [
            { Id: 'ok', MessageBody: 'ok', MessageGroupId: 'g', MessageDeduplicationId: 'd1' },
            { Id: 'nodedup', MessageBody: 'y', MessageGroupId: 'g' },
          ],
        }),
        {
          ...ERR.InvalidParameterValue,
          message:
            'The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly',
        },
      );
      assert.deepEqual(await counts(QueueUrl), EMPTY, 'the valid entries were not enqueued either');
      // Nor was their deduplication id recorded.
      const ok = await sendFifo(QueueUrl, 'ok', 'g', 'd1');
      const msgs = await receiveAll(QueueUrl);
      assert.deepEqual(msgs.map((m) => m.MessageId), [ok.MessageId]);
    });

    it('DeleteMessage with an expired FIFO handle fails; extending before expiry keeps it valid', async () => {
      const QueueUrl = await createFifo({ ContentBasedDeduplication: 'true', VisibilityTimeout: '30' });
      await sendFifo(QueueUrl, 'expiring', 'g');
      const [m] = await receiveAll(QueueUrl);
      await server().advanceClock(31);
      await assertError(call('DeleteMessage', { QueueUrl, ReceiptHandle: m.ReceiptHandle }), {
        ...ERR.InvalidParameterValue,
        message: `Value ${m.ReceiptHandle} for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired.`,
      });
      const [again] = await receiveAll(QueueUrl, { MessageSystemAttributeNames: ['ApproximateReceiveCount'] });
      assert.equal(again.MessageId, m.MessageId, 'the failed delete left the message in the queue');
      assert.equal(again.Attributes.ApproximateReceiveCount, '2');

      await server().advanceClock(20);
      await call('ChangeMessageVisibility', { QueueUrl, ReceiptHandle: again.ReceiptHandle, VisibilityTimeout: 60 });
      await server().advanceClock(30); // 50 s after the receive, past the queue's 30 s
      await call('DeleteMessage', { QueueUrl, ReceiptHandle: again.ReceiptHandle });
      assert.deepEqual(await counts(QueueUrl), EMPTY);
      await server().advanceClock(60);
      assert.deepEqual(await receiveAll(QueueUrl), []);
    });

    it('a retried ReceiveRequestAttemptId returns the same messages and receipt handles', async () => {
      const QueueUrl = await createFifo({ ContentBasedDeduplication: 'true', VisibilityTimeout: '30' });
      for (const b of ['a1', 'a2', 'a3']) await sendFifo(QueueUrl, b, 'g');
      const attempt = { MaxNumberOfMessages: 2, ReceiveRequestAttemptId: 'attempt-1' };
      const first = await receiveAll(QueueUrl, attempt);
      assert.deepEqual(bodies(first), ['a1', 'a2']);
      assert.deepEqual(await receiveAll(QueueUrl, { ReceiveRequestAttemptId: 'attempt-2' }), [], 'a new attempt finds g locked');

      await server().advanceClock(20);
      const retry = await receiveAll(QueueUrl, attempt);
      assert.deepEqual(retry.map((m) => m.MessageId), first.map((m) => m.MessageId));
      assert.deepEqual(retry.map((m) => m.ReceiptHandle), first.map((m) => m.ReceiptHandle));
      assert.deepEqual(bodies(retry), ['a1', 'a2']);

      // §6.4: the retry reset the visibility timeout, so 40 s after the first receive they are still hidden.
      await server().advanceClock(20);
      assert.deepEqual(await receiveAll(QueueUrl), []);

      // After a modification the same id counts as a new attempt: new handles.
      for (const m of retry) {
        await call('ChangeMessageVisibility', { QueueUrl, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0 });
      }
      const renewed = await receiveAll(QueueUrl, attempt);
      assert.deepEqual(bodies(renewed), ['a1', 'a2']);
      for (let i = 0; i < 2; i += 1) assert.notEqual(renewed[i].ReceiptHandle, first[i].ReceiptHandle);
      for (const m of renewed) await call('DeleteMessage', { QueueUrl, ReceiptHandle: m.ReceiptHandle });
      assert.deepEqual(bodies(await receiveAll(QueueUrl)), ['a3']);
    });

    it('PurgeQueue clears the deduplication cache and the group lock', async () => {
      const QueueUrl = await createFifo();
      const before = await sendFifo(QueueUrl, 'before purge', 'g', 'p');
      assert.equal((await sendFifo(QueueUrl, 'dup', 'g', 'p')).MessageId, before.MessageId);
      const [held] = await receiveAll(QueueUrl);
      assert.equal(held.MessageId, before.MessageId);
      await call('PurgeQueue', { QueueUrl });
      assert.deepEqual(await counts(QueueUrl), EMPTY);

      const after = await sendFifo(QueueUrl, 'after purge', 'g', 'p');
      assert.notEqual(after.MessageId, before.MessageId, 'the dedup id is usable again after a purge');
      assert.equal((await sendFifo(QueueUrl, 'dup again', 'g', 'p')).MessageId, after.MessageId);
      const msgs = await receiveAll(QueueUrl);
      assert.deepEqual(bodies(msgs), ['after purge'], 'the purged in-flight message no longer locks g');
      assert.equal(msgs[0].MessageId, after.MessageId);
    });
  });

  describe('nonexistent queue', () => {
    it('every QueueUrl operation fails with QueueDoesNotExist', async () => {
      const QueueUrl = server().queueUrl(uniqueName('ghost'));
      const ops = [
        ['SendMessage', { QueueUrl, MessageBody: 'x' }],
        ['SendMessageBatch', { QueueUrl, Entries: [{ Id: 'a', MessageBody: 'x' }] }],
        ['ReceiveMessage', { QueueUrl }],
        ['GetQueueAttributes', { QueueUrl, AttributeNames: ['All'] }],
        ['SetQueueAttributes', { QueueUrl, Attributes: { DelaySeconds: '1' } }],
        ['DeleteMessage', { QueueUrl, ReceiptHandle: 'x' }],
        ['ChangeMessageVisibility', { QueueUrl, ReceiptHandle: 'x', VisibilityTimeout: 1 }],
        ['PurgeQueue', { QueueUrl }],
        ['DeleteQueue', { QueueUrl }],
        ['TagQueue', { QueueUrl, Tags: { a: 'b' } }],
        ['ListQueueTags', { QueueUrl }],
      ];
      for (const [op, input] of ops) {
        await assertError(call(op, input), { ...ERR.QueueDoesNotExist, message: NO_QUEUE_MSG });
      }
    });
  });

  // ---------------------------------------------------------------------------------------
  // Dead-letter queues, redrive, move tasks, permissions, deleted queues (§3.4, §9, §11, §12).
  // Error texts the reference marks UNVERIFIED are the ones sqsim chose (tests/it/redrive.rs).

  async function arnOf(url) {
    return (await attrs(url, ['QueueArn'])).QueueArn;
  }

  async function setRedrive(url, deadLetterTargetArn, maxReceiveCount) {
    const RedrivePolicy = JSON.stringify({ deadLetterTargetArn, maxReceiveCount });
    await call('SetQueueAttributes', { QueueUrl: url, Attributes: { RedrivePolicy } });
    return RedrivePolicy;
  }

  async function createFifoQueue(prefix, Attributes = {}) {
    const name = `${uniqueName(prefix)}.fifo`;
    const out = await call('CreateQueue', { QueueName: name, Attributes: { FifoQueue: 'true', ...Attributes } });
    return { name, url: out.QueueUrl };
  }

  /** Runs `fn` with the server clock frozen, so only advanceClock moves it; always releases it. */
  async function withFrozenClock(fn) {
    await server().freezeClock(true);
    try {
      return await fn();
    } finally {
      await server().freezeClock(false);
    }
  }

  async function listTasks(SourceArn, MaxResults) {
    const out = await call('ListMessageMoveTasks', { SourceArn, ...(MaxResults ? { MaxResults } : {}) });
    return out.Results || [];
  }

  /** Polls the newest move task of `SourceArn` (short real sleeps, at most 10 s) until `done`. */
  async function waitTask(SourceArn, done, what) {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const [t] = await listTasks(SourceArn);
      if (t && done(t)) return t;
      if (Date.now() > deadline) assert.fail(`move task never reached "${what}": ${JSON.stringify(t)}`);
      await sleep(10);
    }
  }

  /**
   * Gives `srcUrl` a RedrivePolicy to `dlqUrl` with maxReceiveCount 1, sends `n` messages and
   * receives them twice (visibility 0), which moves them all to the DLQ. Returns their MessageIds.
   */
  async function fillDlq(srcUrl, dlqUrl, n) {
    await setRedrive(srcUrl, await arnOf(dlqUrl), 1);
    const ids = [];
    for (let start = 0; start < n; start += 10) {
      const Entries = [];
      for (let i = start; i < Math.min(n, start + 10); i += 1) Entries.push({ Id: `e${i}`, MessageBody: `m${i}` });
      const out = await call('SendMessageBatch', { QueueUrl: srcUrl, Entries });
      assert.equal(out.Successful.length, Entries.length);
      ids.push(...out.Successful.map((e) => e.MessageId));
    }
    let delivered = 0;
    for (let round = 0; delivered < n; round += 1) {
      assert.ok(round < 50, `only ${delivered} of ${n} delivered`);
      delivered += (await receiveAll(srcUrl, { VisibilityTimeout: 0 })).length;
    }
    assert.deepEqual(await receiveAll(srcUrl, { VisibilityTimeout: 0 }), [], 'the second receive dead-letters them all');
    assert.deepEqual(await counts(dlqUrl), { visible: n, inFlight: 0, delayed: 0 });
    assert.deepEqual(await counts(srcUrl), { visible: 0, inFlight: 0, delayed: 0 });
    return ids;
  }

  describe('dead-letter queues (§9.1–9.3)', () => {
    it('maxReceiveCount 2: two deliveries, the third receive moves the message to the DLQ', async () => {
      const dlq = await createQueue('dlq');
      const src = await createQueue('dlqsrc');
      const [dlqArn, srcArn] = [await arnOf(dlq.url), await arnOf(src.url)];
      const policy = await setRedrive(src.url, dlqArn, 2);
      assert.equal((await attrs(src.url, ['RedrivePolicy'])).RedrivePolicy, policy, 'the policy reads back as set');

      const trace = 'Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1';
      const MessageAttributes = { Foo: { DataType: 'String', StringValue: 'Bar' } };
      const sent = await call('SendMessage', {
        QueueUrl: src.url,
        MessageBody: 'poison',
        MessageAttributes,
        MessageSystemAttributes: { AWSTraceHeader: { DataType: 'String', StringValue: trace } },
      });
      let sentTimestamp;
      for (const n of [1, 2]) {
        const [m] = await receiveAll(src.url, { VisibilityTimeout: 0, MessageSystemAttributeNames: ['All'] });
        assert.equal(m.MessageId, sent.MessageId, `delivery ${n}`);
        assert.equal(m.Attributes.ApproximateReceiveCount, String(n));
        assert.equal(m.Attributes.DeadLetterQueueSourceArn, undefined);
        sentTimestamp = m.Attributes.SentTimestamp;
      }
      // The third receive moves it instead of returning it, and goes on with other messages.
      const healthy = await call('SendMessage', { QueueUrl: src.url, MessageBody: 'healthy' });
      const third = await receiveAll(src.url, { VisibilityTimeout: 0 });
      assert.deepEqual(third.map((m) => m.MessageId), [healthy.MessageId], 'only the healthy message is returned');
      assert.deepEqual(await counts(dlq.url), { visible: 1, inFlight: 0, delayed: 0 });

      const [moved] = await receiveAll(dlq.url, { MessageSystemAttributeNames: ['All'], MessageAttributeNames: ['All'] });
      assert.equal(moved.MessageId, sent.MessageId, 'same MessageId');
      assert.equal(moved.Body, 'poison');
      assert.equal(moved.MD5OfBody, md5Hex('poison'));
      assert.deepEqual(normalizeAttributes(moved.MessageAttributes), normalizeAttributes(MessageAttributes));
      assert.equal(moved.MD5OfMessageAttributes, 'ae7155c6026991b6d54b11589678bf9c');
      assert.equal(moved.Attributes.DeadLetterQueueSourceArn, srcArn);
      assert.equal(moved.Attributes.ApproximateReceiveCount, '3', 'the count continues; the move is not counted');
      assert.equal(moved.Attributes.AWSTraceHeader, trace);
      assert.equal(moved.Attributes.SentTimestamp, sentTimestamp, 'a standard DLQ keeps the original enqueue time');
      assert.deepEqual(await counts(src.url), { visible: 1, inFlight: 0, delayed: 0 }, 'only the healthy message is left');
    });

    it('FIFO: dead-lettered messages keep their group order and the group stays usable', async () => {
      const dlq = await createFifoQueue('fdlq', { ContentBasedDeduplication: 'true' });
      const src = await createFifoQueue('fsrc', { ContentBasedDeduplication: 'true' });
      const [dlqArn, srcArn] = [await arnOf(dlq.url), await arnOf(src.url)];
      await setRedrive(src.url, dlqArn, 1);
      const ids = [];
      for (const b of ['m1', 'm2', 'm3']) {
        ids.push((await call('SendMessage', { QueueUrl: src.url, MessageBody: b, MessageGroupId: 'g' })).MessageId);
      }
      const first = await receiveAll(src.url, { VisibilityTimeout: 0 });
      assert.deepEqual(first.map((m) => m.Body), ['m1', 'm2', 'm3']);
      assertOmitted(await call('ReceiveMessage', { QueueUrl: src.url, MaxNumberOfMessages: 10 }), 'Messages');

      const moved = await receiveAll(dlq.url, { MessageSystemAttributeNames: ['All'] });
      assert.deepEqual(moved.map((m) => m.Body), ['m1', 'm2', 'm3'], 'DLQ order = send order');
      assert.deepEqual(moved.map((m) => m.MessageId), ids);
      const seqs = moved.map((m) => BigInt(m.Attributes.SequenceNumber));
      assert.ok(seqs[0] < seqs[1] && seqs[1] < seqs[2], `DLQ sequence numbers increase: ${seqs}`);
      for (const m of moved) {
        assert.equal(m.Attributes.MessageGroupId, 'g');
        assert.equal(m.Attributes.DeadLetterQueueSourceArn, srcArn);
        assert.equal(m.Attributes.ApproximateReceiveCount, '2');
      }
      const next = await call('SendMessage', { QueueUrl: src.url, MessageBody: 'm4', MessageGroupId: 'g' });
      const after = await receiveAll(src.url);
      assert.deepEqual(after.map((m) => m.MessageId), [next.MessageId], 'group g is not left locked');
    });

    it('RedrivePolicy validation: type mismatch, missing target, maxReceiveCount 0 and 1001', async () => {
      const stdDlq = await createQueue('rvdlq');
      const src = await createQueue('rvsrc');
      const fifo = await createFifoQueue('rvfifo');
      const [stdArn, fifoArn] = [await arnOf(stdDlq.url), await arnOf(fifo.url)];
      const missingArn = `arn:aws:sqs:${REGION}:${ACCOUNT}:${uniqueName('nodlq')}`;
      const sameType = 'Dead-letter queue must be same type of queue as the source.';
      const range = (n) => `Invalid value for maxReceiveCount: ${n}, valid values are from 1 to 1000 both inclusive.`;
      const cases = [
        [src.url, { deadLetterTargetArn: fifoArn, maxReceiveCount: 3 }, sameType],
        [fifo.url, { deadLetterTargetArn: stdArn, maxReceiveCount: 3 }, sameType],
        [src.url, { deadLetterTargetArn: missingArn, maxReceiveCount: 3 }, 'Dead letter target does not exist.'],
        [src.url, { deadLetterTargetArn: stdArn, maxReceiveCount: 0 }, range(0)],
        [src.url, { deadLetterTargetArn: stdArn, maxReceiveCount: 1001 }, range(1001)],
      ];
      for (const [QueueUrl, doc, reason] of cases) {
        const RedrivePolicy = JSON.stringify(doc);
        await assertError(call('SetQueueAttributes', { QueueUrl, Attributes: { RedrivePolicy } }), {
          ...ERR.InvalidParameterValue,
          message: `Value ${RedrivePolicy} for parameter RedrivePolicy is invalid. Reason: ${reason}`,
        });
      }
      assert.equal((await attrs(src.url)).RedrivePolicy, undefined, 'no rejected policy was stored');
      assert.equal((await attrs(fifo.url)).RedrivePolicy, undefined);
      assert.deepEqual((await call('ListDeadLetterSourceQueues', { QueueUrl: stdDlq.url })).queueUrls, []);

      // The bounds and a string count are accepted and read back as AWS re-serialises them
      // (the count a number); "" removes the policy.
      for (const count of [1, 1000, '5']) {
        const RedrivePolicy = JSON.stringify({ deadLetterTargetArn: stdArn, maxReceiveCount: count });
        await call('SetQueueAttributes', { QueueUrl: src.url, Attributes: { RedrivePolicy } });
        const expected = JSON.stringify({ deadLetterTargetArn: stdArn, maxReceiveCount: Number(count) });
        assert.equal((await attrs(src.url, ['RedrivePolicy'])).RedrivePolicy, expected);
      }
      await call('SetQueueAttributes', { QueueUrl: src.url, Attributes: { RedrivePolicy: '' } });
      assert.equal((await attrs(src.url)).RedrivePolicy, undefined);
    });

    it('RedriveAllowPolicy denyAll refuses a source queue; byQueue naming it admits it', async () => {
      const dlq = await createQueue('radlq');
      const src = await createQueue('rasrc');
      const [dlqArn, srcArn] = [await arnOf(dlq.url), await arnOf(src.url)];
      const denyAll = JSON.stringify({ redrivePermission: 'denyAll' });
      await call('SetQueueAttributes', { QueueUrl: dlq.url, Attributes: { RedriveAllowPolicy: denyAll } });
      assert.equal((await attrs(dlq.url, ['RedriveAllowPolicy'])).RedriveAllowPolicy, denyAll);

      const RedrivePolicy = JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: 2 });
      await assertError(call('SetQueueAttributes', { QueueUrl: src.url, Attributes: { RedrivePolicy } }), {
        ...ERR.InvalidParameterValue,
        message: new RegExp(`^Value ${escapeRe(RedrivePolicy)} for parameter RedrivePolicy is invalid\\. Reason: .+`),
      });
      assert.equal((await attrs(src.url)).RedrivePolicy, undefined);
      assert.deepEqual((await call('ListDeadLetterSourceQueues', { QueueUrl: dlq.url })).queueUrls, []);

      const byQueue = JSON.stringify({ redrivePermission: 'byQueue', sourceQueueArns: [srcArn] });
      await call('SetQueueAttributes', { QueueUrl: dlq.url, Attributes: { RedriveAllowPolicy: byQueue } });
      await call('SetQueueAttributes', { QueueUrl: src.url, Attributes: { RedrivePolicy } });
      assert.equal((await attrs(src.url, ['RedrivePolicy'])).RedrivePolicy, RedrivePolicy);
      assert.deepEqual((await call('ListDeadLetterSourceQueues', { QueueUrl: dlq.url })).queueUrls, [src.url]);
    });

    it('ListDeadLetterSourceQueues lists every source, pages, and forgets removed policies and queues', async () => {
      const dlq = await createQueue('lsdlq');
      const dlqArn = await arnOf(dlq.url);
      const sources = [];
      for (const s of ['a', 'b', 'c']) {
        const q = await createQueue(`lssrc-${s}`);
        await setRedrive(q.url, dlqArn, 5);
        sources.push(q.url);
      }
      const unrelated = await createQueue('lsother');
      const all = await call('ListDeadLetterSourceQueues', { QueueUrl: dlq.url });
      assert.deepEqual([...all.queueUrls].sort(), [...sources].sort());
      assert.equal(all.NextToken, undefined);

      const pages = [];
      let NextToken;
      do {
        const out = await call('ListDeadLetterSourceQueues', { QueueUrl: dlq.url, MaxResults: 2, ...(NextToken ? { NextToken } : {}) });
        pages.push(out.queueUrls);
        NextToken = out.NextToken;
        assert.ok(pages.length <= 3, 'pagination does not terminate');
      } while (NextToken);
      assert.deepEqual(pages.map((p) => p.length), [2, 1]);
      assert.deepEqual(pages.flat().sort(), [...sources].sort());

      // A queue nobody dead-letters into: queueUrls is present and empty (§4).
      const none = await call('ListDeadLetterSourceQueues', { QueueUrl: unrelated.url });
      assert.deepEqual(none.queueUrls, []);
      if (none.$raw !== undefined) assert.ok('queueUrls' in JSON.parse(none.$raw), `queueUrls missing: ${none.$raw}`);

      await call('SetQueueAttributes', { QueueUrl: sources[1], Attributes: { RedrivePolicy: '' } });
      await call('DeleteQueue', { QueueUrl: sources[2] });
      assert.deepEqual((await call('ListDeadLetterSourceQueues', { QueueUrl: dlq.url })).queueUrls, [sources[0]]);
      await assertError(
        call('ListDeadLetterSourceQueues', { QueueUrl: server().queueUrl(uniqueName('ghost')) }),
        ERR.QueueDoesNotExist,
      );
    });
  });

  describe('message move tasks (§9.4)', () => {
    it('rate 1 on a frozen clock: one message at once, then one per advanced second, back to the source', async () => {
      const N = 4;
      const dlq = await createQueue('mtdlq');
      const src = await createQueue('mtsrc');
      const ids = await fillDlq(src.url, dlq.url, N);
      const dlqArn = await arnOf(dlq.url);

      await withFrozenClock(async () => {
        const { now_ms } = await server().clock();
        const { TaskHandle } = await call('StartMessageMoveTask', { SourceArn: dlqArn, MaxNumberOfMessagesPerSecond: 1 });
        const decoded = JSON.parse(Buffer.from(TaskHandle, 'base64').toString('utf8'));
        assert.equal(decoded.sourceArn, dlqArn, 'TaskHandle is base64 of {"taskId","sourceArn"}');
        assert.match(decoded.taskId, UUID_RE);

        let t = await waitTask(dlqArn, (x) => x.ApproximateNumberOfMessagesMoved >= 1, '1 moved');
        assert.equal(t.Status, 'RUNNING');
        assert.equal(t.TaskHandle, TaskHandle, 'TaskHandle is listed while RUNNING');
        assert.equal(t.SourceArn, dlqArn);
        assert.equal(t.ApproximateNumberOfMessagesToMove, N);
        assert.equal(t.MaxNumberOfMessagesPerSecond, 1);
        assert.equal(t.DestinationArn, undefined, 'no DestinationArn was given');
        assert.equal(t.FailureReason, undefined);
        assert.equal(typeof t.StartedTimestamp, 'number');
        assert.equal(t.StartedTimestamp, now_ms, 'StartedTimestamp is epoch ms on the (frozen) clock');

        await sleep(200);
        t = (await listTasks(dlqArn))[0];
        assert.equal(t.ApproximateNumberOfMessagesMoved, 1, 'no clock time passed, so nothing more moved');
        assert.deepEqual(await counts(src.url), { visible: 1, inFlight: 0, delayed: 0 });

        for (let moved = 2; moved <= N; moved += 1) {
          await server().advanceClock(1);
          await waitTask(dlqArn, (x) => x.ApproximateNumberOfMessagesMoved >= moved, `${moved} moved`);
          await sleep(30);
          t = (await listTasks(dlqArn))[0];
          assert.equal(t.ApproximateNumberOfMessagesMoved, moved, `exactly one more message for second ${moved - 1}`);
          if (moved < N) assert.equal(t.Status, 'RUNNING');
        }
        t = await waitTask(dlqArn, (x) => x.Status === 'COMPLETED', 'COMPLETED');
        assert.equal(t.ApproximateNumberOfMessagesMoved, N);
        assert.equal(t.ApproximateNumberOfMessagesToMove, N);
        assert.equal(t.TaskHandle, undefined, 'no TaskHandle once the task is over');
      });

      assert.deepEqual(await counts(dlq.url), { visible: 0, inFlight: 0, delayed: 0 });
      const back = await receiveAll(src.url, { MessageSystemAttributeNames: ['All'] });
      assert.equal(back.length, N);
      // sqsim keeps the MessageId (the reference leaves this UNVERIFIED; tests/it/redrive.rs relies on it).
      assert.deepEqual(back.map((m) => m.MessageId).sort(), [...ids].sort());
      for (const m of back) {
        assert.equal(m.Attributes.ApproximateReceiveCount, '1', 'a moved-back message starts a fresh receive count');
        assert.equal(m.Attributes.DeadLetterQueueSourceArn, undefined);
      }
    });

    it('without a destination each message returns to its own source queue', async () => {
      const dlq = await createQueue('mtmulti');
      const dlqArn = await arnOf(dlq.url);
      const a = await createQueue('mtsrc-a');
      const b = await createQueue('mtsrc-b');
      for (const q of [a, b]) {
        await setRedrive(q.url, dlqArn, 1);
        await call('SendMessage', { QueueUrl: q.url, MessageBody: `from ${q.name}` });
        assert.equal((await receiveAll(q.url, { VisibilityTimeout: 0 })).length, 1);
        assert.deepEqual(await receiveAll(q.url, { VisibilityTimeout: 0 }), []);
      }
      const inDlq = await receiveAll(dlq.url, { VisibilityTimeout: 0, MessageSystemAttributeNames: ['DeadLetterQueueSourceArn'] });
      assert.deepEqual(
        inDlq.map((m) => m.Attributes.DeadLetterQueueSourceArn).sort(),
        [await arnOf(a.url), await arnOf(b.url)].sort(),
      );
      await call('StartMessageMoveTask', { SourceArn: dlqArn });
      const t = await waitTask(dlqArn, (x) => x.Status === 'COMPLETED', 'COMPLETED');
      assert.equal(t.ApproximateNumberOfMessagesMoved, 2);
      assert.equal(t.MaxNumberOfMessagesPerSecond, undefined, 'no rate was given');
      for (const q of [a, b]) {
        assert.deepEqual((await receiveAll(q.url)).map((m) => m.Body), [`from ${q.name}`]);
      }
      assert.deepEqual(await counts(dlq.url), { visible: 0, inFlight: 0, delayed: 0 });
    });

    it('cancellation mid-way: CANCELLED, moved ones stay moved, the rest stays in the DLQ; listing', async () => {
      const dlq = await createQueue('mcdlq');
      const src = await createQueue('mcsrc');
      const other = await createQueue('mcother');
      await fillDlq(src.url, dlq.url, 5);
      const [dlqArn, otherArn] = [await arnOf(dlq.url), await arnOf(other.url)];

      await withFrozenClock(async () => {
        const { TaskHandle } = await call('StartMessageMoveTask', { SourceArn: dlqArn, MaxNumberOfMessagesPerSecond: 1 });
        await waitTask(dlqArn, (x) => x.ApproximateNumberOfMessagesMoved >= 1, '1 moved');
        await server().advanceClock(1);
        await waitTask(dlqArn, (x) => x.ApproximateNumberOfMessagesMoved >= 2, '2 moved');
        const cancelled = await call('CancelMessageMoveTask', { TaskHandle });
        assert.equal(cancelled.ApproximateNumberOfMessagesMoved, 2);
        let t = await waitTask(dlqArn, (x) => x.Status === 'CANCELLED', 'CANCELLED');
        assert.equal(t.ApproximateNumberOfMessagesMoved, 2);
        assert.equal(t.ApproximateNumberOfMessagesToMove, 5);
        assert.equal(t.TaskHandle, undefined, 'no TaskHandle once cancelled');

        await server().advanceClock(10);
        await sleep(100);
        t = (await listTasks(dlqArn))[0];
        assert.equal(t.Status, 'CANCELLED');
        assert.equal(t.ApproximateNumberOfMessagesMoved, 2, 'a cancelled task moves nothing more');
        assert.deepEqual(await counts(src.url), { visible: 2, inFlight: 0, delayed: 0 });
        assert.deepEqual(await counts(dlq.url), { visible: 3, inFlight: 0, delayed: 0 }, 'the rest stays in the DLQ');
        // Only RUNNING tasks can be cancelled.
        await assertError(call('CancelMessageMoveTask', { TaskHandle }), ERR.InvalidParameterValue);

        // A second task with an explicit destination and no rate runs to completion at once.
        await call('StartMessageMoveTask', { SourceArn: dlqArn, DestinationArn: otherArn });
        t = await waitTask(dlqArn, (x) => x.Status === 'COMPLETED', 'COMPLETED');
        assert.equal(t.DestinationArn, otherArn);
        assert.equal(t.ApproximateNumberOfMessagesMoved, 3);
        assert.equal(t.ApproximateNumberOfMessagesToMove, 3, 'the DLQ size when the task started');
        assert.equal(t.MaxNumberOfMessagesPerSecond, undefined);
        assert.equal(t.TaskHandle, undefined);
        assert.equal(t.FailureReason, undefined);
      });
      assert.deepEqual(await counts(other.url), { visible: 3, inFlight: 0, delayed: 0 });
      assert.deepEqual(await counts(dlq.url), { visible: 0, inFlight: 0, delayed: 0 });

      // Newest first; MaxResults defaults to 1.
      const all = await listTasks(dlqArn, 10);
      assert.deepEqual(all.map((x) => x.Status), ['COMPLETED', 'CANCELLED']);
      assert.ok(all[0].StartedTimestamp >= all[1].StartedTimestamp + 11_000, 'the second task started 11 clock seconds later');
      const dflt = await listTasks(dlqArn);
      assert.equal(dflt.length, 1);
      assert.equal(dflt[0].Status, 'COMPLETED');
    });

    it('errors: unknown source or destination (404), not a DLQ, a second running task, bad handles', async () => {
      const dlq = await createQueue('medlq');
      const src = await createQueue('mesrc');
      await fillDlq(src.url, dlq.url, 3);
      const [dlqArn, srcArn] = [await arnOf(dlq.url), await arnOf(src.url)];
      const ghostArn = `arn:aws:sqs:${REGION}:${ACCOUNT}:${uniqueName('ghost')}`;

      await assertError(call('StartMessageMoveTask', { SourceArn: ghostArn }), {
        ...ERR.ResourceNotFoundException,
        message: "The resource that you specified for the SourceArn parameter doesn't exist.",
      });
      await assertError(call('StartMessageMoveTask', { SourceArn: srcArn }), {
        ...ERR.InvalidParameterValue,
        message: 'Source queue must be configured as a Dead Letter Queue.',
      });
      await assertError(call('StartMessageMoveTask', { SourceArn: dlqArn, DestinationArn: ghostArn }), {
        ...ERR.ResourceNotFoundException,
        message: "The resource that you specified for the DestinationArn parameter doesn't exist.",
      });
      await assertError(call('StartMessageMoveTask', { SourceArn: dlqArn, MaxNumberOfMessagesPerSecond: 501 }), ERR.InvalidParameterValue);
      assertOmitted(await call('ListMessageMoveTasks', { SourceArn: dlqArn }), 'Results');

      await withFrozenClock(async () => {
        const { TaskHandle } = await call('StartMessageMoveTask', { SourceArn: dlqArn, MaxNumberOfMessagesPerSecond: 1 });
        await waitTask(dlqArn, (x) => x.ApproximateNumberOfMessagesMoved >= 1, '1 moved');
        const already =
          'There is already a task running. Only one active task is allowed for a source queue arn at a given time.';
        await assertError(call('StartMessageMoveTask', { SourceArn: dlqArn }), { ...ERR.InvalidParameterValue, message: already });
        await assertError(call('StartMessageMoveTask', { SourceArn: dlqArn, DestinationArn: srcArn }), {
          ...ERR.InvalidParameterValue,
          message: already,
        });
        assert.equal((await listTasks(dlqArn, 10)).length, 1, 'the refused starts created no tasks');

        await assertError(call('CancelMessageMoveTask', { TaskHandle: 'not-a-handle' }), {
          ...ERR.InvalidParameterValue,
          message: 'Value for parameter TaskHandle is invalid.',
        });
        const unknownTask = Buffer.from(JSON.stringify({ taskId: 'x', sourceArn: dlqArn })).toString('base64');
        await assertError(call('CancelMessageMoveTask', { TaskHandle: unknownTask }), {
          ...ERR.ResourceNotFoundException,
          message: 'Task does not exist.',
        });
        const unknownSource = Buffer.from(JSON.stringify({ taskId: 'x', sourceArn: ghostArn })).toString('base64');
        await assertError(call('CancelMessageMoveTask', { TaskHandle: unknownSource }), {
          ...ERR.ResourceNotFoundException,
          message: "The resource that you specified for the SourceArn parameter doesn't exist.",
        });

        await call('CancelMessageMoveTask', { TaskHandle });
        await waitTask(dlqArn, (x) => x.Status === 'CANCELLED', 'CANCELLED');
      });
      // Once the first task is over, a new one may start.
      await call('StartMessageMoveTask', { SourceArn: dlqArn });
      const t = await waitTask(dlqArn, (x) => x.Status === 'COMPLETED', 'COMPLETED');
      assert.equal(t.ApproximateNumberOfMessagesMoved, 2);
      assert.deepEqual(await counts(src.url), { visible: 3, inFlight: 0, delayed: 0 });
    });
  });

  describe('AddPermission / RemovePermission (§11.2)', () => {
    it('round-trips statements through the Policy attribute; 8 actions are OverLimit', async () => {
      const { url } = await createQueue('perm');
      const arn = await arnOf(url);
      const policy = async () => {
        const p = (await attrs(url, ['All'])).Policy;
        return p === undefined ? undefined : JSON.parse(p);
      };
      await call('AddPermission', { QueueUrl: url, Label: 'one', AWSAccountIds: ['111122223333'], Actions: ['ReceiveMessage'] });
      await call('AddPermission', {
        QueueUrl: url,
        Label: 'two',
        AWSAccountIds: ['111122223333', '444455556666'],
        Actions: ['SendMessage', 'DeleteMessage'],
      });
      const one = {
        Sid: 'one',
        Effect: 'Allow',
        Principal: { AWS: 'arn:aws:iam::111122223333:root' },
        Action: 'SQS:ReceiveMessage',
        Resource: arn,
      };
      const two = {
        Sid: 'two',
        Effect: 'Allow',
        Principal: { AWS: ['arn:aws:iam::111122223333:root', 'arn:aws:iam::444455556666:root'] },
        Action: ['SQS:SendMessage', 'SQS:DeleteMessage'],
        Resource: arn,
      };
      assert.deepEqual(await policy(), { Version: '2008-10-17', Id: `${arn}/SQSDefaultPolicy`, Statement: [one, two] });

      const eight = [
        'ChangeMessageVisibility',
        'DeleteMessage',
        'GetQueueAttributes',
        'GetQueueUrl',
        'ListDeadLetterSourceQueues',
        'PurgeQueue',
        'ReceiveMessage',
        'SendMessage',
      ];
      await assertError(call('AddPermission', { QueueUrl: url, Label: 'many', AWSAccountIds: ['111122223333'], Actions: eight }), {
        ...ERR.OverLimit,
        message: '8 Actions were found, maximum allowed is 7.',
      });
      await call('AddPermission', { QueueUrl: url, Label: 'seven', AWSAccountIds: ['111122223333'], Actions: eight.slice(0, 7) });
      const seven = (await policy()).Statement.find((s) => s.Sid === 'seven');
      assert.deepEqual(seven.Action, eight.slice(0, 7).map((a) => `SQS:${a}`), '7 actions are allowed');
      assert.deepEqual((await policy()).Statement.map((s) => s.Sid), ['one', 'two', 'seven'], 'nothing of "many" was stored');

      await assertError(call('AddPermission', { QueueUrl: url, Label: 'one', AWSAccountIds: ['111122223333'], Actions: ['SendMessage'] }), {
        ...ERR.InvalidParameterValue,
        message: 'Value one for parameter Label is invalid. Reason: Already exists.',
      });

      await call('RemovePermission', { QueueUrl: url, Label: 'one' });
      assert.deepEqual((await policy()).Statement.map((s) => s.Sid), ['two', 'seven']);
      assert.deepEqual((await policy()).Statement[0], two);
      await assertError(call('RemovePermission', { QueueUrl: url, Label: 'one' }), {
        ...ERR.InvalidParameterValue,
        message: "Value one for parameter Label is invalid. Reason: can't find label.",
      });
      await call('RemovePermission', { QueueUrl: url, Label: 'two' });
      await call('RemovePermission', { QueueUrl: url, Label: 'seven' });
      assert.equal(await policy(), undefined, 'removing the last statement deletes Policy');
    });
  });

  describe('deleted queues (§3.4)', () => {
    it('QueueDeletedRecently for 60 s after DeleteQueue, then the name is free again', async () => {
      await withFrozenClock(async () => {
        const { name, url } = await createQueue('gone', { VisibilityTimeout: '45' });
        await call('SendMessage', { QueueUrl: url, MessageBody: 'left behind' });
        await call('DeleteQueue', { QueueUrl: url });
        const recently = {
          ...ERR.QueueDeletedRecently,
          message: 'You must wait 60 seconds after deleting a queue before you can create another with the same name.',
        };
        await assertError(call('CreateQueue', { QueueName: name }), recently);
        await assertError(call('CreateQueue', { QueueName: name, Attributes: { VisibilityTimeout: '45' } }), recently);
        await assertError(call('GetQueueUrl', { QueueName: name }), ERR.QueueDoesNotExist);
        const unrelated = await createQueue('gone-other');
        assert.equal(unrelated.url, server().queueUrl(unrelated.name), 'other names are not blocked');

        await server().advanceClock(59);
        await assertError(call('CreateQueue', { QueueName: name }), recently);
        await server().advanceClock(1);
        const again = await call('CreateQueue', { QueueName: name });
        assert.equal(again.QueueUrl, url);
        assert.deepEqual(await counts(url), { visible: 0, inFlight: 0, delayed: 0 }, 'a new, empty queue');
        assert.equal((await attrs(url, ['VisibilityTimeout'])).VisibilityTimeout, '30', 'with default attributes');
      });
    });
  });

  describe('all 23 actions', () => {
    it('every SQS action answers successfully', async () => {
      const used = new Set();
      const run = async (op, input) => {
        const out = await call(op, input);
        used.add(op);
        return out;
      };
      const prefix = uniqueName('all23');
      const dlqName = `${prefix}-dlq`;
      const srcName = `${prefix}-src`;
      const dlqUrl = (await run('CreateQueue', { QueueName: dlqName })).QueueUrl;
      assert.equal(dlqUrl, server().queueUrl(dlqName));
      const created = await run('CreateQueue', { QueueName: srcName, tags: { stage: 'all' } });
      const srcUrl = (await run('GetQueueUrl', { QueueName: srcName })).QueueUrl;
      assert.equal(srcUrl, created.QueueUrl);
      const listed = await run('ListQueues', { QueueNamePrefix: prefix });
      assert.deepEqual([...listed.QueueUrls].sort(), [dlqUrl, srcUrl].sort());

      const dlqArn = (await run('GetQueueAttributes', { QueueUrl: dlqUrl, AttributeNames: ['QueueArn'] })).Attributes.QueueArn;
      assert.equal(dlqArn, `arn:aws:sqs:${REGION}:${ACCOUNT}:${dlqName}`);
      const RedrivePolicy = JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: 1 });
      await run('SetQueueAttributes', { QueueUrl: srcUrl, Attributes: { RedrivePolicy, VisibilityTimeout: '60' } });
      assert.deepEqual(await attrs(srcUrl, ['RedrivePolicy', 'VisibilityTimeout']), { RedrivePolicy, VisibilityTimeout: '60' });

      await run('TagQueue', { QueueUrl: srcUrl, Tags: { team: 'sqsim' } });
      assert.deepEqual((await run('ListQueueTags', { QueueUrl: srcUrl })).Tags, { stage: 'all', team: 'sqsim' });
      await run('UntagQueue', { QueueUrl: srcUrl, TagKeys: ['stage'] });
      assert.deepEqual((await call('ListQueueTags', { QueueUrl: srcUrl })).Tags, { team: 'sqsim' });

      await run('AddPermission', { QueueUrl: srcUrl, Label: 'all23', AWSAccountIds: ['111122223333'], Actions: ['SendMessage'] });
      assert.deepEqual(JSON.parse((await attrs(srcUrl, ['Policy'])).Policy).Statement.map((s) => s.Sid), ['all23']);
      await run('RemovePermission', { QueueUrl: srcUrl, Label: 'all23' });
      assert.equal((await attrs(srcUrl)).Policy, undefined);

      const single = await run('SendMessage', { QueueUrl: srcUrl, MessageBody: 'm0' });
      assert.equal(single.MD5OfMessageBody, md5Hex('m0'));
      const batch = await run('SendMessageBatch', {
        QueueUrl: srcUrl,
        Entries: ['m1', 'm2', 'm3'].map((MessageBody, i) => ({ Id: `e${i + 1}`, MessageBody })),
      });
      assert.deepEqual(batch.Successful.map((e) => e.Id).sort(), ['e1', 'e2', 'e3']);
      const got = await run('ReceiveMessage', { QueueUrl: srcUrl, MaxNumberOfMessages: 10 });
      const byBody = Object.fromEntries(got.Messages.map((m) => [m.Body, m]));
      assert.deepEqual(Object.keys(byBody).sort(), ['m0', 'm1', 'm2', 'm3']);
      assert.equal(byBody.m0.MessageId, single.MessageId);

      await run('DeleteMessage', { QueueUrl: srcUrl, ReceiptHandle: byBody.m0.ReceiptHandle });
      const deleted = await run('DeleteMessageBatch', {
        QueueUrl: srcUrl,
        Entries: [{ Id: 'd1', ReceiptHandle: byBody.m1.ReceiptHandle }],
      });
      assert.deepEqual(deleted.Successful.map((e) => e.Id), ['d1']);
      await run('ChangeMessageVisibility', { QueueUrl: srcUrl, ReceiptHandle: byBody.m2.ReceiptHandle, VisibilityTimeout: 0 });
      const changed = await run('ChangeMessageVisibilityBatch', {
        QueueUrl: srcUrl,
        Entries: [{ Id: 'c3', ReceiptHandle: byBody.m3.ReceiptHandle, VisibilityTimeout: 0 }],
      });
      assert.deepEqual(changed.Successful.map((e) => e.Id), ['c3']);
      // m2 and m3 are visible again after one receive: maxReceiveCount 1 dead-letters them now.
      assertOmitted(await call('ReceiveMessage', { QueueUrl: srcUrl, MaxNumberOfMessages: 10 }), 'Messages');
      assert.deepEqual(await counts(dlqUrl), { visible: 2, inFlight: 0, delayed: 0 });
      assert.deepEqual((await run('ListDeadLetterSourceQueues', { QueueUrl: dlqUrl })).queueUrls, [srcUrl]);

      await withFrozenClock(async () => {
        const { TaskHandle } = await run('StartMessageMoveTask', { SourceArn: dlqArn, MaxNumberOfMessagesPerSecond: 1 });
        await waitTask(dlqArn, (x) => x.ApproximateNumberOfMessagesMoved >= 1, '1 moved');
        const tasks = await run('ListMessageMoveTasks', { SourceArn: dlqArn });
        assert.equal(tasks.Results.length, 1);
        assert.equal(tasks.Results[0].Status, 'RUNNING');
        assert.equal(tasks.Results[0].TaskHandle, TaskHandle);
        const cancelled = await run('CancelMessageMoveTask', { TaskHandle });
        assert.equal(cancelled.ApproximateNumberOfMessagesMoved, 1);
        await waitTask(dlqArn, (x) => x.Status === 'CANCELLED', 'CANCELLED');
      });
      assert.deepEqual(await counts(srcUrl), { visible: 1, inFlight: 0, delayed: 0 });
      assert.deepEqual(await counts(dlqUrl), { visible: 1, inFlight: 0, delayed: 0 });

      await run('PurgeQueue', { QueueUrl: dlqUrl });
      assert.deepEqual(await counts(dlqUrl), { visible: 0, inFlight: 0, delayed: 0 });
      await run('DeleteQueue', { QueueUrl: srcUrl });
      await run('DeleteQueue', { QueueUrl: dlqUrl });
      await assertError(call('GetQueueUrl', { QueueName: srcName }), ERR.QueueDoesNotExist);
      assertOmitted(await call('ListQueues', { QueueNamePrefix: prefix }), 'QueueUrls');

      assert.deepEqual([...used].sort(), [...ALL_ACTIONS].sort());
      assert.equal(used.size, 23);
    });
  });
}
