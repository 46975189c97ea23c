//! `fjord lookup`: rows of a primary-key table by key, to stdout as a
//! pretty table, CSV or JSON lines (as `fjord scan` prints them).
//!
//! Keys come from `--key col=value[,col=value...]` (repeatable) and from
//! `--keys-file` (CSV with a header naming the key columns, or JSON lines),
//! in that order. A key names every primary-key column, partition columns
//! included; with `--prefix col,...` it names those columns instead (the
//! partition keys and the bucket key) and every row under that prefix is
//! printed. Values are read as a CSV field is (an empty one is NULL), typed
//! by the column. A key naming a column that is not a key column, leaving
//! one out or holding a value its column cannot take is an error naming
//! it, before anything is looked up.
//!
//! Found rows go to stdout in the order of the keys; a key with no row is
//! reported on stderr as `not found: col=value,...`, and the exit code is
//! still 0. Lookups are pipelined: up to [`LOOKUPS_IN_FLIGHT`] keys are
//! out at once, which the lookuper batches per server. A progress line
//! (keys looked up so far) is shown on a terminal, and a summary (keys,
//! found, not found) goes to stderr at the end.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::{cell::Cell, fmt::Write as _};

use anyhow::{bail, Context};
use arrow_array::RecordBatch;
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_schema::{Schema, SchemaRef};
use fjord_client::row::RowBatchBuilder;
use fjord_client::scanner::ScanRows;
use fjord_client::{KvRow, KvRows, LookupConfig, Lookuper, PrefixLookuper, TableInfo};
use fjord_format::arrow_schema::to_arrow_schema;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::input::{parse_values, InputFormat, InputSpec, LineParser};
use super::progress::Progress;
use super::scan::{connect, parse_table_path, OutputFormat, Sink, Stdout, DEFAULT_BOOTSTRAP};

/// Keys looked up at once, at most: enough for the lookuper to fill its
/// requests, few enough that the rows waiting to be printed in key order
/// stay small.
pub const LOOKUPS_IN_FLIGHT: usize = 1024;

/// Keys a keys-file batch holds.
const KEYS_PER_BATCH: usize = 1024;

/// Found rows printed together (a group of the text table).
const ROWS_PER_PRINT: usize = 1024;

/// How often one key is retried after a retriable error (a lost
/// connection, a leader moving) unless `--set client.lookup.max-retries`
/// says otherwise: the lookuper's default retries forever, which would
/// leave a command waiting for a server that went away.
const MAX_RETRIES_DEFAULT: &str = "10";

/// Arguments of `fjord lookup`.
#[derive(clap::Args)]
pub struct Args {
    /// Server(s) to bootstrap from, `host:port[,host:port...]`; each is tried in turn.
    #[arg(long, default_value = DEFAULT_BOOTSTRAP)]
    bootstrap: String,
    /// The primary-key table to look up, `database.table`.
    #[arg(long)]
    table: String,
    /// A key, `column=value[,column=value...]`, naming every primary-key
    /// column (partition columns included), or with --prefix every prefix
    /// column; repeatable.
    #[arg(long = "key", value_name = "COLUMN=VALUE,...")]
    keys: Vec<String>,
    /// A file of keys (`-`: stdin): CSV with a header naming the key
    /// columns, or JSON lines.
    #[arg(long)]
    keys_file: Option<PathBuf>,
    /// The keys file's format (default: JSON lines for a name ending in
    /// .json, .jsonl or .ndjson, CSV otherwise).
    #[arg(long, value_enum)]
    keys_format: Option<InputFormat>,
    /// Look up every row under a prefix of the primary key: these columns,
    /// the partition keys (if any) and the bucket key.
    #[arg(long, value_delimiter = ',')]
    prefix: Option<Vec<String>>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    format: OutputFormat,
    /// A lookup option, `key=value` with Fluss's option names (e.g.
    /// `client.lookup.max-batch-size=256`); repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// No progress or summary line on stderr.
    #[arg(long, short)]
    quiet: bool,
}

/// Runs `fjord lookup`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let path = parse_table_path(&args.table)?;
    if args.keys.is_empty() && args.keys_file.is_none() {
        bail!("no keys: give --key column=value[,...] or --keys-file FILE");
    }
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let client = connect(&args.bootstrap).await?;
        let table = client
            .table_info(&path)
            .await
            .with_context(|| format!("cannot find table {path}"))?;
        if !table.descriptor.has_primary_key() {
            bail!(
                "{path} is a log table (no primary key): lookups need a primary-key table; read it with fjord scan"
            );
        }
        let mut options: Vec<(&str, &str)> = vec![("client.lookup.max-retries", MAX_RETRIES_DEFAULT)];
        options.extend(
            args.set
                .iter()
                .map(|kv| kv.split_once('=').unwrap_or((kv.as_str(), ""))),
        );
        let config = LookupConfig::from_options(options)?;
        let lookuper = client.lookuper(&path, config).await?;
        let by = match &args.prefix {
            None => By::Key(lookuper.clone()),
            Some(columns) => By::Prefix(lookuper.prefix(columns)?),
        };
        lookup(&args, &table, &lookuper, by).await
    })
}

/// What a key finds: one row, or every row under a prefix.
#[derive(Clone)]
enum By {
    Key(Lookuper),
    Prefix(PrefixLookuper),
}

impl By {
    /// The columns a key names, in order.
    fn columns(&self) -> &[String] {
        match self {
            By::Key(l) => l.key_columns(),
            By::Prefix(p) => p.prefix_columns(),
        }
    }
}

/// What one key found.
enum Found {
    Row(Option<KvRow>),
    Rows(KvRows),
}

/// One key's lookup, under way: the keys' batch and the key's row in it.
type Pending = JoinHandle<(Arc<RecordBatch>, usize, anyhow::Result<Found>)>;

async fn lookup(args: &Args, table: &TableInfo, lookuper: &Lookuper, by: By) -> anyhow::Result<()> {
    let key_schema = key_schema(table, by.columns())?;
    let closed = Rc::new(Cell::new(false));
    let stdout = Stdout::new(BufWriter::new(std::io::stdout().lock()), closed.clone());
    let mut out = Printer {
        sink: Sink::new(args.format, stdout),
        rows: RowBatchBuilder::new(lookuper.arrow_schema().clone())?,
        pending_rows: 0,
        progress: Progress::new("looked up", args.quiet),
        found: 0,
        missing: 0,
    };
    let mut inflight: VecDeque<Pending> = VecDeque::with_capacity(LOOKUPS_IN_FLIGHT);

    // Every --key is checked before anything is looked up.
    let mut given = Vec::with_capacity(args.keys.len());
    for text in &args.keys {
        given.push(Arc::new(parse_key(table, &key_schema, by.columns(), text)?));
    }
    let result = async {
        for keys in given {
            submit(&by, keys, &mut inflight, &mut out).await?;
        }
        if let Some(file) = &args.keys_file {
            read_keys_file(args, table, file, &key_schema, &by, &mut inflight, &mut out).await?;
        }
        while let Some(pending) = inflight.pop_front() {
            out.print(pending.await?)?;
        }
        out.flush_rows()
    }
    .await;
    if let Err(e) = result {
        out.progress.clear();
        // A reader that went away (`| head`) ends the lookups quietly.
        return if closed.get() { Ok(()) } else { Err(e) };
    }
    let Printer {
        sink,
        mut progress,
        found,
        missing,
        ..
    } = out;
    progress.clear();
    match sink.finish() {
        Err(_) if closed.get() => return Ok(()),
        other => other?,
    }
    if !args.quiet {
        eprintln!(
            "looked up {} keys in {}: {found} found, {missing} not found",
            progress.rows(),
            table.path
        );
    }
    Ok(())
}

/// Looks up every key of `keys`, printing the oldest lookups' results
/// whenever [`LOOKUPS_IN_FLIGHT`] are out.
async fn submit<W: std::io::Write>(
    by: &By,
    keys: Arc<RecordBatch>,
    inflight: &mut VecDeque<Pending>,
    out: &mut Printer<W>,
) -> anyhow::Result<()> {
    for index in 0..keys.num_rows() {
        if inflight.len() >= LOOKUPS_IN_FLIGHT {
            if let Some(oldest) = inflight.pop_front() {
                out.print(oldest.await?)?;
            }
        }
        let by = by.clone();
        let keys = keys.clone();
        inflight.push_back(tokio::spawn(async move {
            let found = look_up(&by, &keys, index).await;
            (keys, index, found)
        }));
    }
    Ok(())
}

/// The lookup of key `index` of `keys`.
async fn look_up(by: &By, keys: &RecordBatch, index: usize) -> anyhow::Result<Found> {
    let rows = ScanRows::new(keys)?;
    let key = rows.row(index).context("a key past the end of its batch")?;
    Ok(match by {
        By::Key(l) => Found::Row(l.lookup(&key).await?),
        By::Prefix(p) => Found::Rows(p.prefix_lookup(&key).await?),
    })
}

/// Reads the keys file in batches and looks up each batch's keys while
/// the next is parsed.
async fn read_keys_file<W: std::io::Write>(
    args: &Args,
    table: &TableInfo,
    file: &Path,
    key_schema: &SchemaRef,
    by: &By,
    inflight: &mut VecDeque<Pending>,
    out: &mut Printer<W>,
) -> anyhow::Result<()> {
    let format =
        args.keys_format
            .unwrap_or_else(|| match file.extension().and_then(|e| e.to_str()) {
                Some("json" | "jsonl" | "ndjson") => InputFormat::Json,
                _ => InputFormat::Csv,
            });
    let name = file.display().to_string();
    let input: Box<dyn BufRead + Send> = if name == "-" {
        Box::new(BufReader::new(std::io::stdin()))
    } else {
        Box::new(BufReader::new(
            File::open(file).with_context(|| format!("cannot open {name}"))?,
        ))
    };
    let expected = match &args.prefix {
        None => format!("the key of {} is", table.path),
        Some(_) => "--prefix names".to_owned(),
    };
    let spec = InputSpec::exact(key_schema.clone(), expected);
    let header = format == InputFormat::Csv;
    let parser = LineParser::new(format, KEYS_PER_BATCH, header, spec)?;
    let (tx, mut rx) = mpsc::channel(2);
    let reader = std::thread::spawn(move || parser.run(input, tx));
    while let Some(parsed) = rx.recv().await {
        let (batches, _) = parsed.with_context(|| format!("{name}: reading keys"))?;
        for rows in batches {
            submit(by, Arc::new(rows.batch), inflight, out).await?;
        }
    }
    if reader.join().is_err() {
        bail!("the keys file reader thread panicked");
    }
    Ok(())
}

/// The Arrow schema of the key columns `columns` of `table`, in order.
fn key_schema(table: &TableInfo, columns: &[String]) -> anyhow::Result<SchemaRef> {
    let schema = to_arrow_schema(table.descriptor.schema());
    let fields = columns
        .iter()
        .map(|c| {
            schema
                .field_with_name(c)
                .map(|f| Arc::new(f.clone()))
                .with_context(|| format!("{} has no column {c:?}", table.path))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(Arc::new(Schema::new(fields)))
}

/// One key from `--key col=value[,col=value...]`: every column of
/// `columns` named once, and nothing else.
fn parse_key(
    table: &TableInfo,
    schema: &SchemaRef,
    columns: &[String],
    text: &str,
) -> anyhow::Result<RecordBatch> {
    let mut values: Vec<Option<&str>> = vec![None; columns.len()];
    for part in text.split(',') {
        let Some((name, value)) = part.split_once('=') else {
            bail!("--key {text:?}: {part:?} is not column=value");
        };
        let name = name.trim();
        let Some(i) = columns.iter().position(|c| c == name) else {
            bail!(
                "--key {text:?}: {name:?} is not a column of the key ({}) of {}",
                columns.join(", "),
                table.path
            );
        };
        if values[i].replace(value).is_some() {
            bail!("--key {text:?}: {name:?} is named twice");
        }
    }
    let values: Vec<&str> = values
        .iter()
        .zip(columns)
        .map(|(value, column)| {
            value.with_context(|| {
                format!(
                    "--key {text:?}: the key column {column:?} is missing (the key of {} is {})",
                    table.path,
                    columns.join(", ")
                )
            })
        })
        .collect::<anyhow::Result<_>>()?;
    parse_values(schema, &values).with_context(|| format!("--key {text:?}"))
}

/// Prints what lookups found, in key order.
struct Printer<W: std::io::Write> {
    sink: Sink<W>,
    /// Found rows not yet printed.
    rows: RowBatchBuilder,
    pending_rows: usize,
    /// Keys looked up so far (their results printed), shown while running.
    progress: Progress,
    found: u64,
    missing: u64,
}

impl<W: std::io::Write> Printer<W> {
    /// Prints one key's result: its rows, or `not found` on stderr.
    fn print(
        &mut self,
        (keys, index, found): (Arc<RecordBatch>, usize, anyhow::Result<Found>),
    ) -> anyhow::Result<()> {
        self.progress.add(1, 0);
        let found = found.with_context(|| format!("looking up {}", describe_key(&keys, index)))?;
        match found {
            Found::Row(Some(row)) => {
                self.rows.append(&row)?;
                self.pending_rows += 1;
                self.found += 1;
            }
            Found::Rows(rows) if !rows.is_empty() => {
                // A prefix's rows are printed together, in key order.
                self.flush_rows()?;
                self.sink.write(&rows.to_record_batch()?)?;
                self.found += 1;
            }
            Found::Row(None) | Found::Rows(_) => {
                self.missing += 1;
                // The progress line is redrawn by the next key's count.
                self.progress.clear();
                eprintln!("not found: {}", describe_key(&keys, index));
            }
        }
        if self.pending_rows >= ROWS_PER_PRINT {
            self.flush_rows()?;
        }
        Ok(())
    }

    /// Prints the found rows held back.
    fn flush_rows(&mut self) -> anyhow::Result<()> {
        if self.pending_rows > 0 {
            let batch = self.rows.finish()?;
            self.pending_rows = 0;
            self.sink.write(&batch)?;
        }
        Ok(())
    }
}

/// Key `index` of `keys` as `col=value,...` (for messages).
#[cold]
fn describe_key(keys: &RecordBatch, index: usize) -> String {
    let options = FormatOptions::default().with_null("NULL");
    let mut text = String::new();
    for (field, column) in keys.schema().fields().iter().zip(keys.columns()) {
        if !text.is_empty() {
            text.push(',');
        }
        let _ = match ArrayFormatter::try_new(column.as_ref(), &options) {
            Ok(f) => write!(text, "{}={}", field.name(), f.value(index)),
            Err(_) => write!(text, "{}=?", field.name()),
        };
    }
    text
}
