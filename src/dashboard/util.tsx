// Small pieces the pages share: relative times, the confirmation dialog, following List pages.
import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { InstanceStatus } from "../gen/krane/ctrl/v1/cluster_pb.js";
import { errorText } from "./api.js";

export function ago(ms: bigint | number): string {
  const t = Number(ms);
  if (t === 0) return "never";
  const s = Math.max(0, Math.round((Date.now() - t) / 1000));
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.round(s / 60)}m ago`;
  if (s < 86400) return `${Math.round(s / 3600)}h ago`;
  return `${Math.round(s / 86400)}d ago`;
}

export function clock(ms: bigint | number): string {
  return new Date(Number(ms)).toLocaleString();
}

export function statusName(s: InstanceStatus): string {
  return (InstanceStatus[s] ?? "UNKNOWN").replace(/^INSTANCE_STATUS_/, "").toLowerCase();
}

/** Every item of a paged List call (ctrl answers at most a page at a time), following next_page_token. */
export async function all<T>(
  page: (pageToken: string) => Promise<{ items: T[]; next: string }>,
  maxPages = 1_000,
): Promise<T[]> {
  const out: T[] = [];
  let token = "";
  let pages = 0;
  do {
    const { items, next } = await page(token);
    out.push(...items);
    token = next;
  } while (token !== "" && ++pages < maxPages);
  return out;
}

/** A modal dialog asking to confirm an action (Escape or Cancel: no). */
export function Confirm(props: { title: string; children: ComponentChildren; onYes: () => void; onNo: () => void }) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    ref.current?.showModal();
  }, []);
  return (
    <dialog ref={ref} aria-label={props.title} onCancel={props.onNo}>
      <h2>{props.title}</h2>
      {props.children}
      <div class="actions">
        <button class="primary" type="button" onClick={props.onYes}>
          Confirm
        </button>
        <button type="button" onClick={props.onNo}>
          Cancel
        </button>
      </div>
    </dialog>
  );
}

/** An action waiting for the user's confirmation. */
export interface PendingAction {
  title: string;
  /** What the dialog says besides its title (a rollback's diff). */
  body?: ComponentChildren;
  run: () => Promise<unknown>;
  /** Where ctrl's refusal is shown: next to the field it concerns. */
  field: string;
  /** After ctrl accepted it. */
  onDone?: () => void;
}

/**
 * Actions that ask first: `act` opens the confirmation `dialog` (render it); confirmed, the action
 * runs, and ctrl's refusal lands in `errors` under the action's field.
 */
export function useConfirmedActions(): {
  act: (p: PendingAction) => void;
  errors: Readonly<Record<string, string>>;
  dialog: ComponentChildren;
} {
  const [pending, setPending] = useState<PendingAction>();
  const [errors, setErrors] = useState<Record<string, string>>({});
  const act = (p: PendingAction): void => {
    setErrors({});
    setPending(p);
  };
  const dialog = pending && (
    <Confirm
      title={pending.title}
      onNo={() => setPending(undefined)}
      onYes={() => {
        const p = pending;
        setPending(undefined);
        p.run().then(
          () => p.onDone?.(),
          (err: unknown) => setErrors({ [p.field]: errorText(err) }),
        );
      }}
    >
      {pending.body ?? null}
    </Confirm>
  );
  return { act, errors, dialog };
}
