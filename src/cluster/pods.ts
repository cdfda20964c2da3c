// How simulated pods behave. KWOK runs no containers: its Stage objects move pods through
// their lifecycle. By default a scheduled pod becomes Running and Ready at once (KWOK's own
// "fast" stages). Tests of rollouts need slower or broken pods, so readiness can be delayed,
// and pods of chosen images can be kept Running but never Ready (as a crashing readiness probe
// would), which is what a rollout's progress deadline must notice.
import { parseAllDocuments, stringify } from "yaml";

export interface PodBehaviour {
  /** Delay before a pod becomes Ready, in milliseconds (plus up to readyJitterMs). */
  readyDelayMs?: number;
  readyJitterMs?: number;
  /** Pods whose first container runs one of these images start but never become Ready. */
  neverReadyImages?: string[];
}

const IMAGE_KEY = ".spec.containers.[0].image";

interface MatchExpression {
  key: string;
  operator: string;
  values?: string[];
}

interface StageDoc {
  kind?: string;
  metadata?: { name?: string };
  spec?: {
    selector?: { matchExpressions?: MatchExpression[] };
    delay?: { durationMilliseconds?: number; jitterDurationMilliseconds?: number };
  };
}

/** A stage for never-ready images: Running with an IP, containers started, Ready=False. */
function unreadyStage(images: string[]): string {
  const stage = {
    apiVersion: "kwok.x-k8s.io/v1alpha1",
    kind: "Stage",
    metadata: { name: "krane-pod-running-unready" },
    spec: {
      resourceRef: { apiGroup: "v1", kind: "Pod" },
      selector: {
        matchExpressions: [
          { key: ".metadata.deletionTimestamp", operator: "DoesNotExist" },
          { key: ".status.phase", operator: "In", values: ["Pending"] },
          { key: IMAGE_KEY, operator: "In", values: images },
        ],
      },
      next: {
        statusTemplate: [
          "{{ $now := Now }}",
          "conditions:",
          "- type: Initialized",
          '  status: "True"',
          "  lastTransitionTime: {{ $now | Quote }}",
          "- type: Ready",
          '  status: "False"',
          "  reason: ContainersNotReady",
          "  lastTransitionTime: {{ $now | Quote }}",
          "- type: ContainersReady",
          '  status: "False"',
          "  reason: ContainersNotReady",
          "  lastTransitionTime: {{ $now | Quote }}",
          "containerStatuses:",
          "{{ range .spec.containers }}",
          "- name: {{ .name | Quote }}",
          "  image: {{ .image | Quote }}",
          "  ready: false",
          "  started: true",
          "  restartCount: 0",
          "  state:",
          "    running:",
          "      startedAt: {{ $now | Quote }}",
          "{{ end }}",
          '{{ $ips := PodIPsWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) }}',
          "{{ with $ips }}",
          "podIP: {{ index . 0 | Quote }}",
          "podIPs:",
          "{{ range . }}",
          "- ip: {{ . | Quote }}",
          "{{ end }}",
          "{{ end }}",
          "phase: Running",
          "startTime: {{ $now | Quote }}",
        ].join("\n"),
      },
    },
  };
  return stringify(stage);
}

/**
 * KWOK's configuration: its own stage documents, with the pod-ready stage adjusted to the
 * requested behaviour, plus krane's extra stages.
 */
export function kwokStagesConfig(kwokDocs: string[], pods: PodBehaviour = {}, extra: string[] = []): string {
  const out: string[] = [];
  const never = pods.neverReadyImages ?? [];
  for (const text of kwokDocs) {
    for (const doc of parseAllDocuments(text)) {
      const stage = doc.toJS() as StageDoc | null;
      if (!stage) continue;
      if (stage.kind === "Stage" && stage.metadata?.name === "pod-ready" && stage.spec) {
        if (never.length > 0) {
          stage.spec.selector ??= {};
          stage.spec.selector.matchExpressions = [
            ...(stage.spec.selector.matchExpressions ?? []),
            { key: IMAGE_KEY, operator: "NotIn", values: never },
          ];
        }
        if (pods.readyDelayMs) {
          stage.spec.delay = {
            durationMilliseconds: pods.readyDelayMs,
            jitterDurationMilliseconds: pods.readyDelayMs + (pods.readyJitterMs ?? 0),
          };
        }
      }
      out.push(stringify(stage));
    }
  }
  if (never.length > 0) out.push(unreadyStage(never));
  out.push(...extra);
  return out.map((d) => d.trim()).join("\n---\n") + "\n";
}
