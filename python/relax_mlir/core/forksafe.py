"""os.fork() waits for compiles in flight in other threads.

A fork copies one thread; MLIR objects that another thread's compile is building are copied half
made, and the child's garbage collector destroying them crashed it (SIGSEGV, or a hang) even when
the child only called executables built before (probe s22/rt F6; multiprocessing's default start
method on Linux forks). `compiling()` marks a compile in flight; a fork waits until no other
thread's compile is, and no compile starts until the fork is done. Threads still compile
concurrently. No MLIR here (`import relax_mlir` must not load it)."""
from __future__ import annotations

import concurrent.futures.thread  # noqa: F401 - its fork handler first (see the registration below)
import gc
import os
import threading
from contextlib import contextmanager

_cv = threading.Condition(threading.RLock())
_in_flight = 0          # compiles running, all threads
_forking = 0            # forks waiting for them (no new compile starts meanwhile)
_mine = threading.local()  # this thread's depth of nested compiles


@contextmanager
def compiling():
    global _in_flight
    with _cv:
        while _forking and not getattr(_mine, "depth", 0):  # (a nested compile goes on)
            _cv.wait()
        _in_flight += 1
    _mine.depth = getattr(_mine, "depth", 0) + 1
    try:
        yield
    finally:
        _mine.depth -= 1
        with _cv:
            _in_flight -= 1
            _cv.notify_all()


def _before_fork() -> None:
    global _forking
    _cv.acquire()  # held across the fork: no compile starts or ends meanwhile
    _forking += 1
    while _in_flight > getattr(_mine, "depth", 0):  # (a compile that forks does not wait for itself)
        _cv.wait()


def _after_fork() -> None:
    global _forking
    _forking -= 1
    _cv.notify_all()
    _cv.release()


def _after_fork_in_child() -> None:
    global _in_flight, _forking
    _in_flight = getattr(_mine, "depth", 0)  # only this thread's compiles came along
    _forking = 0
    _cv.release()
    # The parent's garbage (the MLIR contexts of finished compiles, in reference cycles) is never
    # collected here: a context whose thread pool ran threads aborts when destroyed in a child,
    # where those threads do not exist ("LLVM ERROR: pthread_join failed").
    gc.freeze()


# Registered after concurrent.futures' own handler, so run before it (before-fork handlers run in
# reverse order): that one takes the executors' global lock, which a compile in flight (the CPU
# backend's engines translate on a thread pool) needs to finish.
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork, after_in_child=_after_fork_in_child)
