"""The SQL of a scalar's window: its rows with the ones beside it, or its buckets' extremes.

Each read is one statement, so that a zoom costs a few statements and the rows
it returns (:meth:`~nbviz.store.summary_queries.SummaryQueries.scalar_points`).
What a run of schema 7 or older, read as it is, is zoomed with: a newer run's
zoom reads its packed chunks (:mod:`nbviz.store.chunk_queries`).
"""

from __future__ import annotations

__all__ = ["BUCKET_POINTS", "rows_sql"]


def rows_sql(name: str, lo: int, hi: int, limit: int, edges: bool) -> tuple[str, tuple]:
    """One query for a scalar's rows in ``lo..hi`` (at most ``limit``); with ``edges``
    also the row before and the row after the range, in the same statement."""
    inside = (
        "SELECT step, value FROM scalars WHERE name = ? AND step BETWEEN ? AND ? "
        "ORDER BY step LIMIT ?"
    )
    if not edges:
        return inside, (name, lo, hi, limit)
    sql = (
        "SELECT * FROM (SELECT step, value FROM scalars WHERE name = ? AND step < ? "
        "ORDER BY step DESC LIMIT 1) "
        f"UNION ALL SELECT * FROM ({inside}) "
        "UNION ALL SELECT * FROM (SELECT step, value FROM scalars WHERE name = ? AND step > ? "
        "ORDER BY step LIMIT 1)"
    )
    return sql, (name, lo, name, lo, hi, limit, name, hi)


# each bucket's minimum and maximum at the steps they were reached (one point where
# they share a step), and a NULL (a break in the line) at its first non-finite step,
# read as two columns sorted by SQLite. Its reference is summary_points
# (nbviz.widgets.scalar_points) of scalar_summary's buckets: a change to one is a
# change to both, and tests/test_zoom_reads.py compares them on tied extremes,
# buckets without a finite value and single-row buckets.
BUCKET_POINTS = (
    "SELECT step, value FROM ("
    "SELECT min_step AS step, min AS value FROM scalar_buckets WHERE name = ?1 AND level = ?2 "
    "AND bucket BETWEEN ?3 AND ?4 AND min IS NOT NULL "
    "UNION ALL SELECT max_step, max FROM scalar_buckets WHERE name = ?1 AND level = ?2 "
    "AND bucket BETWEEN ?3 AND ?4 AND max IS NOT NULL AND max_step IS NOT min_step "
    "UNION ALL SELECT bad_first, NULL FROM scalar_buckets WHERE name = ?1 AND level = ?2 "
    "AND bucket BETWEEN ?3 AND ?4 AND bad_first IS NOT NULL"
    ") ORDER BY step"
)
