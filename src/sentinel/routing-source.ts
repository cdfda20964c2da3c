// The routing table's source: list+watch of the environment's EndpointSlices and policy
// ConfigMaps in namespace `sentinel` only (all a namespaced read-only Role allows), through the
// project's informer (reconnects, re-lists on 410, watchdog). Changes are coalesced into one
// rebuild per event-loop turn. When the API server is unreachable the caches keep their last
// content, so the sentinel keeps serving its last table.
import { SENTINEL_NAMESPACE } from "../contracts/cluster.js";
import { defaultRoutingPolicy, routingSelector, type RoutingPolicy } from "../contracts/routing.js";
import { resources } from "../kube/resources.js";
import { Informer, type ListWatchClient } from "../kube/informer.js";
import type { Logger } from "../base/log.js";
import type { AddressMapping } from "../contracts/address-map.js";
import { buildTable, readPolicy, type RoutingTable } from "./table.js";

/** The table, and the policy's auth, hold, edge policies and API keys (absent: none). */
export interface RoutingUpdate extends Pick<RoutingPolicy, "auth" | "hold" | "policies" | "apiKeys"> {
  readonly table: RoutingTable;
  /** A policy has been read (else the table routes by the default policy, and is not ready). */
  readonly policyKnown: boolean;
  readonly policyError: string | undefined;
  readonly problems: readonly string[];
}

export interface RoutingSourceOptions {
  readonly environmentId: string;
  readonly region: string;
  readonly client: ListWatchClient;
  readonly log: Logger;
  readonly addressMap?: AddressMapping;
  /** Watch timeout in seconds (the API server ends each watch after it; it is re-opened at once). */
  readonly watchTimeoutSeconds?: number;
  readonly onUpdate: (u: RoutingUpdate) => void;
  readonly onConnectivity?: (connected: boolean) => void;
}

export class RoutingSource {
  readonly #o: RoutingSourceOptions;
  readonly #slices: Informer;
  readonly #policies: Informer;
  #policy: RoutingPolicy | undefined;
  #pending = false;
  #connected = false;
  #ac = new AbortController();
  #runs: Promise<void>[] = [];

  constructor(o: RoutingSourceOptions) {
    this.#o = o;
    const selector = routingSelector(o.environmentId, o.region);
    const common = {
      labelSelector: selector,
      namespace: SENTINEL_NAMESPACE,
      client: o.client,
      log: o.log,
      timeoutSeconds: o.watchTimeoutSeconds ?? 120,
      backoff: { baseMs: 200, capMs: 10_000, minMs: 100 },
      onEvent: (kind: string) => this.#onReflectorEvent(kind),
    };
    this.#slices = new Informer({ ...common, resource: resources.endpointSlices });
    this.#policies = new Informer({ ...common, resource: resources.configMaps });
    const changed = (): void => {
      this.#setConnected(true);
      this.#schedule();
    };
    this.#slices.onChange(changed);
    this.#policies.onChange(changed);
  }

  get namespace(): string {
    return SENTINEL_NAMESPACE;
  }

  get synced(): boolean {
    return this.#slices.synced && this.#policies.synced;
  }

  get connected(): boolean {
    return this.#connected;
  }

  start(): void {
    const signal = this.#ac.signal;
    this.#runs = [this.#slices.run(signal), this.#policies.run(signal)];
    void Promise.all([this.#slices.waitSynced(), this.#policies.waitSynced()]).then(() => this.#schedule());
  }

  async stop(): Promise<void> {
    this.#ac.abort();
    await Promise.all(this.#runs);
  }

  #onReflectorEvent(kind: string): void {
    if (kind === "error" || kind === "watchdog") this.#setConnected(false);
    else if (kind === "list" || kind === "watch-end") this.#setConnected(true);
  }

  #setConnected(v: boolean): void {
    if (this.#connected === v) return;
    this.#connected = v;
    this.#o.onConnectivity?.(v);
  }

  #schedule(): void {
    if (this.#pending || !this.synced) return;
    this.#pending = true;
    setImmediate(() => {
      this.#pending = false;
      this.#rebuild();
    });
  }

  #rebuild(): void {
    const read = readPolicy(this.#policies.list(), this.#o.environmentId);
    // A refused or deleted policy keeps the last good one: the data plane never loses routing
    // because of a bad write.
    if (read.policy) this.#policy = read.policy;
    const policy = this.#policy ?? defaultRoutingPolicy(this.#o.environmentId);
    const { table, problems } = buildTable(this.#slices.list(), policy, this.#o.addressMap);
    this.#o.onUpdate({
      table,
      policyKnown: this.#policy !== undefined,
      policyError: read.error,
      problems,
      auth: policy.auth,
      hold: policy.hold,
      policies: policy.policies,
      apiKeys: policy.apiKeys,
    });
  }
}
