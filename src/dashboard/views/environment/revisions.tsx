/** @jsxRuntime automatic @jsxImportSource preact */
// The revisions table of the status tab: every revision, newest first, with a rollback to any
// but the rollout's target, confirmed after a diff of what it changes.
import type { Deployment } from "../../../gen/krane/ctrl/v1/api_pb.js";
import { RolloutService } from "../../../gen/krane/ctrl/v1/rollout_pb.js";
import { api } from "../../api.js";
import type { PendingAction } from "../../components/confirm.js";
import { Table } from "../../components/table.js";
import { ago } from "../../format.js";
import { useMayCall } from "../../permissions.js";
import type { EnvRef } from "../../router.js";
import { offersRollback, rollbackDiff, type Revisions } from "./status-model.js";

/** What a rollback from `from` to `to` changes, as the confirmation shows it. */
export function RollbackDiff(props: { from: Deployment | undefined; to: Deployment }) {
  return (
    <table class="diff" aria-label="What the rollback changes">
      <thead>
        <tr>
          <th scope="col">Field</th>
          <th scope="col">Now (r{String(props.from?.revision ?? "")})</th>
          <th scope="col">After (r{String(props.to.revision)})</th>
        </tr>
      </thead>
      <tbody>
        {rollbackDiff(props.from, props.to).map((row) => (
          <tr key={row.field}>
            <td>{row.field}</td>
            <td>{row.now}</td>
            <td class={row.now !== row.then ? "changed" : ""}>{row.then}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function RevisionsTable(props: { envRef: EnvRef; revisions: Revisions; act: (p: PendingAction) => void }) {
  const ref = props.envRef;
  const { all, current } = props.revisions;
  // Hidden where the session's role may not (the actions above say why).
  const mayRollBack = useMayCall()(RolloutService.method.undo);
  return (
    <Table
      label="Revisions"
      empty={
        <>
          No revision yet: deploy one with <code>krane deploy &lt;project/env&gt; --image &lt;image&gt;</code>.
        </>
      }
      rows={all}
      rowKey={(d) => d.deployment?.id ?? ""}
      columns={[
        { key: "rev", title: "Revision", value: (d) => Number(d.deployment?.revision ?? 0) },
        { key: "image", title: "Image", value: (d) => d.deployment?.image ?? "" },
        {
          key: "when",
          title: "Created",
          value: (d) => Number(d.deployment?.createdAtUnixMs ?? 0),
          render: (d) => ago(d.deployment?.createdAtUnixMs ?? 0),
        },
        {
          key: "running",
          title: "Running / desired",
          value: (d) => d.regions.map((r) => `${r.region} ${r.runningInstances}/${r.desiredReplicas}`).join(", "),
        },
        {
          key: "rollback",
          title: "Rollback",
          value: () => "",
          render: (d) =>
            !offersRollback(d, current) ? (
              <span class="muted">target</span>
            ) : !mayRollBack ? (
              <span class="muted">—</span>
            ) : (
              <button
                type="button"
                aria-label={`Roll back to revision ${d.deployment.revision}`}
                onClick={() => {
                  const to = d.deployment;
                  props.act({
                    title: `Roll back to revision ${to.revision}`,
                    field: "action",
                    run: () => api.rollouts.undo({ ...ref, toRevision: to.revision }),
                    body: <RollbackDiff from={current} to={to} />,
                  });
                }}
              >
                Roll back
              </button>
            ),
        },
      ]}
    />
  );
}
