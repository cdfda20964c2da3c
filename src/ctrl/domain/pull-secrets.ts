// No table of its own: adding, replacing or removing a workspace's registry credential
// (./registries.ts) and, in the same transaction, re-rendering what names the workspace's pull
// Secret (./workload-refresh.ts) — so the agents write the Secret's new content, or delete it
// with the last credential, and nothing half-applied is ever streamed.
import { randomBytes } from "node:crypto";
import type { Store } from "../db/store.js";
import {
  buildPullUsername,
  hasBuildPullCredential,
  putRegistryCredentialIn,
  removeRegistryCredentialIn,
  type RegistryCredentialInfo,
} from "./registries.js";
import type { Keyring } from "../secrets/keyring.js";
import { refreshWorkspaceWorkloads } from "./workload-refresh.js";

/** `krane registry add`: stores the credential and re-renders what names the pull Secret. */
export async function addRegistry(
  store: Store,
  keyring: Keyring,
  workspaceRef: string,
  host: string,
  username: string,
  password: string,
): Promise<{ credential: RegistryCredentialInfo; replaced: boolean }> {
  return store.write(async (tx) => {
    const put = await putRegistryCredentialIn(tx, keyring, workspaceRef, host, username, password);
    await refreshWorkspaceWorkloads(tx, put.workspaceId);
    return { credential: put.credential, replaced: put.replaced };
  });
}

/** `krane registry remove`: forgets the credential; not_found when there is none. */
export async function removeRegistry(store: Store, workspaceRef: string, host: string): Promise<void> {
  await store.write(async (tx) =>
    refreshWorkspaceWorkloads(tx, await removeRegistryCredentialIn(tx, workspaceRef, host)),
  );
}

/**
 * The workspace's pull identity at the build registry (token mode), made when it has none (or
 * when a `krane registry add` of that host replaced it): a random password, sealed as any
 * registry credential, so the workspace's pull Secret carries it and ctrl's token endpoint checks
 * it. Stored rather than derived, so one workspace's credential is replaced (rotated) alone:
 * `krane registry remove <build registry>` forgets it and the next build makes a new one.
 * Returns whether it wrote.
 */
export async function ensureBuildPullCredential(
  store: Store,
  keyring: Keyring,
  workspaceId: string,
  host: string,
): Promise<boolean> {
  if (await hasBuildPullCredential(store.db, workspaceId, host)) return false;
  try {
    return await store.write(async (tx) => {
      if (await hasBuildPullCredential(tx.trx, workspaceId, host)) return false;
      const password = randomBytes(32).toString("base64url");
      await putRegistryCredentialIn(tx, keyring, workspaceId, host, buildPullUsername(workspaceId), password);
      await refreshWorkspaceWorkloads(tx, workspaceId);
      return true;
    });
  } catch (err) {
    // Two builds of one workspace at once (PostgreSQL): the other one's insert won the unique
    // (workspace, host) row, which is as good.
    if (await hasBuildPullCredential(store.db, workspaceId, host)) return false;
    throw err;
  }
}
