"""The claims a client made, by job id: whose (the worker id) and which attempt. A holder's call
that names no attempt (ack, nack, heartbeat, a journal append) uses the one kept here.

A claim is forgotten once a call of its own attempt ended it, and only then. A job nacked for a
retry can be claimed again by this client's other threads (a worker's concurrency) before the
nack's answer is read here; forgetting the id then would lose that newer attempt, and the thread
holding it could no longer write its frames."""
import threading
from typing import Dict, Optional, Tuple


class HeldClaims:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_id: Dict[str, Tuple[str, int]] = {}

    def held(self, inv_id: str, worker_id: str, attempt: int) -> None:
        """`worker_id` claimed `inv_id` at `attempt`."""
        with self._lock:
            self._by_id[inv_id] = (worker_id, attempt)

    def get(self, inv_id: str) -> Optional[Tuple[str, int]]:
        with self._lock:
            return self._by_id.get(inv_id)

    def attempt_of(self, inv_id: str, worker_id: str, given: Optional[int] = None) -> Optional[int]:
        """The attempt a holder's call names: the caller's, else the one `worker_id` claimed here."""
        if given is not None:
            return given
        held = self.get(inv_id)
        return held[1] if held and held[0] == worker_id else None

    def done(self, inv_id: str, worker_id: str, attempt: Optional[int]) -> None:
        """A call of `worker_id` at `attempt` ended the job's attempt: its claim is forgotten, if it
        is still the one kept (a later claim of the same job stays)."""
        with self._lock:
            if self._by_id.get(inv_id) == (worker_id, attempt):
                del self._by_id[inv_id]

    def clear(self) -> None:
        with self._lock:
            self._by_id.clear()

    def __len__(self) -> int:
        return len(self._by_id)
