// A minimal DOM for rendering the dashboard's components in Node (no browser, no DOM package):
// the part Preact's renderer uses (elements, text, attributes, style, listeners; events are Node's
// own EventTarget) and what the tests read back (text, attributes, queries). Import it before
// anything of src/dashboard: it installs `document`, and `location` for api.ts's transport.
// Not a browser: no layout, no bubbling, no default actions (a submit button does not submit; a
// test dispatches "submit" on the form).
import { h, render, type ComponentChild } from "preact";
import { act } from "preact/test-utils";

export class FakeNode extends EventTarget {
  parentNode: FakeNode | null = null;
  childNodes: FakeNode[] = [];
  constructor(
    readonly nodeType: number,
    readonly ownerDocument: FakeDocument | null,
  ) {
    super();
  }
  get firstChild(): FakeNode | null {
    return this.childNodes[0] ?? null;
  }
  get nextSibling(): FakeNode | null {
    const siblings = this.parentNode?.childNodes ?? [];
    return siblings[siblings.indexOf(this) + 1] ?? null;
  }
  insertBefore(child: FakeNode, before: FakeNode | null): FakeNode {
    child.remove();
    const i = before ? this.childNodes.indexOf(before) : -1;
    if (i < 0) this.childNodes.push(child);
    else this.childNodes.splice(i, 0, child);
    child.parentNode = this;
    return child;
  }
  appendChild(child: FakeNode): FakeNode {
    return this.insertBefore(child, null);
  }
  removeChild(child: FakeNode): FakeNode {
    this.childNodes = this.childNodes.filter((c) => c !== child);
    child.parentNode = null;
    return child;
  }
  remove(): void {
    this.parentNode?.removeChild(this);
  }
  get textContent(): string {
    return this.childNodes.map((c) => c.textContent).join("");
  }
}

export class FakeText extends FakeNode {
  constructor(
    public data: string,
    doc: FakeDocument,
  ) {
    super(3, doc);
  }
  override get textContent(): string {
    return this.data;
  }
}

class FakeStyle {
  [name: string]: unknown;
  cssText = "";
  setProperty(name: string, value: string): void {
    this[name] = value;
  }
}

export class FakeElement extends FakeNode {
  readonly attributes = new Map<string, string>();
  /** Preact sets style properties by name (`height`) or through setProperty (`--custom`). */
  readonly style = new FakeStyle();
  constructor(
    readonly localName: string,
    readonly namespaceURI: string,
    doc: FakeDocument,
  ) {
    super(1, doc);
  }
  setAttribute(name: string, value: unknown): void {
    this.attributes.set(name, String(value));
  }
  getAttribute(name: string): string | null {
    return this.attributes.get(name) ?? null;
  }
  removeAttribute(name: string): void {
    this.attributes.delete(name);
  }
  /** A <dialog>'s: open, as modal. */
  showModal(): void {
    this.setAttribute("open", "");
  }
  /** A <form>'s controls by name. */
  get elements(): { namedItem(name: string): FakeElement | null } {
    return { namedItem: (name) => find(this, (e) => e.getAttribute("name") === name)[0] ?? null };
  }
}

/**
 * Inputs, selects and textareas hold their value and checked state as properties, as in a
 * browser (Preact sets a prop the element has as a property, any other as an attribute).
 */
export class FakeControl extends FakeElement {
  value = "";
  checked = false;
}

export class FakeDocument extends FakeNode {
  constructor() {
    super(9, null);
  }
  createElementNS(namespace: string, name: string): FakeElement {
    return ["input", "select", "textarea", "option"].includes(name)
      ? new FakeControl(name, namespace, this)
      : new FakeElement(name, namespace, this);
  }
  createElement(name: string): FakeElement {
    return this.createElementNS("http://www.w3.org/1999/xhtml", name);
  }
  createTextNode(data: string): FakeText {
    return new FakeText(data, this);
  }
}

const doc = new FakeDocument();
Object.assign(globalThis, {
  document: doc,
  // api.ts builds its transport from the page's origin; nothing here reaches it.
  location: { origin: "http://dashboard.invalid", hash: "", reload: () => undefined },
});

/** Every element under `root` (itself excluded) that `match` accepts, in document order. */
export function find(root: FakeNode, match: (e: FakeElement) => boolean): FakeElement[] {
  const out: FakeElement[] = [];
  for (const c of root.childNodes) {
    if (c instanceof FakeElement && match(c)) out.push(c);
    out.push(...find(c, match));
  }
  return out;
}

/** Elements by tag name, and optionally an attribute's value. */
export function byTag(root: FakeNode, tag: string, attr?: [string, string]): FakeElement[] {
  return find(root, (e) => e.localName === tag && (!attr || e.getAttribute(attr[0]) === attr[1]));
}

/** The one element of `tag` whose attribute is `value`; throws when there is none or several. */
export function the(root: FakeNode, tag: string, attr: [string, string]): FakeElement {
  const found = byTag(root, tag, attr);
  if (found.length !== 1) throw new Error(`${found.length} <${tag} ${attr[0]}="${attr[1]}"> found`);
  return found[0] as FakeElement;
}

function inTableHeader(e: FakeNode): boolean {
  for (let n = e.parentNode; n; n = n.parentNode) if (n instanceof FakeElement && n.localName === "th") return true;
  return false;
}

/** The buttons that act, by their aria-label or text (the tables' sort buttons left out). */
export function buttons(root: FakeNode): string[] {
  return byTag(root, "button")
    .filter((b) => !inTableHeader(b))
    .map((b) => b.getAttribute("aria-label") ?? b.textContent);
}

export function button(root: FakeNode, name: string): FakeElement {
  const found = byTag(root, "button").filter((b) => (b.getAttribute("aria-label") ?? b.textContent) === name);
  if (found.length !== 1) throw new Error(`${found.length} buttons "${name}"`);
  return found[0] as FakeElement;
}

/** The cells of a table (by its aria-label), row by row, as text; the header row first. */
export function cells(root: FakeNode, label: string): string[][] {
  return byTag(the(root, "table", ["aria-label", label]), "tr").map((tr) =>
    find(tr, (e) => e.localName === "td" || e.localName === "th").map((c) => c.textContent),
  );
}

/** Renders `vnode` into a fresh container, effects flushed; `unmount` ends it. */
export async function mount(vnode: ComponentChild): Promise<{ root: FakeElement; unmount: () => Promise<void> }> {
  const root = doc.createElement("div");
  doc.appendChild(root);
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
    if (value !== undefined && el instanceof FakeControl) el.value = value;
    el.dispatchEvent(new Event(type, { cancelable: true }));
  });
}

/** Lets pending promises (an action's call) settle, and the page render what they set. */
export async function settle(): Promise<void> {
  await act(() => new Promise<void>((r) => setTimeout(r, 0)));
}

export { h };
