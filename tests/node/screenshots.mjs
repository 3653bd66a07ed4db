// The console's screenshots in docs/ (`make screenshots`): a demo set of queues — orders with
// JSON messages and its dead-letter queue, a FIFO queue with a message group locked — shown
// in the system's Chromium at 1280×800, one PNG per main view:
//   docs/console-queues.png, docs/console.png (a queue), docs/console-search.png,
//   docs/console-fifo.png, docs/console-controls.png
// Usage: SQSIM_BIN=target/debug/sqsim node screenshots.mjs [OUT_DIR]   (default ../../docs)
import path from 'node:path';

import * as sqs from '@aws-sdk/client-sqs';

import { ACCOUNT, REGION, launchChromium, startServer, v3Client } from './helpers.mjs';

const out = path.resolve(process.argv[2] ?? new URL('../../docs', import.meta.url).pathname);
const WAIT = { timeout: 10_000 };

const server = await startServer([], { isolated: true });
const client = await v3Client(server.endpoint);
const browser = await launchChromium();
try {
  const send = (input) => client.send(new sqs.SendMessageCommand(input));
  const dlq = (await client.send(new sqs.CreateQueueCommand({ QueueName: 'orders-dlq' }))).QueueUrl;
  const dlqArn = (await client.send(new sqs.GetQueueAttributesCommand({ QueueUrl: dlq, AttributeNames: ['QueueArn'] })))
    .Attributes.QueueArn;
  const orders = (await client.send(new sqs.CreateQueueCommand({
    QueueName: 'orders',
    Attributes: { RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: 3 }) },
  }))).QueueUrl;
  for (let i = 1; i <= 12; i += 1) {
    await send({
      QueueUrl: orders,
      MessageBody: JSON.stringify({ order: 1000 + i, customer: `c-${i % 4}`, items: [{ sku: 'A-1', qty: i }] }),
      MessageAttributes: {
        kind: { DataType: 'String', StringValue: i % 5 === 0 ? 'refund' : 'order' },
        weight: { DataType: 'Number', StringValue: String(i * 1.5) },
      },
      DelaySeconds: i === 12 ? 120 : 0,
    });
  }
  await client.send(new sqs.ReceiveMessageCommand({ QueueUrl: orders, MaxNumberOfMessages: 2, VisibilityTimeout: 90 }));
  await send({ QueueUrl: dlq, MessageBody: '{"order": 977, "error": "payment declined"}' });
  const fifo = (await client.send(new sqs.CreateQueueCommand({
    QueueName: 'payments.fifo', Attributes: { FifoQueue: 'true', ContentBasedDeduplication: 'true' },
  }))).QueueUrl;
  for (const [body, group] of [['p1', 'acct-7'], ['p2', 'acct-9'], ['p3', 'acct-7'], ['p4', 'acct-9']]) {
    await send({ QueueUrl: fifo, MessageBody: `{"payment": "${body}"}`, MessageGroupId: group });
  }
  await client.send(new sqs.ReceiveMessageCommand({ QueueUrl: fifo, MaxNumberOfMessages: 1, VisibilityTimeout: 60 }));

  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 800 });
  const shoot = async (name) => {
    await page.evaluate(() => { document.getElementById('toast').style.display = 'none'; window.scrollTo(0, 0); });
    await page.screenshot({ path: path.join(out, name) });
    console.log(`wrote ${path.join(out, name)}`);
  };
  const open = async (hash, view) => {
    await page.goto(`${server.endpoint}/_sqsim/console#${hash}`);
    await page.waitForSelector(`main[data-view="${view}"]`, WAIT);
  };

  await open('/', 'queues');
  await shoot('console-queues.png');
  await open(`/queue/${ACCOUNT}/${REGION}/orders`, `queue:${ACCOUNT}/${REGION}/orders`);
  await new Promise((r) => setTimeout(r, 3000)); // a few points on the chart
  await shoot('console.png');
  await page.select('#search-field', 'attribute');
  await page.type('#search-text', 'kind=refund');
  await page.click('#search-form button[type="submit"]');
  await page.waitForFunction(() => document.querySelector('#page-info').textContent.includes('searched'), WAIT);
  await page.$eval('#h-messages', (el) => el.scrollIntoView());
  await page.screenshot({ path: path.join(out, 'console-search.png') });
  console.log(`wrote ${path.join(out, 'console-search.png')}`);
  await open(`/queue/${ACCOUNT}/${REGION}/payments.fifo`, `queue:${ACCOUNT}/${REGION}/payments.fifo`);
  await page.$eval('#h-messages', (el) => el.scrollIntoView());
  await page.screenshot({ path: path.join(out, 'console-fifo.png') });
  console.log(`wrote ${path.join(out, 'console-fifo.png')}`);
  await open('/controls', 'controls');
  await shoot('console-controls.png');
} finally {
  await browser.close();
  await server.stop();
}
