// `npm test`: runs the compiled tests (build/test/*.test.js) with node's
// test runner, TAP output, several files at once where node allows it.

import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";

const dir = new URL("../build/test/", import.meta.url);
const files = readdirSync(dir)
  .filter((f) => f.endsWith(".test.js"))
  .sort()
  .map((f) => new URL(f, dir).pathname);
if (files.length === 0) {
  console.error("no tests in build/test: compile them first (tsc -p tsconfig.test.json)");
  process.exit(1);
}
const args = ["--test", "--test-reporter=tap"];
const [major = 0, minor = 0] = process.versions.node.split(".").map(Number);
// --test-concurrency is node 20.10 and later; before, files run at once.
if (major > 20 || (major === 20 && minor >= 10)) args.push("--test-concurrency=4");
const r = spawnSync(process.execPath, [...args, ...files], { stdio: "inherit" });
process.exit(r.status ?? 1);
