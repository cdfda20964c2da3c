// A DOM for rendering the dashboard's components in Node: happy-dom's, installed as the globals
// Preact's renderer and the dashboard use (`document`, `location` for api.ts's transport, the
// element and event classes), plus what the tests read back by (text, attributes, tables,
// buttons). Import it before anything of src/dashboard. Not a browser: no layout.
import { Window } from "happy-dom";
import { h, render, type ComponentChild } from "preact";
import { act } from "preact/test-utils";

const window = new Window({ url: "http://dashboard.invalid/" });
Object.assign(globalThis, {
  window,
  document: window.document,
  location: window.location,
  navigator: window.navigator,
  Node: window.Node,
  Element: window.Element,
  HTMLElement: window.HTMLElement,
  HTMLInputElement: window.HTMLInputElement,
  SVGElement: window.SVGElement,
  Event: window.Event,
  requestAnimationFrame: (cb: (t: number) => void) => setTimeout(() => cb(performance.now()), 0),
  cancelAnimationFrame: (id: NodeJS.Timeout) => clearTimeout(id),
});
const doc = window.document;

/** An element of the test DOM. */
export type FakeElement = InstanceType<typeof window.HTMLElement>;

type Root = FakeElement | InstanceType<typeof window.Element>;

/** Every element under `root` (itself excluded) that `match` accepts, in document order. */
export function find(root: Root, match: (e: FakeElement) => boolean): FakeElement[] {
  return [...root.querySelectorAll("*")].filter((e) => match(e as FakeElement)) as FakeElement[];
}

/** Elements by tag name, and optionally an attribute's value. */
export function byTag(root: Root, tag: string, attr?: [string, string]): FakeElement[] {
  return find(root, (e) => e.localName === tag && (!attr || e.getAttribute(attr[0]) === attr[1]));
}

/** The one element of `tag` whose attribute is `value`; throws when there is none or several. */
export function the(root: Root, tag: string, attr: [string, string]): FakeElement {
  const found = byTag(root, tag, attr);
  if (found.length !== 1) throw new Error(`${found.length} <${tag} ${attr[0]}="${attr[1]}"> found`);
  return found[0] as FakeElement;
}

/** The buttons that act, by their aria-label or text (the tables' sort buttons left out). */
export function buttons(root: Root): string[] {
  return byTag(root, "button")
    .filter((b) => b.closest("th") === null)
    .map((b) => b.getAttribute("aria-label") ?? b.textContent);
}

export function button(root: Root, name: string): FakeElement {
  const found = byTag(root, "button").filter((b) => (b.getAttribute("aria-label") ?? b.textContent) === name);
  if (found.length !== 1) throw new Error(`${found.length} buttons "${name}"`);
  return found[0] as FakeElement;
}

/** The cells of a table (by its aria-label), row by row, as text; the header row first. */
export function cells(root: Root, label: string): string[][] {
  return byTag(the(root, "table", ["aria-label", label]), "tr").map((tr) =>
    find(tr, (e) => e.localName === "td" || e.localName === "th").map((c) => c.textContent),
  );
}

/** Renders `vnode` into a fresh container, effects flushed; `unmount` ends it. */
export async function mount(vnode: ComponentChild): Promise<{ root: FakeElement; unmount: () => Promise<void> }> {
  const root = doc.createElement("div");
  doc.body.appendChild(root);
  await act(() => render(vnode, root as unknown as HTMLElement));
  return {
    root,
    unmount: async () => {
      await act(() => render(null, root as unknown as HTMLElement));
      root.remove();
    },
  };
}

/** Dispatches `type` at `el` (input: after setting its value) and lets the page render. */
export async function fire(el: FakeElement, type: string, value?: string): Promise<void> {
  await act(() => {
    if (value !== undefined) (el as unknown as { value: string }).value = value;
    el.dispatchEvent(new window.Event(type, { cancelable: true, bubbles: true }));
  });
}

/** Lets pending promises (an action's call) settle, and the page render what they set. */
export async function settle(): Promise<void> {
  await act(() => new Promise<void>((r) => setTimeout(r, 0)));
}

export { h };
