"""Calls of one client's threads that can share a request, coalesced as Node's client coalesces
them (client/batcher.ts): while two requests of them are out, the others wait and go together in
the next, one batch of up to 500. A call made with nothing out goes at once, on its own. Each
caller is answered its own answer, or raised its own error. HttpDispatch uses a lane for a
queue's submits, and for a worker's acks that each carry the claim of its next job."""
import threading
from typing import Any, Callable, Dict, List

MAX_IN_FLIGHT = 2
MAX_BATCH = 500


class Lane:
    def __init__(self, one: Callable[[Any], Any], many: Callable[[List[Any]], List[Any]]) -> None:
        self._one, self._many = one, many  # one call's arguments -> its answer; many -> an answer or error each
        self._cond = threading.Condition()
        self._waiting: List[Dict[str, Any]] = []  # {"item", "done", "answer"}
        self._out = 0

    def call(self, item: Any) -> Any:
        mine: Dict[str, Any] = {"item": item, "done": False, "answer": None}
        with self._cond:
            self._waiting.append(mine)
            while not mine["done"]:
                if self._out >= MAX_IN_FLIGHT:
                    self._cond.wait()
                    continue
                batch, self._waiting = self._waiting[:MAX_BATCH], self._waiting[MAX_BATCH:]
                self._out += 1
                self._cond.release()
                try:
                    answers = self._send([w["item"] for w in batch])
                except BaseException:
                    # Interrupted (Ctrl-C on the main thread): this caller raises, and the others'
                    # submits wait for another thread to send them (again: their ids make it safe).
                    self._cond.acquire()
                    self._out -= 1
                    self._waiting[:0] = [w for w in batch if w is not mine]
                    self._cond.notify_all()
                    raise
                self._cond.acquire()
                self._out -= 1
                for w, answer in zip(batch, answers):
                    w["answer"], w["done"] = answer, True
                self._cond.notify_all()
        if isinstance(mine["answer"], BaseException):
            raise mine["answer"]
        return mine["answer"]
    def _send(self, items: List[Any]) -> List[Any]:
        return each_answered(items, self._one, self._many)


def each_answered(items: List[Any], one: Callable[[Any], Any], many: Callable[[List[Any]], List[Any]]) -> List[Any]:
    """Each item's answer or error, in order, never raised: all in one call of `many` when there
    are several, else (or where `many` refuses them: a call the client refuses before sending, a
    bad option) each alone with `one`, its error its own."""
    if len(items) > 1:
        try:
            answers = many(items)
            if len(answers) == len(items):
                return answers
        except Exception:
            pass  # a call the client refuses before sending (a bad option): each alone, its error its own
    out: List[Any] = []
    for item in items:
        try:
            out.append(one(item))
        except Exception as e:  # the caller's to raise, in its own thread
            out.append(e)
    return out
