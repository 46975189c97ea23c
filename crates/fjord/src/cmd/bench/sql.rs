//! `fjord bench sql`: SQL over a live log table against DuckDB over a
//! Parquet file of the same rows, in the same run.
//!
//! Untimed set-up: `--rows` `user_behavior` rows, time-ordered (each
//! generated batch's timestamps are shifted past the previous batch's), are
//! written through the native append writer into a fresh 4-bucket log table
//! with batch statistics on `ts` (`table.statistics.columns`)
//! and, batch for batch, into a Parquet file compressed as the table is;
//! `--pk-rows` of them (keyed by their row number) are upserted into a
//! primary-key table.
//!
//! Timed, each query once to warm up and then `--repeat` times (medians):
//! - `group_by`: `SELECT behavior, count(*), count(DISTINCT user_id) ...
//!   GROUP BY behavior`;
//! - `ts_full`: `count(*)` under a filter on `ts` that every row passes
//!   (the full scan of the `ts` column);
//! - `ts_selective`: the same over 1% of the time range;
//! - `ts_none`: the same over a range before every row: every batch is
//!   left out, so its time is what any query costs besides its reads
//!   (planning, the catalog refresh, the high watermarks, one FetchLog a
//!   bucket), which the summary takes out of both scans to compare the
//!   reads alone;
//! - `point`: `--point-queries` single-key SELECTs on the primary-key
//!   table, each timed alone (median and p99 in µs); in-process, and again
//!   over the server's Postgres endpoint (`--pg`, or the child server's) as
//!   a prepared statement over one connection, what a user's program sees.
//!
//! Fjord's side runs in this process: fjord-sql's engine over the native
//! client (parse, plan, reads, execution), the server being a separate
//! process. DuckDB's side is `python3` with the PyPI `duckdb` package
//! (scripts/install-deps.sh installs it), timed inside Python around each
//! query, on the same two cores. One JSON line per engine and query, then a
//! summary line with the ratios.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch, TimestampMillisecondArray};
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use fjord_client::{FlussClient, ScanRows, WriterConfig};
use fjord_format::arrow_schema::to_arrow_schema;
use fjord_sql::datafusion::parquet::arrow::ArrowWriter;
use fjord_sql::datafusion::parquet::basic::{Compression as ParquetCompression, ZstdLevel};
use fjord_sql::datafusion::parquet::file::properties::WriterProperties;
use fjord_sql::table::ScanStats;
use fjord_sql::{EngineOptions, SqlEngine, SqlSession};

use super::report::Stopwatch;
use super::table::{BenchTable, BENCH_DATABASE};
use super::workload::{Compression, SchemaKind, BENCH_ZSTD_LEVEL};

/// Share of the time range the selective filter selects.
const SELECTIVE_FRACTION: f64 = 0.01;
/// The longest the DuckDB side may run (it only bounds a hung child).
const DUCKDB_TIMEOUT: Duration = Duration::from_secs(1800);

/// One `fjord bench sql` run's parameters.
pub struct SqlRun {
    /// `host:port` of a server.
    pub bootstrap: String,
    /// Rows of the log table (and of the Parquet file).
    pub rows: usize,
    /// Rows per generated Arrow batch.
    pub batch_rows: usize,
    /// The table's (and the Parquet file's) compression.
    pub compression: Compression,
    /// Rows of the primary-key table.
    pub pk_rows: usize,
    /// Timed runs of each query (after one warm-up run).
    pub repeat: usize,
    /// Point queries timed.
    pub point_queries: usize,
    /// The Python that runs DuckDB.
    pub python: String,
    /// Keep the tables and the Parquet file after the run.
    pub keep_table: bool,
    /// A Postgres endpoint's connection string: the point queries are also
    /// timed over it (`None`: in-process only).
    pub pg: Option<String>,
}

/// The timed queries over the log table, `{t}` standing for its name.
struct Queries {
    list: Vec<(&'static str, String)>,
}

impl Queries {
    fn new(ts_min_ms: i64, ts_max_ms: i64) -> Self {
        let span = (ts_max_ms - ts_min_ms) as f64;
        let from = ts_min_ms + (span * 0.5) as i64;
        let to = from + (span * SELECTIVE_FRACTION) as i64;
        let list = vec![
            (
                "group_by",
                "SELECT behavior, count(*) AS n, count(DISTINCT user_id) AS users FROM {t} GROUP BY behavior"
                    .to_owned(),
            ),
            (
                "ts_full",
                format!(
                    "SELECT count(*) AS n FROM {{t}} WHERE ts >= TIMESTAMP '{}'",
                    timestamp_literal(ts_min_ms)
                ),
            ),
            (
                "ts_selective",
                format!(
                    "SELECT count(*) AS n FROM {{t}} WHERE ts >= TIMESTAMP '{}' AND ts < TIMESTAMP '{}'",
                    timestamp_literal(from),
                    timestamp_literal(to)
                ),
            ),
            (
                "ts_none",
                format!(
                    "SELECT count(*) AS n FROM {{t}} WHERE ts < TIMESTAMP '{}'",
                    timestamp_literal(ts_min_ms)
                ),
            ),
        ];
        Self { list }
    }
}

/// The table option that turns batch statistics on, and its value here.
const STATISTICS_OPTION: &str = fjord_format::statistics::TABLE_STATISTICS_COLUMNS;
const STATISTICS_COLUMNS: &str = "ts";

/// Runs the benchmark; prints its JSON lines.
pub async fn run(run: &SqlRun) -> anyhow::Result<()> {
    if run.repeat == 0 || run.point_queries == 0 {
        bail!("--repeat and --point-queries must be positive");
    }
    // Statistics on `ts` (the filtered column): the writer adds each
    // batch's min/max, and `ts_selective` fetches only the batches whose
    // range meets the query's.
    let table = BenchTable::create_with_properties(
        &run.bootstrap,
        SchemaKind::UserBehavior,
        run.compression,
        false,
        false,
        &[(STATISTICS_OPTION, STATISTICS_COLUMNS)],
    )
    .await?;
    let parquet_path = std::env::temp_dir().join(format!(
        "fjord-bench-sql-{}-{}.parquet",
        std::process::id(),
        stamp()
    ));
    let load = Instant::now();
    let (ts_min, ts_max) = load_log_table(run, &table, &parquet_path).await?;
    table.check_record_count(run.rows).await?;
    let pk_name = format!("sql_pk_{}_{}", std::process::id(), stamp());
    let engine = SqlEngine::new(
        FlussClient::connect(std::slice::from_ref(&run.bootstrap)).await?,
        EngineOptions::default(),
    )
    .await?;
    let mut session = engine.session();
    load_pk_table(run, &table.client, &mut session, &pk_name).await?;
    let load_s = load.elapsed().as_secs_f64();

    let queries = Queries::new(ts_min, ts_max);
    let log_table = format!("{BENCH_DATABASE}.{}", table.info.path.table);
    let mut fjord_medians = Vec::new();
    let mut fjord_results = Vec::new();
    for (name, sql) in &queries.list {
        let sql = sql.replace("{t}", &log_table);
        let stats = engine.scan_stats();
        let read0 = ScanStats::get(&stats.log_batches_read);
        let skipped0 = ScanStats::get(&stats.log_batches_skipped);
        let records_skipped0 = ScanStats::get(&stats.log_records_skipped);
        let result = run_query(&mut session, &sql).await?;
        let mut walls = Vec::with_capacity(run.repeat);
        let mut cpus = Vec::with_capacity(run.repeat);
        for _ in 0..run.repeat {
            let watch = Stopwatch::start();
            let again = run_query(&mut session, &sql).await?;
            let (wall, cpu) = watch.stop();
            if again != result {
                bail!("{name}: a repeated run answered differently");
            }
            walls.push(wall);
            cpus.push(cpu);
        }
        let runs = (run.repeat + 1) as u64;
        let batches_read = (ScanStats::get(&stats.log_batches_read) - read0) / runs;
        let batches_skipped = (ScanStats::get(&stats.log_batches_skipped) - skipped0) / runs;
        let records_skipped =
            (ScanStats::get(&stats.log_records_skipped) - records_skipped0) / runs;
        let wall = median(&mut walls);
        let cpu = median(&mut cpus);
        println!(
            "{{\"bench\":\"sql\",\"engine\":\"fjord\",\"where\":\"in-process engine\",\"query\":\"{name}\",\
             \"rows\":{},\"compression\":\"{}\",\"median_ms\":{:.1},\"runs_ms\":[{}],\
             \"cpu_ms_median\":{:.1},\"batches_read\":{batches_read},\"batches_skipped\":{batches_skipped},\"records_skipped\":{records_skipped},\
             \"result\":{}}}",
            run.rows,
            run.compression.name(),
            ms(wall),
            join_ms(&walls),
            ms(cpu),
            json_string(&result.join(";")),
        );
        fjord_medians.push((*name, wall));
        fjord_results.push((*name, result));
    }

    let (point_median, point_p99) = point_queries(run, &mut session, &pk_name).await?;
    println!(
        "{{\"bench\":\"sql\",\"engine\":\"fjord\",\"where\":\"in-process engine\",\"query\":\"point\",\
         \"pk_rows\":{},\"lookups\":{},\"median_us\":{:.0},\"p99_us\":{:.0},\"point_lookups_sent\":{}}}",
        run.pk_rows,
        run.point_queries,
        point_median.as_secs_f64() * 1e6,
        point_p99.as_secs_f64() * 1e6,
        ScanStats::get(&engine.scan_stats().lookups),
    );

    let pg_point = match &run.pg {
        Some(pg) => Some(point_queries_pg(run, pg, &pk_name).await?),
        None => None,
    };

    let duck = duckdb(run, &parquet_path, &queries);
    let mut duck_medians = Vec::new();
    match &duck {
        Ok(lines) => {
            for line in lines {
                println!("{}", line.json);
                duck_medians.push((line.query.clone(), line.median_ms));
                let ours = fjord_results.iter().find(|(n, _)| *n == line.query);
                if let Some((_, ours)) = ours {
                    if *ours != line.result {
                        bail!(
                            "{}: Fjord answered {:?}, DuckDB {:?}",
                            line.query,
                            ours,
                            line.result
                        );
                    }
                }
            }
        }
        Err(e) => println!(
            "{{\"bench\":\"sql\",\"engine\":\"duckdb\",\"error\":{}}}",
            json_string(&format!("{e:#}"))
        ),
    }

    let fjord_ms = |q: &str| {
        fjord_medians
            .iter()
            .find(|(n, _)| *n == q)
            .map(|(_, d)| ms(*d))
    };
    let duck_ms = |q: &str| duck_medians.iter().find(|(n, _)| n == q).map(|(_, m)| *m);
    let mut summary = format!(
        "{{\"bench\":\"sql\",\"summary\":true,\"rows\":{},\"load_s\":{load_s:.1}",
        run.rows
    );
    if let (Some(f), Some(d)) = (fjord_ms("group_by"), duck_ms("group_by")) {
        let _ = write!(summary, ",\"group_by_fjord_over_duckdb\":{:.2}", f / d);
    }
    if let (Some(sel), Some(full)) = (fjord_ms("ts_selective"), fjord_ms("ts_full")) {
        let _ = write!(summary, ",\"ts_selective_over_full\":{:.3}", sel / full);
        if let Some(none) = fjord_ms("ts_none") {
            // The reads alone: each scan less what a query that reads
            // nothing costs.
            let _ = write!(
                summary,
                ",\"ts_none_ms\":{none:.1},\"ts_selective_reads_over_full_reads\":{:.3}",
                (sel - none).max(0.0) / (full - none)
            );
        }
    }
    if let (Some(sel), Some(full)) = (duck_ms("ts_selective"), duck_ms("ts_full")) {
        let _ = write!(
            summary,
            ",\"duckdb_ts_selective_over_full\":{:.3}",
            sel / full
        );
    }
    let _ = write!(
        summary,
        ",\"point_median_us\":{:.0}",
        point_median.as_secs_f64() * 1e6
    );
    if let Some((median, _)) = pg_point {
        let _ = write!(
            summary,
            ",\"point_pg_median_us\":{:.0}",
            median.as_secs_f64() * 1e6
        );
    }
    summary.push('}');
    println!("{summary}");

    if !run.keep_table {
        let _ = std::fs::remove_file(&parquet_path);
        run_query(
            &mut session,
            &format!("DROP TABLE {BENCH_DATABASE}.{pk_name}"),
        )
        .await?;
        table.drop().await?;
    }
    Ok(())
}

/// Writes the time-ordered rows into the log table and the Parquet file;
/// answers the smallest and largest `ts` (ms).
async fn load_log_table(
    run: &SqlRun,
    table: &BenchTable,
    parquet_path: &Path,
) -> anyhow::Result<(i64, i64)> {
    let schema = to_arrow_schema(table.info.descriptor.schema());
    let compression = match run.compression {
        Compression::Zstd => ParquetCompression::ZSTD(ZstdLevel::try_new(BENCH_ZSTD_LEVEL)?),
        Compression::Lz4 => ParquetCompression::LZ4_RAW,
        Compression::None => ParquetCompression::UNCOMPRESSED,
    };
    let props = WriterProperties::builder()
        .set_compression(compression)
        .build();
    let file = std::fs::File::create(parquet_path)
        .with_context(|| format!("creating {}", parquet_path.display()))?;
    let mut parquet = ArrowWriter::try_new(file, schema.clone(), Some(props))?;
    let mut writer = table
        .client
        .append_writer(&table.info.path, WriterConfig::default())
        .await?;
    let (mut ts_min, mut ts_max) = (i64::MAX, i64::MIN);
    let mut batches = TimeOrdered::new(schema.clone(), run.batch_rows);
    let mut left = run.rows;
    while left > 0 {
        let n = left.min(run.batch_rows);
        let batch = batches.next(n)?;
        let ts = ts_column(&batch)?;
        ts_min = ts_min.min(ts.value(0));
        ts_max = ts_max.max(ts.value(ts.len() - 1));
        parquet.write(&batch)?;
        writer.append_batch(batch).await?;
        left -= n;
    }
    writer.close().await?;
    parquet.close()?;
    Ok((ts_min, ts_max))
}

/// The `user_behavior` workload's batches in order, with every batch's
/// timestamps moved to start 1 ms after the previous batch's last (the
/// generator restarts its clock per batch): one time-ordered replay.
struct TimeOrdered {
    schema: arrow_schema::SchemaRef,
    batch_rows: usize,
    seq: u64,
    next_ts_ms: Option<i64>,
}

impl TimeOrdered {
    fn new(schema: arrow_schema::SchemaRef, batch_rows: usize) -> Self {
        Self {
            schema,
            batch_rows,
            seq: 0,
            next_ts_ms: None,
        }
    }

    /// The next batch, of `rows` rows (at most `batch_rows`).
    fn next(&mut self, rows: usize) -> anyhow::Result<RecordBatch> {
        let batch =
            fjord_format::fixtures::user_behavior_batch(rows.min(self.batch_rows), self.seq);
        self.seq += 1;
        let ts = ts_column(&batch)?;
        let shift = match self.next_ts_ms {
            Some(next) => next - ts.value(0),
            None => 0,
        };
        self.next_ts_ms = Some(ts.value(ts.len() - 1) + shift + 1);
        let shifted: ArrayRef = Arc::new(TimestampMillisecondArray::from_iter_values(
            ts.values().iter().map(|v| v + shift),
        ));
        let mut columns = batch.columns().to_vec();
        let last = columns.len() - 1;
        columns[last] = shifted;
        Ok(RecordBatch::try_new(self.schema.clone(), columns)?)
    }
}

fn ts_column(batch: &RecordBatch) -> anyhow::Result<&TimestampMillisecondArray> {
    batch
        .column(batch.num_columns() - 1)
        .as_any()
        .downcast_ref::<TimestampMillisecondArray>()
        .context("the ts column is TIMESTAMP(3)")
}

/// Creates the primary-key table `name` and upserts `--pk-rows` rows of
/// the workload into it, keyed by row number.
async fn load_pk_table(
    run: &SqlRun,
    client: &FlussClient,
    session: &mut SqlSession,
    name: &str,
) -> anyhow::Result<()> {
    run_query(
        session,
        &format!(
            "CREATE TABLE {BENCH_DATABASE}.{name} (id BIGINT, user_id BIGINT, item_id BIGINT, \
             category_id BIGINT, behavior STRING, ts TIMESTAMP(3), PRIMARY KEY (id) NOT ENFORCED) \
             WITH ('bucket.num' = '4')"
        ),
    )
    .await?;
    let path = fjord_client::TablePath::new(BENCH_DATABASE, name);
    let info = client.table_info(&path).await?;
    let schema = to_arrow_schema(info.descriptor.schema());
    let log_schema = to_arrow_schema(&SchemaKind::UserBehavior.schema());
    let mut writer = client.upsert_writer(&path, WriterConfig::default()).await?;
    let mut batches = TimeOrdered::new(log_schema, run.batch_rows);
    let mut left = run.pk_rows;
    let mut first = 0i64;
    while left > 0 {
        let n = left.min(run.batch_rows);
        let batch = batches.next(n)?;
        let mut columns: Vec<ArrayRef> = vec![Arc::new(Int64Array::from_iter_values(
            first..first + n as i64,
        ))];
        columns.extend(batch.columns().iter().cloned());
        let keyed = RecordBatch::try_new(schema.clone(), columns)?;
        let rows = ScanRows::new(&keyed)?;
        for row in &rows {
            writer.upsert(&row).await?;
        }
        left -= n;
        first += n as i64;
    }
    writer.flush().await?;
    writer.close().await?;
    Ok(())
}

/// Times `--point-queries` single-key SELECTs, each alone; answers the
/// median and the 99th percentile.
async fn point_queries(
    run: &SqlRun,
    session: &mut SqlSession,
    pk_name: &str,
) -> anyhow::Result<(Duration, Duration)> {
    let mut state = 0x853c_49e6_748f_ea9bu64;
    let mut times = Vec::with_capacity(run.point_queries);
    // One untimed query builds the table's lookuper.
    run_query(
        session,
        &format!("SELECT * FROM {BENCH_DATABASE}.{pk_name} WHERE id = 0"),
    )
    .await?;
    for _ in 0..run.point_queries {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let key = state % run.pk_rows as u64;
        let sql = format!("SELECT * FROM {BENCH_DATABASE}.{pk_name} WHERE id = {key}");
        let start = Instant::now();
        let rows = run_query(session, &sql).await?;
        times.push(start.elapsed());
        if rows.len() != 1 {
            bail!("point query of key {key} answered {} rows", rows.len());
        }
    }
    times.sort();
    let p99 = times[(times.len() * 99 / 100).min(times.len() - 1)];
    Ok((median(&mut times), p99))
}

/// Times `--point-queries` single-key SELECTs over the Postgres endpoint
/// `pg` as a user's program sends them: one connection, the statement
/// prepared once (`WHERE id = $1`), then each key bound and executed alone
/// (Bind, Execute, Sync: one round trip) and its row read. Prints its JSON
/// line; answers the median and the 99th percentile.
async fn point_queries_pg(
    run: &SqlRun,
    pg: &str,
    pk_name: &str,
) -> anyhow::Result<(Duration, Duration)> {
    let (client, connection) = tokio_postgres::connect(pg, tokio_postgres::NoTls)
        .await
        .with_context(|| format!("connecting to the Postgres endpoint ({pg})"))?;
    let connection = tokio::spawn(connection);
    let statement = client
        .prepare(&format!(
            "SELECT * FROM {BENCH_DATABASE}.{pk_name} WHERE id = $1"
        ))
        .await
        .context("preparing the point query over Postgres")?;
    // The same keys as the in-process run (same generator and seed).
    let mut state = 0x853c_49e6_748f_ea9bu64;
    let mut times = Vec::with_capacity(run.point_queries);
    // One untimed query: the server's lookuper for the table.
    client.query(&statement, &[&0i64]).await?;
    for _ in 0..run.point_queries {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let key = (state % run.pk_rows as u64) as i64;
        let start = Instant::now();
        let rows = client.query(&statement, &[&key]).await?;
        times.push(start.elapsed());
        if rows.len() != 1 || rows[0].get::<_, i64>("id") != key {
            bail!(
                "point query of key {key} over Postgres answered {} rows",
                rows.len()
            );
        }
    }
    drop(statement);
    drop(client);
    let _ = connection.await;
    times.sort();
    let p99 = times[(times.len() * 99 / 100).min(times.len() - 1)];
    let median = median(&mut times);
    println!(
        "{{\"bench\":\"sql\",\"engine\":\"fjord\",\"where\":\"postgres endpoint, prepared statement\",\
         \"query\":\"point\",\"pk_rows\":{},\"lookups\":{},\"median_us\":{:.0},\"p99_us\":{:.0}}}",
        run.pk_rows,
        run.point_queries,
        median.as_secs_f64() * 1e6,
        p99.as_secs_f64() * 1e6,
    );
    Ok((median, p99))
}

/// Runs `sql` to the end; its rows as text (`a|b|c`), sorted.
async fn run_query(session: &mut SqlSession, sql: &str) -> anyhow::Result<Vec<String>> {
    let batches = session
        .execute(sql)
        .await
        .map_err(|e| anyhow::anyhow!("{sql}: {e}"))?
        .collect()
        .await
        .map_err(|e| anyhow::anyhow!("{sql}: {e}"))?;
    let mut rows = Vec::new();
    let options = FormatOptions::default();
    for batch in &batches {
        let formatters = batch
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
            .collect::<Result<Vec<_>, _>>()?;
        for i in 0..batch.num_rows() {
            let mut row = String::new();
            for (j, f) in formatters.iter().enumerate() {
                if j > 0 {
                    row.push('|');
                }
                let _ = write!(row, "{}", f.value(i));
            }
            rows.push(row);
        }
    }
    rows.sort();
    Ok(rows)
}

/// One DuckDB result line.
struct DuckLine {
    query: String,
    median_ms: f64,
    result: Vec<String>,
    json: String,
}

/// The DuckDB side: the same queries over the Parquet file, in `python3`.
fn duckdb(run: &SqlRun, parquet: &Path, queries: &Queries) -> anyhow::Result<Vec<DuckLine>> {
    let mut child = Command::new(&run.python)
        .arg("-c")
        .arg(DUCKDB_SCRIPT)
        .arg(parquet)
        .arg(run.repeat.to_string())
        .arg(run.rows.to_string())
        .arg(run.compression.name())
        .args(
            queries
                .list
                .iter()
                .flat_map(|(name, sql)| [name.to_string(), sql.replace("{t}", "t")]),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", run.python))?;
    let deadline = Instant::now() + DUCKDB_TIMEOUT;
    while child.try_wait()?.is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            bail!("DuckDB did not finish within {DUCKDB_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "{} (DuckDB) failed: {}",
            run.python,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mut lines = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        // Lines are `query<TAB>median_ms<TAB>row;row;...<TAB>json`.
        let mut parts = line.splitn(4, '\t');
        let (Some(query), Some(median), Some(result), Some(json)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            bail!("unexpected DuckDB output line {line:?}");
        };
        let mut result: Vec<String> = if result.is_empty() {
            Vec::new()
        } else {
            result.split(';').map(str::to_owned).collect()
        };
        result.sort();
        lines.push(DuckLine {
            query: query.to_owned(),
            median_ms: median.parse()?,
            result,
            json: json.to_owned(),
        });
    }
    std::io::stdout().flush()?;
    Ok(lines)
}

/// The Python side: argv = parquet path, repeat, rows, compression, then
/// (name, sql) pairs. Prints one tab-separated line per query.
const DUCKDB_SCRIPT: &str = r#"
import json, statistics, sys, time
import duckdb
path, repeat, rows, compression = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
pairs = sys.argv[5:]
con = duckdb.connect()
# The progress bar of a slow query would land on stdout, among the results.
con.execute("SET enable_progress_bar = false")
con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{path}')")
for name, sql in zip(pairs[0::2], pairs[1::2]):
    result = con.execute(sql).fetchall()
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        again = con.execute(sql).fetchall()
        runs.append((time.perf_counter() - t0) * 1000)
        assert sorted(again) == sorted(result)
    text = ";".join(sorted("|".join(str(v) for v in row) for row in result))
    line = {"bench": "sql", "engine": "duckdb", "version": duckdb.__version__,
            "where": "python, parquet file", "query": name, "rows": rows,
            "compression": compression, "median_ms": round(statistics.median(runs), 1),
            "runs_ms": [round(r, 1) for r in runs], "result": text}
    print(f"{name}\t{statistics.median(runs)}\t{text}\t{json.dumps(line, separators=(',', ':'))}")
"#;

fn median(values: &mut [Duration]) -> Duration {
    values.sort();
    values[values.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn join_ms(values: &[Duration]) -> String {
    values
        .iter()
        .map(|d| format!("{:.1}", ms(*d)))
        .collect::<Vec<_>>()
        .join(",")
}

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn stamp() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default()
}

/// `ms` since the epoch as `YYYY-MM-DD HH:MM:SS.mmm` (UTC, proleptic
/// Gregorian: days to civil date after Howard Hinnant's `civil_from_days`).
fn timestamp_literal(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}.{:03}",
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1_000 % 60,
        in_day % 1_000
    )
}

/// The default Python for the DuckDB side.
pub fn default_python() -> PathBuf {
    PathBuf::from(std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamp_literals_are_utc_civil_times() {
        assert_eq!(timestamp_literal(0), "1970-01-01 00:00:00.000");
        assert_eq!(
            timestamp_literal(1_511_544_070_123),
            "2017-11-24 17:21:10.123"
        );
        assert_eq!(
            timestamp_literal(951_782_400_000),
            "2000-02-29 00:00:00.000"
        );
        assert_eq!(timestamp_literal(-1), "1969-12-31 23:59:59.999");
    }

    #[test]
    fn batches_are_time_ordered_across_batches() {
        let schema = to_arrow_schema(&SchemaKind::UserBehavior.schema());
        let mut batches = TimeOrdered::new(schema, 1000);
        let a = batches.next(1000).unwrap();
        let b = batches.next(1000).unwrap();
        let (a, b) = (ts_column(&a).unwrap(), ts_column(&b).unwrap());
        assert!(a.values().windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(a.value(a.len() - 1) + 1, b.value(0));
    }
}
