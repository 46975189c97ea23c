//! `fjord bench`: end-to-end measurements of the native client, each printing
//! one JSON line (records/s, MB/s, client CPU ns per record from getrusage).
//!
//! - `write`: the workload through the native append writer into a fresh table.
//! - `scan`: the same table read back through the native log scanner.
//! - `compress-floor`: the cost of compressing the workload's Arrow buffers
//!   alone, the floor the writer is compared to.
//!
//! Without `--bootstrap` a `fjord server` child process is started on a
//! temporary data dir, so the server's CPU is never counted as the client's.
//! The fluss-rs side of the comparison is `examples/fluss_rs_bench.rs`;
//! `scripts/bench-client.sh` alternates all three.

mod floor;
mod report;
mod scan;
mod server;
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

/// Runs `fjord bench`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let report = match args.command {
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
