"""The process's default plane, resolved once (as Node's defaultDispatch):

- `LAKESHORE_URL` set: an HttpDispatch to it, with `LAKESHORE_TOKEN` and `LAKESHORE_NAMESPACE`
  (default "default");
- else the local plane at `$LAKESHORE_HOME/dispatch.sqlite` (default `~/.lakeshore`), shared with
  Node processes on the same file.
"""
import os
import threading
from typing import Any, Optional

_lock = threading.Lock()
_default: Optional[Any] = None


def default_dispatch() -> Any:
    global _default
    with _lock:
        if _default is None:
            _default = _resolve()
        return _default


def _resolve() -> Any:
    url = os.environ.get("LAKESHORE_URL")
    if url:
        from .http import HttpDispatch
        return HttpDispatch(url, token=os.environ.get("LAKESHORE_TOKEN"), namespace=os.environ.get("LAKESHORE_NAMESPACE") or "default")
    home = os.environ.get("LAKESHORE_HOME") or os.path.join(os.path.expanduser("~"), ".lakeshore")
    os.makedirs(home, exist_ok=True)
    from .local import Dispatch
    return Dispatch(os.path.join(home, "dispatch.sqlite"), ns=os.environ.get("LAKESHORE_NAMESPACE") or "default")


def is_local(dispatch: Any) -> bool:
    """Whether a plane runs in this process on this machine (its envelopes come from this machine's own users)."""
    return bool(getattr(dispatch, "in_process", False))
