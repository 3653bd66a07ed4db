// The web console in a real headless Chromium (the system's, driven by puppeteer-core):
// queues and counts through the SDK, then what the page shows and does, checked through the
// SDK again. CHROMIUM_BIN names the browser (default: `chromium` on PATH). The screenshots of
// docs/ come from screenshots.mjs (`make screenshots`).

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import * as sqs from '@aws-sdk/client-sqs';

import { ACCOUNT, REGION, launchChromium, startServer, v3Client } from './helpers.mjs';

const WAIT = { timeout: 10_000 };

describe('web console', () => {
  let server;
  let client;
  let browser;
  let page;
  const dialogs = [];

  before(async () => {
    server = await startServer();
    client = await v3Client(server.endpoint);
    browser = await launchChromium();
    page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 900 });
    page.on('dialog', async (d) => {
      dialogs.push(d.message());
      await d.accept();
    });
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  async function createQueue(name, attributes) {
    const r = await client.send(new sqs.CreateQueueCommand({ QueueName: name, Attributes: attributes }));
    return r.QueueUrl;
  }

  async function counts(url) {
    const r = await client.send(new sqs.GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['All'] }));
    return {
      visible: Number(r.Attributes.ApproximateNumberOfMessages),
      inFlight: Number(r.Attributes.ApproximateNumberOfMessagesNotVisible),
      arn: r.Attributes.QueueArn,
    };
  }

  /** The text of a cell of the queue list. */
  function cell(queue, col) {
    return page.$eval(`tr[data-queue="${queue}"] td[data-col="${col}"]`, (td) => td.textContent);
  }

  async function waitForCell(queue, col, want) {
    await page.waitForFunction(
      (q, c, w) => document.querySelector(`tr[data-queue="${q}"] td[data-col="${c}"]`)?.textContent === w,
      WAIT,
      queue,
      col,
      String(want),
    );
  }

  async function openQueue(name) {
    await page.goto(`${server.endpoint}/_sqsim/console#/queue/${ACCOUNT}/${REGION}/${name}`);
    await page.waitForSelector(`main[data-view="queue:${ACCOUNT}/${REGION}/${name}"]`, WAIT);
  }

  it('a browser opening the root is sent to the console', async () => {
    const res = await page.goto(`${server.endpoint}/`);
    assert.equal(new URL(res.url()).pathname, '/_sqsim/console');
    assert.equal(await page.title(), 'sqsim console');
  });

  it('lists queues with their counts, and a count updates without a reload', async () => {
    const url = await createQueue('console-list');
    await createQueue('console-other');
    for (let i = 0; i < 3; i += 1) {
      await client.send(new sqs.SendMessageCommand({ QueueUrl: url, MessageBody: `m${i}` }));
    }
    await client.send(new sqs.ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 1 }));
    await page.goto(`${server.endpoint}/_sqsim/console`);
    await waitForCell('console-list', 'visible', 2);
    assert.equal(await cell('console-list', 'in_flight'), '1');
    assert.equal(await cell('console-list', 'delayed'), '0');
    assert.equal(await cell('console-other', 'visible'), '0');

    const reloads = [];
    page.on('load', () => reloads.push(Date.now()));
    await client.send(new sqs.SendMessageCommand({ QueueUrl: url, MessageBody: 'live' }));
    await waitForCell('console-list', 'visible', 3);
    assert.deepEqual(reloads, [], 'the count changed without a reload');

    // The filter narrows the list.
    await page.type('#filter', 'other');
    await page.waitForFunction(() => !document.querySelector('tr[data-queue="console-list"]'), WAIT);
    assert.ok(await page.$('tr[data-queue="console-other"]'));
    await page.$eval('#filter', (el) => {
      el.value = '';
      el.dispatchEvent(new Event('input'));
    });
    await page.waitForSelector('tr[data-queue="console-list"]', WAIT);
  });

  it('shows messages without receiving them', async () => {
    const url = await createQueue('console-peek');
    const trace = 'Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1';
    await client.send(new sqs.SendMessageCommand({
      QueueUrl: url,
      MessageBody: JSON.stringify({ order: 7, items: ['a', 'b'] }),
      MessageAttributes: { kind: { DataType: 'String', StringValue: 'order' } },
      MessageSystemAttributes: { AWSTraceHeader: { DataType: 'String', StringValue: trace } },
    }));
    await openQueue('console-peek');
    await page.waitForSelector('#message-rows tr[data-message-id]', WAIT);
    const body = await page.$eval('#message-rows tr[data-message-id] pre', (el) => el.textContent);
    assert.match(body, /"order": 7/, 'JSON bodies are pretty-printed');
    const row = await page.$eval('#message-rows tr[data-message-id]', (tr) => tr.textContent);
    assert.match(row, /kind/);
    assert.match(row, /SentTimestamp/, 'system attributes are shown');
    const system = await page.$eval('#message-rows tr[data-message-id] dl.system', (dl) => Object.fromEntries(
      [...dl.querySelectorAll('dt')].map((dt) => [dt.textContent, dt.nextElementSibling.textContent])));
    assert.equal(system.SenderId, ACCOUNT, 'the sender is the account that sent');
    assert.equal(system.AWSTraceHeader, trace);
    const text = await page.$eval('main', (m) => m.textContent);
    assert.doesNotMatch(text, /null|undefined/, 'no placeholder leaks into the page');
    assert.equal(await page.$eval('#message-rows td[data-col="receives"]', (td) => td.textContent), '0');
    // Several refreshes later, nothing was received: still visible, never received.
    await new Promise((r) => setTimeout(r, 2500));
    const c = await counts(url);
    assert.equal(c.visible, 1);
    assert.equal(c.inFlight, 0);
    const got = await client.send(new sqs.ReceiveMessageCommand({
      QueueUrl: url, MessageSystemAttributeNames: ['ApproximateReceiveCount'],
    }));
    assert.equal(got.Messages[0].Attributes.ApproximateReceiveCount, '1', 'the console never received it');
  });

  it('reads a message: one line until opened, typed attributes, times relative to the clock', async () => {
    const url = await createQueue('console-read');
    await client.send(new sqs.SendMessageCommand({
      QueueUrl: url,
      MessageBody: JSON.stringify({ order: 8, lines: Array.from({ length: 20 }, (_, i) => `line ${i}`) }),
      MessageAttributes: {
        weight: { DataType: 'Number', StringValue: '2.5' },
        blob: { DataType: 'Binary', BinaryValue: Uint8Array.from([0, 1, 2, 255]) },
        kind: { DataType: 'String.custom', StringValue: 'order' },
      },
    }));
    await client.send(new sqs.ReceiveMessageCommand({ QueueUrl: url, VisibilityTimeout: 120 }));
    await openQueue('console-read');
    await page.waitForSelector('#message-rows tr[data-message-id] details.body', WAIT);
    const collapsed = await page.$eval('#message-rows details.body', (d) => ({
      open: d.open, summary: d.querySelector('summary').textContent, height: d.getBoundingClientRect().height,
    }));
    assert.equal(collapsed.open, false);
    assert.match(collapsed.summary, /^\{"order":8,"lines":\["line 0".*…/, 'one line, cut short');
    assert.ok(collapsed.height < 40, `one line high, got ${collapsed.height}px`);
    await page.click('#message-rows details.body summary');
    // Opened, it stays open through the page's refreshes (every second).
    await new Promise((r) => setTimeout(r, 1500));
    const opened = await page.$eval('#message-rows details.body', (d) => ({
      open: d.open, pre: d.querySelector('pre').textContent,
    }));
    assert.equal(opened.open, true);
    assert.match(opened.pre, /\n {2}"order": 8,/, 'pretty-printed when opened');
    const attrs = await page.$eval('#message-rows tr[data-message-id] td:nth-child(4) dl', (dl) => Object.fromEntries(
      [...dl.querySelectorAll(':scope > dt')].map((dt) => [dt.textContent, dt.nextElementSibling.textContent])));
    assert.equal(attrs.weight, '2.5 · Number');
    assert.equal(attrs.kind, 'order · String.custom');
    assert.equal(attrs.blob, 'AAEC/w== · Binary, 4 B');
    const state = await page.$eval('#message-rows td[data-col="state"]', (td) => ({
      text: td.textContent, iso: td.querySelector('time')?.getAttribute('title'),
    }));
    assert.match(state.text, /^in flight, again visible in (1\.\d|2\.0) min$/);
    assert.ok(state.iso && !Number.isNaN(Date.parse(state.iso)), 'the exact time on hover');
  });

  it('pages through a big queue', async () => {
    const url = await createQueue('console-paging');
    for (let b = 0; b < 6; b += 1) {
      await client.send(new sqs.SendMessageBatchCommand({
        QueueUrl: url,
        Entries: Array.from({ length: 10 }, (_, i) => ({ Id: `e${i}`, MessageBody: `m${b * 10 + i}` })),
      }));
    }
    await openQueue('console-paging');
    await page.waitForFunction(() => document.querySelectorAll('#message-rows tr[data-message-id]').length === 50, WAIT);
    assert.equal(await page.$eval('#page-info', (el) => el.textContent), '1–50 of 60');
    await page.click('#next-page');
    await page.waitForFunction(() => document.querySelectorAll('#message-rows tr[data-message-id]').length === 10, WAIT);
    assert.equal(await page.$eval('#page-info', (el) => el.textContent), '51–60 of 60');
    await page.click('#prev-page');
    await page.waitForFunction(() => document.querySelectorAll('#message-rows tr[data-message-id]').length === 50, WAIT);
  });

  it('searches 10,000 messages by body, id, attribute and group without changing a count', async () => {
    const url = await createQueue('console-search');
    const sends = [];
    for (let b = 0; b < 1000; b += 1) {
      sends.push(client.send(new sqs.SendMessageBatchCommand({
        QueueUrl: url,
        Entries: Array.from({ length: 10 }, (_, i) => {
          const n = b * 10 + i;
          const kind = n % 2500 === 7 ? 'rare' : 'bulk';
          return {
            Id: `e${i}`,
            MessageBody: `order-${n}`,
            MessageAttributes: { kind: { DataType: 'String', StringValue: kind } },
          };
        }),
      })));
      if (sends.length === 50) await Promise.all(sends.splice(0));
    }
    await Promise.all(sends);
    const before = await counts(url);
    assert.equal(before.visible, 10_000);

    const rows = () => page.$$eval('#message-rows tr[data-message-id]', (trs) => trs.map((tr) => ({
      id: tr.dataset.messageId, body: tr.querySelector('td[data-col="body"] pre').textContent,
    })));
    async function find(field, text) {
      await page.select('#search-field', field);
      await page.$eval('#search-text', (el, v) => { el.value = v; }, text);
      await page.click('#search-form button[type="submit"]');
      await page.waitForFunction((v) => document.querySelector('#page-info')?.textContent.includes('searched')
        && document.querySelector('#search-text').value === v, WAIT, text);
    }

    await openQueue('console-search');
    await find('q', 'order-9999');
    await page.waitForFunction(() => document.querySelectorAll('#message-rows tr[data-message-id]').length === 1, WAIT);
    const [last] = await rows();
    assert.equal(last.body, 'order-9999');
    assert.match(await page.$eval('#page-info', (el) => el.textContent), /searched 10000 of 10000/);

    await find('id', last.id.slice(0, 13));
    await page.waitForFunction((id) => [...document.querySelectorAll('#message-rows tr[data-message-id]')]
      .some((tr) => tr.dataset.messageId === id), WAIT, last.id);

    await find('attribute', 'kind=rare');
    await page.waitForFunction(() => document.querySelectorAll('#message-rows tr[data-message-id]').length === 4, WAIT);
    assert.deepEqual((await rows()).map((r) => r.body), ['order-7', 'order-2507', 'order-5007', 'order-7507']);

    await find('q', 'no-such-order');
    await page.waitForSelector('#message-rows tr.empty', WAIT);
    assert.equal(await page.$eval('#next-page', (b) => b.disabled), true);

    const after = await counts(url);
    assert.deepEqual(after, before, 'searching received nothing');

    const fifo = await createQueue('console-search.fifo', { FifoQueue: 'true', ContentBasedDeduplication: 'true' });
    for (let i = 0; i < 12; i += 1) {
      await client.send(new sqs.SendMessageCommand({ QueueUrl: fifo, MessageBody: `f${i}`, MessageGroupId: `g${i % 3}` }));
    }
    await openQueue('console-search.fifo');
    await find('group', 'g2');
    await page.waitForFunction(() => document.querySelectorAll('#message-rows tr[data-message-id]').length === 4, WAIT);
    assert.deepEqual((await rows()).map((r) => r.body), ['f2', 'f5', 'f8', 'f11']);
  });

  it('sends, deletes and purges', async () => {
    const url = await createQueue('console-actions');
    await openQueue('console-actions');
    await page.type('#send-form textarea[name="body"]', 'from the console');
    await page.type('#send-form input[name="attributes"]', '{"source": "console"}');
    await page.click('#send-form button[type="submit"]');
    await page.waitForSelector('#message-rows tr[data-message-id]', WAIT);
    const got = await client.send(new sqs.ReceiveMessageCommand({
      QueueUrl: url, MessageAttributeNames: ['All'], VisibilityTimeout: 0,
    }));
    assert.equal(got.Messages[0].Body, 'from the console');
    assert.equal(got.Messages[0].MessageAttributes.source.StringValue, 'console');

    await page.click('#message-rows tr[data-message-id] button[aria-label^="Delete message"]');
    await page.waitForFunction(() => document.querySelectorAll('#message-rows tr[data-message-id]').length === 0, WAIT);
    assert.equal((await counts(url)).visible, 0);
    assert.ok(dialogs.some((d) => d.includes('Delete this message')));

    for (let i = 0; i < 4; i += 1) {
      await client.send(new sqs.SendMessageCommand({ QueueUrl: url, MessageBody: `p${i}` }));
    }
    await page.waitForFunction(() => document.querySelectorAll('#message-rows tr[data-message-id]').length === 4, WAIT);
    await page.click('#purge');
    await page.waitForFunction(() => document.querySelectorAll('#message-rows tr[data-message-id]').length === 0, WAIT);
    assert.match(dialogs.at(-1), /^Purge every message of console-actions\?$/, 'a purge asks first');
    const c = await counts(url);
    assert.equal(c.visible + c.inFlight, 0);
  });

  it('creates, edits and deletes a queue, sends typed attributes, deletes selected messages', async () => {
    const toastText = () => page.$eval('#toast', (t) => t.textContent);
    await page.goto(`${server.endpoint}/_sqsim/console#/`);
    await page.waitForSelector('main[data-view="queues"]', WAIT);
    // CreateQueue's own checks answer: a bad name is refused with SQS's error.
    await page.type('#create-form input[name="name"]', 'bad name!');
    await page.click('#create-form button[type="submit"]');
    await page.waitForFunction(() => /InvalidParameterValue/.test(document.querySelector('#toast').textContent), WAIT);
    await page.$eval('#create-form input[name="name"]', (el) => { el.value = 'console-made.fifo'; });
    await page.type('#create-form input[name="attributes"]', '{"VisibilityTimeout": 45, "ContentBasedDeduplication": true}');
    await page.click('#create-form button[type="submit"]');
    await waitForCell('console-made.fifo', 'visible', 0);
    const { QueueUrl: url } = await client.send(new sqs.GetQueueUrlCommand({ QueueName: 'console-made.fifo' }));
    const made = await client.send(new sqs.GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['All'] }));
    assert.equal(made.Attributes.VisibilityTimeout, '45');
    assert.equal(made.Attributes.FifoQueue, 'true');
    assert.equal(made.Attributes.ContentBasedDeduplication, 'true');

    await openQueue('console-made.fifo');
    await page.click('#edit-attributes summary');
    await page.$eval('#edit-form input[name="VisibilityTimeout"]', (el) => { el.value = '77'; });
    await page.click('#edit-form button[type="submit"]');
    await page.waitForFunction(() => /Saved VisibilityTimeout/.test(document.querySelector('#toast').textContent), WAIT);
    const edited = await client.send(new sqs.GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['VisibilityTimeout'] }));
    assert.equal(edited.Attributes.VisibilityTimeout, '77');
    await openQueue('console-made.fifo');
    await page.click('#edit-attributes summary');
    await page.$eval('#edit-form input[name="RedrivePolicy"]', (el) => {
      el.value = '{"deadLetterTargetArn": "arn:aws:sqs:us-east-1:000000000000:missing.fifo", "maxReceiveCount": 3}';
    });
    await page.click('#edit-form button[type="submit"]');
    await page.waitForFunction(() => /InvalidParameterValue/.test(document.querySelector('#toast').textContent), WAIT);
    const unchanged = await client.send(new sqs.GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['All'] }));
    assert.equal(unchanged.Attributes.RedrivePolicy, undefined, 'a refused change changes nothing');

    // Typed attributes: a Number, a Binary (base64) and a custom String type.
    await page.type('#send-form textarea[name="body"]', 'typed');
    await page.type('#send-form input[name="group"]', 'g');
    await page.$eval('#send-form input[name="attributes"]', (el) => {
      el.value = JSON.stringify({
        weight: { DataType: 'Number', StringValue: '2.5' },
        blob: { DataType: 'Binary', BinaryValue: 'AAEC/w==' },
        kind: { DataType: 'String.order', StringValue: 'x' },
      });
    });
    await page.click('#send-form button[type="submit"]');
    await page.waitForSelector('#message-rows tr[data-message-id]', WAIT);
    for (const body of ['two', 'three']) {
      await client.send(new sqs.SendMessageCommand({ QueueUrl: url, MessageBody: body, MessageGroupId: 'g' }));
    }
    const got = await client.send(new sqs.ReceiveMessageCommand({
      QueueUrl: url, MessageAttributeNames: ['All'], VisibilityTimeout: 0,
    }));
    const a = got.Messages[0].MessageAttributes;
    assert.equal(got.Messages[0].Body, 'typed');
    assert.deepEqual([a.weight.DataType, a.weight.StringValue], ['Number', '2.5']);
    assert.deepEqual([a.blob.DataType, [...a.blob.BinaryValue]], ['Binary', [0, 1, 2, 255]]);
    assert.deepEqual([a.kind.DataType, a.kind.StringValue], ['String.order', 'x']);

    // Delete selected: two of the three, after a confirm.
    await page.waitForFunction(() => document.querySelectorAll('#message-rows tr[data-message-id]').length === 3, WAIT);
    const boxes = await page.$$('#message-rows tr[data-message-id] input[type="checkbox"]');
    await boxes[1].click();
    await boxes[2].click();
    assert.equal(await page.$eval('#selected-info', (el) => el.textContent), '2 selected');
    const asked = dialogs.length;
    await page.click('#delete-selected');
    await page.waitForFunction(() => document.querySelectorAll('#message-rows tr[data-message-id]').length === 1, WAIT);
    assert.match(dialogs[asked], /Delete 2 selected messages/);
    assert.equal(await toastText(), 'Deleted 2 of 2');
    assert.equal((await counts(url)).visible, 1);

    await page.click('#delete-queue');
    await page.waitForSelector('main[data-view="queues"]', WAIT);
    assert.match(dialogs.at(-1), /Delete the queue console-made.fifo/);
    await assert.rejects(client.send(new sqs.GetQueueUrlCommand({ QueueName: 'console-made.fifo' })), /QueueDoesNotExist|does not exist/);
  });

  it('moves selected messages out of a dead-letter queue back to their source', async () => {
    const dlq = await createQueue('console-pick-dlq');
    const { arn } = await counts(dlq);
    const src = await createQueue('console-pick', {
      RedrivePolicy: JSON.stringify({ deadLetterTargetArn: arn, maxReceiveCount: 1 }),
    });
    for (const body of ['d1', 'd2', 'd3']) {
      await client.send(new sqs.SendMessageCommand({ QueueUrl: src, MessageBody: body }));
    }
    for (let i = 0; i < 2; i += 1) {
      await client.send(new sqs.ReceiveMessageCommand({ QueueUrl: src, MaxNumberOfMessages: 10, VisibilityTimeout: 0 }));
    }
    await openQueue('console-pick-dlq');
    await page.waitForFunction(() => document.querySelectorAll('#message-rows tr[data-message-id]').length === 3, WAIT);
    assert.match(await page.$eval('#move-to', (s) => s.options[0].textContent), /^console-pick \(a source of this queue\)$/);
    const boxes = await page.$$('#message-rows tr[data-message-id] input[type="checkbox"]');
    await boxes[0].click();
    await boxes[2].click();
    const asked = dialogs.length;
    await page.click('#move-selected');
    await page.waitForFunction(() => document.querySelectorAll('#message-rows tr[data-message-id]').length === 1, WAIT);
    assert.match(dialogs[asked], /Move 2 selected messages to console-pick\?/);
    assert.equal((await counts(dlq)).visible, 1);
    const back = await client.send(new sqs.ReceiveMessageCommand({
      QueueUrl: src, MaxNumberOfMessages: 10, MessageSystemAttributeNames: ['All'],
    }));
    assert.equal(back.Messages.length, 2);
    for (const m of back.Messages) {
      assert.equal(m.Attributes.ApproximateReceiveCount, '1', 'a redrive starts the count again');
      assert.equal(m.Attributes.DeadLetterQueueSourceArn, undefined);
    }
  });

  it('charts the counts as they change, and shows a FIFO queue by group with its lock', async () => {
    const url = await createQueue('console-chart');
    await openQueue('console-chart');
    const last = (series) => page.$eval(`#count-chart path[data-series="${series}"]`, (p) => Number(p.dataset.last));
    await page.waitForSelector('#count-chart path[data-series="visible"]', WAIT);
    assert.equal(await last('visible'), 0);
    for (let i = 0; i < 3; i += 1) {
      await client.send(new sqs.SendMessageCommand({ QueueUrl: url, MessageBody: `c${i}` }));
    }
    await client.send(new sqs.SendMessageCommand({ QueueUrl: url, MessageBody: 'later', DelaySeconds: 60 }));
    await page.waitForFunction(() => Number(document.querySelector('#count-chart path[data-series="visible"]')?.dataset.last) === 3, WAIT);
    assert.equal(await last('delayed'), 1);
    await client.send(new sqs.ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 2, VisibilityTimeout: 60 }));
    await page.waitForFunction(() => Number(document.querySelector('#count-chart path[data-series="in_flight"]')?.dataset.last) === 2, WAIT);
    const points = await page.$eval('#count-chart path[data-series="visible"]', (p) => p.getAttribute('d').split('L').length);
    assert.ok(points >= 3, `one point a refresh, got ${points}`);

    const fifo = await createQueue('console-groups.fifo', { FifoQueue: 'true', ContentBasedDeduplication: 'true' });
    for (const [body, group] of [['a1', 'ga'], ['b1', 'gb'], ['a2', 'ga']]) {
      await client.send(new sqs.SendMessageCommand({ QueueUrl: fifo, MessageBody: body, MessageGroupId: group }));
    }
    await client.send(new sqs.ReceiveMessageCommand({ QueueUrl: fifo, MaxNumberOfMessages: 1, VisibilityTimeout: 60 }));
    await openQueue('console-groups.fifo');
    await page.waitForSelector('#message-rows tr.group-head[data-group="gb"]', WAIT);
    const heads = await page.$$eval('#message-rows tr.group-head', (trs) => trs.map((tr) => [tr.dataset.group, tr.dataset.locked, tr.textContent]));
    assert.deepEqual(heads.map(([g, locked]) => [g, locked]), [['ga', 'true'], ['gb', 'false']]);
    assert.match(heads[0][2], /^Group ga · 2 messages on this page · locked by a message in flight, free again in/);
    assert.match(heads[1][2], /^Group gb · 1 message on this page · free$/);
    const order = await page.$$eval('#message-rows tr', (trs) => trs.map((tr) => tr.dataset.group
      ?? tr.querySelector('td[data-col="body"] pre')?.textContent));
    assert.deepEqual(order, ['ga', 'a1', 'a2', 'gb', 'b1']);
  });

  it('starts a redrive from a dead-letter queue and shows its progress', async () => {
    const dlq = await createQueue('console-dlq');
    const dlqArn = (await counts(dlq)).arn;
    const src = await createQueue('console-src', {
      VisibilityTimeout: '0',
      RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: '1' }),
    });
    for (let i = 0; i < 3; i += 1) {
      await client.send(new sqs.SendMessageCommand({ QueueUrl: src, MessageBody: `d${i}` }));
    }
    await client.send(new sqs.ReceiveMessageCommand({ QueueUrl: src, MaxNumberOfMessages: 10 }));
    await client.send(new sqs.ReceiveMessageCommand({ QueueUrl: src, MaxNumberOfMessages: 10 }));
    assert.equal((await counts(dlq)).visible, 3);

    await openQueue('console-dlq');
    const wiring = await page.$eval('section[aria-labelledby="h-wiring"]', (s) => s.textContent);
    assert.match(wiring, /console-src/, 'the DLQ page names the queue that uses it');
    await page.click('#start-redrive');
    await page.waitForSelector('#task-rows tr', WAIT);
    const deadline = Date.now() + 10_000;
    while ((await counts(src)).visible !== 3) {
      assert.ok(Date.now() < deadline, 'the redrive moved the messages back');
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal((await counts(dlq)).visible, 0);
    await page.waitForSelector('#task-rows tr[data-status="COMPLETED"]', WAIT);

    // A slow redrive, cancelled from the console before it is done.
    await client.send(new sqs.PurgeQueueCommand({ QueueUrl: src }));
    await client.send(new sqs.SendMessageBatchCommand({
      QueueUrl: src,
      Entries: Array.from({ length: 5 }, (_, i) => ({ Id: `c${i}`, MessageBody: `slow${i}` })),
    }));
    await client.send(new sqs.ReceiveMessageCommand({ QueueUrl: src, MaxNumberOfMessages: 10 }));
    await client.send(new sqs.ReceiveMessageCommand({ QueueUrl: src, MaxNumberOfMessages: 10 }));
    assert.equal((await counts(dlq)).visible, 5);
    await openQueue('console-dlq');
    await page.waitForFunction(() => document.querySelectorAll('#message-rows tr[data-message-id]').length === 5, WAIT);
    await page.type('#redrive-rate', '1');
    await page.click('#start-redrive');
    await page.waitForSelector('#task-rows tr[data-status="RUNNING"] button', WAIT);
    await page.click('#task-rows tr[data-status="RUNNING"] button');
    await page.waitForSelector('#task-rows tr[data-status="CANCELLED"]', WAIT);
    assert.ok((await counts(dlq)).visible >= 3, 'the cancelled task left most messages in the DLQ');

    await openQueue('console-src');
    const srcWiring = await page.$eval('section[aria-labelledby="h-wiring"]', (s) => s.textContent);
    assert.match(srcWiring, /console-dlq/, 'the source page names its DLQ');
  });

  it('moves the clock and resets from the test controls', async () => {
    const url = await createQueue('console-controls');
    await client.send(new sqs.SendMessageCommand({ QueueUrl: url, MessageBody: 'x', DelaySeconds: 120 }));
    await page.goto(`${server.endpoint}/_sqsim/console#/controls`);
    await page.waitForSelector('main[data-view="controls"]', WAIT);
    const before = (await server.clock()).now_ms;
    await page.$eval('#advance-form input[name="seconds"]', (el) => { el.value = '150'; });
    await page.click('#advance-form button[type="submit"]');
    await page.waitForFunction(
      (t) => fetch('/_sqsim/clock').then((r) => r.json()).then((c) => c.now_ms >= t),
      WAIT,
      before + 150_000,
    );
    assert.equal((await counts(url)).visible, 1, 'the delay ran out on the advanced clock');

    // A fault rule added in the console throttles the next SendMessage, once.
    await page.click('#fault-form button[type="submit"]');
    await page.waitForSelector('#fault-rows tr', WAIT);
    await assert.rejects(
      client.send(new sqs.SendMessageCommand({ QueueUrl: url, MessageBody: 'throttled' })),
      (e) => e.name === 'ThrottlingException' || /Throttl/.test(e.Code || e.name),
    );
    await client.send(new sqs.SendMessageCommand({ QueueUrl: url, MessageBody: 'through' }));
    await page.waitForFunction(
      () => document.querySelector('#fault-rows tr td.num')?.textContent === '1', WAIT,
    );
    // Remove one rule with its row's button: the other stays.
    const faultsNow = async () => (await (await fetch(`${server.endpoint}/_sqsim/faults`)).json()).faults;
    const [spent] = await faultsNow();
    await page.$eval('#fault-form textarea[name="rule"]', (el) => {
      el.value = '{"action": "DeleteQueue", "error": "InternalError"}';
    });
    await page.click('#fault-form button[type="submit"]');
    await page.waitForFunction(() => document.querySelectorAll('#fault-rows tr').length === 2, WAIT);
    await page.click(`#fault-rows tr[data-rule-id="${spent.id}"] button`);
    await page.waitForFunction(() => document.querySelectorAll('#fault-rows tr').length === 1, WAIT);
    const left = await faultsNow();
    assert.deepEqual(left.map((r) => r.action), ['DeleteQueue'], 'only the removed rule is gone');
    assert.ok(await page.$(`#fault-rows tr[data-rule-id="${left[0].id}"]`));
    // The API also takes the rule in a body; an unknown id is a 404 that removes nothing.
    const removeById = (id) => fetch(`${server.endpoint}/_sqsim/faults`, {
      method: 'DELETE', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ id }),
    });
    assert.equal((await removeById(left[0].id + 1000)).status, 404);
    assert.equal((await faultsNow()).length, 1);
    const added = await (await fetch(`${server.endpoint}/_sqsim/faults`, {
      method: 'POST', body: JSON.stringify({ action: 'PurgeQueue', latency_ms: 1 }),
    })).json();
    await page.waitForFunction(() => document.querySelectorAll('#fault-rows tr').length === 2, WAIT);
    const afterBody = await (await removeById(added.id)).json();
    assert.deepEqual(afterBody.faults.map((r) => r.id), [left[0].id]);
    await page.waitForFunction(() => document.querySelectorAll('#fault-rows tr').length === 1, WAIT);
    // And every rule at once.
    await page.click('#fault-form button.secondary');
    await page.waitForFunction(() => document.querySelectorAll('#fault-rows tr').length === 0, WAIT);
    assert.deepEqual(await faultsNow(), []);

    await page.click('#reset');
    const deadline = Date.now() + 10_000;
    for (;;) {
      const list = await client.send(new sqs.ListQueuesCommand({}));
      if (!(list.QueueUrls || []).length) break;
      assert.ok(Date.now() < deadline, 'reset removed every queue');
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(dialogs.some((d) => d.startsWith('Reset sqsim?')));
  });

  it('sends to a FIFO queue with a group and a deduplication id', async () => {
    const url = await createQueue('console-orders.fifo', { FifoQueue: 'true' });
    await openQueue('console-orders.fifo');
    await page.type('#send-form textarea[name="body"]', 'fifo from the console');
    await page.type('#send-form input[name="group"]', 'customer-7');
    await page.type('#send-form input[name="dedup"]', 'order-42');
    await page.click('#send-form button[type="submit"]');
    await page.waitForSelector('#message-rows tr[data-message-id] td[data-col="group"]', WAIT);
    const cellText = await page.$eval('#message-rows tr[data-message-id] td[data-col="group"]', (td) => td.textContent);

    const got = await client.send(new sqs.ReceiveMessageCommand({
      QueueUrl: url, MessageSystemAttributeNames: ['All'], VisibilityTimeout: 0,
    }));
    assert.equal(got.Messages.length, 1);
    const m = got.Messages[0];
    assert.equal(m.Body, 'fifo from the console');
    assert.equal(m.Attributes.MessageGroupId, 'customer-7');
    assert.equal(m.Attributes.MessageDeduplicationId, 'order-42');
    assert.match(m.Attributes.SequenceNumber, /^\d+$/);
    assert.equal(cellText, `customer-7 · ${m.Attributes.SequenceNumber}`);
    // The deduplication id took effect: the same id again within five minutes is dropped.
    await client.send(new sqs.SendMessageCommand({
      QueueUrl: url, MessageBody: 'again', MessageGroupId: 'customer-7', MessageDeduplicationId: 'order-42',
    }));
    const c = await counts(url);
    assert.equal(c.visible + c.inFlight, 1);
  });

  it('freezes and unfreezes the clock from the test controls', async () => {
    await page.goto(`${server.endpoint}/_sqsim/console#/controls`);
    await page.waitForSelector('main[data-view="controls"]', WAIT);
    assert.equal((await server.clock()).frozen, false);
    assert.equal(await page.$eval('#freeze', (b) => b.textContent), 'Freeze');
    await page.click('#freeze');
    await page.waitForFunction(() => document.getElementById('freeze').textContent === 'Unfreeze', WAIT);
    const frozen = await server.clock();
    assert.equal(frozen.frozen, true, '/_sqsim/clock reports the clock frozen');
    await new Promise((r) => setTimeout(r, 50));
    assert.equal((await server.clock()).now_ms, frozen.now_ms, 'a frozen clock does not move');
    assert.match(await page.$eval('#clock-state', (p) => p.textContent), /frozen/);
    await page.click('#freeze');
    await page.waitForFunction(() => document.getElementById('freeze').textContent === 'Freeze', WAIT);
    assert.equal((await server.clock()).frozen, false);
  });

  it('renders with the dark palette when the system asks for it', async () => {
    const background = () => page.$eval('body', (b) => getComputedStyle(b).backgroundColor);
    const accent = () => page.$eval('header a.brand', (a) => getComputedStyle(a).color);
    await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: 'light' }]);
    await page.goto(`${server.endpoint}/_sqsim/console`);
    await page.waitForSelector('main[data-view="queues"]', WAIT);
    assert.equal(await background(), 'rgb(255, 255, 255)');
    assert.equal(await accent(), 'rgb(11, 92, 173)');
    try {
      await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: 'dark' }]);
      assert.equal(await background(), 'rgb(20, 23, 26)', 'the dark background (--bg)');
      assert.equal(await accent(), 'rgb(108, 179, 255)', 'the dark accent (--accent)');
      assert.equal(await page.$eval('body', (b) => getComputedStyle(b).color), 'rgb(230, 233, 236)');
    } finally {
      await page.emulateMediaFeatures([]);
    }
  });

  it('is keyboard usable: the queue links are reachable with Tab', async () => {
    await createQueue('console-keys');
    await page.goto(`${server.endpoint}/_sqsim/console`);
    await page.waitForSelector('tr[data-queue="console-keys"] a', WAIT);
    let reached = false;
    for (let i = 0; i < 20 && !reached; i += 1) {
      await page.keyboard.press('Tab');
      reached = await page.evaluate(() => document.activeElement?.textContent === 'console-keys');
    }
    assert.ok(reached, 'Tab reaches the queue link');
    await page.keyboard.press('Enter');
    await page.waitForSelector(`main[data-view="queue:${ACCOUNT}/${REGION}/console-keys"]`, WAIT);
    assert.match(page.url(), /#\/queue\/000000000000\/us-east-1\/console-keys$/);
  });
});

describe('web console: workers from the config file', () => {
  let server;
  let client;
  let browser;
  let page;
  let app;
  let dir;
  const posted = [];

  before(async () => {
    // The worker's application: records each POST and answers 200.
    app = createServer((req, res) => {
      let body = '';
      req.on('data', (d) => { body += d; });
      req.on('end', () => {
        posted.push(body);
        res.writeHead(200, { 'content-length': '0' });
        res.end();
      });
    });
    await new Promise((r) => app.listen(0, '127.0.0.1', r));
    dir = mkdtempSync(path.join(tmpdir(), 'sqsim-console-'));
    const config = path.join(dir, 'sqsim.toml');
    writeFileSync(config, [
      '[queues.console-jobs]',
      '',
      '[[workers]]',
      'name = "console-app"',
      'queues = ["console-jobs"]',
      `http_url = "http://127.0.0.1:${app.address().port}/"`,
      'http_connections = 2',
      '',
    ].join('\n'));
    // startServer passes the environment on: SQSIM_CONFIG is the --config flag.
    process.env.SQSIM_CONFIG = config;
    try {
      server = await startServer();
    } finally {
      delete process.env.SQSIM_CONFIG;
    }
    client = await v3Client(server.endpoint);
    browser = await launchChromium();
    page = await browser.newPage();
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
    await new Promise((r) => (app ? app.close(r) : r()));
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('shows the worker with its counters', async () => {
    const url = (await client.send(new sqs.GetQueueUrlCommand({ QueueName: 'console-jobs' }))).QueueUrl;
    for (let i = 0; i < 3; i += 1) {
      await client.send(new sqs.SendMessageCommand({ QueueUrl: url, MessageBody: `job ${i}` }));
    }
    await page.goto(`${server.endpoint}/_sqsim/console#/controls`);
    await page.waitForSelector('main[data-view="controls"]', WAIT);
    // The table refreshes every second until the worker has delivered all three.
    await page.waitForFunction(
      () => document.querySelector('#worker-rows tr td:nth-child(2)')?.textContent === '3', WAIT,
    );
    const row = await page.$$eval('#worker-rows tr', (trs) => trs.map((tr) => [...tr.cells].map((td) => td.textContent)));
    // Worker, Delivered, Failed, Retried, Released, In flight.
    assert.deepEqual(row, [['console-app', '3', '0', '0', '0', '0']]);
    assert.deepEqual(posted.sort(), ['job 0', 'job 1', 'job 2']);
    const stats = await (await fetch(`${server.endpoint}/_sqsim/stats`)).json();
    assert.equal(stats.workers[0].delivered, 3);
  });
});
