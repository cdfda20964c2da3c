/** @jsxRuntime automatic @jsxImportSource preact */
// The status tab's actions: deploy an image, scale (every region or one), and the rollout's own
// (pause, resume, promote, abort, restart). Each asks first; ctrl's refusal shows next to its form.
// Only those the session's role allows are shown, and a line says which are hidden and why
// (../../permissions.ts: the roles the methods' protos declare).
import { useContext, useState } from "preact/hooks";
import { DeploymentService, type Deployment } from "../../../gen/krane/ctrl/v1/api_pb.js";
import { RolloutService } from "../../../gen/krane/ctrl/v1/rollout_pb.js";
import type { EnvironmentView } from "../../../gen/krane/ctrl/v1/live_pb.js";
import { api } from "../../api.js";
import type { PendingAction } from "../../components/confirm.js";
import { hiddenNote, RoleContext, useMayCall } from "../../permissions.js";
import type { EnvRef } from "../../router.js";
import { ROLLOUT_ACTIONS, scaleReplicas, scaleTitle } from "./status-model.js";

export function Actions(props: {
  envRef: EnvRef;
  view: EnvironmentView;
  /** The rollout's target revision: a deploy keeps its port; its image is the input's hint. */
  current: Deployment | undefined;
  act: (p: PendingAction) => void;
  errors: Readonly<Record<string, string>>;
}) {
  const ref = props.envRef;
  const { act, errors, current } = props;
  const [image, setImage] = useState("");
  const [replicas, setReplicas] = useState("");
  const [scaleRegion, setScaleRegion] = useState("");
  const regions = props.view.status?.environment?.regions ?? [];
  const mayCall = useMayCall();
  const hidden = hiddenNote(useContext(RoleContext), [
    ["Deploy", DeploymentService.method.createDeployment],
    ["Scale", RolloutService.method.scale],
    ...ROLLOUT_ACTIONS.map(([label, , call]) => [label, RolloutService.method[call]] as const),
    ["Roll back", RolloutService.method.undo],
  ]);
  return (
    <>
      <h2>Actions</h2>
      {hidden !== undefined && (
        <p class="muted" role="note">
          {hidden}
        </p>
      )}
      {mayCall(DeploymentService.method.createDeployment) && (
        <form
          class="actions"
          onSubmit={(e) => {
            e.preventDefault();
            const img = image.trim();
            act({
              title: `Deploy ${img}`,
              field: "image",
              body: (
                <p>
                  A new revision with this image rolls out to every region; its other settings are the current
                  revision's.
                </p>
              ),
              // Only the image changes: the rest is the current revision's, as `krane deploy --image`.
              run: () => api.deployments.createDeployment({ ...ref, image: img, inherit: true }),
              onDone: () => setImage(""),
            });
          }}
        >
          <label>
            Image
            <input
              name="image"
              class="wide"
              title={current?.image ? `now: ${current.image}` : undefined}
              value={image}
              onInput={(e) => setImage(e.currentTarget.value)}
              placeholder={current?.image ?? "registry/app:tag"}
              aria-describedby="image-error"
              required
            />
          </label>
          <button class="primary" type="submit">
            Deploy
          </button>
          <span id="image-error" class="error" role="alert">
            {errors.image ?? ""}
          </span>
        </form>
      )}
      {mayCall(RolloutService.method.scale) && (
        <form
          class="actions"
          onSubmit={(e) => {
            e.preventDefault();
            act({
              title: scaleTitle(replicas, scaleRegion),
              field: "scale",
              run: () => api.rollouts.scale({ ...ref, region: scaleRegion, replicas: scaleReplicas(replicas) }),
            });
          }}
        >
          <label>
            Replicas
            <input
              name="replicas"
              inputMode="numeric"
              value={replicas}
              onInput={(e) => setReplicas(e.currentTarget.value)}
              aria-describedby="scale-error"
              required
              size={6}
            />
          </label>
          <label>
            Region
            <select value={scaleRegion} onChange={(e) => setScaleRegion(e.currentTarget.value)}>
              <option value="">every region</option>
              {regions.map((r) => (
                <option key={r.region} value={r.region}>
                  {r.region} (now {r.replicas})
                </option>
              ))}
            </select>
          </label>
          <button type="submit">Scale</button>
          <span id="scale-error" class="error" role="alert">
            {errors.scale ?? ""}
          </span>
        </form>
      )}
      <div class="actions">
        {ROLLOUT_ACTIONS.filter(([, , call]) => mayCall(RolloutService.method[call])).map(([label, title, call]) => (
          <button
            key={label}
            type="button"
            onClick={() => act({ title, field: "action", run: () => api.rollouts[call](ref) })}
          >
            {label}
          </button>
        ))}
      </div>
      <p class="error" role="alert">
        {errors.action ?? ""}
      </p>
    </>
  );
}
