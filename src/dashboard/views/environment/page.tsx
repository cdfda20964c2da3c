/** @jsxRuntime automatic @jsxImportSource preact */
// An environment's page: one live view (LiveService.WatchEnvironment) feeds its tabs (status,
// events, logs, requests, policies, charts, config and domains; a tab's own file says what it
// shows); the builds tab asks BuildService itself.
import { useState } from "preact/hooks";
import type { EnvironmentView } from "../../../gen/krane/ctrl/v1/live_pb.js";
import { api } from "../../api.js";
import { LiveBadge } from "../../components/badge.js";
import { useLiveStream, type LiveState } from "../../live.js";
import { ENV_TABS, envHash, type EnvRef, type EnvTab } from "../../router.js";
import { Builds } from "./builds.js";
import { Charts } from "./charts.js";
import { recordRollout, type RolloutSample } from "./moves-model.js";
import { Events } from "./events.js";
import { Logs } from "./logs.js";
import { Policies } from "./policies.js";
import { Requests } from "./requests.js";
import { Settings } from "./settings.js";
import { Status } from "./status.js";

/**
 * The page of one environment. Its state (the view, each tab's data, filters, typed input, an
 * open confirmation) is that environment's: the route mounts it keyed by `routeKey`, so another
 * environment gets a fresh page, never this one's data under the other's name.
 */
export function EnvironmentPage(props: EnvRef & { tab: EnvTab }) {
  const ref = { workspace: props.workspace, project: props.project, environment: props.environment };
  const [view, setView] = useState<EnvironmentView | undefined>(undefined);
  // The rollout's instance counts per region as views arrive (the status tab's chart).
  const [moves, setMoves] = useState<readonly RolloutSample[]>([]);
  const { state, error } = useLiveStream(
    (signal) => api.live.watchEnvironment(ref, { signal }),
    (m) => {
      const v = m.view;
      if (!v) return;
      setView(v);
      setMoves((prev) => recordRollout(prev, v.rollout, Date.now()));
    },
    [props.workspace, props.project, props.environment],
  );
  return <EnvironmentBody envRef={ref} tab={props.tab} state={state} error={error} view={view} moves={moves} />;
}

/** What the page draws of its stream's state: the heading, the tabs, and the tab's body. */
export function EnvironmentBody(props: {
  envRef: EnvRef;
  tab: EnvTab;
  state: LiveState;
  error: string;
  view: EnvironmentView | undefined;
  /** The rollout's instance counts as views arrived (none: the chart is left out). */
  moves?: readonly RolloutSample[];
}) {
  const { envRef: ref, tab, view } = props;
  return (
    <main>
      <p>
        <a href="#/">Overview</a> / {ref.workspace} / {ref.project}/{ref.environment} <LiveBadge state={props.state} />
      </p>
      <nav aria-label="Environment" class="tabs">
        {ENV_TABS.map(([t, title]) => (
          <a key={t} href={envHash(ref, t)} aria-current={t === tab ? "page" : undefined}>
            {title}
          </a>
        ))}
      </nav>
      {/* A refusal ends the stream: only ctrl's message, nothing that would act on the environment. */}
      {props.error ? (
        <p class="error" role="alert">
          {props.error}
        </p>
      ) : !view ? (
        <p class="muted">Loading…</p>
      ) : tab === "events" ? (
        <Events envRef={ref} view={view} />
      ) : tab === "logs" ? (
        <Logs envRef={ref} view={view} />
      ) : tab === "requests" ? (
        <Requests envRef={ref} />
      ) : tab === "policies" ? (
        <Policies envRef={ref} />
      ) : tab === "charts" ? (
        <Charts envRef={ref} view={view} />
      ) : tab === "builds" ? (
        <Builds envRef={ref} />
      ) : tab === "config" ? (
        <Settings envRef={ref} view={view} />
      ) : (
        <Status envRef={ref} view={view} moves={props.moves ?? []} />
      )}
    </main>
  );
}
