//! The fluss-rs side of `fjord bench`: the same workload, through the
//! official Rust client (fluss-rs 1.0.0, its defaults: acks=all, 2 MiB
//! batches, idempotence on), against the same server, printing the same JSON
//! line with `"client":"fluss-rs"`.
//!
//! ```text
//! cargo run --release -p fjord --example fluss_rs_bench -- \
//!     --bootstrap 127.0.0.1:9123 --rows 10000000 --compression none
//! ```
//!
//! `--op write` (default): a fresh table, every record appended as a
//! `GenericRow` (one reused row, values borrowed from the pre-generated Arrow
//! columns, as `fjord bench write --input rows` does), then one flush; or
//! whole Arrow batches with `--input arrow`. `--op scan`: the table is
//! written first (not timed), then read from the earliest offsets with the
//! record-batch log scanner. CPU is this process's getrusage (user + sys) over
//! the timed phase only; the workload is generated before it.
//!
//! The workload must stay identical to `src/cmd/bench/workload.rs`: the
//! `user_behavior` rows come from the same `fjord_format::fixtures` generator
//! and the same batch seeds; `long` is the same counter.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use arrow::array::{Array, ArrayData, ArrayRef, AsArray, Int64Array, RecordBatch};
use arrow::datatypes::{
    DataType as ArrowType, Field, Int64Type, Schema as ArrowSchema, TimestampMillisecondType,
};
use clap::{Parser, ValueEnum};
use fluss::client::{FlussConnection, EARLIEST_OFFSET};
use fluss::config::Config;
use fluss::metadata::{DataTypes, Schema, TableDescriptor, TablePath};
use fluss::row::{GenericRow, TimestampNtz};
use fluss::rpc::message::OffsetSpec;

/// Buckets of the benchmark table (as `fjord bench`).
const BUCKETS: i32 = 4;
/// Database of the benchmark tables (as `fjord bench`).
const DATABASE: &str = "bench";
/// How long one scanner poll waits for data.
const POLL_WAIT: Duration = Duration::from_millis(500);
/// The longest a scan may take before the benchmark gives up.
const SCAN_DEADLINE: Duration = Duration::from_secs(600);

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Compression {
    Zstd,
    Lz4,
    None,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum SchemaKind {
    UserBehavior,
    Long,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Input {
    Rows,
    Arrow,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Op {
    Write,
    Scan,
}

/// fluss-rs on the `fjord bench` workload.
#[derive(Parser)]
struct Args {
    /// `host:port` of the server.
    #[arg(long)]
    bootstrap: String,
    /// Records to write (or read).
    #[arg(long, default_value_t = 10_000_000)]
    rows: usize,
    #[arg(long, value_enum, default_value_t = Compression::Zstd)]
    compression: Compression,
    #[arg(long, value_enum, default_value_t = SchemaKind::UserBehavior)]
    schema: SchemaKind,
    /// What the writer is handed (write only).
    #[arg(long, value_enum, default_value_t = Input::Rows)]
    input: Input,
    /// Rows per generated Arrow batch (as `fjord bench`).
    #[arg(long, default_value_t = 55_000)]
    batch_rows: usize,
    #[arg(long, value_enum, default_value_t = Op::Write)]
    op: Op,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.rows == 0 || args.batch_rows == 0 {
        bail!("--rows and --batch-rows must be positive");
    }
    let runtime = tokio::runtime::Runtime::new()?;
    let line = runtime.block_on(run(&args))?;
    println!("{line}");
    Ok(())
}

async fn run(args: &Args) -> anyhow::Result<String> {
    let config = Config {
        bootstrap_servers: args.bootstrap.clone(),
        ..Config::default()
    };
    let connection = FlussConnection::new(config)
        .await
        .context("connecting with fluss-rs")?;
    let admin = connection.get_admin()?;
    admin.create_database(DATABASE, None, true).await?;
    let path = TablePath::new(DATABASE, table_name(args));
    admin.create_table(&path, &descriptor(args)?, false).await?;
    let table = connection.get_table(&path).await?;

    let generating = cpu();
    let (batches, arrow_bytes) = generate(args.schema, args.rows, args.batch_rows);
    let generate_cpu = cpu() - generating;

    let writer = table.new_append()?.create_writer()?;
    let (wall, used, extra) = match args.op {
        Op::Write => {
            let (cpu0, wall0) = (cpu(), Instant::now());
            for batch in &batches {
                match args.input {
                    Input::Arrow => drop(writer.append_arrow_batch(batch.clone())?),
                    Input::Rows => append_rows(&writer, args.schema, batch)?,
                }
            }
            writer.flush().await?;
            (wall0.elapsed(), cpu() - cpu0, String::new())
        }
        Op::Scan => {
            for batch in &batches {
                drop(writer.append_arrow_batch(batch.clone())?);
            }
            writer.flush().await?;
            let scanner = table.new_scan().create_record_batch_log_scanner()?;
            let start: HashMap<i32, i64> = (0..BUCKETS).map(|b| (b, EARLIEST_OFFSET)).collect();
            scanner.subscribe_buckets(&start).await?;
            let deadline = Instant::now() + SCAN_DEADLINE;
            let (mut read, mut polls) = (0usize, 0usize);
            let (cpu0, wall0) = (cpu(), Instant::now());
            while read < args.rows {
                if Instant::now() > deadline {
                    bail!(
                        "read {read} of {} records within {SCAN_DEADLINE:?}",
                        args.rows
                    );
                }
                for batch in scanner.poll(POLL_WAIT).await? {
                    read += batch.num_records();
                }
                polls += 1;
            }
            let timed = (wall0.elapsed(), cpu() - cpu0);
            if read != args.rows {
                bail!("read {read} records, wrote {}", args.rows);
            }
            (timed.0, timed.1, format!(",\"polls\":{polls}.0"))
        }
    };

    // A writer that lost or duplicated records would make the figure meaningless.
    let buckets: Vec<i32> = (0..BUCKETS).collect();
    let ends = admin
        .list_offsets(&path, &buckets, OffsetSpec::Latest)
        .await?;
    let stored: i64 = ends.values().sum();
    if stored != args.rows as i64 {
        bail!(
            "{path} holds {stored} records after the run, expected {}",
            args.rows
        );
    }
    admin.drop_table(&path, true).await?;

    let seconds = wall.as_secs_f64();
    let n = args.rows as f64;
    Ok(format!(
        "{{\"client\":\"fluss-rs\",\"op\":\"{}\",\"input\":\"{}\",\"schema\":\"{}\",\"compression\":\"{}\",\
         \"records\":{},\"seconds\":{seconds:.6},\"records_per_s\":{:.0},\"mb_per_s\":{:.1},\
         \"mb_basis\":\"arrow_uncompressed\",\"client_cpu_ns_per_record\":{:.1},\
         \"generate_cpu_ns_per_record\":{:.1}{extra}}}",
        match args.op {
            Op::Write => "write",
            Op::Scan => "scan",
        },
        match (args.op, args.input) {
            (Op::Scan, _) | (_, Input::Arrow) => "arrow",
            (_, Input::Rows) => "rows",
        },
        schema_name(args.schema),
        compression_name(args.compression).0,
        args.rows,
        n / seconds,
        arrow_bytes as f64 / seconds / 1e6,
        used.as_nanos() as f64 / n,
        generate_cpu.as_nanos() as f64 / n,
    ))
}

/// Appends each row of `batch` as one reused `GenericRow` whose values borrow
/// from the batch's columns (downcast once per batch).
fn append_rows(
    writer: &fluss::client::AppendWriter,
    schema: SchemaKind,
    batch: &RecordBatch,
) -> anyhow::Result<()> {
    const WRONG: &str = "generated batch does not have the workload's column types";
    match schema {
        SchemaKind::UserBehavior => {
            let user = batch
                .column(0)
                .as_primitive_opt::<Int64Type>()
                .context(WRONG)?;
            let item = batch
                .column(1)
                .as_primitive_opt::<Int64Type>()
                .context(WRONG)?;
            let category = batch
                .column(2)
                .as_primitive_opt::<Int64Type>()
                .context(WRONG)?;
            let behavior = batch.column(3).as_string_opt::<i32>().context(WRONG)?;
            let ts = batch
                .column(4)
                .as_primitive_opt::<TimestampMillisecondType>()
                .context(WRONG)?;
            let mut row = GenericRow::new(5);
            for i in 0..batch.num_rows() {
                row.set_field(0, user.value(i));
                row.set_field(1, item.value(i));
                row.set_field(2, category.value(i));
                row.set_field(3, behavior.value(i));
                row.set_field(4, TimestampNtz::new(ts.value(i)));
                // Fire and forget, as the client intends; flush waits for all.
                drop(writer.append(&row)?);
            }
        }
        SchemaKind::Long => {
            let values = batch
                .column(0)
                .as_primitive_opt::<Int64Type>()
                .context(WRONG)?;
            let mut row = GenericRow::new(1);
            for &v in values.values().iter() {
                row.set_field(0, v);
                drop(writer.append(&row)?);
            }
        }
    }
    Ok(())
}

fn table_name(args: &Args) -> String {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default();
    format!(
        "fluss_rs_{}_{}_{}_{stamp}",
        schema_name(args.schema),
        compression_name(args.compression).0,
        std::process::id()
    )
}

fn descriptor(args: &Args) -> anyhow::Result<TableDescriptor> {
    let schema = match args.schema {
        SchemaKind::UserBehavior => Schema::builder()
            .column("user_id", DataTypes::bigint())
            .column("item_id", DataTypes::bigint())
            .column("category_id", DataTypes::bigint())
            .column("behavior", DataTypes::string())
            .column("ts", DataTypes::timestamp_with_precision(3))
            .build()?,
        SchemaKind::Long => Schema::builder().column("v", DataTypes::bigint()).build()?,
    };
    let (kind, level) = compression_name(args.compression);
    let mut builder = TableDescriptor::builder()
        .schema(schema)
        .distributed_by(Some(BUCKETS), Vec::new())
        .comment("fluss-rs bench workload")
        .property("table.log.arrow.compression.type", kind.to_uppercase());
    if let Some(level) = level {
        builder = builder.property("table.log.arrow.compression.zstd.level", level);
    }
    Ok(builder.build()?)
}

fn schema_name(schema: SchemaKind) -> &'static str {
    match schema {
        SchemaKind::UserBehavior => "user_behavior",
        SchemaKind::Long => "long",
    }
}

/// The JSON name and the table property values of a compression.
fn compression_name(compression: Compression) -> (&'static str, Option<&'static str>) {
    match compression {
        Compression::Zstd => ("zstd", Some("3")),
        Compression::Lz4 => ("lz4", None),
        Compression::None => ("none", None),
    }
}

/// The workload as Arrow batches (the same rows `fjord bench` generates) and
/// their uncompressed Arrow bytes.
fn generate(schema: SchemaKind, rows: usize, batch_rows: usize) -> (Vec<RecordBatch>, u64) {
    let mut batches = Vec::with_capacity(rows.div_ceil(batch_rows));
    let mut bytes = 0u64;
    let (mut left, mut seq) = (rows, 0u64);
    while left > 0 {
        let n = left.min(batch_rows);
        let batch = match schema {
            SchemaKind::UserBehavior => fjord_format::fixtures::user_behavior_batch(n, seq),
            SchemaKind::Long => {
                let first = seq as i64 * batch_rows as i64;
                let values: ArrayRef =
                    Arc::new(Int64Array::from_iter_values(first..first + n as i64));
                let schema = ArrowSchema::new(vec![Field::new("v", ArrowType::Int64, true)]);
                RecordBatch::try_new(Arc::new(schema), vec![values]).expect("one BIGINT column")
            }
        };
        for column in batch.columns() {
            bytes += buffer_bytes(&column.to_data()) as u64;
        }
        batches.push(batch);
        left -= n;
        seq += 1;
    }
    (batches, bytes)
}

fn buffer_bytes(data: &ArrayData) -> usize {
    data.nulls().map_or(0, |n| n.buffer().len())
        + data.buffers().iter().map(|b| b.len()).sum::<usize>()
        + data.child_data().iter().map(buffer_bytes).sum::<usize>()
}

/// CPU time (user + system) of this process so far.
fn cpu() -> Duration {
    // SAFETY: getrusage only writes into the zeroed struct we pass it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime))
}
