"""The peak memory of a process and its descendants, sampled (for the benchmarks)."""

from __future__ import annotations

import threading

import psutil


class TreeMemory(threading.Thread):
    """Samples the memory of a process and its descendants every `interval` seconds: the
    peak of their summed PSS, which counts the pages they share (a worker's with its
    parent's or the forkserver's) once, unlike a sum of RSS, and counts them at the same
    moment, unlike a sum of each process's own peak."""

    def __init__(self, pid: int | None = None, interval: float = 0.02) -> None:
        """A daemon thread watching `pid` (default this process); peak_mb after stop()."""
        super().__init__(daemon=True)
        self.peak_mb = 0.0
        self._pid, self._interval = pid, interval
        self._done = threading.Event()

    def run(self) -> None:
        """Sample until stopped (or the process is gone)."""
        try:
            root = psutil.Process(self._pid)
        except psutil.Error:
            return
        while not self._done.wait(self._interval):
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.Error:  # the process ended
                return
            total = 0
            for proc in procs:
                try:
                    total += proc.memory_full_info().pss
                except psutil.Error:  # ended meanwhile
                    pass
            self.peak_mb = max(self.peak_mb, round(total / 2**20, 1))

    def stop(self) -> None:
        """Stop sampling."""
        self._done.set()
        self.join()
