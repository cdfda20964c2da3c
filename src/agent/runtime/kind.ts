// What a controller kind is built from, and the shape of its registration. A kind folder
// exports one factory `(env) => ControllerDeclaration`; src/agent/kinds.ts lists them with kind().
import type { Client } from "@connectrpc/connect";
import type { ClusterService } from "../../gen/krane/ctrl/v1/cluster_pb.js";
import type { ControllerDeclaration } from "./builder.js";
import type { ControllerOptions } from "./core.js";
import type { Manager } from "./manager.js";

export type ClusterClient = Client<typeof ClusterService>;

/**
 * What every kind is built from: the agent's region and its ctrl client. A kind that needs
 * settings of its own declares them beside it (`KindEnv & SentinelSettings`, …) and the agent's
 * list of kinds (src/agent/kinds.ts) composes them, so nothing here changes for a new kind.
 */
export interface KindEnv {
  readonly region: string;
  readonly ctrl: ClusterClient;
}

/** A kind ready to be added to a manager (its message types stay inside). */
export type KindRegistration<E extends KindEnv = KindEnv> = (manager: Manager, env: E, opts: ControllerOptions) => void;

/** Wraps a kind's factory for the list in src/agent/kinds.ts. */
export function kind<E extends KindEnv, Msg, D, Del, R>(
  factory: (env: E) => ControllerDeclaration<Msg, D, Del, R>,
): KindRegistration<E> {
  return (manager, env, opts) => void manager.add(factory(env), opts);
}

/** Like kind(), for a kind that runs only when the agent's settings call for it (undefined: not added). */
export function optionalKind<E extends KindEnv, Msg, D, Del, R>(
  factory: (env: E) => ControllerDeclaration<Msg, D, Del, R> | undefined,
): KindRegistration<E> {
  return (manager, env, opts) => {
    const decl = factory(env);
    if (decl) manager.add(decl, opts);
  };
}

/** A key list of zero or one key (for `keysOf` of objects labelled with their key). */
export function oneKey(k: string | undefined): string[] {
  return k === undefined ? [] : [k];
}
