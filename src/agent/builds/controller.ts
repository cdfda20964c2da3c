// The build controller kind (`krane agent --builds N`, ctrl in `--builds-in cluster` mode): the
// builds ctrl hands to this region, each run to its end in a builder pod (./run.ts), at most N at
// once. Key = build id.
//   owns  builder pods in krane-builds (./pod.ts; a pod of a build no longer desired, such as
//         one an earlier agent left, is deleted)
// Apply: a build this agent is not running yet starts, when a slot is free (else it waits its
// turn); one it runs or ran is left alone. Delete: a running build is aborted (its pod and Secret
// deleted); nothing is reported but the end of the key.
import { create } from "@bufbuild/protobuf";
import {
  type ApplyBuild,
  type BuildState,
  BuildStateSchema,
  type DeleteBuild,
  DeleteBuildSchema,
  type ReportBuildStatusRequest,
  ReportBuildStatusRequestSchema,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import { BUILDS_NAMESPACE } from "../../contracts/cluster.js";
import { COMPONENT, LABEL_BUILD_ID, LABEL_COMPONENT, LABEL_MANAGED_BY, MANAGED_BY } from "../../contracts/labels.js";
import { resources } from "../../kube/resources.js";
import { controller, Result, type ControllerDeclaration } from "../runtime/builder.js";
import type { KindEnv } from "../runtime/kind.js";
import { clusterProtocol } from "../runtime/kstate.js";
import { builderName } from "./pod.js";
import { runBuild, type BuilderSettings } from "./run.js";
import { validateApplyBuild } from "./validate.js";

export type BuildDeclaration = ControllerDeclaration<BuildState, ApplyBuild, DeleteBuild, ReportBuildStatusRequest>;

export interface BuildEnv {
  /** Builds from source in builder pods (absent: the build kind does not run). */
  readonly builds?: BuilderSettings;
}

/** What an apply of a build does (pure): start it, leave it (running or ran here), or wait for a slot. */
export function decide(known: boolean, running: number, max: number): "start" | "leave" | "wait" {
  if (known) return "leave";
  return running < max ? "start" : "wait";
}

/** How soon a build waiting for a slot looks again. */
const WAIT_MS = 2_000;

export function buildsController({ region, ctrl, builds }: KindEnv & BuildEnv): BuildDeclaration | undefined {
  if (!builds) return undefined;
  /** The builds this agent runs, by id; an ended one stays (it is not run twice) until its Delete. */
  const runs = new Map<string, { abort: AbortController; done: Promise<void>; ended: boolean }>();
  const running = (): number => [...runs.values()].filter((r) => !r.ended).length;
  const messages = { state: BuildStateSchema, report: ReportBuildStatusRequestSchema, key: "buildId" } as const;
  return controller<BuildState, ApplyBuild, DeleteBuild, ReportBuildStatusRequest>("builds")
    .protocol(clusterProtocol({ region, ctrl }, messages))
    .owns(resources.pods, {
      namespace: BUILDS_NAMESPACE,
      selector: `${LABEL_MANAGED_BY}=${MANAGED_BY},${LABEL_COMPONENT}=${COMPONENT.builder}`,
      keyOf: (pod) => pod.metadata.labels?.[LABEL_BUILD_ID],
      refOf: (pod) => create(DeleteBuildSchema, { buildId: pod.metadata.labels?.[LABEL_BUILD_ID] ?? "" }),
      // Nothing of a pod is reported.
      statusChanged: () => false,
    })
    .reconciler({
      validate: validateApplyBuild,
      validateDelete: (d) => (d.buildId === "" ? "build_id: is required" : undefined),
      render: () => [],
      async reconcile(key, want, ctx, signal) {
        if (want.type === "delete") {
          const run = runs.get(key);
          runs.delete(key);
          if (run) {
            run.abort.abort();
            await run.done;
          } else {
            // A pod no run of this agent's holds (an earlier agent's).
            await ctx.kube.delete(resources.pods, BUILDS_NAMESPACE, builderName(key), signal).catch(() => {});
            await ctx.kube.delete(resources.secrets, BUILDS_NAMESPACE, builderName(key), signal).catch(() => {});
          }
          return ctx.deleted(key, want, signal);
        }
        switch (decide(runs.has(key), running(), builds.maxBuilds)) {
          case "leave":
            return Result.done;
          case "wait":
            return Result.requeueAfter(WAIT_MS);
          case "start": {
            const abort = new AbortController();
            const run = { abort, done: Promise.resolve(), ended: false };
            run.done = runBuild(want.desired, { region, ctrl, kube: ctx.kube, settings: builds }, abort.signal)
              .catch((err: unknown) => ctx.log.warn({ build: key, err: String(err) }, "a build ended with an error"))
              .finally(() => {
                run.ended = true;
                // A build waiting for a slot may start now.
                for (const k of ctx.activeKeys()) if (!runs.has(k)) ctx.enqueue(k);
              });
            runs.set(key, run);
            ctx.log.info({ build: key }, "build started in a builder pod");
            return Result.done;
          }
        }
      },
    })
    .build();
}
