// Source archives: packed deterministically (equal contents, equal bytes: the upload's digest is
// its identity), read back whole, and read defensively (what a source never needs is refused).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, readlinkSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { gzipSync } from "node:zlib";
import { packTar, readTar, TarError, type TarEntry } from "../../../src/builds/tar.js";

const LIMITS = { maxBytes: 1 << 20, maxEntries: 100 };
const text = (s: string) => new TextEncoder().encode(s);

const entries: TarEntry[] = [
  { path: "src", type: "dir" },
  { path: "src/index.js", type: "file", data: text("console.log(1)\n") },
  { path: "run.sh", type: "file", data: text("#!/bin/sh\n"), executable: true },
  { path: `deep/${"d".repeat(120)}/file-with-a-long-name.txt`, type: "file", data: text("long") },
  { path: "naïve.txt", type: "file", data: text("utf-8 name") },
  { path: "link", type: "symlink", target: "src/index.js" },
  { path: "empty", type: "file", data: new Uint8Array() },
];

test("packing is deterministic and independent of the entries' order", () => {
  const a = packTar(entries);
  const b = packTar([...entries].reverse());
  assert.deepEqual(a, b);
  assert.notDeepEqual(packTar(entries.slice(1)), a);
});

test("what is packed reads back, and GNU tar reads it the same way", () => {
  const back = readTar(packTar(entries), LIMITS);
  assert.deepEqual(
    back.map((e) => [e.path, e.type, e.executable ?? false, e.target ?? "", Buffer.from(e.data ?? []).toString()]),
    [...entries]
      .sort((x, y) => (x.path < y.path ? -1 : 1))
      .map((e) => [
        e.path,
        e.type,
        e.type === "file" ? (e.executable ?? false) : false,
        e.target ?? "",
        Buffer.from(e.data ?? []).toString(),
      ]),
  );
  const dir = mkdtempSync(join(tmpdir(), "krane-tar-"));
  writeFileSync(join(dir, "a.tgz"), packTar(entries));
  execFileSync("tar", ["-xzf", join(dir, "a.tgz"), "-C", dir]);
  assert.equal(readFileSync(join(dir, "deep", "d".repeat(120), "file-with-a-long-name.txt"), "utf8"), "long");
  assert.equal(readFileSync(join(dir, "naïve.txt"), "utf8"), "utf-8 name");
  assert.equal(readlinkSync(join(dir, "link")), "src/index.js");
  assert.equal(statSync(join(dir, "run.sh")).mode & 0o777, 0o755);
});

test("an archive made by GNU tar reads (ustar prefix, ./ names, the root entry)", () => {
  const dir = mkdtempSync(join(tmpdir(), "krane-tar-"));
  execFileSync("sh", [
    "-c",
    `mkdir -p ${dir}/t/a && echo hi > ${dir}/t/a/b.txt && tar -czf ${dir}/x.tgz -C ${dir}/t .`,
  ]);
  const back = readTar(readFileSync(join(dir, "x.tgz")), LIMITS);
  assert.deepEqual(
    back.map((e) => e.path),
    ["a", "a/b.txt"],
  );
});

/** A raw tar with one entry whose header is written by hand (what an attacker sends). */
function rawTar(name: string, type: string, body = "", linkname = ""): Buffer {
  const h = Buffer.alloc(512);
  h.write(name, 0, 100);
  h.write("0000644\0", 100);
  h.write("0000000\0", 108);
  h.write("0000000\0", 116);
  h.write(`${body.length.toString(8).padStart(11, "0")}\0`, 124);
  h.write("00000000000\0", 136);
  h.write("        ", 148);
  h.write(type, 156);
  h.write(linkname, 157);
  h.write("ustar\0", 257);
  h.write("00", 263);
  let sum = 0;
  for (const b of h) sum += b;
  h.write(`${sum.toString(8).padStart(6, "0")}\0 `, 148);
  const data = Buffer.alloc(Math.ceil(body.length / 512) * 512);
  data.write(body);
  return Buffer.concat([h, data]);
}

const refused = (raw: Buffer, says: RegExp, limits = LIMITS) =>
  assert.throws(
    () => readTar(gzipSync(Buffer.concat([raw, Buffer.alloc(1024)])), limits),
    (err: unknown) => err instanceof TarError && says.test(err.message),
  );

test("absolute paths, .., hard links, devices, a path twice and paths below the archive's own links are refused", () => {
  refused(rawTar("/etc/passwd", "0", "x"), /absolute path/);
  refused(rawTar("a/../../x", "0", "x"), /outside the root/);
  refused(rawTar("a", "1", "", "b"), /a hard link/);
  refused(rawTar("dev", "3"), /entry type "3"/);
  refused(
    Buffer.concat([rawTar("out", "2", "", "/etc"), rawTar("out/passwd", "0", "x")]),
    /below out, a symbolic link/,
  );
  refused(Buffer.concat([rawTar("out", "2", "", "/etc/passwd"), rawTar("out", "0", "x")]), /out: twice in the archive/);
});

test("bounds: unpacked bytes, entries, and data that is not gzip", () => {
  const big = packTar([{ path: "a", type: "file", data: new Uint8Array(4096) }]);
  assert.throws(() => readTar(big, { maxBytes: 1000, maxEntries: 10 }), /more than the limit of 1000 bytes/);
  const many = packTar(Array.from({ length: 5 }, (_, i) => ({ path: `f${i}`, type: "file" as const })));
  assert.throws(() => readTar(many, { maxBytes: 1 << 20, maxEntries: 4 }), /more than the limit of 4 entries/);
  assert.throws(() => readTar(text("not gzip"), LIMITS), /not gzip data/);
  const bad = rawTar("a", "0", "x");
  bad[0] = 0x62; // the checksum no longer matches
  refused(bad, /bad checksum/);
});
