// No table of its own: adding, replacing or removing a workspace's registry credential
// (./registries.ts) and, in the same transaction, re-rendering what names the workspace's pull
// Secret (./workload-refresh.ts) — so the agents write the Secret's new content, or delete it
// with the last credential, and nothing half-applied is ever streamed.
import type { Store } from "../db/store.js";
import { putRegistryCredentialIn, removeRegistryCredentialIn, type RegistryCredentialInfo } from "./registries.js";
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
