// The digest a workspace's new revision of an image records, asked before the transaction that
// records it (a registry's answer may take seconds; no lock is held meanwhile): deploys, previews
// (created, approved, or given a new image by their pull request) all ask here, with the
// workspace's credential for the image's registry. No resolver (ctrl runs `--image-digests
// off`): null, the image runs as named.
import type { Kysely } from "kysely";
import type { Database } from "../db/schema.js";
import { registryCredential } from "../domain/registries.js";
import { findWorkspace } from "../domain/tenancy.js";
import type { Keyring } from "../secrets/keyring.js";
import type { ImageResolver } from "./resolve.js";

export async function pinImage(
  images: ImageResolver | undefined,
  db: Kysely<Database>,
  keyring: Keyring | undefined,
  workspace: string,
  field: string,
  image: string,
): Promise<string | null> {
  if (!images) return null;
  const ws = await findWorkspace(db, workspace);
  return images.resolve(field, image, (host) => registryCredential(db, keyring, ws.id, host));
}
