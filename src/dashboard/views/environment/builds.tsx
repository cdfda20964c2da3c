/** @jsxRuntime automatic @jsxImportSource preact */
// The builds tab: the environment's newest builds (BuildService.ListBuilds: state, source, time,
// the revision a deploy build made, why one failed) and one build's log, followed while it runs
// as `krane build logs -f` follows it (GetBuild from the next line on). A failed build shows the
// step that failed and that step's last lines above its log. Cancel is offered to roles that may
// call CancelBuild, and asks first.
import { useContext, useEffect, useState } from "preact/hooks";
import { BuildService, type Build } from "../../../gen/krane/ctrl/v1/build_pb.js";
import { api, errorText, isFinal, isSignedOut } from "../../api.js";
import { Toned } from "../../components/badge.js";
import { useConfirmedActions } from "../../components/confirm.js";
import { ago } from "../../format.js";
import { hiddenNote, RoleContext, useMayCall } from "../../permissions.js";
import type { EnvRef } from "../../router.js";
import {
  appendLog,
  BUILD_TONE,
  buildSource,
  buildTook,
  isActive,
  LIST_IDLE_REFRESH_MS,
  LIST_REFRESH_MS,
  LOG_REFRESH_MS,
} from "./builds-model.js";

const sleep = (ms: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(t);
      resolve();
    });
  });

export function Builds(props: { envRef: EnvRef }) {
  const { workspace, project, environment } = props.envRef;
  const [builds, setBuilds] = useState<Build[] | undefined>(undefined);
  const [listError, setListError] = useState("");
  const [chosen, setChosen] = useState("");
  const [reload, setReload] = useState(0);
  const { act, errors, dialog } = useConfirmedActions();
  const mayCall = useMayCall();
  const hidden = hiddenNote(useContext(RoleContext), [["Cancel", BuildService.method.cancelBuild]]);

  // The list: asked again often while a build may still move, less often otherwise (builds
  // start elsewhere too: the CLI, a repository's push).
  useEffect(() => {
    const stop = new AbortController();
    void (async () => {
      while (!stop.signal.aborted) {
        let wait = LIST_IDLE_REFRESH_MS;
        try {
          const r = await api.builds.listBuilds({ workspace, project, environment }, { signal: stop.signal });
          setBuilds(r.builds);
          setListError("");
          if (r.builds.some(isActive)) wait = LIST_REFRESH_MS;
        } catch (err) {
          if (stop.signal.aborted) return;
          if (isSignedOut(err)) location.reload();
          setListError(errorText(err));
          if (isFinal(err)) return;
        }
        await sleep(wait, stop.signal);
      }
    })();
    return () => stop.abort();
  }, [workspace, project, environment, reload]);

  const shown = chosen || builds?.[0]?.id || "";
  return (
    <>
      <h2>Builds</h2>
      {listError && (
        <p class="error" role="alert">
          {listError}
        </p>
      )}
      {hidden !== undefined && <p class="muted">{hidden}</p>}
      {builds === undefined ? (
        <p class="muted">Loading…</p>
      ) : builds.length === 0 ? (
        <p class="muted">
          No builds yet. <code>krane deploy {`${project}/${environment}`} --source .</code> builds one, and so does a
          push to a branch a connected repository maps here (<code>krane repo connect</code>).
        </p>
      ) : (
        <table>
          <caption class="muted">Newest first</caption>
          <thead>
            <tr>
              <th scope="col">Build</th>
              <th scope="col">State</th>
              <th scope="col">Source</th>
              <th scope="col">Queued</th>
              <th scope="col">Took</th>
              <th scope="col">Revision</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {builds.map((b) => (
              <tr key={b.id} aria-current={b.id === shown ? "true" : undefined}>
                <td>
                  <button type="button" aria-pressed={b.id === shown} onClick={() => setChosen(b.id)}>
                    {b.id}
                  </button>
                </td>
                <td>
                  <Toned tone={BUILD_TONE[b.state] ?? ""} title={b.error || undefined}>
                    {b.state}
                  </Toned>
                </td>
                <td>{buildSource(b)}</td>
                <td>{ago(b.createdAtUnixMs)}</td>
                <td>{buildTook(b)}</td>
                <td>{b.deploymentId || (b.deploy ? "—" : "build only")}</td>
                <td>
                  {isActive(b) && mayCall(BuildService.method.cancelBuild) && (
                    <button
                      type="button"
                      onClick={() =>
                        act({
                          title: `Cancel build ${b.id}?`,
                          field: "cancel",
                          run: () => api.builds.cancelBuild({ workspace, buildId: b.id }),
                          onDone: () => setReload((n) => n + 1),
                        })
                      }
                    >
                      Cancel
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {errors.cancel && (
        <p class="error" role="alert">
          {errors.cancel}
        </p>
      )}
      {dialog}
      {shown !== "" && (
        <BuildLog key={shown} workspace={workspace} buildId={shown} onEnd={() => setReload((n) => n + 1)} />
      )}
    </>
  );
}

/** One build's log from its first kept line, followed until the build ends. */
function BuildLog(props: { workspace: string; buildId: string; onEnd: () => void }) {
  const [build, setBuild] = useState<Build | undefined>(undefined);
  const [lines, setLines] = useState<string[]>([]);
  const [error, setError] = useState("");
  const { workspace, buildId, onEnd } = props;
  useEffect(() => {
    const stop = new AbortController();
    void (async () => {
      let next = 0;
      let wasActive = false;
      while (!stop.signal.aborted) {
        try {
          const r = await api.builds.getBuild({ workspace, buildId, logFrom: next }, { signal: stop.signal });
          next = r.logNext;
          if (r.log.length > 0) setLines((old) => appendLog(old, r.log));
          setBuild(r.build);
          setError("");
          if (!r.build || !isActive(r.build)) {
            if (wasActive) onEnd();
            return;
          }
          wasActive = true;
        } catch (err) {
          if (stop.signal.aborted) return;
          if (isSignedOut(err)) location.reload();
          setError(errorText(err));
          if (isFinal(err)) return;
        }
        await sleep(LOG_REFRESH_MS, stop.signal);
      }
    })();
    return () => stop.abort();
  }, [workspace, buildId]);
  return (
    <section aria-label={`Build ${buildId}`}>
      <h3>
        Log of {buildId}
        {build && isActive(build) ? <span class="muted"> (following)</span> : null}
      </h3>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {build?.state === "failed" && (
        <div class="error" role="alert">
          {/* ctrl's reason names the step already. */}
          <p>Failed: {build.error || build.failedStep}</p>
          {build.failedOutput.length > 0 && <pre>{build.failedOutput.join("\n")}</pre>}
        </div>
      )}
      <div class="logs" role="log" aria-label={`Log lines of ${buildId}`} tabIndex={0}>
        {lines.map((l, i) => (
          <div key={i}>{l}</div>
        ))}
      </div>
    </section>
  );
}
