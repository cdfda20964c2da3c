// Where ctrl's master key comes from: `--master-key-file` (or KRANE_MASTER_KEY_FILE), the
// KRANE_MASTER_KEY variable, or — for a local SQLite database only — a key generated on first
// start into a file next to it (mode 0600; only the path is logged). A PostgreSQL installation
// must be given its key for secrets: replicas must share it, and a generated one would be lost
// with the pod (without one, ctrl runs and refuses secrets).
import { randomBytes } from "node:crypto";
import { linkSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { Keyring, KeyringError, generateMasterKey, parseMasterKey } from "./keyring.js";

export interface MasterKeySettings {
  /** The key itself (KRANE_MASTER_KEY). */
  readonly key?: string;
  /** A file holding the key. */
  readonly file?: string;
  /** Files of previous keys, still accepted for unwrapping during a rotation. */
  readonly previousFiles?: readonly string[];
  /** Where a local installation's generated key goes when none is given (undefined: refuse). */
  readonly generateAt?: string;
}

function readKeyFile(file: string, what: string, warn: (msg: string, file: string) => void): Buffer {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new KeyringError(`${what} ${file}: ${(err as Error).message}`);
  }
  if ((statSync(file).mode & 0o077) !== 0) warn("the master key file can be read by other users: chmod 600 it", file);
  return parseMasterKey(text, `${what} ${file}`);
}

/** Whether the settings name a key, or a place to generate one (else loadKeyring refuses). */
export function hasMasterKeySource(s: MasterKeySettings): boolean {
  return s.key !== undefined || s.file !== undefined || s.generateAt !== undefined;
}

/** The keyring from the settings; `warn` is told about loose file permissions and generated keys (paths only). */
export function loadKeyring(
  s: MasterKeySettings,
  warn: (msg: string, file: string) => void = () => undefined,
): Keyring {
  if (s.key !== undefined && s.file !== undefined)
    throw new KeyringError("master key: give either KRANE_MASTER_KEY or --master-key-file, not both");
  const previous = (s.previousFiles ?? []).map((f) => readKeyFile(f, "previous master key file", warn));
  if (s.key !== undefined) return new Keyring(parseMasterKey(s.key, "KRANE_MASTER_KEY"), previous);
  if (s.file !== undefined) return new Keyring(readKeyFile(s.file, "master key file", warn), previous);
  if (s.generateAt === undefined) {
    throw new KeyringError(
      "no master key: give --master-key-file (or KRANE_MASTER_KEY_FILE, or KRANE_MASTER_KEY) — 32 random bytes, e.g. `openssl rand -base64 32`",
    );
  }
  try {
    return new Keyring(readKeyFile(s.generateAt, "master key file", warn), previous);
  } catch (err) {
    if (!(err instanceof KeyringError) || !/ENOENT/.test(err.message)) throw err;
  }
  // Written whole under a name of its own, then linked into place: link() fails if the file
  // exists, and a ctrl starting at the same moment never reads a created but still empty file
  // (which writing the file in place with "wx" allowed).
  const tmp = `${s.generateAt}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`;
  try {
    writeFileSync(tmp, `${generateMasterKey()}\n`, { mode: 0o600, flag: "wx" });
    linkSync(tmp, s.generateAt);
    warn("generated a master key for secrets at rest: back it up, without it no secret can be read", s.generateAt);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
  } finally {
    rmSync(tmp, { force: true });
  }
  return new Keyring(readKeyFile(s.generateAt, "master key file", warn), previous);
}
