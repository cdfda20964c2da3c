// Which digest a deploy's image names, asked once in ctrl before the revision is recorded (so the
// revision is the same bytes in every region, for every new instance and for a rollback), with
// the workspace's credential for the image's registry when it has one. Why ctrl and not the
// agent: the digest must be known before the revision exists (an agent in each region could see
// the tag at different moments and record different bytes), and ctrl holds the credentials.
//
// What is not asked: an image given by digest (taken as is; its registry is asked only that it
// has it), and images under a local host (`localHosts`, default krane.local: images loaded into
// the nodes' containerd directly, in no registry). Failures are refused deploys, nothing recorded:
// an unreachable registry or a refused credential is failed_precondition naming the registry; an
// image the registry does not have is invalid_argument on `image`.
import { parseImageRef, registryApiHost } from "../../contracts/images.js";
import { DomainError, failedPrecondition, invalidArgument } from "../errors.js";
import {
  RegistryClient,
  RegistryError,
  type RegistryClientOptions,
  type RegistryCredential,
} from "./registry-client.js";

/** Hosts whose images are never looked up by default (krane's own images, loaded into containerd). */
export const DEFAULT_LOCAL_IMAGE_HOSTS: readonly string[] = ["krane.local"];

export interface ImageSettings extends RegistryClientOptions {
  /** Images under these registry hosts run as named, unresolved. */
  readonly localHosts?: readonly string[];
}

/** A workspace's credential for a registry host, if it has one. */
export type CredentialLookup = (registry: string) => Promise<RegistryCredential | undefined>;

export class ImageResolver {
  readonly #client: RegistryClient;
  readonly #local: ReadonlySet<string>;

  constructor(settings: ImageSettings = {}) {
    this.#client = new RegistryClient(settings);
    this.#local = new Set(settings.localHosts ?? DEFAULT_LOCAL_IMAGE_HOSTS);
  }

  async close(): Promise<void> {
    await this.#client.close();
  }

  /**
   * The digest a deploy of `image` records (null: it runs as named). Throws a DomainError naming
   * the field `field` or the registry.
   */
  async resolve(field: string, image: string, credentialFor: CredentialLookup): Promise<string | null> {
    const ref = parseImageRef(image);
    if (ref === undefined)
      throw invalidArgument(field, "is not an image reference a registry can be asked about (host/repository:tag)");
    if (this.#local.has(ref.registry)) return ref.digest ?? null;
    const credential = await credentialFor(ref.registry);
    const reference = ref.digest ?? ref.tag ?? "latest";
    try {
      return await this.#client.manifestDigest(registryApiHost(ref.registry), ref.repository, reference, credential);
    } catch (err) {
      throw describe(err, field, ref.registry, `${ref.repository}:${reference}`.replace(/:(sha\d+:)/, "@$1"));
    }
  }
}

/** A registry's failure as the deploy's refusal. */
function describe(err: unknown, field: string, registry: string, what: string): DomainError {
  if (!(err instanceof RegistryError)) throw err;
  const withCredential = (ask: string): string => `${ask} (krane registry add ${registry})`;
  switch (err.reason) {
    case "not_found":
      return invalidArgument(field, `registry ${registry} has no image ${what}: ${err.message}`);
    case "unauthorized":
      return failedPrecondition(withCredential(`registry ${registry} refused access to ${what}: ${err.message}`));
    case "forbidden":
      return failedPrecondition(withCredential(`registry ${registry} refused access to ${what}: ${err.message}`));
    case "unreachable":
      return failedPrecondition(
        `registry ${registry} could not be reached to resolve ${what} to a digest (${err.message}); nothing was recorded`,
      );
    case "bad_answer":
      return failedPrecondition(`registry ${registry} gave no digest for ${what}: ${err.message}`);
  }
}
