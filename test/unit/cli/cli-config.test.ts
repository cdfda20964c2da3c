// The CLI's config file (src/cli/cli-config.ts): sessions stored 0600 in a 0700 folder, one per ctrl
// URL; a file others may read refused; a refresh answer keeps who the session is.
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { loadSession, saveSession, sessionFromAnswer, type StoredSession } from "../../../src/cli/cli-config.js";

const dir = mkdtempSync(join(tmpdir(), "krane-cli-config-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const session: StoredSession = {
  sessionId: "mss_a",
  accessToken: "krane_session_a",
  refreshToken: "krane_refresh_a",
  accessExpiresAt: 1_000,
  expiresAt: 2_000,
  workspace: "acme",
  email: "ana@example.com",
  role: "developer",
};

test("stores a session per ctrl URL, the owner's only, and forgets it", async () => {
  const path = join(dir, "a", "krane", "config.json");
  await saveSession("https://krane.example.com/", session, path);
  await saveSession("https://other.example.com", { ...session, sessionId: "mss_b" }, path);
  assert.equal(statSync(path).mode & 0o777, 0o600);
  assert.equal(statSync(join(dir, "a", "krane")).mode & 0o777, 0o700);
  assert.deepEqual(await loadSession("https://krane.example.com", path), session);
  assert.equal((await loadSession("https://other.example.com/", path))?.sessionId, "mss_b");
  await saveSession("https://krane.example.com", undefined, path);
  assert.equal(await loadSession("https://krane.example.com", path), undefined);
  assert.equal((await loadSession("https://other.example.com", path))?.sessionId, "mss_b");
  assert.equal(await loadSession("https://krane.example.com", join(dir, "none.json")), undefined);
});

test("refuses a config file others may read", async () => {
  const path = join(dir, "b", "config.json");
  await saveSession("https://krane.example.com", session, path);
  chmodSync(path, 0o644);
  await assert.rejects(loadSession("https://krane.example.com", path), /may be read by others \(mode 644\): chmod 600/);
});

test("a refresh answer keeps the workspace and member; a bad answer is refused", () => {
  const refreshed = sessionFromAnswer(
    {
      session_id: "mss_a",
      access_token: "krane_session_b",
      refresh_token: "krane_refresh_b",
      access_expires_at: "2030-01-01T00:05:00.000Z",
      expires_at: "2030-01-01T12:00:00.000Z",
    },
    session,
  );
  assert.deepEqual(refreshed, {
    ...session,
    accessToken: "krane_session_b",
    refreshToken: "krane_refresh_b",
    accessExpiresAt: Date.parse("2030-01-01T00:05:00.000Z"),
    expiresAt: Date.parse("2030-01-01T12:00:00.000Z"),
  });
  assert.throws(() => sessionFromAnswer({ session_id: "mss_a" }), /no access_token/);
});
