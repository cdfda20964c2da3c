/** @jsxRuntime automatic @jsxImportSource preact */
// The status tab: the actions, then the rollout (per region, its instances old and new as they
// moved while the page was open; a canary's steps, weights and
// analysis verdict with the measurements behind it), the revisions (each a rollback after a diff),
// and the instances, sentinels and clusters. One set of confirmed actions serves the tab: a
// refused rollout action or rollback shows ctrl's message under the actions.
import type { EnvironmentView } from "../../../gen/krane/ctrl/v1/live_pb.js";
import { useConfirmedActions } from "../../components/confirm.js";
import type { EnvRef } from "../../router.js";
import { Actions } from "./actions.js";
import { Clusters, Instances, Sentinels } from "./health.js";
import { RevisionsTable } from "./revisions.js";
import type { RolloutSample } from "./moves-model.js";
import { Rollout } from "./rollout.js";
import { revisions } from "./status-model.js";

export function Status(props: { envRef: EnvRef; view: EnvironmentView; moves: readonly RolloutSample[] }) {
  const { act, errors, dialog } = useConfirmedActions();
  const revs = revisions(props.view);
  return (
    <>
      <Actions envRef={props.envRef} view={props.view} current={revs.current} act={act} errors={errors} />
      {dialog}
      <h2>Rollout</h2>
      {props.view.rollout && (
        <Rollout view={props.view} rollout={props.view.rollout} revisionOf={revs.revisionOf} moves={props.moves} />
      )}
      <h2>Revisions</h2>
      <RevisionsTable envRef={props.envRef} revisions={revs} act={act} />
      <Instances view={props.view} />
      <Sentinels view={props.view} />
      <Clusters view={props.view} />
    </>
  );
}
