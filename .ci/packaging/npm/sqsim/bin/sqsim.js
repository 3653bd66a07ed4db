#!/usr/bin/env node
"use strict";
// The `sqsim` command (npx sqsim): run the native binary with our arguments and stdio, pass
// signals on to it and exit the way it exits. Node has no exec(), so we stay as its parent.
const { spawn } = require("node:child_process");
const { binaryPath } = require("../index.js");

let bin;
try {
  bin = binaryPath();
} catch (err) {
  console.error(err.message);
  process.exit(1);
}

const child = spawn(bin, process.argv.slice(2), { stdio: "inherit" });
// Without handlers Node would die on these and leave the server running (e.g. `kill <npx pid>`,
// a container's SIGTERM); a Ctrl-C reaches both anyway, and sqsim ignores the second one.
const signals = ["SIGINT", "SIGTERM"];
for (const signal of signals) process.on(signal, () => child.kill(signal));

child.on("error", (err) => {
  console.error(`sqsim: could not run ${bin}: ${err.message}`);
  process.exit(1);
});
child.on("exit", (code, signal) => {
  if (signal) {
    // Die of the same signal, so our parent sees what the server saw (the shell's 128+n if
    // Node ignores that signal, e.g. SIGPIPE).
    for (const s of signals) process.removeAllListeners(s);
    process.exitCode = 128 + (require("node:os").constants.signals[signal] ?? 0);
    process.kill(process.pid, signal);
  } else {
    process.exit(code);
  }
});
