// A source archive: a gzipped POSIX tar of regular files, directories and symbolic links (pure,
// buffers in and out). The CLI packs a directory with `packTar` so that equal contents give equal
// bytes (sorted entries, owner 0, time 0, modes 0644 or 0755), which makes an upload's digest its
// identity; the agent reads one back with `readTar`, which refuses what a source never needs and
// an attacker would use: absolute paths, "..", hard links and devices, a path below a symbolic
// link the archive made, and more data or files than the bounds allow.
import { gunzipSync, gzipSync } from "node:zlib";
import { normalizePath } from "./detect.js";

export interface TarEntry {
  /** Relative path, "/" between components. */
  readonly path: string;
  readonly type: "file" | "dir" | "symlink";
  /** Files: the contents. */
  readonly data?: Uint8Array;
  /** Files: executable by its owner. */
  readonly executable?: boolean;
  /** Symbolic links: the target, as stored. */
  readonly target?: string;
}

const BLOCK = 512;

function octal(n: number, width: number): string {
  return `${n.toString(8).padStart(width - 1, "0")}\0`;
}

/** A pax extended header record ("<len> key=value\n", the length counting itself). */
function paxRecord(key: string, value: string): string {
  const body = ` ${key}=${value}\n`;
  let len = Buffer.byteLength(body) + 1;
  while (String(len).length + Buffer.byteLength(body) !== len) len = String(len).length + Buffer.byteLength(body);
  return `${len}${body}`;
}

function header(name: string, type: string, size: number, mode: number, linkname = ""): Buffer {
  const h = Buffer.alloc(BLOCK);
  h.write(name, 0, 100, "utf8");
  h.write(octal(mode, 8), 100, 8, "ascii");
  h.write(octal(0, 8), 108, 8, "ascii");
  h.write(octal(0, 8), 116, 8, "ascii");
  h.write(octal(size, 12), 124, 12, "ascii");
  h.write(octal(0, 12), 136, 12, "ascii");
  h.write("        ", 148, 8, "ascii");
  h.write(type, 156, 1, "ascii");
  h.write(linkname, 157, 100, "utf8");
  h.write("ustar\0", 257, 6, "ascii");
  h.write("00", 263, 2, "ascii");
  let sum = 0;
  for (const b of h) sum += b;
  h.write(`${sum.toString(8).padStart(6, "0")}\0 `, 148, 8, "ascii");
  return h;
}

function padded(data: Uint8Array): Buffer[] {
  const rest = data.length % BLOCK;
  return rest === 0 ? [Buffer.from(data)] : [Buffer.from(data), Buffer.alloc(BLOCK - rest)];
}

/** The gzipped tar of `entries`, sorted by path; equal entries give equal bytes. */
export function packTar(entries: readonly TarEntry[]): Buffer {
  const out: Buffer[] = [];
  const sorted = [...entries].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  for (const e of sorted) {
    const name = e.type === "dir" ? `${e.path}/` : e.path;
    const target = e.target ?? "";
    // Names or targets too long (or not ASCII) for the fixed fields go in a pax header first.
    const pax =
      (Buffer.byteLength(name) > 100 || /[^\x20-\x7e]/.test(name) ? paxRecord("path", name) : "") +
      (Buffer.byteLength(target) > 100 || /[^\x20-\x7e]/.test(target) ? paxRecord("linkpath", target) : "");
    if (pax !== "") {
      const body = Buffer.from(pax, "utf8");
      out.push(header("PaxHeader", "x", body.length, 0o644), ...padded(body));
    }
    const short = (s: string) => (Buffer.byteLength(s) > 100 || /[^\x20-\x7e]/.test(s) ? "" : s);
    if (e.type === "file") {
      const data = e.data ?? new Uint8Array();
      out.push(header(short(name), "0", data.length, e.executable ? 0o755 : 0o644), ...padded(data));
    } else if (e.type === "dir") {
      out.push(header(short(name), "5", 0, 0o755));
    } else {
      out.push(header(short(name), "2", 0, 0o777, short(target)));
    }
  }
  out.push(Buffer.alloc(BLOCK * 2));
  // mtime 0 in the gzip header too (Node writes 0), so equal archives compress to equal bytes.
  return gzipSync(Buffer.concat(out), { level: 6 });
}

export interface ReadLimits {
  /** Most bytes the archive may unpack to. */
  readonly maxBytes: number;
  /** Most entries it may hold. */
  readonly maxEntries: number;
}

/** An archive krane will not unpack; the message says why. */
export class TarError extends Error {}

function cstring(b: Buffer, start: number, len: number): string {
  const s = b.subarray(start, start + len);
  const end = s.indexOf(0);
  return s.subarray(0, end === -1 ? len : end).toString("utf8");
}

function parseOctal(b: Buffer, start: number, len: number): number {
  const s = cstring(b, start, len).trim();
  if (s === "") return 0;
  if (!/^[0-7]+$/.test(s)) throw new TarError(`a tar header has a bad number field: ${JSON.stringify(s)}`);
  return parseInt(s, 8);
}

function parsePax(body: Buffer): Map<string, string> {
  const out = new Map<string, string>();
  let i = 0;
  while (i < body.length) {
    const sp = body.indexOf(0x20, i);
    if (sp === -1) break;
    const len = Number(body.subarray(i, sp).toString("ascii"));
    if (!Number.isSafeInteger(len) || len <= 0 || i + len > body.length)
      throw new TarError("a pax header is malformed");
    const rec = body.subarray(sp + 1, i + len - 1).toString("utf8");
    const eq = rec.indexOf("=");
    if (eq > 0) out.set(rec.slice(0, eq), rec.slice(eq + 1));
    i += len;
  }
  return out;
}

/**
 * The entries of a gzipped tar, checked: every path stays inside the root and below no symbolic
 * link of the archive, only files, directories and symbolic links, within `limits`.
 */
export function readTar(gz: Uint8Array, limits: ReadLimits): TarEntry[] {
  let raw: Buffer;
  try {
    raw = gunzipSync(gz, { maxOutputLength: limits.maxBytes + BLOCK * 4 });
  } catch (err) {
    if (err instanceof RangeError)
      throw new TarError(`the archive unpacks to more than the limit of ${limits.maxBytes} bytes`);
    throw new TarError(`the archive is not gzip data (${err instanceof Error ? err.message : String(err)})`);
  }
  const entries: TarEntry[] = [];
  const links = new Set<string>();
  const seen = new Set<string>();
  let pax = new Map<string, string>();
  let longName: string | undefined;
  let total = 0;
  let off = 0;
  while (off + BLOCK <= raw.length) {
    const h = raw.subarray(off, off + BLOCK);
    if (h.every((b) => b === 0)) break;
    let sum = 0;
    for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : (h[i] ?? 0);
    if (sum !== parseOctal(h, 148, 8)) throw new TarError(`the tar header at byte ${off} has a bad checksum`);
    const type = String.fromCharCode(h[156] ?? 0);
    const size = parseOctal(h, 124, 12);
    const dataStart = off + BLOCK;
    off = dataStart + Math.ceil(size / BLOCK) * BLOCK;
    if (off > raw.length) throw new TarError("the archive ends inside an entry");
    const data = raw.subarray(dataStart, dataStart + size);
    if (type === "x") {
      pax = parsePax(data);
      continue;
    }
    if (type === "g") continue;
    if (type === "L") {
      longName = cstring(data, 0, data.length);
      continue;
    }
    const prefix = cstring(h, 345, 155);
    const rawName = pax.get("path") ?? longName ?? (prefix ? `${prefix}/${cstring(h, 0, 100)}` : cstring(h, 0, 100));
    const rawTarget = pax.get("linkpath") ?? cstring(h, 157, 100);
    pax = new Map();
    longName = undefined;
    if (rawName.startsWith("/")) throw new TarError(`${rawName}: an absolute path`);
    const path = normalizePath(rawName);
    if (path === undefined) {
      if (rawName.replace(/\/+$/, "").replace(/^\.\/?/, "") === "") continue; // the root itself
      throw new TarError(`${rawName}: a path outside the root`);
    }
    const parts = path.split("/");
    for (let i = 1; i < parts.length; i++)
      if (links.has(parts.slice(0, i).join("/")))
        throw new TarError(`${path}: below ${parts.slice(0, i).join("/")}, a symbolic link of the archive`);
    // A second entry for a path would write through what the first made (a symbolic link).
    if (seen.has(path)) throw new TarError(`${path}: twice in the archive`);
    seen.add(path);
    if (entries.length >= limits.maxEntries)
      throw new TarError(`the archive holds more than the limit of ${limits.maxEntries} entries`);
    total += size;
    if (total > limits.maxBytes)
      throw new TarError(`the archive unpacks to more than the limit of ${limits.maxBytes} bytes`);
    const mode = parseOctal(h, 100, 8);
    if (type === "0" || type === "\0" || type === "7") {
      entries.push({ path, type: "file", data: new Uint8Array(data), executable: (mode & 0o100) !== 0 });
    } else if (type === "5") {
      entries.push({ path, type: "dir" });
    } else if (type === "2") {
      links.add(path);
      entries.push({ path, type: "symlink", target: rawTarget });
    } else {
      throw new TarError(
        `${path}: ${type === "1" ? "a hard link" : `entry type "${type}"`}; a source holds files, directories and symbolic links only`,
      );
    }
  }
  return entries;
}
