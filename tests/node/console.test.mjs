// The web console in a real headless Chromium (the system's, driven by puppeteer-core):
// queues and counts through the SDK, then what the page shows and does, checked through the
// SDK again. CHROMIUM_BIN names the browser (default: `chromium` on PATH); CONSOLE_SCREENSHOT,
// when set, is where the queue page's screenshot for the README is written.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { after, before, describe, it } from 'node:test';

import * as sqs from '@aws-sdk/client-sqs';
import puppeteer from 'puppeteer-core';

import { ACCOUNT, REGION, startServer, v3Client } from './helpers.mjs';

function chromiumPath() {
  if (process.env.CHROMIUM_BIN) return process.env.CHROMIUM_BIN;
  for (const name of ['chromium', 'chromium-browser']) {
    try {
      return execFileSync('sh', ['-c', `command -v ${name}`]).toString().trim();
    } catch (_) {
      /* try the next name */
    }
  }
  throw new Error('no Chromium found: `make test` installs the chromium package');
}

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
    browser = await puppeteer.launch({
      executablePath: chromiumPath(),
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
    });
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
    await client.send(new sqs.SendMessageCommand({
      QueueUrl: url,
      MessageBody: JSON.stringify({ order: 7, items: ['a', 'b'] }),
      MessageAttributes: { kind: { DataType: 'String', StringValue: 'order' } },
    }));
    await openQueue('console-peek');
    await page.waitForSelector('#message-rows tr', WAIT);
    const body = await page.$eval('#message-rows tr pre', (el) => el.textContent);
    assert.match(body, /"order": 7/, 'JSON bodies are pretty-printed');
    const row = await page.$eval('#message-rows tr', (tr) => tr.textContent);
    assert.match(row, /kind/);
    assert.match(row, /SentTimestamp/, 'system attributes are shown');
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

  it('pages through a big queue', async () => {
    const url = await createQueue('console-paging');
    for (let b = 0; b < 6; b += 1) {
      await client.send(new sqs.SendMessageBatchCommand({
        QueueUrl: url,
        Entries: Array.from({ length: 10 }, (_, i) => ({ Id: `e${i}`, MessageBody: `m${b * 10 + i}` })),
      }));
    }
    await openQueue('console-paging');
    await page.waitForFunction(() => document.querySelectorAll('#message-rows tr').length === 50, WAIT);
    assert.equal(await page.$eval('#page-info', (el) => el.textContent), '1–50 of 60');
    await page.click('#next-page');
    await page.waitForFunction(() => document.querySelectorAll('#message-rows tr').length === 10, WAIT);
    assert.equal(await page.$eval('#page-info', (el) => el.textContent), '51–60 of 60');
    await page.click('#prev-page');
    await page.waitForFunction(() => document.querySelectorAll('#message-rows tr').length === 50, WAIT);
  });

  it('sends, deletes and purges', async () => {
    const url = await createQueue('console-actions');
    await openQueue('console-actions');
    await page.type('#send-form textarea[name="body"]', 'from the console');
    await page.type('#send-form input[name="attributes"]', '{"source": "console"}');
    await page.click('#send-form button[type="submit"]');
    await page.waitForSelector('#message-rows tr', WAIT);
    const got = await client.send(new sqs.ReceiveMessageCommand({
      QueueUrl: url, MessageAttributeNames: ['All'], VisibilityTimeout: 0,
    }));
    assert.equal(got.Messages[0].Body, 'from the console');
    assert.equal(got.Messages[0].MessageAttributes.source.StringValue, 'console');

    await page.click('#message-rows tr button');
    await page.waitForFunction(() => document.querySelectorAll('#message-rows tr').length === 0, WAIT);
    assert.equal((await counts(url)).visible, 0);
    assert.ok(dialogs.some((d) => d.includes('Delete this message')));

    for (let i = 0; i < 4; i += 1) {
      await client.send(new sqs.SendMessageCommand({ QueueUrl: url, MessageBody: `p${i}` }));
    }
    await page.waitForFunction(() => document.querySelectorAll('#message-rows tr').length === 4, WAIT);
    await page.click('#purge');
    await page.waitForFunction(() => document.querySelectorAll('#message-rows tr').length === 0, WAIT);
    const c = await counts(url);
    assert.equal(c.visible + c.inFlight, 0);
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
    await page.waitForFunction(() => document.querySelectorAll('#message-rows tr').length === 5, WAIT);
    await page.type('#redrive-rate', '1');
    await page.click('#start-redrive');
    await page.waitForSelector('#task-rows tr[data-status="RUNNING"] button', WAIT);
    await page.click('#task-rows tr[data-status="RUNNING"] button');
    await page.waitForSelector('#task-rows tr[data-status="CANCELLED"]', WAIT);
    assert.ok((await counts(dlq)).visible >= 3, 'the cancelled task left most messages in the DLQ');

    await openQueue('console-src');
    const srcWiring = await page.$eval('section[aria-labelledby="h-wiring"]', (s) => s.textContent);
    assert.match(srcWiring, /console-dlq/, 'the source page names its DLQ');
    if (process.env.CONSOLE_SCREENSHOT) {
      await page.waitForSelector('#message-rows tr', WAIT);
      await page.evaluate(() => {
        const t = document.getElementById('toast');
        t.className = '';
        t.textContent = '';
        window.scrollTo(0, 0);
      });
      await page.screenshot({ path: process.env.CONSOLE_SCREENSHOT, fullPage: false });
    }
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
    await page.click('#fault-form button.secondary');
    await page.waitForFunction(() => document.querySelectorAll('#fault-rows tr').length === 0, WAIT);

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
