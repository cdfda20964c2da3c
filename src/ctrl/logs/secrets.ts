// The secret values to mask in one environment's lines (the I/O around mask.ts), shared by the
// archive (what is stored) and StreamLogs (what is sent, live lines and kept ones alike, before
// --grep looks at them: a viewer must not find a secret by grepping for its prefix). The values
// of a deployment are opened the first time one of its lines is seen, once; the masker masks
// every value learned so far, whichever deployment's line it is (a secret of an older revision
// printed by a newer one is masked too).
import type { Kysely } from "kysely";
import type { Database } from "../db/schema.js";
import { revisionSecrets } from "../domain/secret-values.js";
import type { Keyring } from "../secrets/keyring.js";
import { secretMasker, type Masker } from "./mask.js";
import { revisionsOf } from "./target.js";

export class EnvironmentSecrets {
  readonly #db: Kysely<Database>;
  readonly #keyring: Keyring | undefined;
  readonly #environmentId: string;
  readonly #revisions = new Map<string, number>();
  readonly #values = new Map<string, string[]>();
  #masker: Masker = (line) => line;

  /** Without a keyring no secret can be set, so there is nothing to mask. */
  constructor(db: Kysely<Database>, keyring: Keyring | undefined, environmentId: string) {
    this.#db = db;
    this.#keyring = keyring;
    this.#environmentId = environmentId;
  }

  /** Learns the revisions and secret values of the deployments not seen before. */
  async learn(deploymentIds: Iterable<string>): Promise<void> {
    const fresh = [...new Set(deploymentIds)].filter((id) => id !== "" && !this.#values.has(id));
    if (fresh.length === 0) return;
    for (const [id, revision] of await revisionsOf(this.#db, this.#environmentId, fresh))
      this.#revisions.set(id, revision);
    for (const id of fresh) {
      // A deployment of another environment (not in revisionsOf's answer) is not opened.
      const values = this.#keyring && this.#revisions.has(id) ? await revisionSecrets(this.#db, this.#keyring, id) : [];
      this.#values.set(
        id,
        values.map((v) => v.value.toString("utf8")),
      );
    }
    this.#masker = secretMasker([...this.#values.values()].flat());
  }

  /** The revision of a deployment learned (0: unknown, or another environment's). */
  revision(deploymentId: string): number {
    return this.#revisions.get(deploymentId) ?? 0;
  }

  /** The line with every value learned so far masked. */
  mask(line: string): string {
    return this.#masker(line);
  }
}
