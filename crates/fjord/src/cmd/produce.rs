//! `fjord produce`: CSV or JSON lines from a file or stdin into a log table.
//!
//! Input is parsed straight into Arrow with the table's Arrow schema
//! (arrow-csv / arrow-json decoders built once per run), a batch of lines
//! at a time, on a reader thread, while the native append writer (acks=all
//! unless `--set client.writer.acks=...`) sends the previous batches;
//! hand-offs between the two are per batch. Rows of a partitioned table go
//! to the writer one by one (each is routed to its partition, created on
//! demand as the writer's `client.writer.dynamic-create-partition.enabled`
//! allows); other tables take each parsed batch whole.
//! One record per line: blank lines are skipped (and still counted, so line
//! numbers match an editor's); a CSV field may not contain a line break.
//!
//! A line that does not parse stops the run with an error naming the line
//! number and, where the decoder says, the column; nothing after the batch
//! that holds the bad line is sent. A summary (rows, bytes, elapsed) goes
//! to stderr at the end; a progress line is shown meanwhile on a terminal.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use arrow_array::RecordBatch;
use arrow_schema::{ArrowError, SchemaRef};
use fjord_client::scanner::ScanRows;
use fjord_client::{TableInfo, TablePath, WriterConfig};
use tokio::sync::mpsc;

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

/// Input formats of `fjord produce`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum InputFormat {
    /// Comma-separated values, fields in table column order.
    Csv,
    /// One JSON object per line, keys named after the table's columns.
    Json,
}

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
    /// (in any order).
    #[arg(long)]
    header: bool,
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
    let mut writer = client.append_writer(&path, config).await?;
    let schema = writer.arrow_schema().clone();
    // A partitioned table's rows are routed one by one to their partitions;
    // any other table takes each parsed batch whole.
    let by_row = table.is_partitioned();

    let parser = LineParser::new(args.format, schema, args.batch_rows, args.header, &table)?;
    let (tx, mut rx) = mpsc::channel(PARSED_BATCHES_AHEAD);
    let reader = std::thread::spawn(move || parser.run(input, tx));

    let mut progress = Progress::new("wrote", args.quiet);
    while let Some(parsed) = rx.recv().await {
        let (batches, bytes) = match parsed {
            Ok(parsed) => parsed,
            Err(e) => {
                progress.clear();
                // Whatever was sent before the bad batch is acknowledged
                // first, so the error is the only thing left to report.
                let _ = tokio::time::timeout(FLUSH_TIMEOUT, writer.flush()).await;
                return Err(e.context(format!(
                    "{}: stopped after writing {} rows",
                    input_name(args),
                    progress.rows()
                )));
            }
        };
        let mut rows = 0;
        for batch in batches.into_iter().filter(|b| b.num_rows() > 0) {
            rows += batch.num_rows();
            if by_row {
                for row in &ScanRows::new(&batch)? {
                    writer.append(&row).await?;
                }
            } else {
                // Completion is awaited by the final flush, for all batches at once.
                drop(writer.append_batch(batch).await?);
            }
        }
        progress.add(rows, bytes);
    }
    tokio::time::timeout(FLUSH_TIMEOUT, writer.close())
        .await
        .with_context(|| {
            format!("the server did not acknowledge the writes within {FLUSH_TIMEOUT:?}")
        })??;
    if reader.join().is_err() {
        bail!("the input reader thread panicked");
    }
    progress.clear();
    let elapsed = progress.elapsed();
    eprintln!(
        "produced {} rows ({:.1} MB of input) into {path} in {:.3} s ({:.0} rows/s)",
        progress.rows(),
        progress.bytes() as f64 / BYTES_PER_MB,
        elapsed.as_secs_f64(),
        progress.rows_per_second(),
    );
    Ok(())
}

fn input_name(args: &Args) -> String {
    match args.file.as_deref() {
        Some(p) if p.as_os_str() != "-" => p.display().to_string(),
        _ => "stdin".to_owned(),
    }
}

/// Parsed batches (one per chunk of lines, as a rule) and the input bytes
/// they came from.
type Parsed = anyhow::Result<(Vec<RecordBatch>, usize)>;

/// The Arrow decoder of one input format, built once per run.
/// One per run: the size difference between variants does not matter, but
/// the CSV one is boxed to keep the enum small.
enum Decoder {
    Csv(Box<arrow_csv::reader::Decoder>),
    Json(arrow_json::reader::Decoder),
}

impl Decoder {
    fn new(format: InputFormat, schema: &SchemaRef, batch_rows: usize) -> anyhow::Result<Self> {
        Ok(match format {
            InputFormat::Csv => Decoder::Csv(Box::new(
                arrow_csv::ReaderBuilder::new(schema.clone())
                    .with_header(false)
                    .with_batch_size(batch_rows)
                    .build_decoder(),
            )),
            InputFormat::Json => Decoder::Json(
                arrow_json::ReaderBuilder::new(schema.clone())
                    .with_batch_size(batch_rows)
                    // A key the table does not have is a mistake to report,
                    // not a value to drop silently.
                    .with_strict_mode(true)
                    .build_decoder()?,
            ),
        })
    }

    /// Decodes `bytes` (whole lines, each ending in `\n`) into batches:
    /// one, unless a line holds several JSON objects and the chunk so more
    /// records than a batch takes.
    fn decode_all(&mut self, mut bytes: &[u8]) -> Result<Vec<RecordBatch>, ArrowError> {
        let mut out = Vec::with_capacity(1);
        while !bytes.is_empty() {
            let read = match self {
                Decoder::Csv(d) => d.decode(bytes)?,
                Decoder::Json(d) => d.decode(bytes)?,
            };
            bytes = &bytes[read..];
            if read == 0 {
                // The decoder holds a full batch: take it to make room.
                match self.flush()? {
                    Some(batch) => out.push(batch),
                    None => {
                        return Err(ArrowError::ParseError(
                            "the decoder accepts no more input".to_owned(),
                        ))
                    }
                }
            }
        }
        out.extend(self.flush()?);
        Ok(out)
    }

    fn flush(&mut self) -> Result<Option<RecordBatch>, ArrowError> {
        match self {
            Decoder::Csv(d) => d.flush(),
            Decoder::Json(d) => d.flush(),
        }
    }
}

/// Reads lines in chunks of `batch_rows`, decodes each chunk into a batch,
/// and finds the line at fault when a chunk does not decode.
struct LineParser {
    format: InputFormat,
    schema: SchemaRef,
    batch_rows: usize,
    header: bool,
    decoder: Decoder,
    /// Column names in input order (the table's unless a header reorders
    /// them), for the header check and error messages.
    columns: Vec<String>,
    /// For each table column, its position in the input, when a header put
    /// the columns in another order.
    to_table: Option<Vec<usize>>,
    table: TablePath,
}

impl LineParser {
    fn new(
        format: InputFormat,
        schema: SchemaRef,
        batch_rows: usize,
        header: bool,
        table: &TableInfo,
    ) -> anyhow::Result<Self> {
        let decoder = Decoder::new(format, &schema, batch_rows)?;
        let columns = schema.fields().iter().map(|f| f.name().clone()).collect();
        Ok(Self {
            format,
            schema,
            batch_rows,
            header,
            decoder,
            columns,
            to_table: None,
            table: table.path.clone(),
        })
    }

    /// Parses `input` to its end (or the first error), sending each batch.
    /// Stops early when the receiver is gone (the writer failed).
    fn run(mut self, mut input: Box<dyn BufRead + Send>, tx: mpsc::Sender<Parsed>) {
        let mut chunk = Chunk::default();
        let mut line_number = 0u64;
        if self.header {
            if let Err(e) = self.check_header(&mut input, &mut line_number) {
                let _ = tx.blocking_send(Err(e));
                return;
            }
        }
        loop {
            let more = match chunk.fill(&mut input, self.batch_rows, &mut line_number) {
                Ok(more) => more,
                Err(e) => {
                    let _ = tx.blocking_send(Err(e.into()));
                    return;
                }
            };
            if !chunk.is_empty() {
                let parsed = self.decode_chunk(&chunk).map(|b| (b, chunk.input_bytes));
                let failed = parsed.is_err();
                if tx.blocking_send(parsed).is_err() || failed {
                    return;
                }
            }
            if !more {
                return;
            }
        }
    }

    /// Reads the header line: the table's columns, in any order. Another
    /// order makes the decoder read the input's order and each batch is put
    /// back in the table's (a per-batch column reorder, no copy).
    fn check_header(
        &mut self,
        input: &mut dyn BufRead,
        line_number: &mut u64,
    ) -> anyhow::Result<()> {
        let mut line = String::new();
        input
            .read_line(&mut line)
            .context("reading the header line")?;
        *line_number += 1;
        let names: Vec<&str> = line
            .trim_end_matches(['\n', '\r'])
            .split(',')
            .map(|n| n.trim().trim_matches('"'))
            .collect();
        if names == self.columns {
            return Ok(());
        }
        let positions: Option<Vec<usize>> = names
            .iter()
            .map(|n| self.columns.iter().position(|c| c == n))
            .collect();
        let is_permutation = positions.as_ref().is_some_and(|p| {
            let mut sorted = p.clone();
            sorted.sort_unstable();
            sorted.dedup();
            sorted.len() == self.columns.len() && p.len() == self.columns.len()
        });
        let Some(positions) = positions.filter(|_| is_permutation) else {
            bail!(
                "line 1: the header names columns ({}) but {} has ({}): name each once",
                names.join(","),
                self.table,
                self.columns.join(",")
            );
        };
        let input_schema = Arc::new(self.schema.project(&positions)?);
        self.to_table = Some(
            (0..self.columns.len())
                .map(|c| positions.iter().position(|&p| p == c).unwrap_or(c))
                .collect(),
        );
        self.columns = names.iter().map(|n| (*n).to_owned()).collect();
        self.schema = input_schema;
        self.decoder = Decoder::new(self.format, &self.schema, self.batch_rows)?;
        Ok(())
    }

    fn decode_chunk(&mut self, chunk: &Chunk) -> anyhow::Result<Vec<RecordBatch>> {
        match self.decoder.decode_all(&chunk.bytes) {
            Ok(batches) => match &self.to_table {
                None => Ok(batches),
                Some(order) => Ok(batches
                    .iter()
                    .map(|b| b.project(order))
                    .collect::<Result<_, _>>()?),
            },
            Err(chunk_error) => {
                // The decoder may hold half a batch now: start afresh, and
                // decode line by line to name the line at fault (error path only).
                self.decoder = Decoder::new(self.format, &self.schema, self.batch_rows)?;
                for (number, range) in chunk.lines() {
                    let mut single = Decoder::new(self.format, &self.schema, self.batch_rows)?;
                    if let Err(e) = single.decode_all(&chunk.bytes[range]) {
                        bail!("line {number}: {}", self.describe(&e));
                    }
                }
                bail!(
                    "lines {}..={}: {}",
                    chunk.first_line(),
                    chunk.last_line(),
                    self.describe(&chunk_error)
                )
            }
        }
    }

    /// The decoder's message with the column named: arrow-csv says "for
    /// column <index> at line <line within the batch>", which would mislead.
    fn describe(&self, error: &ArrowError) -> String {
        let message = error.to_string();
        let Some(at) = message.find(" for column ") else {
            return message;
        };
        let digits: String = message[at + " for column ".len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        match digits
            .parse::<usize>()
            .ok()
            .and_then(|i| self.columns.get(i))
        {
            Some(name) => format!("column {name}: {}", &message[..at]),
            None => message,
        }
    }
}

/// A batch's worth of input lines, each ending in `\n`, with their line
/// numbers. Its buffers are reused chunk after chunk.
#[derive(Default)]
struct Chunk {
    bytes: Vec<u8>,
    /// `(line number, end offset in bytes)` of each non-blank line.
    lines: Vec<(u64, usize)>,
    /// Input bytes read for this chunk, blank lines included.
    input_bytes: usize,
}

impl Chunk {
    /// Reads up to `max_lines` non-blank lines; returns whether input remains.
    fn fill(
        &mut self,
        input: &mut dyn BufRead,
        max_lines: usize,
        line_number: &mut u64,
    ) -> std::io::Result<bool> {
        self.bytes.clear();
        self.lines.clear();
        self.input_bytes = 0;
        while self.lines.len() < max_lines {
            let start = self.bytes.len();
            let read = input.read_until(b'\n', &mut self.bytes)?;
            if read == 0 {
                return Ok(false);
            }
            *line_number += 1;
            self.input_bytes += read;
            if self.bytes[start..].iter().all(u8::is_ascii_whitespace) {
                self.bytes.truncate(start);
                continue;
            }
            if self.bytes.last() != Some(&b'\n') {
                self.bytes.push(b'\n');
            }
            self.lines.push((*line_number, self.bytes.len()));
        }
        Ok(true)
    }

    fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    fn first_line(&self) -> u64 {
        self.lines.first().map_or(0, |l| l.0)
    }

    fn last_line(&self) -> u64 {
        self.lines.last().map_or(0, |l| l.0)
    }

    /// Each line's number and byte range.
    fn lines(&self) -> impl Iterator<Item = (u64, std::ops::Range<usize>)> + '_ {
        let mut start = 0;
        self.lines.iter().map(move |&(number, end)| {
            let range = start..end;
            start = end;
            (number, range)
        })
    }
}
