// What packaged.test.cjs doesn't show, against the installed package: the `sqsim` command
// (npx, exit codes, signals), a missing platform package, start and control-plane errors, and
// servers that outlive no one.
const { spawn, spawnSync } = require("node:child_process");
const { once } = require("node:events");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { CreateQueueCommand } = require("@aws-sdk/client-sqs");
const { startSqsim, binaryPath } = require("sqsim");

const { version } = require("sqsim/package.json");
const sqsimDir = path.dirname(require.resolve("sqsim/package.json"));
const platformPackage = `@sqsim/${process.platform}-${process.arch}`;
// `--no`: never fetch sqsim from the registry; `--`: the rest is sqsim's (npx would take
// `--version` or `--no-such-flag` as its own). The timeout: a lost flag starts a server.
const npx = (...args) =>
  spawnSync("npx", ["--no", "--", "sqsim", ...args], { encoding: "utf8", timeout: 20_000 });
// [status, stdout, stderr]: a failed expectation shows stderr too.
const outcome = (r) => [r.status, r.stdout.trim(), r.stderr];
const alive = (endpoint) => fetch(`${endpoint}/_sqsim/health`).then(() => true, () => false);

// A server gets SIGTERM when its Node process exits; give it a moment to go.
async function gone(endpoint) {
  for (let i = 0; i < 50 && (await alive(endpoint)); i++) await new Promise((r) => setTimeout(r, 100));
  return !(await alive(endpoint));
}

test("npx sqsim --version prints the package's version", () => {
  expect(outcome(npx("--version"))).toEqual([0, `sqsim ${version}`, expect.any(String)]);
});

test("npx sqsim passes the binary's exit code and stderr through", () => {
  const r = npx("--no-such-flag");
  expect(r.status).toBe(2);
  expect(r.stderr).toContain("unexpected argument '--no-such-flag'");
});

test("the binary is the platform package's, and executable", () => {
  const platformDir = path.dirname(require.resolve(`${platformPackage}/package.json`));
  expect(binaryPath()).toBe(path.join(platformDir, "bin", "sqsim"));
  fs.accessSync(binaryPath(), fs.constants.X_OK);
});

test("SIGTERM to the sqsim command reaches the server, which exits cleanly", async () => {
  // A process group of its own: if the signal isn't passed on, the server is still killed.
  const cmd = spawn(path.join(__dirname, "node_modules", ".bin", "sqsim"), ["--port", "0"], {
    stdio: ["ignore", "pipe", "ignore"],
    detached: true,
  });
  try {
    const [chunk] = await once(cmd.stdout, "data"); // "sqsim listening on http://127.0.0.1:PORT"
    const endpoint = /listening on (\S+)/.exec(chunk.toString())[1];
    expect(await alive(endpoint)).toBe(true);
    cmd.kill("SIGTERM");
    expect(await once(cmd, "exit")).toEqual([0, null]);
    expect(await alive(endpoint)).toBe(false);
  } finally {
    cmd.stdout.destroy();
    try {
      process.kill(-cmd.pid, "SIGKILL");
    } catch {} // ESRCH: nothing left, as it should be
  }
});

test("without the platform package, the command and startSqsim say what's missing and what to do", async () => {
  // sqsim alone, where no node_modules above has the platform package.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sqsim-no-platform-"));
  const lonely = path.join(dir, "node_modules", "sqsim");
  fs.cpSync(sqsimDir, lonely, { recursive: true });
  try {
    const run = (env = {}) =>
      spawnSync(process.execPath, [path.join(lonely, "bin", "sqsim.js"), "--version"], {
        encoding: "utf8",
        timeout: 20_000,
        env: { ...process.env, NODE_PATH: "", ...env },
      });
    const r = run();
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(`the package ${platformPackage} is not installed`);
    expect(r.stderr).toContain("--omit=optional");
    await expect(require(lonely).startSqsim()).rejects.toThrow(`${platformPackage} is not installed`);

    expect(outcome(run({ SQSIM_BINARY_PATH: binaryPath() }))).toEqual([0, `sqsim ${version}`, ""]);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("ESM: import { startSqsim } from \"sqsim\"", () => {
  const script =
    'import { startSqsim } from "sqsim"; const s = await startSqsim(); await s.reset(); await s.stop(); console.log("ok")';
  const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
    encoding: "utf8",
    cwd: __dirname,
    timeout: 20_000,
  });
  expect(outcome(r)).toEqual([0, "ok", expect.any(String)]);
});

test("a server that exits at once rejects startSqsim with its stderr", async () => {
  await expect(startSqsim({ args: ["--no-such-flag"] })).rejects.toThrow(
    /exited \(code 2\) before listening[\s\S]*unexpected argument '--no-such-flag'/,
  );
});

test("client config, peek by URL, the clock; errors carry status and body; stop twice is fine", async () => {
  const sqsim = await startSqsim();
  const sqs = sqsim.client({ region: "eu-west-1" });
  const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: "jobs" }));
  const { queue } = await sqsim.peek(QueueUrl, { region: "eu-west-1" });
  expect(queue).toBe("arn:aws:sqs:eu-west-1:000000000000:jobs");
  expect(await sqsim.freeze()).toMatchObject({ frozen: true });
  const { now_ms } = await sqsim.advance(10);
  expect((await sqsim.unfreeze()).now_ms).toBeGreaterThanOrEqual(now_ms);
  await expect(sqsim.advance(-1)).rejects.toThrow(/clock: 400 .*advance_seconds/);
  await expect(sqsim.peek("nope")).rejects.toThrow(/peek\?queue_url=.*: 404/);
  await Promise.all([sqsim.stop(), sqsim.stop()]);
  await sqsim.stop();
  expect(await alive(sqsim.endpoint)).toBe(false);
});

test("a Node process or a Jest run that never calls stop() takes its server with it", async () => {
  const script = 'require("sqsim").startSqsim().then((s) => console.log(s.endpoint))';
  const node = spawnSync(process.execPath, ["-e", script], { encoding: "utf8", cwd: __dirname, timeout: 20_000 });
  expect(outcome(node)).toEqual([0, expect.stringMatching(/^http:/), expect.any(String)]);
  expect(await gone(node.stdout.trim())).toBe(true);

  const endpointFile = path.join(__dirname, "forgotten-endpoint");
  const jest = spawnSync("npx", ["--no", "--", "jest", "--ci", "--testMatch", "**/fixtures/forgets-stop.cjs"], {
    encoding: "utf8",
    cwd: __dirname,
    timeout: 20_000,
    env: { ...process.env, ENDPOINT_FILE: endpointFile },
  });
  expect(outcome(jest)).toEqual([0, expect.any(String), expect.any(String)]);
  expect(await gone(fs.readFileSync(endpointFile, "utf8"))).toBe(true);
}, 30_000);
