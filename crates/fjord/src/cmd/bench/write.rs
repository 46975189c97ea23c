//! `fjord bench write`: the workload through the native append writer
//! (acks=all) into a fresh table; the timed phase is from the first append to
//! the end of the final flush.
//!
//! With `--input rows` each record is handed over as a `[Datum; N]` read from
//! the pre-generated Arrow columns (a few loads per record, the same work the
//! fluss-rs example does to fill its `GenericRow`); with `--input typed-rows`
//! as a struct of the record's fields that writes them with `FieldWriter`'s
//! typed methods; with `--input row-runs` in runs through `append_rows`;
//! with `--input arrow` the generated batches are handed over whole.

use anyhow::{bail, Context};
use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, TimestampMillisecondType};
use arrow_array::RecordBatch;
use fjord_client::row::{Datum, FieldWriter, InternalRow, Timestamp};
use fjord_client::{AppendWriter, WriterConfig};

use super::report::{Report, Stopwatch, ThreadCpu};
use super::table::BenchTable;
use super::workload::{day_of, generate, partition_days, Compression, SchemaKind, PARTITION_DAYS};

/// What the writer is handed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Input {
    /// One row at a time through the typed row API (`append`), each row a
    /// `[Datum; N]`: the values matched to their columns at run time.
    Rows,
    /// One row at a time through `append`, each row a struct whose
    /// `write_fields` writes its fields with `FieldWriter`'s typed methods,
    /// as a caller with a row type of its own would.
    TypedRows,
    /// Rows handed over in runs of [`ROWS_PER_CALL`] (`append_rows`), as a
    /// caller with several records at hand (a binlog event's rows, a
    /// decoded message) would.
    RowRuns,
    /// Whole Arrow `RecordBatch`es.
    Arrow,
}

/// Rows per `append_rows` call with `--input row-runs`.
pub const ROWS_PER_CALL: usize = 256;

impl Input {
    /// The name printed in the JSON line.
    pub fn name(self) -> &'static str {
        match self {
            Input::Rows => "rows",
            Input::TypedRows => "typed_rows",
            Input::RowRuns => "row_runs",
            Input::Arrow => "arrow",
        }
    }
}

/// One write run's parameters.
pub struct WriteRun {
    /// `host:port` of a server.
    pub bootstrap: String,
    /// Workload.
    pub schema: SchemaKind,
    /// Table compression.
    pub compression: Compression,
    /// Records to write.
    pub rows: usize,
    /// Rows per generated Arrow batch.
    pub batch_rows: usize,
    /// Row API or Arrow batches.
    pub input: Input,
    /// Partition the table by day ([`PARTITION_DAYS`] days).
    pub partitioned: bool,
    /// Write the partitioned workload's rows (with their `dt` column) to an
    /// unpartitioned table: the baseline `partitioned` is compared with.
    pub day_column: bool,
    /// Writer options (`client.writer.*`, Fluss names) over Fluss's defaults.
    pub writer_options: Vec<(String, String)>,
    /// Keep the table after the run instead of dropping it.
    pub keep_table: bool,
}

/// Runs the write benchmark and checks the table holds exactly the rows written.
pub async fn run(run: &WriteRun) -> anyhow::Result<Report> {
    let config = WriterConfig::from_options(
        run.writer_options
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str())),
    )?;
    let with_days = run.partitioned || run.day_column;
    if with_days && run.schema != SchemaKind::UserBehavior {
        bail!("--partitioned and --day-column write the user_behavior workload: use them with --schema user-behavior");
    }
    if with_days && run.input == Input::TypedRows {
        bail!("--input typed-rows writes the five user_behavior columns, without the day: use --input rows, row-runs or arrow with --partitioned and --day-column");
    }
    let table = BenchTable::create(
        &run.bootstrap,
        run.schema,
        run.compression,
        run.partitioned,
        run.day_column,
    )
    .await?;
    let generating = Stopwatch::start();
    let mut workload = generate(run.schema, run.rows, run.batch_rows);
    if with_days && run.input == Input::Arrow {
        let schema = fjord_format::arrow_schema::to_arrow_schema(&run.schema.table_schema(true));
        workload.batches =
            with_day_column(&workload.batches, workload.rows, &partition_days(), schema)?;
    }
    let (_, generate_cpu) = generating.stop();

    let mut writer = table.client.append_writer(&table.info.path, config).await?;
    let days = partition_days();
    let threads = ThreadCpu::snapshot();
    let timed = Stopwatch::start();
    let mut first_row = 0;
    for batch in &workload.batches {
        match run.input {
            Input::Arrow => {
                // The completion is dropped: `flush` reports the first failure.
                writer.append_batch(batch.clone()).await?;
            }
            Input::Rows | Input::RowRuns if with_days => {
                let runs = run.input == Input::RowRuns;
                append_partitioned_rows(&mut writer, batch, first_row, workload.rows, &days, runs)
                    .await?
            }
            Input::Rows => append_rows(&mut writer, run.schema, batch).await?,
            Input::TypedRows => append_typed_rows(&mut writer, run.schema, batch).await?,
            Input::RowRuns => append_row_runs(&mut writer, run.schema, batch).await?,
        }
        first_row += batch.num_rows();
    }
    writer.flush().await?;
    let (wall, cpu) = timed.stop();
    let page_faults = timed.page_faults();
    let split = ThreadCpu::snapshot().split(&threads);
    let per_record = |ns: u64| ns as f64 / workload.rows.max(1) as f64;
    let stats = writer.stats();
    writer.close().await?;

    table.check_record_count(workload.rows).await?;
    if !run.keep_table {
        table.drop().await?;
    }
    Ok(Report {
        op: "write",
        client: "fjord",
        input: run.input.name(),
        schema: run.schema.name(),
        compression: run.compression.name(),
        records: workload.rows,
        arrow_bytes: workload.arrow_bytes,
        wall,
        cpu,
        generate_cpu,
        extra: vec![
            (
                "partitions",
                if run.partitioned {
                    PARTITION_DAYS as f64
                } else {
                    0.0
                },
            ),
            ("batches", stats.batches as f64),
            (
                "wire_bytes_per_record",
                stats.bytes as f64 / workload.rows.max(1) as f64,
            ),
            ("retries", stats.retries as f64),
            ("max_buffered_mb", stats.max_buffered_bytes as f64 / 1e6),
            // Of the timed phase, whole process.
            ("page_faults", page_faults as f64),
            // The same CPU by thread (/proc schedstat): the caller's thread
            // (rows into batches), the encoder (compression), the runtime
            // (sending).
            ("caller_cpu_ns_per_record", per_record(split.caller_ns)),
            ("encoder_cpu_ns_per_record", per_record(split.encoder_ns)),
            ("runtime_cpu_ns_per_record", per_record(split.runtime_ns)),
            ("other_cpu_ns_per_record", per_record(split.other_ns)),
        ],
    })
}

/// The user-behavior workload's columns of one batch, downcast once per
/// batch, so per record only values are read.
struct UserBehaviorColumns<'a> {
    user: &'a [i64],
    item: &'a [i64],
    category: &'a [i64],
    behavior: &'a arrow_array::StringArray,
    ts: &'a [i64],
}

impl<'a> UserBehaviorColumns<'a> {
    fn of(batch: &'a RecordBatch) -> anyhow::Result<Self> {
        const WRONG: &str = "generated batch does not have the workload's column types";
        let int64 = |i: usize| -> anyhow::Result<&'a [i64]> {
            Ok(batch
                .column(i)
                .as_primitive_opt::<Int64Type>()
                .context(WRONG)?
                .values())
        };
        Ok(Self {
            user: int64(0)?,
            item: int64(1)?,
            category: int64(2)?,
            behavior: batch.column(3).as_string_opt::<i32>().context(WRONG)?,
            ts: batch
                .column(4)
                .as_primitive_opt::<TimestampMillisecondType>()
                .context(WRONG)?
                .values(),
        })
    }

    /// Row `i` as the table's five values. Inlined into the bench loop: as
    /// a call (1.8 % of the rows profile, docs/bench-notes/client.md), its
    /// returned array was read back with wide loads that stall on the
    /// narrow stores that wrote it — the bench's own cost, not the writer's.
    #[inline(always)]
    fn row(&self, i: usize) -> [Datum<'a>; 5] {
        [
            Datum::BigInt(self.user[i]),
            Datum::BigInt(self.item[i]),
            Datum::BigInt(self.category[i]),
            Datum::String(self.behavior.value(i)),
            Datum::Timestamp(Timestamp::from_millis(self.ts[i])),
        ]
    }

    /// Row `i` as a [`UserBehaviorRow`].
    #[inline(always)]
    fn typed_row(&self, i: usize) -> UserBehaviorRow<'a> {
        UserBehaviorRow {
            user: self.user[i],
            item: self.item[i],
            category: self.category[i],
            behavior: self.behavior.value(i),
            ts: Timestamp::from_millis(self.ts[i]),
        }
    }
}

/// One `user_behavior` record as a row type of its own: what a caller with
/// a struct per record hands to `append` (`--input typed-rows`).
struct UserBehaviorRow<'a> {
    user: i64,
    item: i64,
    category: i64,
    behavior: &'a str,
    ts: Timestamp,
}

impl InternalRow for UserBehaviorRow<'_> {
    fn field_count(&self) -> usize {
        5
    }

    fn datum(&self, pos: usize) -> Datum<'_> {
        match pos {
            0 => Datum::BigInt(self.user),
            1 => Datum::BigInt(self.item),
            2 => Datum::BigInt(self.category),
            3 => Datum::String(self.behavior),
            _ => Datum::Timestamp(self.ts),
        }
    }

    #[inline(always)]
    fn write_fields(&self, fields: &mut FieldWriter<'_>) {
        fields.bigint(self.user);
        fields.bigint(self.item);
        fields.bigint(self.category);
        fields.string(self.behavior);
        fields.timestamp(self.ts);
    }
}

/// One `long` record as a row type of its own (`--input typed-rows`).
struct LongRow(i64);

impl InternalRow for LongRow {
    fn field_count(&self) -> usize {
        1
    }

    fn datum(&self, _pos: usize) -> Datum<'_> {
        Datum::BigInt(self.0)
    }

    #[inline(always)]
    fn write_fields(&self, fields: &mut FieldWriter<'_>) {
        fields.bigint(self.0);
    }
}

/// The batches with each row's day appended as the last column (the
/// partition key of `--partitioned`), as `schema` (the six-column table's),
/// built before the timed phase.
fn with_day_column(
    batches: &[RecordBatch],
    rows: usize,
    days: &[String],
    schema: arrow_schema::SchemaRef,
) -> anyhow::Result<Vec<RecordBatch>> {
    let mut first_row = 0;
    let mut out = Vec::with_capacity(batches.len());
    for batch in batches {
        let dt: arrow_array::StringArray = (first_row..first_row + batch.num_rows())
            .map(|i| Some(days[day_of(i, rows)].as_str()))
            .collect();
        let mut columns = batch.columns().to_vec();
        columns.push(std::sync::Arc::new(dt));
        out.push(RecordBatch::try_new(schema.clone(), columns)?);
        first_row += batch.num_rows();
    }
    Ok(out)
}

/// The `long` workload's one column of a generated batch.
fn long_values(batch: &RecordBatch) -> anyhow::Result<&[i64]> {
    Ok(batch
        .column(0)
        .as_primitive_opt::<Int64Type>()
        .context("generated batch does not have the workload's column types")?
        .values())
}

/// Appends every row of `batch` through the row API.
async fn append_rows(
    writer: &mut AppendWriter,
    schema: SchemaKind,
    batch: &RecordBatch,
) -> anyhow::Result<()> {
    match schema {
        SchemaKind::UserBehavior => {
            let columns = UserBehaviorColumns::of(batch)?;
            for i in 0..batch.num_rows() {
                writer.append(&columns.row(i)).await?;
            }
        }
        SchemaKind::Long => {
            for &v in long_values(batch)? {
                writer.append(&[Datum::BigInt(v)]).await?;
            }
        }
    }
    Ok(())
}

/// Appends every row of `batch` through the row API, as row types of their
/// own ([`UserBehaviorRow`], [`LongRow`]).
async fn append_typed_rows(
    writer: &mut AppendWriter,
    schema: SchemaKind,
    batch: &RecordBatch,
) -> anyhow::Result<()> {
    match schema {
        SchemaKind::UserBehavior => {
            let columns = UserBehaviorColumns::of(batch)?;
            for i in 0..batch.num_rows() {
                writer.append(&columns.typed_row(i)).await?;
            }
        }
        SchemaKind::Long => {
            for &v in long_values(batch)? {
                writer.append(&LongRow(v)).await?;
            }
        }
    }
    Ok(())
}

/// Appends every row of `batch` through `append_rows`, [`ROWS_PER_CALL`]
/// rows per call, each call's rows built into a reused vector.
async fn append_row_runs(
    writer: &mut AppendWriter,
    schema: SchemaKind,
    batch: &RecordBatch,
) -> anyhow::Result<()> {
    match schema {
        SchemaKind::UserBehavior => {
            let columns = UserBehaviorColumns::of(batch)?;
            let mut run = Vec::with_capacity(ROWS_PER_CALL);
            for start in (0..batch.num_rows()).step_by(ROWS_PER_CALL) {
                let end = (start + ROWS_PER_CALL).min(batch.num_rows());
                run.clear();
                run.extend((start..end).map(|i| columns.row(i)));
                writer.append_rows(&run).await?;
            }
        }
        SchemaKind::Long => {
            let mut run = Vec::with_capacity(ROWS_PER_CALL);
            for chunk in long_values(batch)?.chunks(ROWS_PER_CALL) {
                run.clear();
                run.extend(chunk.iter().map(|&v| [Datum::BigInt(v)]));
                writer.append_rows(&run).await?;
            }
        }
    }
    Ok(())
}

/// Appends every row of `batch` (records `first_row..` of `rows`) with its
/// day as the last column, the partition key; with `runs`, through
/// `append_rows` ([`ROWS_PER_CALL`] rows per call).
async fn append_partitioned_rows(
    writer: &mut AppendWriter,
    batch: &RecordBatch,
    first_row: usize,
    rows: usize,
    days: &[String],
    runs: bool,
) -> anyhow::Result<()> {
    let columns = UserBehaviorColumns::of(batch)?;
    let mut run = Vec::with_capacity(if runs { ROWS_PER_CALL } else { 0 });
    let n = batch.num_rows();
    // Days are contiguous runs far longer than a batch as a rule: a batch
    // whose first and last rows share a day needs no per-row day (a u128
    // division) at all.
    let first_day = day_of(first_row, rows);
    let one_day = n == 0 || day_of(first_row + n - 1, rows) == first_day;
    for i in 0..n {
        let day = if one_day {
            first_day
        } else {
            day_of(first_row + i, rows)
        };
        let [user, item, category, behavior, ts] = columns.row(i);
        let row = [
            user,
            item,
            category,
            behavior,
            ts,
            Datum::String(&days[day]),
        ];
        if !runs {
            writer.append(&row).await?;
            continue;
        }
        run.push(row);
        if run.len() == ROWS_PER_CALL {
            writer.append_rows(&run).await?;
            run.clear();
        }
    }
    writer.append_rows(&run).await?;
    Ok(())
}
