"""A Dagster asset that folds new rows into the streaming kernel PCA sketch.

Optional example (``pip install dagster``); Dagster is not a dependency of
distsketch.  Load it with ``dagster dev -f workflows/orchestrators/dagster_skpca.py``
and materialise ``skpca_sketch`` (the schedule runs it nightly).  Each
materialisation is one ``distsketch run``: incremental, resumable, and a
no-op when no rows were appended.
"""

# No `from __future__ import annotations`: Dagster reads the context
# parameter's annotation at definition time and refuses a string.
from pathlib import Path

import dagster as dg

from distsketch.workflow import run_workflow

SPEC = Path(__file__).resolve().parents[1] / "skpca.yaml"


@dg.asset(description="Streaming kernel PCA of data/X.zarr (model, embeddings, report).")
def skpca_sketch(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    result = run_workflow(SPEC, wait=3600, log=context.log.info)
    manifest = result.manifest or {}
    return dg.MaterializeResult(metadata={
        "status": result.status,
        "rows": result.rows_after,
        "new_rows": result.rows_after - result.rows_before,
        "result": dg.MetadataValue.path(str(result.result_dir)),
        "peak_memory_mib": round(manifest.get("peak_memory_bytes", 0) / 2**20, 1),
    })


nightly = dg.ScheduleDefinition(name="skpca_nightly", cron_schedule="30 2 * * *",
                                target=dg.AssetSelection.assets(skpca_sketch))

defs = dg.Definitions(assets=[skpca_sketch], schedules=[nightly])
