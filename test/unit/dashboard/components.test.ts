// The dashboard's shared components, rendered into the minimal DOM of ./dom.ts: the dense table
// (sort, filter, drawing only the rows in view), the line chart, the confirmation of an action
// (ctrl's refusal lands under the action's field) and the live badge.
import "./dom.js";
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { LiveBadge, Toned } from "../../../src/dashboard/components/badge.js";
import { useConfirmedActions, type PendingAction } from "../../../src/dashboard/components/confirm.js";
import { LineChart, plot, stack } from "../../../src/dashboard/components/line-chart.js";
import { filterRows, rowWindow, sortRows, Table, type Column } from "../../../src/dashboard/components/table.js";
import { button, byTag, cells, fire, h, mount, settle, the, type FakeElement } from "./dom.js";

interface Row {
  name: string;
  n: number;
}
const COLUMNS: Column<Row>[] = [
  { key: "name", title: "Name", value: (r) => r.name },
  { key: "n", title: "N", value: (r) => r.n },
];
const ROWS: Row[] = [
  { name: "web-10", n: 3 },
  { name: "web-9", n: 20 },
  { name: "Api", n: 100 },
];

describe("table", () => {
  it("sorts numbers as numbers and text in natural order, either way", () => {
    const by = (key: string, desc: boolean) =>
      sortRows(
        [...ROWS],
        COLUMNS.find((c) => c.key === key),
        desc,
      ).map((r) => r.name);
    assert.deepEqual(by("n", false), ["web-10", "web-9", "Api"]);
    assert.deepEqual(by("n", true), ["Api", "web-9", "web-10"]);
    // "web-9" before "web-10": numeric, not character by character.
    assert.deepEqual(by("name", false), ["Api", "web-9", "web-10"]);
    assert.deepEqual(sortRows([...ROWS], undefined, false), ROWS);
  });

  it("filters on any column's value, in any case, ignoring the surrounding blanks", () => {
    assert.deepEqual(
      filterRows(ROWS, COLUMNS, " API ").map((r) => r.name),
      ["Api"],
    );
    assert.deepEqual(
      filterRows(ROWS, COLUMNS, "20").map((r) => r.name),
      ["web-9"],
    );
    assert.equal(filterRows(ROWS, COLUMNS, "").length, 3);
  });

  it("draws a short table whole, and of a long one the rows in view and a few around them", () => {
    assert.deepEqual(rowWindow(0, 34), { first: 0, last: 34, virtual: false });
    assert.deepEqual(rowWindow(0, 1_000), { first: 0, last: 34, virtual: true });
    // 100 rows of 28 px scrolled past: the view starts at row 100, drawn from 5 rows before.
    assert.deepEqual(rowWindow(2_800, 1_000), { first: 95, last: 129, virtual: true });
    assert.deepEqual(rowWindow(28_000, 1_000), { first: 995, last: 1_000, virtual: true });
  });

  it("filters and sorts in the page: the count, the order, the header's state", async () => {
    const { root, unmount } = await mount(
      h(Table<Row>, {
        label: "Things",
        rows: ROWS,
        columns: COLUMNS,
        rowKey: (r) => r.name,
        filter: true,
        empty: "No thing yet.",
      }),
    );
    assert.deepEqual(cells(root, "Things"), [
      ["Name", "N"],
      ["web-10", "3"],
      ["web-9", "20"],
      ["Api", "100"],
    ]);
    await fire(the(root, "input", ["aria-label", "Filter Things"]), "input", "web");
    assert.match(root.textContent, /2 of 3/);
    assert.deepEqual(cells(root, "Things").slice(1), [
      ["web-10", "3"],
      ["web-9", "20"],
    ]);
    const nameHeader = () => byTag(root, "th")[0] as FakeElement;
    await fire(button(root, "Name"), "click");
    assert.equal(nameHeader().getAttribute("aria-sort"), "ascending");
    assert.deepEqual(cells(root, "Things").slice(1), [
      ["web-9", "20"],
      ["web-10", "3"],
    ]);
    await fire(button(root, "Name ↑"), "click");
    assert.equal(nameHeader().getAttribute("aria-sort"), "descending");
    assert.deepEqual(cells(root, "Things").slice(1), [
      ["web-10", "3"],
      ["web-9", "20"],
    ]);
    await unmount();
  });

  it("an empty table says what to do next, and a filter that matches nothing says so", async () => {
    const empty = await mount(
      h(Table<Row>, { label: "None", rows: [], columns: COLUMNS, rowKey: (r) => r.name, empty: "Add a thing first." }),
    );
    const only = (root: FakeElement, label: string) =>
      byTag(the(root, "table", ["aria-label", label]), "td").map((td) => [td.textContent, td.getAttribute("colspan")]);
    assert.deepEqual(only(empty.root, "None"), [["Add a thing first.", "2"]]);
    await empty.unmount();
    const some = await mount(
      h(Table<Row>, { label: "Some", rows: ROWS, columns: COLUMNS, rowKey: (r) => r.name, filter: true, empty: "x" }),
    );
    await fire(the(some.root, "input", ["aria-label", "Filter Some"]), "input", "nothing like it");
    assert.deepEqual(only(some.root, "Some"), [["No row matches the filter.", "2"]]);
    await some.unmount();
  });

  it("a toned state carries its tone's shape beside the word, hidden from screen readers", async () => {
    for (const [tone, icon] of [
      ["ok", "✓"],
      ["warn", "◐"],
      ["bad", "✕"],
    ] as const) {
      const { root, unmount } = await mount(h(Toned, { tone, children: "word" }));
      const span = byTag(root, "span")[0] as FakeElement;
      assert.equal(span.getAttribute("class"), tone);
      const shape = byTag(span, "span")[0] as FakeElement;
      assert.equal(shape.getAttribute("aria-hidden"), "true");
      assert.equal(shape.textContent.trim(), icon);
      assert.equal(span.textContent.replace(icon, "").trim(), "word");
      await unmount();
    }
    const muted = await mount(h(Toned, { tone: "muted", children: "word" }));
    assert.equal(byTag(muted.root, "span").length, 1);
    await muted.unmount();
  });

  it("draws only the rows in view of a long table, with spacers for the rest", async () => {
    const many = Array.from({ length: 500 }, (_, i) => ({ name: `row-${i}`, n: i }));
    const { root, unmount } = await mount(
      h(Table<Row>, { label: "Many", rows: many, columns: COLUMNS, rowKey: (r) => r.name, empty: "" }),
    );
    const body = () => byTag(the(root, "table", ["aria-label", "Many"]), "tbody")[0] as FakeElement;
    const drawn = () => byTag(body(), "tr").filter((tr) => tr.getAttribute("aria-hidden") === null);
    assert.equal(drawn().length, 34);
    assert.equal(the(root, "table", ["aria-label", "Many"]).getAttribute("aria-rowcount"), "501");
    const scroller = byTag(root, "div").find((d) => d.getAttribute("class") === "scroll") as FakeElement;
    Object.assign(scroller, { scrollTop: 28 * 200 });
    await fire(scroller, "scroll");
    assert.deepEqual(
      byTag(drawn()[0] as FakeElement, "td").map((td) => td.textContent),
      ["row-195", "195"],
    );
    // The spacers keep the scroll height: 195 rows above, 271 below.
    const spacers = byTag(body(), "tr").filter((tr) => tr.getAttribute("aria-hidden") === "true");
    assert.deepEqual(
      spacers.map((s) => s.style.height),
      [`${195 * 28}px`, `${271 * 28}px`],
    );
    await unmount();
  });
});

describe("line chart", () => {
  const series = [
    {
      name: "r1",
      points: [
        { t: 1_000, v: 2 },
        { t: 2_000, v: 4 },
      ],
    },
    { name: "r2", points: [] },
  ];

  it("scales to the largest value and the time span, and says each line's last value", () => {
    const p = plot(series, 1_000, 2_000, "per second");
    assert.equal(p.max, 4);
    // x from the y axis (28) to the right edge (412); y from the x axis (120: 0) up to the top
    // (8: the largest value), so 2 of 4 is half way.
    assert.deepEqual(p.lines, ["28.0,64.0 412.0,8.0", ""]);
    assert.equal(p.summary, "r1: last 4 per second; r2: last none per second");
    assert.equal(plot([], 0, 0, "ms").summary, "");
  });

  it("draws a polyline and a legend entry per series, and names what it shows", async () => {
    const { root, unmount } = await mount(
      h(LineChart, { title: "Requests", unit: "per second", series, from: 1_000, to: 2_000 }),
    );
    assert.equal(
      byTag(root, "svg")[0]?.getAttribute("aria-label"),
      "Requests: r1: last 4 per second; r2: last none per second",
    );
    assert.deepEqual(
      byTag(root, "polyline").map((p) => p.getAttribute("points")),
      ["28.0,64.0 412.0,8.0", ""],
    );
    // A dot on the last point of each line that has one.
    assert.deepEqual(
      byTag(root, "circle").map((c) => [c.getAttribute("cx"), c.getAttribute("cy")]),
      [["412.0", "8.0"]],
    );
    assert.deepEqual(
      byTag(root, "li").map((li) => li.textContent.trim()),
      ["r1", "r2"],
    );
    await unmount();
    const empty = await mount(h(LineChart, { title: "p99 latency", unit: "ms", series: [], from: 0, to: 1 }));
    assert.equal(byTag(empty.root, "svg")[0]?.getAttribute("aria-label"), "p99 latency: no measurements");
    await empty.unmount();
  });

  it("stacks each series on those before it (the top line is the total); a missing point adds nothing", () => {
    const stacked = stack([
      {
        name: "r1",
        points: [
          { t: 1, v: 2 },
          { t: 2, v: 3 },
        ],
      },
      {
        name: "r2",
        points: [
          { t: 2, v: 1 },
          { t: 3, v: 4 },
        ],
      },
    ]);
    assert.deepEqual(stacked[1]?.points, [
      { t: 1, v: 2 },
      { t: 2, v: 4 },
      { t: 3, v: 4 },
    ]);
    assert.deepEqual(stacked[0]?.points, [
      { t: 1, v: 2 },
      { t: 2, v: 3 },
    ]);
  });

  it("a stacked chart fills a band per series and still says each series' own last value", async () => {
    const two = [
      {
        name: "r1",
        points: [
          { t: 1_000, v: 2 },
          { t: 2_000, v: 2 },
        ],
      },
      {
        name: "r2",
        points: [
          { t: 1_000, v: 1 },
          { t: 2_000, v: 2 },
        ],
      },
    ];
    const { root, unmount } = await mount(
      h(LineChart, { title: "Requests", unit: "per second", series: two, from: 1_000, to: 2_000, stacked: true }),
    );
    assert.equal(byTag(root, "polygon").length, 2);
    assert.equal(
      byTag(root, "svg")[0]?.getAttribute("aria-label"),
      "Requests: r1: last 2 per second; r2: last 2 per second",
    );
    // The top line reaches the total (4, the chart's top: y 8) at the end.
    assert.match(byTag(root, "polyline")[1]?.getAttribute("points") ?? "", /412\.0,8\.0$/);
    await unmount();
  });
});

describe("confirmed actions", () => {
  /** A page with one action that asks first, and the two fields' refusals. */
  function Harness(props: { action: Omit<PendingAction, "title" | "field">; field: string }) {
    const { act, errors, dialog } = useConfirmedActions();
    return h("div", null, [
      h(
        "button",
        { type: "button", onClick: () => act({ title: "Do it", field: props.field, ...props.action }) },
        "Ask",
      ),
      h("span", { id: "image-error" }, errors.image ?? ""),
      h("span", { id: "action-error" }, errors.action ?? ""),
      dialog,
    ]);
  }
  it("runs the action only when confirmed, and shows ctrl's refusal under its field", async () => {
    let runs = 0;
    const run = async () => {
      runs++;
      throw new ConnectError("image: not a valid image reference", Code.InvalidArgument);
    };
    const { root, unmount } = await mount(h(Harness, { field: "image", action: { run } }));
    await fire(button(root, "Ask"), "click");
    const dialog = the(root, "dialog", ["aria-label", "Do it"]);
    assert.equal(dialog.getAttribute("open"), "", "shown as a modal");
    await fire(button(root, "Cancel"), "click");
    assert.equal(byTag(root, "dialog").length, 0);
    assert.equal(runs, 0, "cancelled: nothing ran");

    await fire(button(root, "Ask"), "click");
    await fire(button(root, "Confirm"), "click");
    await settle();
    assert.equal(runs, 1);
    assert.equal(byTag(root, "dialog").length, 0);
    assert.equal(the(root, "span", ["id", "image-error"]).textContent, "image: not a valid image reference");
    assert.equal(the(root, "span", ["id", "action-error"]).textContent, "");

    // Asking again clears the last refusal.
    await fire(button(root, "Ask"), "click");
    assert.equal(the(root, "span", ["id", "image-error"]).textContent, "");
    await unmount();
  });

  it("calls onDone once ctrl accepted the action", async () => {
    let done = 0;
    const { root, unmount } = await mount(
      h(Harness, { field: "action", action: { run: async () => undefined, onDone: () => done++ } }),
    );
    await fire(button(root, "Ask"), "click");
    await fire(button(root, "Confirm"), "click");
    await settle();
    assert.equal(done, 1);
    assert.equal(the(root, "span", ["id", "action-error"]).textContent, "");
    await unmount();
  });
});

describe("live badge", () => {
  it("says the stream's state in its tone, politely announced", async () => {
    for (const [state, text, tone] of [
      ["connecting", "connecting…", "warn"],
      ["live", "live", "ok"],
      ["reconnecting", "reconnecting…", "warn"],
      ["stopped", "stopped", "bad"],
    ] as const) {
      const { root, unmount } = await mount(h(LiveBadge, { state }));
      const badge = the(root, "span", ["role", "status"]);
      assert.equal(badge.textContent, text);
      assert.equal(badge.getAttribute("class"), `badge ${tone}`);
      assert.equal(badge.getAttribute("aria-live"), "polite");
      await unmount();
    }
  });
});
