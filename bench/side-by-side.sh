#!/usr/bin/env bash
# lakeshore beside BullMQ and pg-boss in one sitting, on the common workload, and interleaved:
# each round runs the peers' cases once (../shared/peers' harness, copied to a scratch folder
# since it is read-only; its setup.sh installs Redis and Postgres with apt and starts them on
# loopback), stops their servers, then runs `npm run bench` once. So the k-th run of every system
# falls in the same few minutes, and a machine that slows down within the sitting (these VMs move
# by a third from one half hour to the next) slows every system's runs alike, not only the
# second half's. It prints one markdown table of medians from both sets of JSON lines.
#   bench/side-by-side.sh            3 rounds (REPS to change)
# Output: $OUT (default /tmp/lakeshore-side-by-side/<stamp>): peers.jsonl, lakeshore.jsonl, table.md
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PEERS_SRC="${PEERS_SRC:-$ROOT/../shared/peers}"
SCRATCH="${PEERS_DIR:-/tmp/lakeshore-peers}"
OUT="${OUT:-/tmp/lakeshore-side-by-side/$(date -u +%Y%m%dT%H%M%SZ)}"
REPS="${REPS:-3}"
PEER_CASES="bullmq-add bullmq-addBulk pgboss-send pgboss-insert bullmq-idle pgboss-idle-notify"
mkdir -p "$OUT"
: > "$OUT/peers.jsonl"
: > "$OUT/lakeshore.jsonl"
[ -d "$SCRATCH" ] || cp -r "$PEERS_SRC" "$SCRATCH"
for rep in $(seq 1 "$REPS"); do
  echo "[side-by-side] round $rep of $REPS: peers ($(date -u +%H:%M:%S))" >&2
  rm -rf "$OUT/peers/round-$rep"
  (cd "$SCRATCH" && REPS=1 OUT="$OUT/peers/round-$rep" ./bench.sh $PEER_CASES >&2)
  # the harness numbers its own single round 1: give each line the sitting's round
  node -e 'const rep = Number(process.argv[1]); for (const l of require("fs").readFileSync(0, "utf8").split("\n").filter(Boolean)) { const r = JSON.parse(l); console.log(JSON.stringify({ ...r, rep })); }' \
    "$rep" < "$OUT/peers/round-$rep/raw.jsonl" >> "$OUT/peers.jsonl"
  (cd "$SCRATCH" && ./stop.sh >&2) || true
  echo "[side-by-side] round $rep of $REPS: lakeshore ($(date -u +%H:%M:%S))" >&2
  (cd "$ROOT" && REPS=1 BENCH_REP="$rep" node scripts/run.mjs bench >> "$OUT/lakeshore.jsonl")
done
# Shard scaling, once, after the rounds: a SIMULATION of D1's single writer (bench/shards.ts).
echo "[side-by-side] shard scaling, simulated D1 ($(date -u +%H:%M:%S))" >&2
(cd "$ROOT" && node scripts/run.mjs node bench/shards.ts >> "$OUT/lakeshore.jsonl")
node "$ROOT/bench/table.mjs" "$OUT/lakeshore.jsonl" "$OUT/peers.jsonl" | tee "$OUT/table.md"
