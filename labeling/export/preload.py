"""What the export's forkserver loads before it forks workers (see export_parallel).

Imported by that server process only, so its settings hold in every worker and nowhere else:
- the modules a worker runs, loaded once and shared with the workers it forks;
- Arrow's allocations from the C library's malloc instead of mimalloc, which keeps freed
  memory for reuse: a worker's chunks come and go, and mimalloc held about 50 MB more per
  worker at the peak of a 1,000,000-work export (bench/RESULTS.md);
- every object the garbage collector tracks frozen, so that a collection in a worker does
  not write to (and so copy) pages it shares with the server.
"""

import gc

import pyarrow as pa

import labeling.export.parallel  # noqa: F401 - loaded for the workers

pa.set_memory_pool(pa.system_memory_pool())
gc.freeze()
