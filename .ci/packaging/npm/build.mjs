#!/usr/bin/env node
// Builds the npm packages the way esbuild ships its binary: `sqsim` (the launcher and the Node
// API, from .ci/packaging/npm/sqsim) and `@sqsim/<platform>-<arch>` (just the binary), which `sqsim`
// lists in optionalDependencies so npm installs only the one whose os/cpu match.
//
//   node .ci/packaging/npm/build.mjs --binary target/dist/sqsim --out target/npm [--platform linux-x64]
//                                [--keep-debug]
//
// Leaves DIR/sqsim-VERSION.tgz and DIR/sqsim-PLATFORM-VERSION.tgz and prints their paths. The
// version is Cargo.toml's: the sources carry 0.0.0 placeholders. No dependencies.
import { execFileSync } from "node:child_process";
import {
  chmodSync, copyFileSync, cpSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync,
} from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const here = dirname(fileURLToPath(import.meta.url));
const { values: opt } = parseArgs({
  options: {
    binary: { type: "string" },
    out: { type: "string" },
    platform: { type: "string", default: `${process.platform}-${process.arch}` },
    "keep-debug": { type: "boolean", default: false },
  },
});
if (!opt.binary || !opt.out) {
  console.error("usage: node .ci/packaging/npm/build.mjs --binary PATH --out DIR [--platform OS-CPU] [--keep-debug]");
  process.exit(2);
}
const out = resolve(opt.out);
const [os, cpu] = opt.platform.split("-");
const exe = os === "win32" ? "sqsim.exe" : "sqsim";
const native = opt.platform === `${process.platform}-${process.arch}`;

// [package] version (and repository, if Cargo.toml ever gets one) from Cargo.toml.
const cargo = readFileSync(join(here, "../../../Cargo.toml"), "utf8");
const cargoPackage = cargo.split(/^\[/m).find((section) => section.startsWith("package]"));
const cargoField = (name) => new RegExp(`^${name}\\s*=\\s*"([^"]*)"`, "m").exec(cargoPackage)?.[1];
const version = cargoField("version");
const repository = cargoField("repository");
if (!version) throw new Error("build.mjs: no [package] version in Cargo.toml");

// A stale binary would ship under the wrong version: check it when it runs here.
if (native) {
  const reported = execFileSync(opt.binary, ["--version"], { encoding: "utf8" }).trim();
  if (reported !== `sqsim ${version}`) {
    console.error(`build.mjs: ${opt.binary} says "${reported}", Cargo.toml says ${version}`);
    process.exit(1);
  }
}

// Start from nothing each time, so `DIR/*.tgz` is exactly these two tarballs.
mkdirSync(out, { recursive: true });
for (const f of readdirSync(out)) if (/^sqsim-.*\.tgz$/.test(f)) rmSync(join(out, f));
const stage = join(out, "stage");
rmSync(stage, { recursive: true, force: true });

// The main package: the sources, with the version stamped in.
const main = join(stage, "sqsim");
cpSync(join(here, "sqsim"), main, { recursive: true });
const pkg = JSON.parse(readFileSync(join(main, "package.json"), "utf8"));
pkg.version = version;
for (const dep of Object.keys(pkg.optionalDependencies)) pkg.optionalDependencies[dep] = version;
if (repository) pkg.repository = { type: "git", url: `git+${repository}.git` };
if (!(`@sqsim/${opt.platform}` in pkg.optionalDependencies)) {
  console.error(`build.mjs: @sqsim/${opt.platform} is not in sqsim's optionalDependencies`);
  process.exit(1);
}
writeFileSync(join(main, "package.json"), JSON.stringify(pkg, null, 2) + "\n");

// The platform package: the binary and a package.json whose os/cpu make npm skip it elsewhere.
const platform = join(stage, opt.platform);
mkdirSync(join(platform, "bin"), { recursive: true });
copyFileSync(opt.binary, join(platform, "bin", exe));
// Debug info is most of the size (a debug build: 286 MB, 64 MB without) and of npm pack's time;
// the symbols stay, so a panic's backtrace still names functions. Only this machine's strip
// knows this machine's binaries.
if (native && os !== "win32" && !opt["keep-debug"]) {
  try {
    execFileSync("strip", ["-S", join(platform, "bin", exe)]);
  } catch (err) {
    console.error(`build.mjs: not stripped (${err.message.split("\n")[0]}); packing as is`);
  }
}
chmodSync(join(platform, "bin", exe), 0o755);
const platformPkg = {
  name: `@sqsim/${opt.platform}`,
  version,
  description: `The ${opt.platform} binary of sqsim, an Amazon SQS-compatible server: install "sqsim".`,
  license: pkg.license,
  ...(pkg.repository && { repository: pkg.repository }),
  os: [os],
  cpu: [cpu],
  files: ["bin/"],
  preferUnplugged: true, // Yarn PnP: a binary must live on disk, not in a zip
};
writeFileSync(join(platform, "package.json"), JSON.stringify(platformPkg, null, 2) + "\n");
writeFileSync(
  join(platform, "README.md"),
  `# ${platformPkg.name}\n\nThe \`sqsim\` binary for ${opt.platform}. Install ` +
    "[`sqsim`](https://www.npmjs.com/package/sqsim) instead: it depends on this package " +
    "(optionally, one per platform) and runs the binary.\n",
);

for (const dir of [platform, main]) {
  const [packed] = JSON.parse(
    execFileSync("npm", ["pack", "--json", "--pack-destination", out], {
      cwd: dir,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "inherit"],
      shell: process.platform === "win32", // npm is npm.cmd there
    }),
  );
  console.log(join(out, packed.filename));
}
rmSync(stage, { recursive: true }); // a second copy of the binary
