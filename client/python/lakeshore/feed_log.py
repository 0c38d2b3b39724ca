"""The local plane's feed across processes (as client/local/feed-log.ts does it in Node): each
process writes its records to the file's local_feed table while some process reads the
namespace's feed (a reader's row in local_feed_readers says so), and readers follow the table.

A transition's records are in its commit's place: a verb that may tell the feed and changed a row
takes a slot (a row with record '') inside its own transaction, and what its thread tells next
fills the slot (a JSON array of records). So a record another process makes because of it comes
after it, whichever process writes first. A reader waits at a slot not yet filled, up to
FEED_HOLD_S (its writer is gone: the slot is passed). A slot left empty is taken back by its
thread's next verb."""
import json
import os
import re
import sqlite3
import threading
import time
from typing import Any, Dict, Iterator, List, Optional, Tuple

from .errors import BadRequest

#: The shared feed (client/local/feed-log.ts): records kept, how often old ones are trimmed, and how
#: often a reader looks for other processes' records (seconds).
FEED_KEEP = 100_000
FEED_TRIM_EVERY = 1_000
FEED_POLL_S = 0.05
#: How often a process looks for readers (a new reader waits this long, and a little, before it
#: starts), how often a reader renews its row, and when a row not renewed lapses (ms).
FEED_NOTICE_S = 0.25
FEED_RENEW_S = 1.0
FEED_READER_TTL_MS = 5_000
#: How long a reader waits for a slot to be filled before it passes it (seconds).
FEED_HOLD_S = 3.0
#: The verbs whose transitions the feed is told of (a slot is taken for them).
_TELLS = re.compile(r"^(submit|cancel|ack|nack_retry|nack_fail|retry|redrive|redrive_dead_letters|tick|release|boltzmann_levels|claim_.*)$")


class FeedLog:
    """Mixed into Dispatch: uses its _db, _lock, _closed and namespace, and the _feed_writes,
    _feed_readers, _feed_read_at and _feed_read it sets."""

    namespace: str
    _db: sqlite3.Connection
    _lock: Any  # a threading.RLock
    _closed: bool
    _feed_writes: int
    _feed_slot: threading.local
    _feed_readers: int
    _feed_read_at: float
    _feed_read: bool

    def _feed_wanted(self) -> bool:
        """Whether some process reads this namespace's feed (client/local/feed-log.ts): asked of the
        file at most every FEED_NOTICE_S; this process's own readers count at once."""
        if self._feed_readers:
            return True
        now = time.monotonic()
        if now - self._feed_read_at >= FEED_NOTICE_S:
            self._feed_read_at = now
            try:
                with self._lock:
                    self._feed_read = self._db.execute("SELECT 1 FROM local_feed_readers WHERE ns = ? AND until > ? LIMIT 1",
                                                       (self.namespace, int(time.time() * 1000))).fetchone() is not None
            except sqlite3.Error:
                self._feed_read = False
        return self._feed_read

    def _feed_reader(self, reader: str, until: Optional[int]) -> None:
        """Puts this reader's row in (renewed until `until`), or takes it out (None)."""
        with self._lock:
            if self._closed:
                return
            if until is None:
                self._db.execute("DELETE FROM local_feed_readers WHERE reader = ?", (reader,))
            else:
                self._db.execute("INSERT INTO local_feed_readers (reader, ns, until) VALUES (?, ?, ?) "
                                 "ON CONFLICT (reader) DO UPDATE SET until = excluded.until", (reader, self.namespace, until))

    def _feed_seal(self, verb: str, changed: bool) -> Optional[int]:
        """Inside a verb's transaction: its slot in local_feed when it changed a row, may tell the
        feed, and some process reads it; this thread's last slot, if nothing filled it, is taken back."""
        last = getattr(self._feed_slot, "slot", None)
        if last is not None and not self._feed_slot.records:
            self._db.execute("DELETE FROM local_feed WHERE seq = ?", (last,))
        self._feed_slot.slot = None
        if not (changed and _TELLS.match(verb) and self._feed_wanted()):
            return None
        return int(self._db.execute("INSERT INTO local_feed (ns, queue, record) VALUES (?, '', '') RETURNING seq", (self.namespace,)).fetchone()[0])

    def _feed_sealed(self, slot: Optional[int]) -> None:
        """The verb committed: what this thread tells next goes in its slot."""
        self._feed_slot.slot = slot
        self._feed_slot.records = []

    def _feed_write(self, records: List[Dict[str, Any]]) -> None:
        """This thread's records: into its last verb's slot, else appended to local_feed, in the order told."""
        with self._lock:
            if self._closed:
                return
            slot = getattr(self._feed_slot, "slot", None)
            self._db.execute("BEGIN IMMEDIATE")
            try:
                if slot is not None:
                    self._feed_slot.records += records
                    self._db.execute("UPDATE local_feed SET record = ? WHERE seq = ?", (json.dumps(self._feed_slot.records, separators=(",", ":")), slot))
                else:
                    self._db.executemany("INSERT INTO local_feed (ns, queue, record) VALUES (?, ?, ?)",
                                         [(self.namespace, r["queue"], json.dumps(r, separators=(",", ":"))) for r in records])
                self._feed_writes += len(records)
                if self._feed_writes >= FEED_TRIM_EVERY:
                    self._feed_writes = 0
                    self._db.execute("DELETE FROM local_feed WHERE seq <= (SELECT max(seq) FROM local_feed) - ?", (FEED_KEEP,))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def _feed_follow(self, queue: Optional[str], kinds: Optional[List[str]], stop: Optional[threading.Event]) -> Iterator[Dict[str, Any]]:
        """Records of `queue` (None: every queue) of every process on this file, from this call on
        (the reader's place is taken now, not at its first read), until `stop`."""
        wanted = set(kinds or ("job", "worker"))
        if not wanted or wanted - {"job", "worker"}:
            raise BadRequest("unknown kind in %r: the feed has job and worker records (kinds=job,worker)" % (kinds,))
        # A reader's row tells every process on the file to write its records; they look every
        # FEED_NOTICE_S, so the reader takes its place once that has passed.
        reader = "py-%s" % os.urandom(8).hex()
        with self._lock:  # its place, as its row goes in: what any process writes from then on is read
            last = int(self._db.execute("SELECT coalesce(max(seq), 0) FROM local_feed").fetchone()[0])
        self._feed_readers += 1
        self._feed_reader(reader, int(time.time() * 1000) + FEED_READER_TTL_MS)
        time.sleep(FEED_NOTICE_S + 0.05)
        return self._feed_from(reader, last, queue, wanted, stop)

    def _feed_from(self, reader: str, last: int, queue: Optional[str], wanted: Any, stop: Optional[threading.Event]) -> Iterator[Dict[str, Any]]:
        renewed = time.monotonic()
        try:
            yield from self._feed_rows(reader, last, queue, wanted, stop, renewed)
        finally:
            self._feed_readers -= 1
            try:
                self._feed_reader(reader, None)
            except sqlite3.Error:
                pass

    def _feed_rows(self, reader: str, last: int, queue: Optional[str], wanted: Any, stop: Optional[threading.Event],
                   renewed: float) -> Iterator[Dict[str, Any]]:
        holding: Optional[Tuple[int, float]] = None
        while not (stop and stop.is_set()):
            if time.monotonic() - renewed >= FEED_RENEW_S:
                renewed = time.monotonic()
                self._feed_reader(reader, int(time.time() * 1000) + FEED_READER_TTL_MS)
            with self._lock:
                if self._closed:
                    return
                rows = self._db.execute("SELECT seq, queue, record FROM local_feed INDEXED BY local_feed_ns WHERE ns = ? AND seq > ? "
                                        "ORDER BY seq LIMIT 1000", (self.namespace, last)).fetchall()
                first = int(self._db.execute("SELECT coalesce(min(seq), 0) FROM local_feed").fetchone()[0])
            if first > last + 1 and last > 0:  # trimmed past where this reader was
                yield {"kind": "gap", "reason": "behind"}
                last = max(last, first - 1)
            held = False
            for r in rows:
                text = r["record"]
                if text == "":  # a slot not filled yet: what follows waits for it, up to FEED_HOLD_S
                    if holding is None or holding[0] != r["seq"]:
                        holding = (r["seq"], time.monotonic())
                    if time.monotonic() - holding[1] < FEED_HOLD_S:
                        held = True
                        break
                    last = int(r["seq"])
                    continue
                last = int(r["seq"])
                for rec in (json.loads(text) if text.startswith("[") else [json.loads(text)]):
                    if (queue is None or rec.get("queue") == queue) and rec.get("kind") in wanted:
                        yield rec
            if held or len(rows) < 1000:
                (stop.wait if stop else time.sleep)(FEED_POLL_S)
