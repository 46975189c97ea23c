//! `fjord bench`: end-to-end measurements of the native client, each printing
//! one JSON line (records/s, MB/s, client CPU ns per record from getrusage).
//!
//! - `write`: the workload through the native append writer into a fresh table.
//! - `scan`: the same table read back through the native log scanner.
//! - `compress-floor`: the cost of compressing the workload's Arrow buffers
//!   alone, the floor the writer is compared to.
//! - `upsert`, `lookup`: the primary-key workload through the native upsert
//!   writer and lookuper (`kv`), with the server's CPU per record; the
//!   fluss-rs side is `examples/fluss_rs_kv_bench.rs`.
//! - `sql`: queries over a log table and a primary-key table through
//!   fjord-sql, against DuckDB over a Parquet file of the same rows.
//!
//! Without `--bootstrap` a `fjord server` child process is started on a
//! temporary data dir, so the server's CPU is never counted as the client's.
//! The fluss-rs side of the comparison is `examples/fluss_rs_bench.rs`;
//! `scripts/bench-client.sh` alternates all three.

mod floor;
mod kv;
mod report;
mod scan;
mod server;
mod sql;
mod table;
mod workload;
mod write;

use anyhow::bail;

use workload::{Compression, SchemaKind, DEFAULT_BATCH_ROWS};
use write::Input;

/// Arguments of `fjord bench`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(clap::Subcommand)]
enum BenchCommand {
    /// Write the workload through the native writer (acks=all).
    Write(WriteArgs),
    /// Write the workload (untimed), then read it back through the native scanner.
    Scan(ScanArgs),
    /// Compress the workload's Arrow buffers alone (no client, no server).
    CompressFloor(FloorArgs),
    /// Upsert the primary-key workload through the native upsert writer.
    Upsert(UpsertArgs),
    /// Write the primary-key workload (untimed), then look its keys up.
    Lookup(LookupArgs),
    /// SQL over a log table and a primary-key table, and DuckDB over a
    /// Parquet file of the same rows.
    Sql(SqlArgs),
}

#[derive(clap::Args)]
struct SqlArgs {
    #[command(flatten)]
    server: ServerArgs,
    /// Rows of the log table and the Parquet file.
    #[arg(long, default_value_t = 10_000_000)]
    rows: usize,
    /// Rows per generated (and written) Arrow batch.
    #[arg(long, default_value_t = DEFAULT_BATCH_ROWS)]
    batch_rows: usize,
    /// The table's Arrow body compression (and the Parquet file's).
    #[arg(long, value_enum, default_value_t = Compression::Zstd)]
    compression: Compression,
    /// Rows of the primary-key table the point queries read.
    #[arg(long, default_value_t = 1_000_000)]
    pk_rows: usize,
    /// Timed runs of each query, after one warm-up run.
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    /// Point queries timed, one at a time.
    #[arg(long, default_value_t = 2_000)]
    point_queries: usize,
    /// The Python with the `duckdb` package (default: $PYTHON or python3).
    #[arg(long)]
    python: Option<String>,
    /// The Postgres endpoint the point queries are also timed over, as a
    /// connection string (`host=H port=P user=U password=W`); default: the
    /// child server's `--pg-listen` endpoint. With `--bootstrap` and no
    /// `--pg`, the point queries run in-process only.
    #[arg(long)]
    pg: Option<String>,
}

/// The primary-key workload (`kv`), the same as
/// `examples/fluss_rs_kv_bench.rs`'s.
#[derive(clap::Args)]
struct KvWorkloadArgs {
    /// Distinct keys written (and the key space of the lookups).
    #[arg(long, default_value_t = 1_600_000)]
    keys: u32,
    /// Share of all writes that update a key written before, in [0, 1).
    #[arg(long, default_value_t = 0.2)]
    update_fraction: f64,
    /// Buckets of the table.
    #[arg(long, default_value_t = 4)]
    buckets: i32,
    /// The changelog's Arrow compression (`table.log.arrow.compression.type`).
    #[arg(long, value_enum, default_value_t = Compression::None)]
    compression: Compression,
    /// Seed of the workload.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// What the writer is handed.
    #[arg(long, value_enum, default_value_t = kv::KvInput::Rows)]
    input: kv::KvInput,
    /// A writer option over the bench's (1 MiB batches) and Fluss's
    /// defaults, `client.writer.KEY=VALUE`; repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// With `--bootstrap`: the server's pid, for its CPU per record.
    #[arg(long)]
    server_pid: Option<u32>,
    /// Worker threads of the client's runtime (0: one per core, tokio's
    /// default); `examples/fluss_rs_kv_bench.rs` takes the same option.
    #[arg(long, default_value_t = 0)]
    runtime_threads: usize,
}

#[derive(clap::Args)]
struct UpsertArgs {
    #[command(flatten)]
    workload: KvWorkloadArgs,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(clap::Args)]
struct LookupArgs {
    #[command(flatten)]
    workload: KvWorkloadArgs,
    #[command(flatten)]
    server: ServerArgs,
    /// Lookups to time (default: as many as --keys).
    #[arg(long)]
    lookups: Option<usize>,
    /// Lookups outstanding at once.
    #[arg(long, default_value_t = 256)]
    in_flight: usize,
    /// How the lookups are kept outstanding: a task per lookup in flight,
    /// or one task with all of them in a `FuturesUnordered`.
    #[arg(long, value_enum, default_value_t = kv::LookupDrive::Tasks)]
    drive: kv::LookupDrive,
    /// A lookuper option over Fluss's defaults, `client.lookup.KEY=VALUE`;
    /// repeatable.
    #[arg(long = "lookup-set", value_name = "KEY=VALUE")]
    lookup_set: Vec<String>,
}

/// The workload, shared by every bench subcommand.
#[derive(clap::Args)]
struct WorkloadArgs {
    /// Records to write (or read).
    #[arg(long, default_value_t = 10_000_000)]
    rows: usize,
    /// The table's Arrow body compression.
    #[arg(long, value_enum, default_value_t = Compression::Zstd)]
    compression: Compression,
    /// The workload's schema.
    #[arg(long, value_enum, default_value_t = SchemaKind::UserBehavior)]
    schema: SchemaKind,
    /// Rows per generated Arrow batch (the unit `--input arrow` hands over;
    /// for `compress-floor`, the batches compressed: a row writer's rows
    /// per batch, records / batches of its run, gives the floor of the
    /// batches that writer seals).
    #[arg(long, default_value_t = DEFAULT_BATCH_ROWS)]
    batch_rows: usize,
}

/// Where the server is; one is started when `--bootstrap` is absent.
#[derive(clap::Args)]
struct ServerArgs {
    /// `host:port` of a running Fjord (or Fluss) server.
    #[arg(long)]
    bootstrap: Option<String>,
    /// Keep the benchmark table instead of dropping it after the run.
    #[arg(long)]
    keep_table: bool,
}

#[derive(clap::Args)]
struct WriteArgs {
    #[command(flatten)]
    workload: WorkloadArgs,
    #[command(flatten)]
    server: ServerArgs,
    /// Hand the writer rows one at a time, or whole Arrow batches.
    #[arg(long, value_enum, default_value_t = Input::Rows)]
    input: Input,
    /// A writer option over Fluss's defaults, `client.writer.KEY=VALUE`
    /// (e.g. `client.writer.batch-size=4mb`); repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Partition the table by day over 30 days (a STRING `dt` column; the
    /// rows are a time-ordered replay, each day contiguous); rows or Arrow
    /// batches (split by partition by the writer).
    #[arg(long)]
    partitioned: bool,
    /// The same rows as `--partitioned` (with the `dt` column) into an
    /// unpartitioned table: the baseline for `--partitioned`.
    #[arg(long, conflicts_with = "partitioned")]
    day_column: bool,
}

#[derive(clap::Args)]
struct ScanArgs {
    #[command(flatten)]
    workload: WorkloadArgs,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(clap::Args)]
struct FloorArgs {
    #[command(flatten)]
    workload: WorkloadArgs,
}

/// `KEY=VALUE` options.
fn key_values(set: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    set.iter()
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) => Ok((k.trim().to_owned(), v.trim().to_owned())),
            None => Err(anyhow::anyhow!("--set {kv:?}: expected KEY=VALUE")),
        })
        .collect()
}

/// The run of the primary-key workload against `bootstrap` (`child`: the
/// server started for it).
fn kv_run(
    workload: &KvWorkloadArgs,
    server: &ServerArgs,
    bootstrap: String,
    child_pid: Option<u32>,
) -> anyhow::Result<kv::KvRun> {
    if workload.keys == 0 || !(0.0..1.0).contains(&workload.update_fraction) {
        bail!("--keys must be positive and --update-fraction in [0, 1)");
    }
    if workload.buckets <= 0 {
        bail!("--buckets must be positive");
    }
    Ok(kv::KvRun {
        bootstrap,
        server_pid: workload.server_pid.or(child_pid),
        keys: workload.keys,
        update_fraction: workload.update_fraction,
        buckets: workload.buckets,
        compression: workload.compression,
        seed: workload.seed,
        writer_options: key_values(&workload.set)?,
        input: workload.input,
        keep_table: server.keep_table,
    })
}

/// Runs a primary-key bench against `--bootstrap` or a child server, and
/// prints its JSON line.
fn run_kv<F, Fut>(workload: &KvWorkloadArgs, server: &ServerArgs, bench: F) -> anyhow::Result<()>
where
    F: FnOnce(kv::KvRun) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<String>>,
{
    let child = match &server.bootstrap {
        Some(_) => None,
        None => Some(server::ChildServer::start()?),
    };
    let bootstrap = match (&server.bootstrap, &child) {
        (Some(addr), _) => addr.clone(),
        (None, Some(child)) => child.addr().to_owned(),
        (None, None) => unreachable!("a child server is started without --bootstrap"),
    };
    let run = kv_run(workload, server, bootstrap, child.as_ref().map(|c| c.pid()))?;
    let runtime = bench_runtime(workload.runtime_threads)?;
    let line = runtime.block_on(bench(run))?;
    println!("{line}");
    Ok(())
}

/// A multi-threaded runtime of `threads` workers (0: one per core).
fn bench_runtime(threads: usize) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if threads > 0 {
        builder.worker_threads(threads);
    }
    builder.enable_all().build()
}

/// Runs `fjord bench`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let report = match args.command {
        BenchCommand::Upsert(a) => {
            return run_kv(&a.workload, &a.server, |run| async move {
                kv::upsert(&run).await
            })
        }
        BenchCommand::Lookup(a) => {
            let config = fjord_client::LookupConfig::from_options(
                key_values(&a.lookup_set)?
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect::<Vec<_>>(),
            )?;
            if a.in_flight == 0 {
                bail!("--in-flight must be positive");
            }
            let lookups = a.lookups.unwrap_or(a.workload.keys as usize);
            let (in_flight, drive) = (a.in_flight, a.drive);
            return run_kv(&a.workload, &a.server, |run| async move {
                kv::lookup(&run, lookups, in_flight, drive, config).await
            });
        }
        BenchCommand::Sql(a) => {
            if a.rows == 0 || a.batch_rows == 0 || a.pk_rows == 0 {
                bail!("--rows, --batch-rows and --pk-rows must be positive");
            }
            let child = match &a.server.bootstrap {
                Some(_) => None,
                None => Some(server::ChildServer::start_with(&[
                    "--pg-listen",
                    "127.0.0.1:0",
                ])?),
            };
            let pg = a.pg.clone().or_else(|| {
                let endpoint = child.as_ref()?.endpoint("postgres")?;
                let (host, port) = endpoint.rsplit_once(':')?;
                // The child's endpoint has no users: loopback trust.
                Some(format!("host={host} port={port} user=bench"))
            });
            let bootstrap = match (&a.server.bootstrap, &child) {
                (Some(addr), _) => addr.clone(),
                (None, Some(child)) => child.addr().to_owned(),
                (None, None) => unreachable!("a child server is started without --bootstrap"),
            };
            let run = sql::SqlRun {
                bootstrap,
                rows: a.rows,
                batch_rows: a.batch_rows,
                compression: a.compression,
                pk_rows: a.pk_rows,
                repeat: a.repeat,
                point_queries: a.point_queries,
                python: a
                    .python
                    .unwrap_or_else(|| sql::default_python().display().to_string()),
                keep_table: a.server.keep_table,
                pg,
            };
            let runtime = tokio::runtime::Runtime::new()?;
            return runtime.block_on(sql::run(&run));
        }
        BenchCommand::CompressFloor(a) => {
            check_workload(&a.workload)?;
            floor::run(
                a.workload.schema,
                a.workload.compression,
                a.workload.rows,
                a.workload.batch_rows,
            )?
        }
        BenchCommand::Write(a) => {
            check_workload(&a.workload)?;
            let writer_options = a
                .set
                .iter()
                .map(|kv| match kv.split_once('=') {
                    Some((k, v)) => Ok((k.trim().to_owned(), v.trim().to_owned())),
                    None => Err(anyhow::anyhow!("--set {kv:?}: expected KEY=VALUE")),
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            with_server(&a.server, |bootstrap| async move {
                write::run(&write::WriteRun {
                    bootstrap,
                    schema: a.workload.schema,
                    compression: a.workload.compression,
                    rows: a.workload.rows,
                    batch_rows: a.workload.batch_rows,
                    input: a.input,
                    partitioned: a.partitioned,
                    day_column: a.day_column,
                    writer_options,
                    keep_table: a.server.keep_table,
                })
                .await
            })?
        }
        BenchCommand::Scan(a) => {
            check_workload(&a.workload)?;
            with_server(&a.server, |bootstrap| async move {
                scan::run(&scan::ScanRun {
                    bootstrap,
                    schema: a.workload.schema,
                    compression: a.workload.compression,
                    rows: a.workload.rows,
                    batch_rows: a.workload.batch_rows,
                    keep_table: a.server.keep_table,
                })
                .await
            })?
        }
    };
    println!("{}", report.to_json());
    Ok(())
}

fn check_workload(workload: &WorkloadArgs) -> anyhow::Result<()> {
    if workload.rows == 0 || workload.batch_rows == 0 {
        bail!("--rows and --batch-rows must be positive");
    }
    Ok(())
}

/// Runs `bench` on a multi-threaded runtime against `--bootstrap`, or against
/// a `fjord server` child process started for the run.
fn with_server<F, Fut>(server: &ServerArgs, bench: F) -> anyhow::Result<report::Report>
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<report::Report>>,
{
    let child = match &server.bootstrap {
        Some(_) => None,
        None => Some(server::ChildServer::start()?),
    };
    let bootstrap = match (&server.bootstrap, &child) {
        (Some(addr), _) => addr.clone(),
        (None, Some(child)) => child.addr().to_owned(),
        (None, None) => unreachable!("a child server is started without --bootstrap"),
    };
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(bench(bootstrap))
}
