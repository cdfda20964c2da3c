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

/**
 * The shape beside a toned state, so that it does not rest on colour alone (WCAG 1.4.1): the
 * word says it, the colour and the shape repeat it. Hidden from screen readers, which read the word.
 */
export const TONE_ICON: Record<Tone, string> = { ok: "✓", warn: "◐", bad: "✕", muted: "", "": "" };

/** A state written in its tone's colour, after its tone's icon. */
export function Toned(props: { tone: Tone; title?: string; children: ComponentChildren }) {
  const icon = TONE_ICON[props.tone];
  return (
    <span class={props.tone} title={props.title}>
      {icon !== "" && (
        <span class="icon" aria-hidden="true">
          {icon}{" "}
        </span>
      )}
      {props.children}
    </span>
  );
}
