// Runs the test suite with node:test through tsx.
//   node scripts/run-tests.mjs            all tests (unit, then integration)
//   node scripts/run-tests.mjs unit       only test/unit
//   node scripts/run-tests.mjs FILE...    the given files
// Prints node's own summary and a closing "N passed, N failed" line for CI.
import { spawnSync } from "node:child_process";
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";

function find(dir) {
  let out = [];
  let entries;
  try {
    entries = readdirSync(dir);
  } catch {
    return out;
  }
  for (const e of entries.sort()) {
    const p = join(dir, e);
    if (statSync(p).isDirectory()) out = out.concat(find(p));
    else if (p.endsWith(".test.ts")) out.push(p);
  }
  return out;
}

const args = process.argv.slice(2);
let files;
if (args.length === 0) files = [...find("test/unit"), ...find("test/integration")];
else if (args.length === 1 && (args[0] === "unit" || args[0] === "integration")) files = find(`test/${args[0]}`);
else files = args;
if (files.length === 0) {
  console.error("no test files found");
  process.exit(1);
}

const concurrency = process.env.KRANE_TEST_CONCURRENCY ?? "2";
const res = spawnSync(
  process.execPath,
  [
    "--import",
    "tsx",
    "--test",
    `--test-concurrency=${concurrency}`,
    // A hung test fails after 10 minutes instead of holding CI until its own deadline.
    "--test-timeout=600000",
    "--test-reporter=spec",
    "--test-reporter-destination=stdout",
    "--test-reporter=./scripts/count-reporter.mjs",
    "--test-reporter-destination=stdout",
    ...files,
  ],
  {
    stdio: "inherit",
    // The tests deploy placeholder images that are in no registry (registry.example.com/…): the
    // ctrl processes they start run images as named unless a test turns resolution on
    // (--image-digests resolve, as the private-registry tests do).
    env: { ...process.env, KRANE_IMAGE_DIGESTS: process.env.KRANE_IMAGE_DIGESTS ?? "off" },
  },
);
process.exit(res.status ?? 1);
