"""Runs the parquet tests' SQL on one engine over a runtrace dataset and
prints the results as JSON: `python3 query.py duckdb|spark|datafusion DATASET DOC`,
where DOC is docs/parquet.md: its ```sql <engine> blocks run too, as
written (with 'dataset/ pointing at DATASET), and their results are in
"docs".

The SQL is the same text on both engines (only the view over the files
differs), which is the point: the dataset needs no engine-specific code.
"""
import json
import sys

import re

engine, dataset, doc = sys.argv[1], sys.argv[2], sys.argv[3]


def blocks_of(tag):
    text = open(doc, encoding="utf-8").read()
    blocks = re.findall(r"```sql " + tag + r"\n(.*?)```", text, re.S)
    return [b.strip().rstrip(";").replace("'dataset/", "'" + dataset + "/") for b in blocks]


def doc_blocks():
    return blocks_of(engine)

# Per host and spawn location: polls and total poll time.
POLL_STATS = """
SELECT host, spawn_loc, COUNT(*) AS polls, SUM(duration_ns) AS poll_ns_total
FROM polls GROUP BY host, spawn_loc ORDER BY host, spawn_loc
"""

# Nearest-rank p99 of the wake->poll delay (docs/analysis.md's definition:
# the value of rank ceil(0.99 * n)), per host and spawn location.
WAKE_P99 = """
WITH ranked AS (
  SELECT host, spawn_loc, wake_delay_ns,
         ROW_NUMBER() OVER (PARTITION BY host, spawn_loc ORDER BY wake_delay_ns) AS rn,
         COUNT(*) OVER (PARTITION BY host, spawn_loc) AS n
  FROM polls WHERE wake_delay_ns IS NOT NULL)
SELECT host, spawn_loc, MIN(wake_delay_ns) AS p99
FROM ranked WHERE rn = GREATEST(CAST(CEIL(0.99 * n) AS BIGINT), 1)
GROUP BY host, spawn_loc ORDER BY host, spawn_loc
"""

# The band an approximate p99 should fall in, per host and spawn location:
# from the nearest-rank p98 to the maximum.
WAKE_BAND = """
WITH ranked AS (
  SELECT host, spawn_loc, wake_delay_ns,
         ROW_NUMBER() OVER (PARTITION BY host, spawn_loc ORDER BY wake_delay_ns) AS rn,
         COUNT(*) OVER (PARTITION BY host, spawn_loc) AS n
  FROM polls WHERE wake_delay_ns IS NOT NULL)
SELECT host, spawn_loc,
       MIN(CASE WHEN rn >= GREATEST(CAST(CEIL(0.98 * n) AS BIGINT), 1) THEN wake_delay_ns END),
       MAX(wake_delay_ns)
FROM ranked GROUP BY host, spawn_loc ORDER BY host, spawn_loc
"""

# Rows per table (every table must be readable on the engine).
TABLES = ["polls", "tasks", "workers", "queues", "lock_events", "io_events",
          "backlog_triggers", "queue_snapshots"]


def run(sql_fn, register, docs=None):
    for t in TABLES:
        register(t)
    out = {
        "poll_stats": [[r[0], r[1], int(r[2]), int(r[3])] for r in sql_fn(POLL_STATS)],
        "wake_p99": [[r[0], r[1], int(r[2])] for r in sql_fn(WAKE_P99)],
        "wake_band": [[r[0], r[1], int(r[2]), int(r[3])] for r in sql_fn(WAKE_BAND)],
        "rows": {t: int(sql_fn(f"SELECT COUNT(*) FROM {t}")[0][0]) for t in TABLES},
        "hosts": sorted(r[0] for r in sql_fn("SELECT DISTINCT host FROM polls")),
    }
    if docs is None:
        out["docs"] = [[[str(v) for v in r] for r in sql_fn(b)] for b in doc_blocks()]
    else:
        out.update(docs(sql_fn))
    print(json.dumps(out))


def trino_on_datafusion(sql_fn):
    """docs/parquet.md's Athena/Trino blocks on DataFusion: each query as
    written; one DataFusion rejects must have a ```sql datafusion block with
    the same first line, which runs instead ("differ" lists them). The Hive
    DDL block (s3 paths, MSCK) is the datafusion DDL block's job."""
    ddl, *variants = blocks_of("datafusion")
    variants = {v.splitlines()[0]: v for v in variants}
    out, differ = [], []
    for i, b in enumerate(blocks_of("trino")):
        if b.startswith("CREATE EXTERNAL TABLE"):
            out.append([[str(v) for v in r] for r in sql_fn(ddl)])
            differ.append(i)
            continue
        try:
            rows = sql_fn(b)
            assert b.splitlines()[0] not in variants, "a datafusion variant of a block that runs as written: " + b.splitlines()[0]
        except Exception as e:  # DataFusion's dialect: its variant runs
            variant = variants.get(b.splitlines()[0])
            if variant is None:
                raise SystemExit(f"DataFusion rejects Trino block {i} and docs/parquet.md has no datafusion variant: {e}")
            rows = sql_fn(variant)
            differ.append(i)
        out.append([[str(v) for v in r] for r in rows])
    return {"docs": out, "differ": differ}


if engine == "duckdb":
    import duckdb

    con = duckdb.connect()

    def register(t):
        con.execute(
            f"CREATE VIEW {t} AS SELECT * FROM read_parquet("
            f"'{dataset}/{t}/*/*/*/*.parquet', hive_partitioning = true)")

    run(lambda q: con.execute(q).fetchall(), register)
elif engine == "spark":
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[1]").appName("runtrace-parquet-test")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")

    def register(t):
        spark.read.parquet(f"{dataset}/{t}").createOrReplaceTempView(t)

    try:
        run(lambda q: [tuple(r) for r in spark.sql(q).collect()], register)
    finally:
        spark.stop()
elif engine == "datafusion":
    from datafusion import SessionContext

    ctx = SessionContext()

    def register(t):
        # docs/parquet.md's DataFusion DDL, for every table.
        ddl = blocks_of("datafusion")[0].replace("polls", t)
        ctx.sql(ddl).collect()

    run(lambda q: [tuple(r.values()) for r in ctx.sql(q).to_pylist()], register,
        trino_on_datafusion)
else:
    sys.exit(f"unknown engine {engine!r}")
