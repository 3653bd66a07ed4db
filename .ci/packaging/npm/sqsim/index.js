"use strict";
// sqsim for Node tests: find the native binary that npm installed with this package, start it on
// a free port and drive its test controls (/_sqsim/…). Node >= 18 built-ins only.
const { spawn } = require("node:child_process");

const ACCOUNT = "000000000000"; // the account sqsim's queue URLs use unless configured otherwise
const START_TIMEOUT_MS = 20_000;
const STOP_GRACE_MS = 5_000;

// The native binary: $SQSIM_BINARY_PATH, else the platform package npm picked for this machine
// (esbuild's scheme: one optionalDependency per platform, `os`/`cpu` let npm skip the others).
function binaryPath() {
  if (process.env.SQSIM_BINARY_PATH) return process.env.SQSIM_BINARY_PATH;
  const platform = `${process.platform}-${process.arch}`;
  const pkg = `@sqsim/${platform}`;
  const exe = process.platform === "win32" ? "sqsim.exe" : "sqsim";
  try {
    return require.resolve(`${pkg}/bin/${exe}`);
  } catch {
    const known = Object.keys(require("./package.json").optionalDependencies || {});
    if (!known.includes(pkg)) {
      throw new Error(
        `sqsim: there is no prebuilt binary for ${platform} (there are: ${known.join(", ")}). ` +
          "Build one (`cargo install sqsim`) and set SQSIM_BINARY_PATH to it.",
      );
    }
    throw new Error(
      `sqsim: the binary for ${platform} is missing: the package ${pkg} is not installed.\n` +
        `npm installs it as an optional dependency of sqsim, and skips it when optional ` +
        `dependencies are omitted (--no-optional, --omit=optional, optional=false in .npmrc) or ` +
        `when the lockfile was written without it.\n` +
        `Fix: reinstall with optional dependencies (rm -rf node_modules && npm install), or ` +
        `npm install ${pkg}, or set SQSIM_BINARY_PATH to an sqsim binary.`,
    );
  }
}

// Servers still running, killed when Node exits so a crashed test run leaves none behind. Under
// Jest, `process` is a per-file copy whose "exit" never fires; the main context's is the real one.
const live = new Set();
const realProcess = (() => {
  try {
    return require("node:vm").runInThisContext("process");
  } catch {
    return process;
  }
})();
function killAll() {
  for (const child of live) child.kill("SIGTERM");
}
function track(child) {
  live.add(child);
  if (live.size === 1) realProcess.on("exit", killAll);
  const untrack = () => {
    live.delete(child);
    if (live.size === 0) realProcess.off("exit", killAll);
  };
  child.once("exit", untrack);
  child.once("error", () => child.pid === undefined && untrack()); // never started: no "exit"
}

async function startSqsim({ args = [], env = {}, binary } = {}) {
  const bin = binary ?? binaryPath();
  const child = spawn(bin, ["--port", "0", ...args], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
    windowsHide: true,
  });
  track(child);

  // The server logs to stderr for as long as it runs: keep reading (a full pipe would block it)
  // and keep the tail for error messages.
  let stderr = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (chunk) => {
    stderr = (stderr + chunk).slice(-4000);
  });
  const exited = new Promise((resolve) => child.once("exit", resolve));

  const endpoint = await new Promise((resolve, reject) => {
    let out = "";
    const fail = (why) => {
      clearTimeout(timer);
      child.kill("SIGKILL");
      const tail = stderr.trim() ? `\n--- stderr (tail) ---\n${stderr.trim()}` : "";
      reject(new Error(`sqsim (${bin}) ${why}${tail}`));
    };
    const timer = setTimeout(
      () => fail(`printed no "sqsim listening on" line within ${START_TIMEOUT_MS / 1000} s`),
      START_TIMEOUT_MS,
    );
    const onError = (err) => fail(`could not be started: ${err.message}`);
    child.once("error", onError);
    // "close", not "exit": by then stderr has been read to the end.
    const onClose = (code, signal) => fail(`exited (${signal ?? `code ${code}`}) before listening`);
    child.once("close", onClose);
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", function firstLine(chunk) {
      out += chunk;
      const nl = out.indexOf("\n");
      if (nl < 0) return;
      // Later lines (the banner) are read and dropped: resume() with no listener discards them.
      child.stdout.off("data", firstLine);
      child.stdout.resume();
      child.off("close", onClose);
      child.off("error", onError);
      clearTimeout(timer);
      const match = /listening on (\S+)/.exec(out.slice(0, nl)); // "sqsim listening on http://127.0.0.1:PORT"
      if (match) resolve(match[1]);
      else fail(`printed an unexpected first line: ${out.slice(0, nl)}`);
    });
  });

  // Don't keep Node alive for the server: a test run that forgets stop() still ends, and the
  // exit hook above takes the server down with it.
  child.unref();
  child.stdout.unref?.();
  child.stderr.unref?.();

  const control = async (method, path, body) => {
    const res = await fetch(`${endpoint}/_sqsim/${path}`, {
      method,
      headers: body === undefined ? {} : { "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`sqsim ${method} /_sqsim/${path}: ${res.status} ${text}`);
    return text ? JSON.parse(text) : undefined;
  };
  const queueUrl = (queue) => (/^https?:\/\//.test(queue) ? queue : `${endpoint}/${ACCOUNT}/${queue}`);
  const clients = [];
  let stopping;

  return {
    endpoint,
    pid: child.pid,
    client(config = {}) {
      let sdk;
      try {
        sdk = require("@aws-sdk/client-sqs");
      } catch (err) {
        if (err.code !== "MODULE_NOT_FOUND") throw err;
        throw new Error(
          "sqsim: client() needs the AWS SDK: npm install --save-dev @aws-sdk/client-sqs",
          { cause: err },
        );
      }
      const client = new sdk.SQSClient({
        endpoint,
        region: "us-east-1",
        credentials: { accessKeyId: "test", secretAccessKey: "test" },
        ...config,
      });
      clients.push(client);
      return client;
    },
    reset: (scope = {}) => control("POST", "reset", scope),
    advance: (seconds) => control("POST", "clock", { advance_seconds: seconds }),
    freeze: () => control("POST", "clock", { freeze: true }),
    unfreeze: () => control("POST", "clock", { freeze: false }),
    // `params`: offset, limit, region (a queue URL alone names its region's default).
    peek: (queue, params = {}) =>
      control("GET", `peek?${new URLSearchParams({ queue_url: queueUrl(queue), ...params })}`),
    stop() {
      stopping ??= (async () => {
        for (const client of clients) client.destroy(); // their keep-alive sockets
        if (child.exitCode === null && child.signalCode === null) {
          child.kill("SIGTERM");
          // A ref'd timer also keeps Node running until the server is really gone.
          const timer = setTimeout(() => child.kill("SIGKILL"), STOP_GRACE_MS);
          await exited;
          clearTimeout(timer);
        }
      })();
      return stopping;
    },
  };
}

module.exports = { startSqsim, binaryPath };
