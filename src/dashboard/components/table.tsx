/** @jsxRuntime automatic @jsxImportSource preact */
// A dense, sortable, filterable table that renders only the rows in view (fixed row height), so
// hundreds or thousands of rows stay fast. Sorting and filtering are pure (sortRows, filterRows).
import type { ComponentChildren } from "preact";
import { useMemo, useState } from "preact/hooks";

export interface Column<T> {
  key: string;
  title: string;
  /** What the column sorts and filters by. */
  value: (row: T) => string | number;
  render?: (row: T) => ComponentChildren;
  /** Long text (a message, a diff): wraps within a bounded width instead of widening the table. */
  wrap?: boolean;
}

export function filterRows<T>(rows: readonly T[], columns: readonly Column<T>[], text: string): T[] {
  const q = text.trim().toLowerCase();
  if (q === "") return [...rows];
  return rows.filter((r) => columns.some((c) => String(c.value(r)).toLowerCase().includes(q)));
}

/** One collator for every sort: far cheaper per comparison than String.prototype.localeCompare. */
const collator = new Intl.Collator(undefined, { numeric: true });

export function sortRows<T>(rows: T[], column: Column<T> | undefined, descending: boolean): T[] {
  if (!column) return rows;
  const dir = descending ? -1 : 1;
  // Each row's value is computed once, not twice per comparison.
  const keyed = rows.map((row) => ({ row, v: column.value(row) }));
  keyed.sort((a, b) => {
    if (typeof a.v === "number" && typeof b.v === "number") return (a.v - b.v) * dir;
    return collator.compare(String(a.v), String(b.v)) * dir;
  });
  return keyed.map((k) => k.row);
}

const ROW_PX = 28;
const VIEW_ROWS = 24;

/**
 * Which of `count` rows to draw when the table is scrolled `top` px down: a few beyond the view on
 * each side. `virtual`: only those are drawn, spacer rows stand in for the rest; a short table
 * draws every row.
 */
export function rowWindow(top: number, count: number): { first: number; last: number; virtual: boolean } {
  const first = Math.max(0, Math.floor(top / ROW_PX) - 5);
  const last = Math.min(count, first + VIEW_ROWS + 10);
  return { first, last, virtual: count > VIEW_ROWS + 10 };
}

export function Table<T>(props: {
  label: string;
  rows: readonly T[];
  columns: readonly Column<T>[];
  rowKey: (row: T) => string;
  filter?: boolean;
  /** What an empty table says: why it is empty and what to do next (every table has one). */
  empty: ComponentChildren;
}) {
  const [text, setText] = useState("");
  const [sortKey, setSortKey] = useState<string | undefined>(undefined);
  const [desc, setDesc] = useState(false);
  const [top, setTop] = useState(0);
  const shown = useMemo(
    () =>
      sortRows(
        filterRows(props.rows, props.columns, text),
        props.columns.find((c) => c.key === sortKey),
        desc,
      ),
    [props.rows, props.columns, text, sortKey, desc],
  );
  const { first, last, virtual } = rowWindow(top, shown.length);
  const slice = virtual ? shown.slice(first, last) : shown;
  return (
    <div>
      {props.filter && (
        <div class="filter">
          <input
            type="search"
            aria-label={`Filter ${props.label}`}
            placeholder="Filter"
            value={text}
            onInput={(e) => setText(e.currentTarget.value)}
          />{" "}
          <span class="muted">
            {shown.length} of {props.rows.length}
          </span>
        </div>
      )}
      <div class="scroll" onScroll={(e) => setTop(e.currentTarget.scrollTop)}>
        <table aria-label={props.label} aria-rowcount={shown.length + 1}>
          <thead>
            <tr>
              {props.columns.map((c) => (
                <th
                  key={c.key}
                  scope="col"
                  aria-sort={sortKey === c.key ? (desc ? "descending" : "ascending") : undefined}
                >
                  <button
                    type="button"
                    onClick={() => {
                      if (sortKey === c.key) setDesc(!desc);
                      else {
                        setSortKey(c.key);
                        setDesc(false);
                      }
                    }}
                  >
                    {c.title}
                    {sortKey === c.key ? (desc ? " ↓" : " ↑") : ""}
                  </button>
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {shown.length === 0 && (
              <tr>
                <td class="empty" colSpan={props.columns.length}>
                  {props.rows.length === 0 ? props.empty : "No row matches the filter."}
                </td>
              </tr>
            )}
            {virtual && first > 0 && <tr aria-hidden="true" style={{ height: `${first * ROW_PX}px` }} />}
            {slice.map((r) => (
              <tr key={props.rowKey(r)} style={{ height: `${ROW_PX}px` }}>
                {props.columns.map((c) => (
                  <td key={c.key} class={c.wrap ? "wrap" : undefined}>
                    {c.render ? c.render(r) : String(c.value(r))}
                  </td>
                ))}
              </tr>
            ))}
            {virtual && last < shown.length && (
              <tr aria-hidden="true" style={{ height: `${(shown.length - last) * ROW_PX}px` }} />
            )}
          </tbody>
        </table>
      </div>
    </div>
  );
}
