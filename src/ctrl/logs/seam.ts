// The seam between stored lines and live ones, and the archive's "stored already" test (pure).
// Both rest on one fact: each instance's lines carry the kubelet's time stamps (unix ns), in
// order, and no two lines of an instance share one. So a cursor per instance (region/instance:
// the time of the last line kept) says exactly which lines were seen: a line is new when it is
// later than its instance's cursor, and an instance without a cursor has nothing seen.

/** An instance's key: its region and pod name. */
export function sourceKey(region: string, instance: string): string {
  return `${region}/${instance}`;
}

export class InstanceCursors {
  readonly #last = new Map<string, bigint>();

  constructor(initial?: Iterable<readonly [string, bigint]>) {
    if (initial) for (const [k, ns] of initial) this.#last.set(k, ns);
  }

  get size(): number {
    return this.#last.size;
  }

  /** The time of the instance's last line seen, or undefined. */
  get(key: string): bigint | undefined {
    return this.#last.get(key);
  }

  /** Whether the line is new (later than its instance's cursor); a new line moves the cursor. */
  admit(key: string, ns: bigint): boolean {
    const last = this.#last.get(key);
    if (last !== undefined && ns <= last) return false;
    this.#last.set(key, ns);
    return true;
  }

  /** Whether the line is new, without moving the cursor (the seam: history's cursors stay fixed). */
  isNew(key: string, ns: bigint): boolean {
    const last = this.#last.get(key);
    return last === undefined || ns > last;
  }

  /**
   * Where a live read must start so that no line after any of `running`'s cursors is missed:
   * the earliest of their cursors, or `floor` when one of them has none (all it wrote is new).
   * Never before `floor`.
   */
  liveSince(running: Iterable<string>, floor: bigint): bigint {
    let since: bigint | undefined;
    for (const key of running) {
      const last = this.#last.get(key);
      if (last === undefined) return floor;
      if (since === undefined || last < since) since = last;
    }
    if (since === undefined || since < floor) return floor;
    return since;
  }
}
