"""A namespace-wide view's pages, put back together (the Node client's client/http/pages.ts): the
plane answers at most 100 queues a request, and the HTTP client asks for every page and answers the
whole, as a local plane answers it."""
import re
from typing import Any, Dict, List, Optional

_MORE = "lakeshore_more_queues"
_MORE_AFTER = re.compile(r'^lakeshore_more_queues\{[^\n]*?after="((?:[^"\\]|\\.)*)"[^\n]*\} 1$', re.M)
_HEAD = re.compile(r"^# (HELP|TYPE) (\S+)")


def merge_worker_pages(seen: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Each worker once across the pages (a worker of queues on two pages is on both)."""
    by: Dict[str, Dict[str, Any]] = {}
    for w in seen:
        cur = by.get(w["worker_id"])
        if cur is None:
            by[w["worker_id"]] = dict(w, queues=list(w["queues"]), holding=list(w["holding"]))
            continue
        newer, older = (w, cur) if w["last_seen"] > cur["last_seen"] else (cur, w)
        merged = dict(newer)
        for k in ("host", "pid", "version", "concurrency"):
            merged[k] = newer[k] if newer[k] is not None else older[k]
        merged.update(queues=sorted(set(cur["queues"]) | set(w["queues"])), holding=cur["holding"] + w["holding"],
                      first_seen=min(cur["first_seen"], w["first_seen"]), last_seen=newer["last_seen"])
        by[w["worker_id"]] = merged
    return sorted(by.values(), key=lambda x: -x["last_seen"])


def more_pages_after(text: str) -> Optional[str]:
    """The name to ask the next page of metrics after, from its lakeshore_more_queues gauge; None on the last page."""
    m = _MORE_AFTER.search(text)
    return None if m is None else re.sub(r"\\(.)", lambda c: "\n" if c.group(1) == "n" else c.group(1), m.group(1))


def merge_metric_pages(pages: List[str]) -> str:
    """Pages of Prometheus text as one: each family once, its samples from every page in order (one
    repeated on each page once), and the last page's lakeshore_more_queues."""
    families: Dict[str, Dict[str, Dict[str, None]]] = {}
    for i, page in enumerate(pages):
        cur: Optional[Dict[str, Dict[str, None]]] = None
        keep = True
        for line in page.split("\n"):
            if not line:
                continue
            head = _HEAD.match(line)
            if head:
                cur = families.setdefault(head.group(2), {"head": {}, "samples": {}})
                cur["head"][line] = None
                keep = head.group(2) != _MORE or i == len(pages) - 1
                continue
            if cur is not None and keep and not line.startswith("#"):
                cur["samples"][line] = None
    return "\n".join(line for f in families.values() for line in list(f["head"]) + list(f["samples"])) + "\n"
