// The workspace Namespaces a kind writes into, created (or found) once per process: a kind whose
// objects may come before any deployment's creates the Namespace itself, with the labels the
// agent's fence requires.
import { workspaceNamespaceLabels } from "../../contracts/labels.js";
import type { KubeClient } from "../../kube/client.js";
import { resources } from "../../kube/resources.js";

export class WorkspaceNamespaces {
  readonly #ensured = new Set<string>();

  /** Creates the Namespace unless this process created or found it before. */
  async ensure(kube: KubeClient, name: string, workspaceId: string, signal: AbortSignal): Promise<void> {
    if (this.#ensured.has(name)) return;
    await kube.create(
      resources.namespaces,
      { apiVersion: "v1", kind: "Namespace", metadata: { name, labels: workspaceNamespaceLabels(workspaceId) } },
      signal,
    );
    this.#ensured.add(name);
  }

  /** Checks it again next time (it may have been deleted behind our back). */
  forget(name: string): void {
    this.#ensured.delete(name);
  }
}
