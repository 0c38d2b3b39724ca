/**
 * Set-based statements carry their items' bytes as hex inside one JSON parameter. Items are
 * grouped so no statement carries more than SET_BYTES of them; an item larger than that goes in
 * a statement of its own, with its bytes bound as a blob. With `key`, no group holds two items
 * of one key: a later item of the same key starts the next group, so its statement runs after
 * the first one's, as if the items had come one by one.
 */
export const SET_BYTES = 256 << 10;

export interface Group<T> {
  /** Positions of the group's items in the input. */
  at: number[];
  items: T[];
  /** True for a single item too large for a set-based statement. */
  alone: boolean;
}

export function groupBySize<T>(items: T[], size: (t: T) => number, key?: (t: T) => string): Group<T>[] {
  const groups: (Group<T> & { bytes: number; keys?: Set<string> })[] = [];
  items.forEach((it, i) => {
    const n = size(it);
    let g = groups[groups.length - 1];
    if (n > SET_BYTES) {
      groups.push({ at: [i], items: [it], alone: true, bytes: n });
      return;
    }
    const k = key?.(it);
    if (!g || g.alone || g.bytes + n > SET_BYTES || (k !== undefined && g.keys?.has(k)))
      groups.push((g = { at: [], items: [], alone: false, bytes: 0 }));
    if (k !== undefined) (g.keys ??= new Set()).add(k);
    g.at.push(i);
    g.items.push(it);
    g.bytes += n;
  });
  return groups;
}

/**
 * One plan's answers from its groups' statements: each group's statement answers some items
 * (null where its row did not come back); `answer` reads a group's result into its items' slots.
 */
export function scatter<T, R>(
  groups: Group<T>[],
  total: number,
  results: { rows: Record<string, unknown>[] }[],
  answer: (g: Group<T>, rows: Record<string, unknown>[]) => (R | null)[],
): (R | null)[] {
  const out: (R | null)[] = new Array(total).fill(null);
  groups.forEach((g, k) => {
    answer(g, results[k]!.rows).forEach((r, j) => {
      out[g.at[j]!] = r;
    });
  });
  return out;
}
