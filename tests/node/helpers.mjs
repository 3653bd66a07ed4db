// Shared helpers for the Node client tests and the one launcher of sqsim for them
// (startServer; only the docs' Jest examples, readme*.jest.cjs, start sqsim themselves,
// being code blocks of docs/testing.md and docs/realism.md verbatim): start/stop sqsim,
// build v3 and v2 SDK clients against it, drive the admin clock, and compute the SQS
// digests independently of the server (neither SDK checks MD5OfMessageAttributes, so the
// tests do).

import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import puppeteer from 'puppeteer-core';

// Quiet the SDKs' end-of-support banners; they are read when a client is built/loaded.
process.env.AWS_SDK_JS_SUPPRESS_MAINTENANCE_MODE_MESSAGE = '1';
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);

export const ACCOUNT = '000000000000';
export const REGION = 'us-east-1';
export const CREDENTIALS = { accessKeyId: 'AKIDTEST', secretAccessKey: 'test-secret' };

/** The sqsim binary: $SQSIM_BIN, else the debug build of this checkout. */
export function binaryPath() {
  return process.env.SQSIM_BIN || path.resolve(here, '../../target/debug/sqsim');
}

// Settings sqsim reads from the environment, dropped for an isolated server (its flags are
// the whole story): every SQSIM_* variable, and LocalStack's, which --compat localstack
// reads; the same rule as tests/python/sqsim_process.py's.
const LOCALSTACK_ENV = ['SQS_ENDPOINT_STRATEGY', 'LOCALSTACK_HOST', 'PERSISTENCE'];
const isSetting = (name) => name.startsWith('SQSIM_') || LOCALSTACK_ENV.includes(name);

/**
 * Starts `sqsim --host 127.0.0.1 --port 0 ...flags`. Resolves to { endpoint, queueUrl(name),
 * admin(method, path, body, status), stop(), advanceClock(s), clock(), freezeClock(f),
 * health() }. Rejects if the server does not announce its port within 15 s.
 *
 * By default sqsim gets this process's environment (SQSIM_CONFIG set there is its --config),
 * and with $SQSIM_TEST_ENDPOINT set this resolves to that running sqsim instead (make
 * cluster-suites points it at a cluster's gateway node; stop() then leaves it running).
 * `{ isolated: true }` is a server of the test's own, as its flags say: always started, even
 * with $SQSIM_TEST_ENDPOINT set, without sqsim's settings (isSetting) in its environment,
 * and stop() asserts it exited 0 on SIGTERM.
 */
export function startServer(flags = [], { isolated = false } = {}) {
  const external = process.env.SQSIM_TEST_ENDPOINT;
  if (external && !isolated) return Promise.resolve(makeServer(null, external.replace(/\/+$/, '')));
  const env = { ...process.env, RUST_LOG: process.env.RUST_LOG || 'warn' };
  if (isolated) for (const k of Object.keys(env)) if (isSetting(k)) delete env[k];
  const child = spawn(binaryPath(), ['--host', '127.0.0.1', '--port', '0', ...flags], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env,
  });
  let stderr = '';
  child.stderr.on('data', (d) => {
    stderr += d;
  });
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`sqsim did not start in 15 s; stdout=${out} stderr=${stderr}`));
    }, 15_000);
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`sqsim exited early (${code ?? signal}); stderr=${stderr}`));
    });
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/sqsim listening on (http:\/\/[^\s]+)/);
      if (!m) return;
      clearTimeout(timer);
      child.removeAllListeners('exit');
      child.stdout.removeAllListeners('data');
      child.stdout.resume();
      const endpoint = m[1];
      resolve(makeServer(child, endpoint, isolated && (() => stderr)));
    });
  });
}

/** The server object of startServer; `stderr` (a getter) makes stop() assert exit code 0. */
function makeServer(child, endpoint, stderr) {
  const exited = child && new Promise((r) => child.once('exit', r));
  return {
    endpoint,
    queueUrl: (name) => `${endpoint}/${ACCOUNT}/${name}`,
    /** An admin call; asserts the status and returns the JSON reply. */
    async admin(method, path, body, status = 200) {
      const res = await fetch(endpoint + path, {
        method,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      assert.equal(res.status, status, `${method} ${path}: ${text}`);
      return JSON.parse(text);
    },
    async stop() {
      if (!child || child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 5_000);
      const code = await exited;
      clearTimeout(t);
      if (stderr) assert.equal(code, 0, `sqsim exited with ${code}; stderr=${stderr()}`);
    },
    /** Moves the server's virtual clock forward. */
    async advanceClock(seconds) {
      const res = await fetch(`${endpoint}/_sqsim/clock`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ advance_seconds: seconds }),
      });
      if (res.status !== 200) throw new Error(`clock advance failed: ${res.status} ${await res.text()}`);
      return res.json();
    },
    async clock() {
      const res = await fetch(`${endpoint}/_sqsim/clock`);
      return res.json();
    },
    /** Freezes (true) or releases (false) the virtual clock; returns { now_ms, frozen }. */
    async freezeClock(frozen = true) {
      const res = await fetch(`${endpoint}/_sqsim/clock`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ freeze: frozen }),
      });
      if (res.status !== 200) throw new Error(`clock freeze failed: ${res.status} ${await res.text()}`);
      const state = await res.json();
      if (state.frozen !== frozen) throw new Error(`clock freeze=${frozen} not applied: ${JSON.stringify(state)}`);
      return state;
    },
    async health() {
      const res = await fetch(`${endpoint}/_sqsim/health`);
      return { status: res.status, body: await res.json() };
    },
  };
}

/** A v3 SQSClient for `endpoint`. */
export async function v3Client(endpoint) {
  const { SQSClient } = await import('@aws-sdk/client-sqs');
  return new SQSClient({ endpoint, region: REGION, credentials: CREDENTIALS, maxAttempts: 1 });
}

/** The aws-sdk v2 module (loaded lazily so the banner env var above is already set). */
export function awsV2() {
  return require('aws-sdk');
}

/** A v2 AWS.SQS for `endpoint`. */
export function v2Client(endpoint) {
  const AWS = awsV2();
  return new AWS.SQS({
    endpoint,
    region: REGION,
    credentials: new AWS.Credentials(CREDENTIALS),
    maxRetries: 0,
  });
}

let counter = 0;
/** A queue name unique within this process (test files each have their own server). */
export function uniqueName(prefix = 'q') {
  counter += 1;
  return `${prefix}-${process.pid}-${counter}`;
}

export function md5Hex(data) {
  return createHash('md5').update(data).digest('hex');
}

/** Lowercase hex SHA-256 (of the UTF-8 bytes, for strings): the content-based dedup id. */
export function sha256Hex(data) {
  return createHash('sha256').update(typeof data === 'string' ? Buffer.from(data, 'utf8') : data).digest('hex');
}

/**
 * MD5OfMessageAttributes as SQS computes it: names sorted by byte value; for each,
 * len+name, len+DataType, transport byte (1 string, 2 binary), len+value.
 * `attrs` is the SDK shape: { Name: { DataType, StringValue | BinaryValue } }.
 * Returns undefined for no attributes.
 */
export function md5OfMessageAttributes(attrs) {
  const names = Object.keys(attrs || {});
  if (names.length === 0) return undefined;
  names.sort((a, b) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8')));
  const parts = [];
  const lenPrefixed = (buf) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(buf.length);
    parts.push(len, buf);
  };
  for (const name of names) {
    const v = attrs[name];
    lenPrefixed(Buffer.from(name, 'utf8'));
    lenPrefixed(Buffer.from(v.DataType, 'utf8'));
    if (v.BinaryValue !== undefined && v.BinaryValue !== null) {
      parts.push(Buffer.from([2]));
      const bin = typeof v.BinaryValue === 'string' ? Buffer.from(v.BinaryValue, 'base64') : Buffer.from(v.BinaryValue);
      lenPrefixed(bin);
    } else {
      parts.push(Buffer.from([1]));
      lenPrefixed(Buffer.from(v.StringValue, 'utf8'));
    }
  }
  return md5Hex(Buffer.concat(parts));
}

/** Normalizes received message attributes (Uint8Array/Buffer binary) for deepEqual. */
export function normalizeAttributes(attrs) {
  if (!attrs) return attrs;
  const out = {};
  for (const [k, v] of Object.entries(attrs)) {
    const n = { DataType: v.DataType };
    if (v.StringValue !== undefined) n.StringValue = v.StringValue;
    if (v.BinaryValue !== undefined) n.BinaryValue = Buffer.from(v.BinaryValue).toString('base64');
    out[k] = n;
  }
  return out;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

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

/** The headless Chromium the tests drive (`args`: more switches). */
export function launchChromium(args = []) {
  return puppeteer.launch({
    executablePath: chromiumPath(),
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', ...args],
  });
}
