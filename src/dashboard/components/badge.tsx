/** @jsxRuntime automatic @jsxImportSource preact */
// States as the pages show them: a live stream's badge, and a word in its tone's colour (the
// styles' ok, warn and bad classes).
import type { ComponentChildren } from "preact";
import type { LiveState } from "../live.js";

export type Tone = "ok" | "warn" | "bad" | "muted" | "";

/** What the badge of a stream in `state` says, and its tone. */
export const LIVE_BADGE: Record<LiveState, [string, Tone]> = {
  connecting: ["connecting…", "warn"],
  live: ["live", "ok"],
  reconnecting: ["reconnecting…", "warn"],
  stopped: ["stopped", "bad"],
};

export function LiveBadge(props: { state: LiveState }) {
  const [text, tone] = LIVE_BADGE[props.state];
  return (
    <span class={`badge ${tone}`} role="status" aria-live="polite">
      {text}
    </span>
  );
}

/** A state written in its tone's colour. */
export function Toned(props: { tone: Tone; title?: string; children: ComponentChildren }) {
  return (
    <span class={props.tone} title={props.title}>
      {props.children}
    </span>
  );
}
