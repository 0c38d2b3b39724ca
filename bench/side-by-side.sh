#!/usr/bin/env bash
# lakeshore beside BullMQ and pg-boss in one sitting, on the common workload: runs the peers'
# harness (../shared/peers, copied to a scratch folder since it is read-only; its setup.sh
# installs Redis and Postgres with apt and starts them on loopback), then `npm run bench`, and
# prints one markdown table of medians from both sets of JSON lines.
#   bench/side-by-side.sh            3 runs of each case (REPS to change)
# Output: $OUT (default /tmp/lakeshore-side-by-side/<stamp>): peers.jsonl, lakeshore.jsonl, table.md
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PEERS_SRC="${PEERS_SRC:-$ROOT/../shared/peers}"
SCRATCH="${PEERS_DIR:-/tmp/lakeshore-peers}"
OUT="${OUT:-/tmp/lakeshore-side-by-side/$(date -u +%Y%m%dT%H%M%SZ)}"
export REPS="${REPS:-3}"
mkdir -p "$OUT"
[ -d "$SCRATCH" ] || cp -r "$PEERS_SRC" "$SCRATCH"
(cd "$SCRATCH" && OUT="$OUT/peers" ./bench.sh bullmq-add bullmq-addBulk pgboss-send pgboss-insert bullmq-idle pgboss-idle-notify >&2)
cp "$OUT/peers/raw.jsonl" "$OUT/peers.jsonl"
(cd "$SCRATCH" && ./stop.sh >&2) || true
(cd "$ROOT" && node scripts/run.mjs bench > "$OUT/lakeshore.jsonl")
node "$ROOT/bench/table.mjs" "$OUT/lakeshore.jsonl" "$OUT/peers.jsonl" | tee "$OUT/table.md"
