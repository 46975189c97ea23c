"""Peer benchmark: the pure-Python `mysql-replication` (PyPI) reader counting
row changes of a binlog, for comparison with Fjord's MySQL source in the same
run. Usage: pyrepl_count.py PORT USER PASSWORD MAX_ROWS; prints one JSON line."""
import json
import sys
import time

from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent

port, user, password, max_rows = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
stream = BinLogStreamReader(
    connection_settings={"host": "127.0.0.1", "port": port, "user": user, "passwd": password},
    server_id=7777,
    blocking=False,
    resume_stream=False,
    only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
    is_mariadb=True,
)
rows = 0
wall = time.perf_counter()
cpu = time.process_time()
for event in stream:
    rows += len(event.rows)
    if rows >= max_rows:
        break
wall = time.perf_counter() - wall
cpu = time.process_time() - cpu
stream.close()
print(json.dumps({"reader": "python-mysql-replication", "rows": rows, "rows_per_s": rows / wall,
                  "cpu_ns_per_row": cpu * 1e9 / max(rows, 1)}))
