// A foreign web page against a developer's sqsim, in a real headless Chromium (issue 28).
// The page is served from http://evil.test:PORT (Chromium resolves evil.test to 127.0.0.1,
// so it is another site on the developer's own machine) and tries what needs no CORS
// preflight: a query-protocol form POST (SendMessage, DeleteQueue), an auto-submitted form,
// an <img> GET (PurgeQueue), a no-cors text/plain POST to /_sqsim/reset, and a cors read of
// /_sqsim/peek. Then the SDK checks nothing changed. The same page against an sqsim started
// with --allowed-origins for it wipes the queue and reads the peek, so the attacks are real; a
// page reaching sqsim by a rebound name (DNS rebinding) is refused too, and the console
// still works from http://127.0.0.1:PORT and http://localhost:PORT.

import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { after, before, describe, it } from 'node:test';

import * as sqs from '@aws-sdk/client-sqs';

import { launchChromium, startServer, v3Client } from './helpers.mjs';

const WAIT = { timeout: 15_000 };

/** The attacker's page: every request it can make without a preflight, at `target`. */
function attackPage(target, queueUrl) {
  const q = (params) => new URLSearchParams(params).toString();
  return `<!doctype html><html><head><title>cat pictures</title></head><body>
<iframe name="sink" style="display:none"></iframe>
<form id="f" method="POST" action="${target}/" target="sink">
  <input type="hidden" name="Action" value="DeleteQueue">
  <input type="hidden" name="QueueUrl" value="${queueUrl}">
</form>
<script>
(async () => {
  const results = {};
  const attempt = async (name, fn) => {
    try { const r = await fn(); results[name] = r === undefined ? 'sent' : r; }
    catch (e) { results[name] = 'error: ' + e.message; }
  };
  await attempt('send', () => fetch(${JSON.stringify(target + '/')}, {
    method: 'POST', mode: 'no-cors',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: ${JSON.stringify(q({ Action: 'SendMessage', QueueUrl: queueUrl, MessageBody: 'planted' }))},
  }).then(() => 'sent'));
  await attempt('reset', () => fetch(${JSON.stringify(target + '/_sqsim/reset')}, {
    method: 'POST', mode: 'no-cors', headers: { 'Content-Type': 'text/plain' }, body: '{}',
  }).then(() => 'sent'));
  await attempt('peek', () => fetch(${JSON.stringify(target + '/_sqsim/peek?queue_url=' + encodeURIComponent(queueUrl))})
    .then((r) => r.text()));
  await attempt('img', () => new Promise((resolve) => {
    const img = new Image();
    img.onload = img.onerror = () => resolve('loaded');
    img.src = ${JSON.stringify(target + '/?' + q({ Action: 'PurgeQueue', QueueUrl: queueUrl }))};
  }));
  document.getElementById('f').submit();
  await new Promise((r) => setTimeout(r, 1500));
  window.results = results;
  document.title = 'done';
})();
</script></body></html>`;
}

async function serveAttacker(html) {
  const server = createServer((req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/html' });
    res.end(html());
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return server;
}

describe('a foreign web page', () => {
  let browser;
  before(async () => {
    browser = await launchChromium(['--host-resolver-rules=MAP evil.test 127.0.0.1, MAP rebind.test 127.0.0.1']);
  });
  after(async () => {
    await browser?.close();
  });

  async function attack(flags) {
    let attacker;
    let queueUrl;
    let target;
    attacker = await serveAttacker(() => attackPage(target, queueUrl));
    const origin = `http://evil.test:${attacker.address().port}`;
    const server = await startServer(flags(origin));
    try {
      target = server.endpoint;
      const client = await v3Client(server.endpoint);
      queueUrl = (await client.send(new sqs.CreateQueueCommand({ QueueName: 'victim' }))).QueueUrl;
      await client.send(new sqs.SendMessageCommand({ QueueUrl: queueUrl, MessageBody: 'original' }));
      const page = await browser.newPage();
      await page.goto(`${origin}/`);
      await page.waitForFunction(() => document.title === 'done', WAIT);
      const results = await page.evaluate(() => window.results);
      await page.close();
      const urls = (await client.send(new sqs.ListQueuesCommand({}))).QueueUrls ?? [];
      const bodies = [];
      if (urls.includes(queueUrl)) {
        const r = await client.send(new sqs.ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10, VisibilityTimeout: 0 }));
        for (const m of r.Messages ?? []) bodies.push(m.Body);
      }
      return { results, urls, queueUrl, bodies: bodies.sort() };
    } finally {
      await server.stop();
      attacker.close();
    }
  }

  it('can neither plant, delete, purge, reset nor read anything', async () => {
    const { results, urls, queueUrl, bodies } = await attack(() => []);
    assert.ok(urls.includes(queueUrl), 'the queue survived the form POST and the reset');
    assert.deepEqual(bodies, ['original'], 'nothing planted, nothing purged');
    assert.match(results.peek, /^error/, 'the page could not read a peek');
  });

  it('wipes the queue when sqsim allows its origin (the attacks are real)', async () => {
    const { results, urls, queueUrl } = await attack((origin) => ['--allowed-origins', origin]);
    assert.ok(!urls.includes(queueUrl), 'an allowed origin deleted the queue / reset sqsim');
    assert.doesNotMatch(results.peek, /^error/, 'an allowed origin reads the answer (CORS)');
  });

  it('cannot reach sqsim by a rebound name, while the console works by its own names', async () => {
    const server = await startServer();
    try {
      const page = await browser.newPage();
      const port = new URL(server.endpoint).port;
      const rebound = await page.goto(`http://rebind.test:${port}/_sqsim/stats`);
      assert.equal(rebound.status(), 403);
      for (const host of ['127.0.0.1', 'localhost']) {
        const res = await page.goto(`http://${host}:${port}/_sqsim/console`);
        assert.equal(res.status(), 200, host);
        assert.equal(await page.title(), 'sqsim console');
        await page.waitForSelector('main[data-view]', WAIT);
      }
      await page.close();
    } finally {
      await server.stop();
    }
  });
});
