// RegistryService: a workspace's registry credentials (add replaces, list never answers a
// password, remove). The password is validated, sealed by the domain and dropped; errors name
// the field, never its value.
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { RegistrySchema, type Registry, type RegistryService } from "../../gen/krane/ctrl/v1/api_pb.js";
import type { Store } from "../db/store.js";
import { addRegistry, removeRegistry } from "../domain/pull-secrets.js";
import { listRegistryCredentials, type RegistryCredentialInfo } from "../domain/registries.js";
import { failedPrecondition, invalidArgument } from "../errors.js";
import type { Keyring } from "../secrets/keyring.js";
import { registryHostField, validateRegistryCredential, workspaceRef } from "../validate/api.js";

function registryMsg(r: RegistryCredentialInfo): Registry {
  return create(RegistrySchema, {
    host: r.host,
    username: r.username,
    createdAtUnixMs: BigInt(r.createdAt),
    updatedAtUnixMs: BigInt(r.updatedAt),
  });
}

export function registryServiceImpl({
  store,
  keyring,
  managedHost,
}: {
  store: Store;
  keyring: Keyring | undefined;
  /** The build registry whose credentials ctrl makes itself (token mode): not added by hand. */
  managedHost?: string | undefined;
}): ServiceImpl<typeof RegistryService> {
  return {
    async addRegistry(req) {
      const workspace = workspaceRef("workspace", req.workspace);
      const host = registryHostField("host", req.host);
      if (host === managedHost)
        throw invalidArgument(
          "host",
          `${host} is ctrl's build registry: ctrl makes each workspace's credential for it (the next build does)`,
        );
      const { username, password } = validateRegistryCredential(req.username, req.password);
      if (!keyring) throw failedPrecondition("this ctrl has no master key for secrets (--master-key-file)");
      const { credential, replaced } = await addRegistry(store, keyring, workspace, host, username, password);
      return { registry: registryMsg(credential), replaced };
    },
    async listRegistries(req) {
      const rows = await listRegistryCredentials(store.db, workspaceRef("workspace", req.workspace));
      return { registries: rows.map(registryMsg) };
    },
    async removeRegistry(req) {
      await removeRegistry(store, workspaceRef("workspace", req.workspace), registryHostField("host", req.host));
      return {};
    },
  };
}
