// The first admin API token: registered as configured, read from its file, or generated into the
// file (mode 0600) for a database with no user token yet. Tokens never go to logs, only the path.
import { mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import type { Logger } from "pino";
import type { Store } from "../db/store.js";
import { addUserToken, countInstallationTokens, generateToken } from "../domain/tokens.js";

export async function bootstrapAdminToken(
  store: Store,
  admin: { token?: string; file: string },
  log: Logger,
): Promise<void> {
  if (admin.token !== undefined) {
    if (!(await addUserToken(store, "admin", admin.token))) {
      log.error(
        "the configured admin token was revoked and is not registered again: remove it from the configuration (--admin-token, KRANE_ADMIN_TOKEN)",
      );
    }
    return;
  }
  const fromFile = readAdminTokenFile(admin.file, log);
  if (fromFile !== undefined) {
    if (!(await addUserToken(store, "admin", fromFile))) {
      log.warn(
        { file: admin.file },
        "the admin token in this file was revoked and is not registered again: delete the file",
      );
    }
    return;
  }
  if ((await countInstallationTokens(store.db)) > 0) return;
  let token = generateToken("user");
  mkdirSync(dirname(admin.file), { recursive: true });
  try {
    writeFileSync(admin.file, `${token}\n`, { mode: 0o600, flag: "wx" });
  } catch (err) {
    // Another ctrl on this machine wrote it first: use its token.
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    token = readAdminTokenFile(admin.file, log) ?? token;
  }
  await addUserToken(store, "admin", token);
  // Only the path is logged: tokens never go to logs.
  log.warn({ file: admin.file }, "created the first admin API token; use it as KRANE_TOKEN");
}

/** The token in the admin token file, or undefined when there is no such file. */
function readAdminTokenFile(file: string, log: Logger): string | undefined {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new Error(`admin token file ${file}: ${(err as Error).message}`);
  }
  const token = text.trim();
  if (token === "" || /\s/.test(token)) throw new Error(`admin token file ${file}: expected one token on one line`);
  if ((statSync(file).mode & 0o077) !== 0)
    log.warn({ file }, "the admin token file can be read by other users: chmod 600 it");
  return token;
}
