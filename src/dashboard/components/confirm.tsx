/** @jsxRuntime automatic @jsxImportSource preact */
// Actions that ask first: the confirmation dialog, and useConfirmedActions, which runs a confirmed
// action and keeps ctrl's refusal under the field it concerns.
import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { errorText } from "../api.js";
import type { Column } from "./table.js";

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

/**
 * A table's last column: a Remove button per row that asks first (`act`), its confirmation titled
 * and its button labelled `Remove <what>`; ctrl's refusal lands under the field "remove".
 */
export function removeColumn<T>(
  act: (p: PendingAction) => void,
  what: (row: T) => string,
  run: (row: T) => Promise<unknown>,
  onDone: () => void,
): Column<T> {
  return {
    key: "remove",
    title: "Remove",
    value: () => "",
    render: (row) => (
      <button
        type="button"
        aria-label={`Remove ${what(row)}`}
        onClick={() => act({ title: `Remove ${what(row)}`, field: "remove", run: () => run(row), onDone })}
      >
        Remove
      </button>
    ),
  };
}
