"""`python -m dreamlake.lakeshore.daemon` (or `python -m lakeshore.daemon`): a Python worker
process serving one or more pools.

    python -m dreamlake.lakeshore.daemon --queue gpu [--queue cpu] [--root /data] [--once]
                               [--url URL --token TOKEN] [--namespace NS] [--allow-pickled]
                               [--runtime-policy minor] [--concurrency N] [--lease-ms MS]
                               [--home DIR]   (with no URL: the local plane in DIR/dispatch.sqlite)

With no --queue it serves LAKESHORE_POOLS (a,b), else the pool `default`. Several pools are served
at once, `--concurrency` claim loops each (threads: jobs that wait on I/O, a GPU or a subprocess
run side by side; CPU-bound Python shares one interpreter lock); with --once it runs at most one
job of any of them.

Flags win over the environment (LAKESHORE_URL, LAKESHORE_TOKEN, LAKESHORE_NAMESPACE, LAKESHORE_HOME). Functions
resolve as run_worker's (resolve.py): the registry (none here), then `module:qualname` imported
under --root. --allow-pickled lets it run by-value functions: unpickling runs the sender's code,
so it is off unless asked for on an HTTP plane. SIGTERM or SIGINT stop its claims; the job running
finishes (its answer goes out), then it exits 0. A second signal meanwhile puts the running jobs
back in their queues (a nack with retry, error type Interrupted) and exits 128 + its number.
`lakeshore worker start` supervises it.
"""
import argparse
import logging
import os
import signal
import sys
import threading
from typing import List, Optional

from .errors import LakeshoreError, Unavailable
from .http import HttpDispatch
from .local import Dispatch
from .queue import SyncQueue
from .resolve import POLICIES
from .threads import put_back, running, together
from .worker import run_worker


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m dreamlake.lakeshore.daemon", description="Serve lakeshore pools with Python functions.")
    p.add_argument("--queue", action="append", help="a pool to serve (repeatable; default: LAKESHORE_POOLS, else 'default')")
    p.add_argument("--root", help="import module:qualname functions from under this directory")
    p.add_argument("--once", action="store_true", help="run at most one job (an empty queue: exit 0 after a 2 s wait)")
    p.add_argument("--url", help="the plane's address (default: LAKESHORE_URL)")
    p.add_argument("--token", help="a worker token (default: LAKESHORE_TOKEN)")
    p.add_argument("--namespace", help="the namespace (default: LAKESHORE_NAMESPACE, else 'default')")
    p.add_argument("--home", help="with no URL: the local plane's directory, its file dispatch.sqlite (default: LAKESHORE_HOME, else ~/.lakeshore)")
    p.add_argument("--allow-pickled", action="store_true", help="run by-value (pickled) functions: this runs the sender's code")
    p.add_argument("--code", choices=("mount", "off"), default="off", help="mount: run jobs carrying the producer's pushed git tree, from it (runs the producer's code)")
    p.add_argument("--runtime-policy", choices=POLICIES, default="minor", help="how a pickled function's interpreter must match this one")
    p.add_argument("--retries", type=int, help="retry a failing job while its attempt <= this, where neither the job nor its queue "
                   "sets a budget (default: the plane's, 3 attempts, as a Node worker's)")
    p.add_argument("--worker-id", help="this worker's id (default: host:pid:py)")
    p.add_argument("--time-limit-ms", type=int, help="the time limit of a job whose envelope and queue set none (default 600000; 0: none)")
    p.add_argument("--concurrency", type=_positive_int, default=1, help="jobs at a time per pool, each on its own thread (default 1)")
    p.add_argument("--lease-ms", type=_positive_int, help="the lease each claim asks for, in ms (default 30000); heartbeats extend it")
    p.add_argument("--give-up-after", type=float, help="exit (code 8) once the plane has been unreachable this many seconds (default: never)")
    p.add_argument("--exit-with-parent", action="store_true",
                   help="stop as on SIGTERM once the process that started this one is gone (`lakeshore worker start` passes it)")
    a = p.parse_args(argv)
    if a.root and not os.path.isdir(a.root):
        # A worker would start, claim, and fail every job that names a module: the command line's mistake (exit 2).
        p.error("--root %s: no such directory (%s)" % (a.root, os.path.abspath(a.root)))
    _own_the_log()
    url = a.url or os.environ.get("LAKESHORE_URL")
    stop = threading.Event()
    if url:
        # A worker never gives up on the plane unless told to: it waits out an outage with the jobs
        # it holds (their heartbeats and acks go once it is back), says so once, and stops at once
        # when signalled meanwhile.
        d = HttpDispatch(url, token=a.token or os.environ.get("LAKESHORE_TOKEN"),
                         namespace=a.namespace or os.environ.get("LAKESHORE_NAMESPACE") or "default",
                         # --once is a one-shot command: it keeps the client's bounded retry (15 s), as `worker once` in Node.
                         retry_for=a.give_up_after if a.give_up_after else (15.0 if a.once else float("inf")), stop=stop, max_backoff=5.0)
    else:
        # The local plane: the flags win over the environment here too, as for an HTTP plane.
        home = a.home or os.environ.get("LAKESHORE_HOME") or os.path.join(os.path.expanduser("~"), ".lakeshore")
        os.makedirs(home, exist_ok=True)
        d = Dispatch(os.path.join(home, "dispatch.sqlite"), ns=a.namespace or os.environ.get("LAKESHORE_NAMESPACE") or "default")

    def on_signal(signum: int, _frame: object) -> None:
        name = signal.Signals(signum).name
        signals.append(name)
        if len(signals) > 1:
            # Asked again: it stops now, and the jobs it runs go back to their queues at once
            # rather than as their leases run out (a supervisor's SIGKILL leaves them to that).
            n = put_back(why="told to stop again (%s)" % name)
            _say("%s again: stopped; %d running job%s back in %s queue%s" % (name, n, "" if n == 1 else "s", "its" if n == 1 else "their",
                                                                           "" if n == 1 else "s"))
            raise SystemExit(128 + signum)
        signalled.set()
        stop.set()
        n = running()
        _say("%s: no more claims; %s" % (name, "stopping" if not n else "finishing the running job (%s again: put it back and stop now)" % name
                                          if n == 1 else "finishing the %d running jobs (%s again: put them back and stop now)" % (n, name)))

    signals: List[str] = []
    signalled = threading.Event()  # a signal, not one pool's failure, stopped it
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if a.exit_with_parent:
        _watch_parent(signalled, stop)
    root = os.path.abspath(a.root) if a.root else None
    pools = a.queue or [p.strip() for p in os.environ.get("LAKESHORE_POOLS", "").split(",") if p.strip()] or ["default"]
    _say("serving %s on %s (pid %d)" % (", ".join(pools), url or "the local plane", os.getpid()))
    try:
        lease = {"lease": a.lease_ms / 1000} if a.lease_ms else {}
        n = _serve(d, pools, stop, once=a.once, concurrency=a.concurrency, root=root, retries=a.retries,
                   allow_pickled=True if a.allow_pickled else None, runtime_policy=a.runtime_policy, worker_id=a.worker_id,
                   code=a.code, time_limit_ms=a.time_limit_ms, **lease)
    except Unavailable as e:
        if signalled.is_set():  # stopped while the plane was away: nothing to say but that
            _say("stopped (the plane was away)")
            return 0
        _say(str(e))
        return 8
    except LakeshoreError as e:  # a refusal (a bad token, a role): one line, not a traceback
        _say("%s: %s" % (type(e).__name__, e))
        return 6 if e.status in (401, 403) else 1
    _say("ran %d job%s; stopped" % (n, "" if n == 1 else "s"))
    return 0


def _say(message: str) -> None:
    """A line on stderr, where one can be written: a supervisor gone takes the other end of its
    stderr with it, and a write that fails must not keep a signal from stopping the worker."""
    try:
        print("lakeshore.daemon: %s" % message, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


class _Said(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        _say(record.getMessage())


def _own_the_log() -> None:
    """The client's warnings (the plane away, and back) and each job's outcome (`ID: succeeded`,
    and why one failed, was retried or stopped) are the daemon's lines as well, said as its others
    are, where nothing else was set up to take them."""
    log = logging.getLogger("lakeshore")
    if not log.handlers:
        log.addHandler(_Said(logging.INFO))
        log.setLevel(logging.INFO)  # each job's outcome (attempt.py), as Node's worker says it
        log.propagate = False


def _watch_parent(signalled: threading.Event, stop: threading.Event) -> None:
    """Stops the worker as SIGTERM does once its parent is gone (it was given to another parent):
    a supervisor killed outright (SIGKILL, the OOM killer) leaves no worker claiming jobs behind it."""
    parent = os.getppid()

    def watch() -> None:
        while not stop.wait(0.5):
            if os.getppid() != parent:
                signalled.set()
                stop.set()
                _say("the process that started it is gone: no more claims; finishing the running job")

    threading.Thread(target=watch, daemon=True, name="lakeshore-parent").start()


def _positive_int(v: str) -> int:
    try:
        n = int(v)
    except ValueError:
        raise argparse.ArgumentTypeError("takes a whole number of at least 1, got %r" % v) from None
    if n < 1:
        raise argparse.ArgumentTypeError("takes a whole number of at least 1, got %s" % v)
    return n


def _serve(d: object, pools: List[str], stop: threading.Event, *, once: bool, concurrency: int = 1, **opts: object) -> int:
    """Serves each pool with `concurrency` run_workers of its own, together (one worker id, so the
    plane lists one worker with that many slots a pool); answers the jobs run. With `once`, the
    pools are asked in turn (the 2 s wait shared among them) until one gives a job."""
    if once:
        for pool in pools:
            ran = run_worker(SyncQueue(pool, dispatch=d), once=True, once_wait=2.0 / len(pools), stop=stop, **opts)  # type: ignore[arg-type]
            if ran:
                return ran
        return 0
    slots = concurrency * len(pools)
    if slots == 1:
        return run_worker(SyncQueue(pools[0], dispatch=d), stop=stop, pools=pools, **opts)  # type: ignore[arg-type]
    # Every pool's threads together: one pool's failure (a refused token, the plane given up on) stops them all.
    loops = [(lambda pool=pool: run_worker(SyncQueue(pool, dispatch=d), stop=stop, pools=pools, slots=slots, **opts))  # type: ignore[arg-type]
             for pool in pools for _ in range(concurrency)]
    return together(loops, stop, ["lakeshore-%s-%d" % (p, i) for p in pools for i in range(concurrency)])


if __name__ == "__main__":
    sys.exit(main())
