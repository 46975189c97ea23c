"""`fjord sql` answers checked against an independent engine, DuckDB.

The same rows go into Fjord tables (by `fjord sql` INSERT statements, through
the native writer) and into Parquet files; each query runs in `fjord sql -f ...
--format csv` against a real `fjord server` and in DuckDB over the Parquet
files, and the two results must be equal row for row (floats compared to 9
significant digits, since the engines sum in different orders).

Tables: `events`, a user_behavior-like log table over 3 buckets; `users`, a
primary-key table (read through the KV scan), joined to `events`; `clicks`, a
table partitioned by `dt` (partition pruning must not change answers).
"""

import csv
import datetime
import io
import math
import random
import re
import subprocess

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import _fjord_bin

# Rows of `events`; several writer batches per bucket, small enough to insert
# through SQL text in a few seconds.
EVENT_ROWS = 6000
USER_COUNT = 300
# Rows per INSERT statement (each becomes writer batches of its own).
INSERT_ROWS_PER_STATEMENT = 500
# How long one `fjord sql` run may take; it only bounds a hung run.
SQL_TIMEOUT_S = 300

BEHAVIORS = ["pv", "cart", "fav", "buy"]
REGIONS = ["eu", "us", "apac"]
BASE_TS = datetime.datetime(2026, 11, 1, 0, 0, 0)


def _rows():
    """Deterministic rows with skew (a few hot users, pv dominant) and NULLs."""
    rng = random.Random(23)
    events = []
    for i in range(EVENT_ROWS):
        hot = rng.random() < 0.3
        user_id = rng.randrange(10) if hot else rng.randrange(USER_COUNT)
        behavior = rng.choices(BEHAVIORS, weights=[80, 8, 7, 5])[0]
        amount = None if rng.random() < 0.1 else round(rng.uniform(0.5, 200.0), 2)
        events.append(
            {
                "user_id": user_id,
                "item_id": rng.randrange(2000),
                "category_id": rng.randrange(40),
                "behavior": behavior,
                # Unique and increasing: ORDER BY ts is total.
                "ts": BASE_TS + datetime.timedelta(seconds=37 * i),
                "amount": amount,
            }
        )
    users = [
        {
            "user_id": u,
            "name": f"user{u:04d}",
            "region": REGIONS[u % len(REGIONS)],
            "age": None if u % 17 == 0 else 18 + (u * 7) % 60,
        }
        for u in range(USER_COUNT)
        if u % 11 != 5  # some users have no row: inner and outer joins differ
    ]
    clicks = [
        {
            "id": i,
            "dt": (BASE_TS.date() + datetime.timedelta(days=i % 5)).strftime("%Y%m%d"),
            "url": f"/p/{rng.randrange(50)}",
            "ms": rng.randrange(1, 5000),
        }
        for i in range(1500)
    ]
    return events, users, clicks


def _sql_literal(value):
    if value is None:
        return "NULL"
    if isinstance(value, datetime.datetime):
        return f"TIMESTAMP '{value.strftime('%Y-%m-%d %H:%M:%S')}'"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def _inserts(table, rows, columns):
    statements = []
    for start in range(0, len(rows), INSERT_ROWS_PER_STATEMENT):
        chunk = rows[start : start + INSERT_ROWS_PER_STATEMENT]
        values = ",\n".join(
            "(" + ", ".join(_sql_literal(r[c]) for c in columns) + ")" for r in chunk
        )
        statements.append(f"INSERT INTO {table} VALUES\n{values};")
    return statements


def _fjord_sql(server, tmp_path, sql, name="script.sql", database="duck"):
    """Runs `sql` with `fjord sql -f` in `database` and returns (header, rows)
    of its CSV."""
    script = tmp_path / name
    script.write_text(sql)
    done = subprocess.run(
        [
            _fjord_bin(),
            "sql",
            "--bootstrap",
            server.address,
            *(["-d", database] if database else []),
            "--format",
            "csv",
            "-f",
            str(script),
        ],
        capture_output=True,
        text=True,
        timeout=SQL_TIMEOUT_S,
    )
    assert done.returncode == 0, (
        f"fjord sql failed ({done.returncode}):\n{done.stderr}\n--- sql ---\n{sql[:2000]}"
    )
    reader = list(csv.reader(io.StringIO(done.stdout)))
    if not reader:
        return [], []
    return reader[0], reader[1:]


_TIMESTAMP = re.compile(r"^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(\.0*)?$")


def _norm(value):
    """One cell as comparable text: NULL and '' alike (CSV cannot tell them
    apart; the data has no empty strings), numbers to 9 significant digits,
    timestamps without a 'T' or zero fractions."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (datetime.datetime, datetime.date)):
        value = str(value)
    if isinstance(value, (int, float)) or hasattr(value, "as_tuple"):
        return _num(float(value))
    text = str(value)
    match = _TIMESTAMP.match(text)
    if match:
        return f"{match.group(1)} {match.group(2)}"
    try:
        return _num(float(text))
    except ValueError:
        return text


def _num(x):
    if math.isnan(x):
        return "nan"
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.9g}"


@pytest.fixture(scope="module")
def loaded(fjord_server, tmp_path_factory):
    """The three tables in Fjord (database `duck`) and a DuckDB connection
    with views of the same names over Parquet files of the same rows."""
    tmp = tmp_path_factory.mktemp("duck")
    events, users, clicks = _rows()
    event_cols = ["user_id", "item_id", "category_id", "behavior", "ts", "amount"]
    user_cols = ["user_id", "name", "region", "age"]
    click_cols = ["id", "dt", "url", "ms"]
    ddl = [
        "CREATE DATABASE duck;",
        "CREATE TABLE duck.events (user_id BIGINT, item_id BIGINT, category_id BIGINT, "
        "behavior STRING, ts TIMESTAMP(3), amount DOUBLE) WITH ('bucket.num' = '3');",
        "CREATE TABLE duck.users (user_id BIGINT, name STRING, region STRING, age INT, "
        "PRIMARY KEY (user_id) NOT ENFORCED) WITH ('bucket.num' = '2');",
        "CREATE TABLE duck.clicks (id BIGINT, dt STRING, url STRING, ms INT) PARTITIONED BY (dt);",
    ]
    script = "\n".join(
        ddl
        + _inserts("duck.events", events, event_cols)
        + _inserts("duck.users", users, user_cols)
        + _inserts("duck.clicks", clicks, click_cols)
    )
    _fjord_sql(fjord_server, tmp, script, "load.sql", database=None)

    schemas = {
        "events": pa.schema(
            [
                ("user_id", pa.int64()),
                ("item_id", pa.int64()),
                ("category_id", pa.int64()),
                ("behavior", pa.string()),
                ("ts", pa.timestamp("ms")),
                ("amount", pa.float64()),
            ]
        ),
        "users": pa.schema(
            [
                ("user_id", pa.int64()),
                ("name", pa.string()),
                ("region", pa.string()),
                ("age", pa.int32()),
            ]
        ),
        "clicks": pa.schema(
            [("id", pa.int64()), ("dt", pa.string()), ("url", pa.string()), ("ms", pa.int32())]
        ),
    }
    con = duckdb.connect()
    for name, rows in [("events", events), ("users", users), ("clicks", clicks)]:
        path = tmp / f"{name}.parquet"
        pq.write_table(pa.Table.from_pylist(rows, schema=schemas[name]), path)
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{path}')")
    return fjord_server, tmp, con


# (name, query, ordered): ordered queries compare in order, the others as
# multisets. Every query is text both engines take unchanged.
QUERIES = [
    ("count", "SELECT count(*) AS n, count(amount) AS with_amount FROM events", True),
    (
        "filter",
        "SELECT user_id, item_id, behavior, amount FROM events "
        "WHERE behavior IN ('buy', 'cart') AND amount > 150 AND ts >= TIMESTAMP '2026-11-02 00:00:00'",
        False,
    ),
    (
        "filter_null",
        "SELECT count(*) AS n FROM events WHERE amount IS NULL AND category_id BETWEEN 5 AND 9",
        True,
    ),
    (
        "group_by",
        "SELECT behavior, count(*) AS n, count(DISTINCT user_id) AS users, sum(amount) AS total, "
        "avg(amount) AS mean, min(ts) AS first, max(ts) AS last FROM events GROUP BY behavior",
        False,
    ),
    (
        "group_by_having",
        "SELECT category_id, count(*) AS n FROM events WHERE behavior = 'pv' "
        "GROUP BY category_id HAVING count(*) > 120",
        False,
    ),
    (
        "group_by_expression",
        "SELECT CASE WHEN amount IS NULL THEN 'none' WHEN amount < 50 THEN 'small' ELSE 'large' END AS size, "
        "behavior, count(*) AS n FROM events GROUP BY 1, 2",
        False,
    ),
    (
        "join",
        "SELECT u.region, count(*) AS n, count(DISTINCT e.item_id) AS items, sum(e.amount) AS total "
        "FROM events e JOIN users u ON e.user_id = u.user_id GROUP BY u.region",
        False,
    ),
    (
        "left_join",
        "SELECT e.user_id, count(*) AS n, max(u.name) AS name FROM events e "
        "LEFT JOIN users u ON e.user_id = u.user_id WHERE u.user_id IS NULL GROUP BY e.user_id",
        False,
    ),
    (
        "join_filter_on_pk_table",
        "SELECT e.behavior, count(*) AS n FROM events e JOIN users u ON e.user_id = u.user_id "
        "WHERE u.age > 50 AND u.region = 'eu' GROUP BY e.behavior",
        False,
    ),
    (
        "order_by_limit",
        "SELECT user_id, item_id, ts, amount FROM events ORDER BY ts DESC LIMIT 25",
        True,
    ),
    (
        "order_by_limit_offset",
        "SELECT user_id, behavior, ts FROM events WHERE amount > 100 ORDER BY amount DESC, ts LIMIT 10 OFFSET 5",
        True,
    ),
    (
        "top_users",
        "SELECT user_id, count(*) AS n FROM events GROUP BY user_id ORDER BY n DESC, user_id LIMIT 12",
        True,
    ),
    (
        "window_row_number",
        "SELECT user_id, ts, row_number() OVER (PARTITION BY user_id ORDER BY ts) AS rn, "
        "sum(amount) OVER (PARTITION BY user_id ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS running "
        "FROM events WHERE user_id < 15",
        False,
    ),
    (
        "window_rank_lag",
        "SELECT category_id, behavior, n, rank() OVER (PARTITION BY category_id ORDER BY n DESC, behavior) AS r, "
        "lag(n) OVER (PARTITION BY category_id ORDER BY n DESC, behavior) AS prev "
        "FROM (SELECT category_id, behavior, count(*) AS n FROM events GROUP BY category_id, behavior) t",
        False,
    ),
    (
        "window_top_per_group",
        "SELECT behavior, user_id, item_id FROM (SELECT behavior, user_id, item_id, "
        "row_number() OVER (PARTITION BY behavior ORDER BY ts DESC) AS rn FROM events) t WHERE rn <= 3",
        False,
    ),
    (
        "pk_point",
        "SELECT name, region, age FROM users WHERE user_id = 42",
        True,
    ),
    (
        "pk_scan",
        "SELECT region, count(*) AS n, avg(age) AS mean_age, count(age) AS with_age FROM users GROUP BY region",
        False,
    ),
    (
        "partition_filter",
        "SELECT dt, count(*) AS n, sum(ms) AS total FROM clicks WHERE dt >= '20261103' GROUP BY dt",
        False,
    ),
    (
        "partition_and_column_filter",
        "SELECT url, count(*) AS n FROM clicks WHERE dt = '20261101' AND ms < 1000 GROUP BY url",
        False,
    ),
    (
        "subquery",
        "SELECT count(*) AS n FROM events WHERE user_id IN (SELECT user_id FROM users WHERE region = 'apac') "
        "AND amount > (SELECT avg(amount) FROM events)",
        True,
    ),
]


@pytest.mark.parametrize("name,sql,ordered", QUERIES, ids=[q[0] for q in QUERIES])
def test_fjord_sql_answers_as_duckdb_over_parquet(loaded, name, sql, ordered):
    server, tmp, con = loaded
    header, fjord_rows = _fjord_sql(server, tmp, sql + ";", f"{name}.sql")
    duck = con.execute(sql)
    duck_header = [d[0] for d in duck.description]
    duck_rows = duck.fetchall()
    assert header == duck_header, f"{name}: columns {header} vs DuckDB {duck_header}"
    got = [tuple(_norm(v) for v in row) for row in fjord_rows]
    want = [tuple(_norm(v) for v in row) for row in duck_rows]
    if not ordered:
        got, want = sorted(got), sorted(want)
    assert len(got) == len(want), f"{name}: {len(got)} rows vs DuckDB {len(want)}"
    assert len(want) > 0, f"{name}: the query must select something to compare"
    assert got == want, f"{name}: first difference at row " + str(
        next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
    )
