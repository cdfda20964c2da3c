// Answers from state, for repeats of keyed calls whose first answer was lost (ctrl ended between
// the change's commit and recording its answer; ../server/idempotency.ts). The client never got an
// answer then, so the one built here — the object the call created or changed, read back — is the
// first it gets. Each entry only reads; the idempotency layer refuses any write while it runs.
// Methods missing here (a new token: its secret is never stored; rare admin calls) answer
// already_exists instead, saying the change was applied.
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  GetDeploymentRequestSchema,
  GetEnvironmentRequestSchema,
  GetProjectRequestSchema,
  GetWorkspaceRequestSchema,
  type DeploymentService,
  type EnvironmentService,
  type ProjectService,
  type WorkspaceService,
} from "../../gen/krane/ctrl/v1/api_pb.js";
import { GetRolloutStatusRequestSchema, type RolloutService } from "../../gen/krane/ctrl/v1/rollout_pb.js";
import { NoReanswerError, type Reanswers } from "./idempotency.js";

export function workspaceReanswers(impl: ServiceImpl<typeof WorkspaceService>): Reanswers<typeof WorkspaceService> {
  return {
    async createWorkspace(req, ctx) {
      return {
        workspace: (await impl.getWorkspace(create(GetWorkspaceRequestSchema, { workspace: req.slug }), ctx)).workspace,
      };
    },
  };
}

export function projectReanswers(impl: ServiceImpl<typeof ProjectService>): Reanswers<typeof ProjectService> {
  return {
    async createProject(req, ctx) {
      return {
        project: (
          await impl.getProject(create(GetProjectRequestSchema, { workspace: req.workspace, project: req.slug }), ctx)
        ).project,
      };
    },
  };
}

export function environmentReanswers(
  impl: ServiceImpl<typeof EnvironmentService>,
): Reanswers<typeof EnvironmentService> {
  const get = async (
    workspace: string,
    project: string,
    environment: string,
    ctx: Parameters<typeof impl.getEnvironment>[1],
  ): Promise<object> => ({
    environment: (
      await impl.getEnvironment(create(GetEnvironmentRequestSchema, { workspace, project, environment }), ctx)
    ).environment,
  });
  return {
    createEnvironment: (req, ctx) => get(req.workspace, req.project, req.slug, ctx),
    updateEnvironment: (req, ctx) => get(req.workspace, req.project, req.environment, ctx),
  };
}

export function deploymentReanswers(impl: ServiceImpl<typeof DeploymentService>): Reanswers<typeof DeploymentService> {
  return {
    async createDeployment(_req, ctx, subject) {
      // The new revision's id was kept with the claim, in the same transaction.
      if (subject === null) throw new NoReanswerError();
      return {
        deployment: (await impl.getDeployment(create(GetDeploymentRequestSchema, { deploymentId: subject }), ctx))
          .deployment,
      };
    },
    deleteDeployment: () => Promise.resolve({}),
  };
}

export function rolloutReanswers(impl: ServiceImpl<typeof RolloutService>): Reanswers<typeof RolloutService> {
  const status = async (
    req: { workspace: string; project: string; environment: string },
    ctx: Parameters<typeof impl.getRolloutStatus>[1],
  ): Promise<object> => ({
    status: (
      await impl.getRolloutStatus(
        create(GetRolloutStatusRequestSchema, {
          workspace: req.workspace,
          project: req.project,
          environment: req.environment,
        }),
        ctx,
      )
    ).status,
  });
  return {
    scale: status,
    pause: status,
    resume: status,
    undo: status,
    restart: status,
    // The pin is the state a rollback leaves (whether it was instant is not kept: false).
    async rollback(req, ctx) {
      const { status: st } = await impl.getRolloutStatus(
        create(GetRolloutStatusRequestSchema, {
          workspace: req.workspace,
          project: req.project,
          environment: req.environment,
        }),
        ctx,
      );
      return {
        deploymentId: req.unpin ? "" : (st?.pinnedDeploymentId ?? ""),
        revision: req.unpin ? 0n : (st?.pinnedRevision ?? 0n),
        unpinned: req.unpin,
        status: st,
      };
    },
  };
}
