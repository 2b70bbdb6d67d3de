// The package as published: its exports, its version, and no Node-only
// code outside the signal helper.

import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { createRequire } from "node:module";
import { test } from "node:test";

import * as pkg from "@readpast/client";

const root = new URL("../../", import.meta.url);
const manifest = JSON.parse(readFileSync(new URL("package.json", root), "utf8")) as {
  name: string;
  version: string;
  type: string;
  exports: Record<string, unknown>;
  dependencies?: Record<string, string>;
  devDependencies: Record<string, string>;
  peerDependenciesMeta: Record<string, { optional: boolean }>;
  files: string[];
};

test("name, version, module type and no runtime dependencies", () => {
  assert.equal(manifest.name, "@readpast/client");
  assert.equal(pkg.VERSION, manifest.version);
  assert.equal(manifest.type, "module");
  assert.equal(manifest.dependencies, undefined);
  assert.equal(manifest.peerDependenciesMeta["@opentelemetry/api"]?.optional, true);
  for (const [name, version] of Object.entries(manifest.devDependencies)) {
    assert.match(version, /^\d+\.\d+\.\d+$/, `${name} is pinned exactly`);
  }
});

test("the exports resolve to the built module and its types", () => {
  const require = createRequire(import.meta.url);
  const resolved = import.meta.resolve("@readpast/client");
  assert.ok(resolved.endsWith("/dist/index.js"), resolved);
  assert.equal(typeof require.resolve("@readpast/client/package.json"), "string");
  const dist = readdirSync(new URL("dist/", root));
  for (const f of ["index.js", "index.d.ts", "client.js", "client.d.ts", "worker.js", "worker.d.ts"]) {
    assert.ok(dist.includes(f), `dist/${f}`);
  }
  for (const name of ["Client", "Worker", "Snooze", "Cancel", "Discard", "StaleClaimError", "NetworkError", "shutdownOnSignals"]) {
    assert.equal(typeof (pkg as Record<string, unknown>)[name], "function", name);
  }
});

// send.js reads process.versions only, to tell Node (whose node:http it
// loads on first use, by a dynamic import) from Deno and Bun.
test("only the signal helper and the Node check touch process, and nothing imports Node modules", () => {
  for (const f of readdirSync(new URL("dist/", root))) {
    if (!f.endsWith(".js")) continue;
    const src = readFileSync(new URL(`dist/${f}`, root), "utf8");
    assert.doesNotMatch(src, /from "node:|require\(/, `dist/${f} imports a Node module`);
    if (f !== "signals.js" && f !== "worker.js" && f !== "send.js") assert.doesNotMatch(src, /\bprocess\??\./, `dist/${f} uses process`);
  }
});
