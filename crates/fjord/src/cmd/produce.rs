//! `fjord produce`: CSV or JSON lines from a file or stdin into a table.
//!
//! Input is parsed into Arrow with the table's schema ([`super::input`]), a
//! batch of lines at a time, on a reader thread, while the writer sends the
//! previous batches; hand-offs between the two are per batch.
//!
//! A log table is written with the native append writer (acks=all unless
//! `--set client.writer.acks=...`). Rows of a partitioned table go to it
//! one by one (each is routed to its partition, created on demand as the
//! writer's `client.writer.dynamic-create-partition.enabled` allows); other
//! tables take each parsed batch whole.
//!
//! A primary-key table is written with the upsert writer, row by row:
//! every row is an upsert, or with `--delete` a delete of its key (only
//! the key columns are read, so a CSV header may name just those). A
//! change-type column [`OP_COLUMN`] (named by a CSV header or a JSON key;
//! not a column of the table) decides per row: `+I`, `+U`, `c`, `u`, `r`
//! upsert, `-D`, `d` delete, `-U` rows are skipped (the `+U` after them
//! holds the new row, as Fluss's sink reads a changelog), and a row without
//! a value is an upsert. `--columns` makes a partial update of the named
//! columns (the input holds those, the key among them; the others keep
//! their values), where `-D` is Fluss's partial delete (the named columns
//! are cleared; the row goes when nothing else is left).
//!
//! A line that does not parse, or a change type that is not one, stops the
//! run with an error naming the line number (and, where the decoder says,
//! the column); nothing after the batch that holds the bad line is sent.
//! Every write's outcome is checked: the final flush returns the first
//! failure. A summary (rows, bytes, elapsed; for a primary-key table the
//! upserts, deletes and skipped rows) goes to stderr at the end; a progress
//! line is shown meanwhile on a terminal.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use arrow_schema::{FieldRef, SchemaRef};
use fjord_client::scanner::ScanRows;
use fjord_client::{
    AppendWriter, FlussClient, TableInfo, TablePath, UpsertOptions, UpsertWriter, WriterConfig,
};
use fjord_format::arrow_schema::to_arrow_schema;
use tokio::sync::mpsc;

use super::input::{InputFormat, InputSpec, LineParser, Need, RowOp, Rows, OP_COLUMN};
use super::progress::{Progress, BYTES_PER_MB};
use super::scan::{connect, parse_table_path, DEFAULT_BOOTSTRAP};

/// Default rows per parsed batch: large enough that per-batch costs vanish
/// next to per-record ones, small enough to bound the memory a batch holds.
const DEFAULT_BATCH_ROWS: usize = 32 * 1024;

/// Parsed batches the reader thread may run ahead of the writer. Bounds the
/// memory held between parsing and sending (back-pressure on the reader).
const PARSED_BATCHES_AHEAD: usize = 4;

/// How long the final flush may wait for the server's acknowledgements.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(300);

/// Arguments of `fjord produce`.
#[derive(clap::Args)]
pub struct Args {
    /// Server(s) to bootstrap from, `host:port[,host:port...]`; each is tried in turn.
    #[arg(long, default_value = DEFAULT_BOOTSTRAP)]
    bootstrap: String,
    /// The table to write, `database.table`.
    #[arg(long)]
    table: String,
    /// Input format.
    #[arg(long, value_enum, default_value_t = InputFormat::Csv)]
    format: InputFormat,
    /// The CSV input starts with a header line naming the table's columns
    /// (in any order), and for a primary-key table perhaps the change-type
    /// column `op`.
    #[arg(long)]
    header: bool,
    /// Primary-key tables: every input row deletes the row with its key.
    #[arg(long)]
    delete: bool,
    /// Primary-key tables: a partial update of these columns (the key must
    /// be among them), which are all the input holds, in this order.
    #[arg(long, value_delimiter = ',')]
    columns: Option<Vec<String>>,
    /// Rows per batch handed to the writer.
    #[arg(long, default_value_t = DEFAULT_BATCH_ROWS)]
    batch_rows: usize,
    /// A writer option, `key=value` with Fluss's option names (e.g.
    /// `client.writer.acks=all`, `client.writer.batch-size=4mb`); repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// No progress line on stderr.
    #[arg(long, short)]
    quiet: bool,
    /// Input file; `-` or nothing reads stdin.
    file: Option<PathBuf>,
}

/// Runs `fjord produce`.
pub fn run(args: Args) -> anyhow::Result<()> {
    if args.batch_rows == 0 {
        bail!("--batch-rows must be positive");
    }
    if args.header && args.format != InputFormat::Csv {
        bail!("--header applies to CSV input only");
    }
    let path = parse_table_path(&args.table)?;
    let input: Box<dyn BufRead + Send> = match args.file.as_deref() {
        None => Box::new(BufReader::new(std::io::stdin())),
        Some(p) if p.as_os_str() == "-" => Box::new(BufReader::new(std::io::stdin())),
        Some(p) => Box::new(BufReader::new(
            File::open(p).with_context(|| format!("cannot open {}", p.display()))?,
        )),
    };
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(produce(&args, path, input))
}

async fn produce(
    args: &Args,
    path: TablePath,
    input: Box<dyn BufRead + Send>,
) -> anyhow::Result<()> {
    let client = connect(&args.bootstrap).await?;
    let config = WriterConfig::from_options(
        args.set
            .iter()
            .map(|kv| kv.split_once('=').unwrap_or((kv.as_str(), ""))),
    )?;
    let table = client
        .table_info(&path)
        .await
        .with_context(|| format!("cannot find table {path}"))?;
    let (mut target, spec) = match table.descriptor.has_primary_key() {
        false => log_target(args, &client, &table, config).await?,
        true => kv_target(args, &client, &table, config).await?,
    };

    let parser = LineParser::new(args.format, args.batch_rows, args.header, spec)?;
    let (tx, mut rx) = mpsc::channel(PARSED_BATCHES_AHEAD);
    let reader = std::thread::spawn(move || parser.run(input, tx));

    let mut progress = Progress::new("wrote", args.quiet);
    let mut counts = Counts::default();
    while let Some(parsed) = rx.recv().await {
        let (batches, bytes) = match parsed {
            Ok(parsed) => parsed,
            Err(e) => {
                progress.clear();
                // Whatever was sent before the bad batch is acknowledged
                // first, so the error is the only thing left to report.
                let _ = tokio::time::timeout(FLUSH_TIMEOUT, target.flush()).await;
                return Err(e.context(format!(
                    "{}: stopped after writing {} rows",
                    input_name(args),
                    progress.rows()
                )));
            }
        };
        let mut rows = 0;
        for parsed in batches.into_iter().filter(|b| b.batch.num_rows() > 0) {
            rows += parsed.batch.num_rows();
            if let Err(e) = target.write(parsed, &mut counts).await {
                progress.clear();
                return Err(e.context(format!(
                    "{}: stopped after writing {} rows",
                    input_name(args),
                    progress.rows()
                )));
            }
        }
        progress.add(rows, bytes);
    }
    tokio::time::timeout(FLUSH_TIMEOUT, target.close())
        .await
        .with_context(|| {
            format!("the server did not acknowledge the writes within {FLUSH_TIMEOUT:?}")
        })?
        .with_context(|| format!("writing {path}"))?;
    if reader.join().is_err() {
        bail!("the input reader thread panicked");
    }
    progress.clear();
    let elapsed = progress.elapsed();
    let detail = match table.descriptor.has_primary_key() {
        false => String::new(),
        true => format!(
            ": {} upserts, {} deletes, {} skipped (-U)",
            counts.upserts, counts.deletes, counts.skipped
        ),
    };
    eprintln!(
        "produced {} rows ({:.1} MB of input) into {path} in {:.3} s ({:.0} rows/s){detail}",
        progress.rows(),
        progress.bytes() as f64 / BYTES_PER_MB,
        elapsed.as_secs_f64(),
        progress.rows_per_second(),
    );
    Ok(())
}

/// The append writer of a log table and what its input holds: the table's
/// columns.
async fn log_target(
    args: &Args,
    client: &FlussClient,
    table: &TableInfo,
    config: WriterConfig,
) -> anyhow::Result<(Target, InputSpec)> {
    if args.delete {
        bail!(
            "{} is a log table (no primary key): --delete applies to primary-key tables",
            table.path
        );
    }
    if args.columns.is_some() {
        bail!(
            "{} is a log table (no primary key): --columns (a partial update) applies to primary-key tables",
            table.path
        );
    }
    let writer = client.append_writer(&table.path, config).await?;
    let spec = InputSpec::exact(writer.arrow_schema().clone(), format!("{} has", table.path));
    let target = Target::Log {
        writer,
        // A partitioned table's rows are routed one by one to their
        // partitions; any other table takes each parsed batch whole.
        by_row: table.is_partitioned(),
    };
    Ok((target, spec))
}

/// The upsert writer of a primary-key table (a partial one for
/// `--columns`, unless deleting) and what its input holds.
async fn kv_target(
    args: &Args,
    client: &FlussClient,
    table: &TableInfo,
    config: WriterConfig,
) -> anyhow::Result<(Target, InputSpec)> {
    let schema = to_arrow_schema(table.descriptor.schema());
    let key = table.descriptor.schema().primary_key().unwrap_or_default();
    let default = if args.delete {
        RowOp::Delete
    } else {
        RowOp::Upsert
    };
    let (fields, expected) = match &args.columns {
        None => {
            // Deleting, only the key is read: the rest may be left out.
            let fields = schema
                .fields()
                .iter()
                .map(|f| match key.contains(f.name()) || !args.delete {
                    true => (f.clone(), Need::Required),
                    false => (nullable(f), Need::Optional),
                })
                .collect();
            (fields, format!("{} has", table.path))
        }
        Some(names) => {
            let fields = named_columns(table, &schema, names, key)?;
            (fields, "--columns names".to_owned())
        }
    };
    let mut spec = InputSpec::new(fields, schema.clone(), expected);
    // A table with a column called `op` has no change-type column.
    if schema.index_of(OP_COLUMN).is_err() {
        spec = spec.with_ops(default);
    }
    let options = match &args.columns {
        Some(names) if !args.delete => UpsertOptions::default().partial_update_by_names(names),
        _ => UpsertOptions::default(),
    };
    let writer = client
        .upsert_writer_with(&table.path, config, options)
        .await?;
    Ok((Target::Kv { writer, default }, spec))
}

/// The fields of `--columns`: columns of the table, each once, the whole
/// primary key among them.
fn named_columns(
    table: &TableInfo,
    schema: &SchemaRef,
    names: &[String],
    key: &[String],
) -> anyhow::Result<Vec<(FieldRef, Need)>> {
    let mut fields: Vec<(FieldRef, Need)> = Vec::with_capacity(names.len());
    for name in names {
        let Ok(i) = schema.index_of(name) else {
            let all: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
            bail!(
                "--columns: {} has no column {name:?} (it has {})",
                table.path,
                all.join(", ")
            );
        };
        if fields.iter().any(|(f, _)| f.name() == name) {
            bail!("--columns names {name:?} twice");
        }
        fields.push((schema.fields()[i].clone(), Need::Required));
    }
    if let Some(missing) = key.iter().find(|k| !names.contains(k)) {
        bail!(
            "--columns must include the primary key of {} ({}); {missing:?} is missing",
            table.path,
            key.join(", ")
        );
    }
    Ok(fields)
}

fn nullable(field: &FieldRef) -> FieldRef {
    Arc::new(field.as_ref().clone().with_nullable(true))
}

/// Rows a primary-key table's input did, by op.
#[derive(Default)]
struct Counts {
    upserts: u64,
    deletes: u64,
    skipped: u64,
}

/// The writer a run writes with.
enum Target {
    /// A log table's append writer.
    Log { writer: AppendWriter, by_row: bool },
    /// A primary-key table's upsert writer; rows without an op do `default`.
    Kv {
        writer: UpsertWriter,
        default: RowOp,
    },
}

impl Target {
    /// Hands one parsed batch to the writer. Completion is awaited by the
    /// final flush, for all batches at once; a row the writer refuses, or
    /// an earlier batch's failure, fails here.
    async fn write(&mut self, parsed: Rows, counts: &mut Counts) -> anyhow::Result<()> {
        match self {
            Target::Log { writer, by_row } => {
                if *by_row {
                    for row in &ScanRows::new(&parsed.batch)? {
                        writer.append(&row).await?;
                    }
                } else {
                    drop(writer.append_batch(parsed.batch).await?);
                }
            }
            Target::Kv { writer, default } => {
                let rows = ScanRows::new(&parsed.batch)?;
                for row in &rows {
                    let op = parsed.ops.get(row.index()).copied().unwrap_or(*default);
                    match op {
                        RowOp::Upsert => {
                            writer.upsert(&row).await?;
                            counts.upserts += 1;
                        }
                        RowOp::Delete => {
                            writer.delete(&row).await?;
                            counts.deletes += 1;
                        }
                        RowOp::Skip => counts.skipped += 1,
                    }
                }
            }
        }
        Ok(())
    }

    /// Waits until everything handed over so far is acknowledged.
    async fn flush(&mut self) -> anyhow::Result<()> {
        match self {
            Target::Log { writer, .. } => writer.flush().await?,
            Target::Kv { writer, .. } => writer.flush().await?,
        }
        Ok(())
    }

    /// Flushes and stops the writer; the first failure of any write.
    async fn close(self) -> anyhow::Result<()> {
        match self {
            Target::Log { writer, .. } => writer.close().await?,
            Target::Kv { writer, .. } => writer.close().await?,
        }
        Ok(())
    }
}

fn input_name(args: &Args) -> String {
    match args.file.as_deref() {
        Some(p) if p.as_os_str() != "-" => p.display().to_string(),
        _ => "stdin".to_owned(),
    }
}
