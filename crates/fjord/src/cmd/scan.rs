//! `fjord scan`: a table to stdout as a pretty table, CSV or JSON lines.
//!
//! A log table is read from its log, as below. A primary-key table is read
//! as its current rows by default: every bucket (of every partition, or of
//! `--partition`; or `--bucket`) in key order, a bucket at a time, through
//! a ScanKv session (each bucket a snapshot as of its first batch), or with
//! `--limit` up to [`LIMIT_SCAN_ROWS_MAX`] through LimitScan (one request a
//! bucket, until the limit is reached). `--changelog` reads a primary-key
//! table's changelog instead, as a log table's log, with a change-type
//! column `_change_type` (`+I`, `-U`, `+U`, `-D`; `+A` in a log table) first.
//!
//! Every bucket (of every partition that exists when the scan starts, or of
//! `--partition`; following, partitions created later join within
//! [`PARTITION_DISCOVERY_INTERVAL`], from their first record) is read from `--from` (earliest, latest, an offset, or the
//! first record committed at or after a timestamp) with the native log
//! scanner, `--columns` pushed to the server as a projection (in the order
//! given). Without `--follow` the scan ends when each bucket reached the high
//! watermark it had when the scan started, so a scan of a table that keeps
//! growing still terminates; `--limit` ends it sooner. Output is written per
//! batch; a closed stdout (`fjord scan ... | head`) ends the scan quietly.
//!
//! Also home of what `fjord produce` shares with it: the bootstrap
//! connection, table-path parsing and the progress line.

use std::cell::Cell;
use std::collections::{BTreeMap, HashSet};
use std::io::{BufWriter, Write};
use std::rc::Rc;
use std::time::{Duration, Instant};

use std::sync::Arc;

use anyhow::{bail, Context};
use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use fjord_client::kv::scan::KV_SCAN_FETCH_BYTES_DEFAULT;
use fjord_client::scanner::{ScanBucket, StartOffset};
use fjord_client::{
    ChangeType, FlussClient, KvBucket, KvRows, LogScanner, ScanBatch, ScannerConfig, TableInfo,
    TablePath,
};

use super::progress::Progress;

/// Where the server is when `--bootstrap` is not given (Fluss's default port).
pub const DEFAULT_BOOTSTRAP: &str = "127.0.0.1:9123";

/// How long connecting to one bootstrap server may take before the next is tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How often a `--follow` scan of a partitioned table lists its partitions
/// to pick up new ones: soon enough for a person watching, rarely enough
/// that the listing costs the coordinator nothing.
const PARTITION_DISCOVERY_INTERVAL: Duration = Duration::from_secs(1);

/// Rows the `table` format lays out together: column widths are computed per
/// group, so memory stays bounded however long the scan.
const TABLE_GROUP_ROWS: usize = 1_000;

/// Most rows a `--limit` scan of a primary-key table's current rows asks
/// of one bucket with LimitScan (whose answer holds them all at once); a
/// larger limit streams the buckets through ScanKv and stops there.
pub const LIMIT_SCAN_ROWS_MAX: u64 = 16 * 1024;

/// The change-type column `--changelog` puts first.
pub const CHANGE_TYPE_COLUMN: &str = "_change_type";

/// Output formats of `fjord scan`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// A bordered text table, for people.
    Table,
    /// CSV with a header line.
    Csv,
    /// One JSON object per line.
    Json,
}

/// Arguments of `fjord scan`.
#[derive(clap::Args)]
pub struct Args {
    /// Server(s) to bootstrap from, `host:port[,host:port...]`; each is tried in turn.
    #[arg(long, default_value = DEFAULT_BOOTSTRAP)]
    bootstrap: String,
    /// The table to read, `database.table`.
    #[arg(long)]
    table: String,
    /// Where to start in every bucket: `earliest` (the default), `latest`,
    /// an offset, or `ts:MILLIS` (the first record committed at or after
    /// that time). A log, or a primary-key table's changelog.
    #[arg(long)]
    from: Option<String>,
    /// Columns to read, comma-separated, in the order to print them.
    #[arg(long, value_delimiter = ',')]
    columns: Option<Vec<String>>,
    /// Stop after this many rows.
    #[arg(long)]
    limit: Option<u64>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    format: OutputFormat,
    /// Read only this partition (by name, e.g. `20261130` or `2026$eu`) of a
    /// partitioned table; without it every partition that exists at the
    /// start is read (and, with --follow, every partition created later).
    #[arg(long)]
    partition: Option<String>,
    /// Read only this bucket (of every partition read).
    #[arg(long)]
    bucket: Option<i32>,
    /// A primary-key table: read its changelog (with a `_change_type`
    /// column first) instead of its current rows.
    #[arg(long)]
    changelog: bool,
    /// Keep reading new records after the end (until interrupted or
    /// --limit). A log, or a primary-key table's changelog.
    #[arg(long)]
    follow: bool,
    /// A scanner option, `key=value` with Fluss's option names (e.g.
    /// `client.scanner.log.fetch.max-bytes=32mb`); repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// No progress line on stderr.
    #[arg(long, short)]
    quiet: bool,
}

/// Runs `fjord scan`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let path = parse_table_path(&args.table)?;
    let start = parse_start(args.from.as_deref().unwrap_or("earliest"))?;
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(scan(&args, path, start))
}

/// Parses `database.table`.
pub fn parse_table_path(text: &str) -> anyhow::Result<TablePath> {
    match text.split_once('.') {
        Some((db, table)) if !db.is_empty() && !table.is_empty() && !table.contains('.') => {
            Ok(TablePath::new(db, table))
        }
        _ => bail!("--table {text:?} is not of the form database.table"),
    }
}

/// Connects a client to the first reachable server of a comma-separated
/// bootstrap list (the client tries each in turn).
pub async fn connect(bootstrap: &str) -> anyhow::Result<FlussClient> {
    let servers: Vec<String> = bootstrap
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(str::to_owned)
        .collect();
    if servers.is_empty() {
        bail!("--bootstrap {bootstrap:?} names no server");
    }
    match tokio::time::timeout(CONNECT_TIMEOUT, FlussClient::connect(&servers)).await {
        Ok(client) => Ok(client?),
        Err(_) => bail!("no answer from {bootstrap} within {CONNECT_TIMEOUT:?}"),
    }
}

fn parse_start(text: &str) -> anyhow::Result<StartOffset> {
    Ok(match text {
        "earliest" => StartOffset::Earliest,
        "latest" => StartOffset::Latest,
        _ => match text.strip_prefix("ts:") {
            Some(ms) => StartOffset::Timestamp(ms.parse().with_context(|| {
                format!("--from {text:?}: ts: takes milliseconds since the epoch")
            })?),
            None => match text.parse::<i64>() {
                Ok(offset) if offset >= 0 => StartOffset::Offset(offset),
                _ => bail!(
                    "--from {text:?} is not earliest, latest, a non-negative offset or ts:MILLIS"
                ),
            },
        },
    })
}

/// Column indexes of `names` in the table, in the order given.
fn projection(table: &TableInfo, names: &[String]) -> anyhow::Result<Vec<usize>> {
    let columns = table.descriptor.schema().columns();
    names
        .iter()
        .map(|name| {
            columns
                .iter()
                .position(|c| c.name == *name)
                .with_context(|| {
                    let all: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
                    format!(
                        "--columns: {} has no column {name:?} (it has {})",
                        table.path,
                        all.join(", ")
                    )
                })
        })
        .collect()
}

async fn scan(args: &Args, path: TablePath, start: StartOffset) -> anyhow::Result<()> {
    let client = connect(&args.bootstrap).await?;
    let table = client
        .table_info(&path)
        .await
        .with_context(|| format!("cannot find table {path}"))?;
    if let Some(bucket) = args.bucket {
        if !(0..table.bucket_count()).contains(&bucket) {
            bail!(
                "--bucket {bucket}: {path} has buckets 0 to {}",
                table.bucket_count() - 1
            );
        }
    }
    if table.descriptor.has_primary_key() && !args.changelog {
        return scan_state(args, &client, &table).await;
    }
    let mut config = ScannerConfig::from_options(
        args.set
            .iter()
            .map(|kv| kv.split_once('=').unwrap_or((kv.as_str(), ""))),
    )?;
    config.projection = args
        .columns
        .as_deref()
        .map(|names| projection(&table, names))
        .transpose()?;
    let mut scanner = subscribe(&client, &table, config, args, start).await?;

    let closed = Rc::new(Cell::new(false));
    let stdout = Stdout {
        inner: BufWriter::new(std::io::stdout().lock()),
        closed: closed.clone(),
    };
    let mut sink = Sink::new(args.format, stdout);
    let mut progress = Progress::new("read", args.quiet);
    let mut remaining = args.limit.unwrap_or(u64::MAX);
    let mut done = Vec::new();
    let mut changelog_schema = None;
    // Following all partitions of a partitioned table, new ones join the scan.
    let discover = args.follow && table.is_partitioned() && args.partition.is_none();
    while remaining > 0 && (discover || scanner.subscriptions().next().is_some()) {
        if discover {
            scanner.discover_partitions(&client, args).await?;
            if scanner.subscriptions().next().is_none() {
                // Nothing to fetch yet: wait for the next listing.
                tokio::time::sleep(PARTITION_DISCOVERY_INTERVAL).await;
                continue;
            }
        }
        let batches = scanner.poll().await?;
        for scanned in &batches {
            let mut records = match args.changelog {
                true => with_change_types(scanned, &mut changelog_schema)?,
                false => scanned.records().clone(),
            };
            if records.num_rows() as u64 > remaining {
                records = records.slice(0, remaining as usize);
            }
            remaining -= records.num_rows() as u64;
            // No byte count: Arrow memory sizes count whole shared buffers, not
            // the bytes of these rows, and would overstate what was read.
            progress.add(records.num_rows(), 0);
            if let Err(e) = sink.write(&records) {
                progress.clear();
                // A reader that went away (`| head`) ends the scan quietly.
                return if closed.get() { Ok(()) } else { Err(e) };
            }
            if remaining == 0 {
                break;
            }
        }
        if args.follow && !batches.is_empty() {
            // Following, rows are shown as they arrive, not when a buffer fills.
            if let Err(e) = sink.flush_pending() {
                progress.clear();
                return if closed.get() { Ok(()) } else { Err(e) };
            }
        }
        // A bucket that reached the end it had at the start is done.
        done.clear();
        done.extend(scanner.subscriptions().filter(|&key| {
            let end = scanner.end(key);
            scanner.position(key).is_some_and(|p| p >= end)
        }));
        for &key in &done {
            scanner.unsubscribe(key);
        }
    }
    progress.clear();
    match sink.finish() {
        Err(_) if closed.get() => Ok(()),
        other => other,
    }
}

/// `scanned`'s records with the change-type column first; `schema` is
/// the result's, made on the first call (the columns never change).
fn with_change_types(
    scanned: &ScanBatch,
    schema: &mut Option<SchemaRef>,
) -> anyhow::Result<RecordBatch> {
    let records = scanned.records();
    let schema = schema.get_or_insert_with(|| {
        let mut fields = vec![Arc::new(Field::new(
            CHANGE_TYPE_COLUMN,
            DataType::Utf8,
            false,
        ))];
        fields.extend(records.schema().fields().iter().cloned());
        Arc::new(Schema::new(fields))
    });
    let types = StringArray::from_iter_values(
        (0..records.num_rows()).map(|i| change_type_name(scanned.change_type(i))),
    );
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(records.num_columns() + 1);
    columns.push(Arc::new(types));
    columns.extend(records.columns().iter().cloned());
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

/// Fluss's short string of a change type.
fn change_type_name(change: ChangeType) -> &'static str {
    match change {
        ChangeType::AppendOnly => "+A",
        ChangeType::Insert => "+I",
        ChangeType::UpdateBefore => "-U",
        ChangeType::UpdateAfter => "+U",
        ChangeType::Delete => "-D",
    }
}

/// Prints the current rows of primary-key table `table`: every bucket to
/// read, one after the other, through LimitScan (`--limit` up to
/// [`LIMIT_SCAN_ROWS_MAX`]) or a ScanKv session.
async fn scan_state(args: &Args, client: &FlussClient, table: &TableInfo) -> anyhow::Result<()> {
    if args.from.is_some() || args.follow {
        bail!(
            "{} is a primary-key table, read as its current rows: --from and --follow read its changelog, with --changelog",
            table.path
        );
    }
    let projection = args
        .columns
        .as_deref()
        .map(|names| projection(table, names))
        .transpose()?;
    let buckets = kv_buckets(client, table, args).await?;
    let closed = Rc::new(Cell::new(false));
    let stdout = Stdout {
        inner: BufWriter::new(std::io::stdout().lock()),
        closed: closed.clone(),
    };
    let mut out = StateOut {
        sink: Sink::new(args.format, stdout),
        progress: Progress::new("read", args.quiet),
        projection,
        remaining: args.limit.unwrap_or(u64::MAX),
    };
    let by_limit_scan = args.limit.is_some_and(|l| l <= LIMIT_SCAN_ROWS_MAX);
    for bucket in buckets {
        if out.remaining == 0 {
            break;
        }
        let written = if by_limit_scan {
            // At most LIMIT_SCAN_ROWS_MAX, so it fits an i32.
            let limit = out.remaining as i32;
            let rows = client.limit_scan(table, bucket, limit).await?;
            out.write(&rows)
        } else {
            let mut scanner = client
                .kv_scanner(table, bucket, KV_SCAN_FETCH_BYTES_DEFAULT)
                .await?;
            let mut written = Ok(());
            while out.remaining > 0 && written.is_ok() {
                match scanner.next_batch().await? {
                    Some(rows) => written = out.write(&rows),
                    None => break,
                }
            }
            written
        };
        if let Err(e) = written {
            out.progress.clear();
            // A reader that went away (`| head`) ends the scan quietly.
            return if closed.get() { Ok(()) } else { Err(e) };
        }
    }
    out.progress.clear();
    match out.sink.finish() {
        Err(_) if closed.get() => Ok(()),
        other => other,
    }
}

/// Where a state scan's rows go, and how many more may.
struct StateOut<W: Write> {
    sink: Sink<W>,
    progress: Progress,
    projection: Option<Vec<usize>>,
    remaining: u64,
}

impl<W: Write> StateOut<W> {
    /// Prints `rows` (projected, cut at the limit).
    fn write(&mut self, rows: &KvRows) -> anyhow::Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let mut batch = rows.to_record_batch()?;
        if let Some(columns) = &self.projection {
            batch = batch.project(columns)?;
        }
        if batch.num_rows() as u64 > self.remaining {
            batch = batch.slice(0, self.remaining as usize);
        }
        self.remaining -= batch.num_rows() as u64;
        self.progress.add(batch.num_rows(), 0);
        self.sink.write(&batch)
    }
}

/// The buckets a state scan reads: of the table, or of every partition
/// (or `--partition`); all of them, or `--bucket`.
async fn kv_buckets(
    client: &FlussClient,
    table: &TableInfo,
    args: &Args,
) -> anyhow::Result<Vec<KvBucket>> {
    let buckets: Vec<i32> = match args.bucket {
        Some(bucket) => vec![bucket],
        None => (0..table.bucket_count()).collect(),
    };
    if !table.is_partitioned() {
        if let Some(name) = &args.partition {
            bail!(
                "{} is not partitioned: --partition {name:?} does not apply",
                table.path
            );
        }
        return Ok(buckets.into_iter().map(KvBucket::new).collect());
    }
    let mut partitions = client.admin().list_partitions(&table.path, None).await?;
    if let Some(name) = &args.partition {
        partitions.retain(|p| p.name == *name);
        if partitions.is_empty() {
            bail!(
                "{} has no partition {name:?} (see fjord partitions list)",
                table.path
            );
        }
    }
    Ok(partitions
        .iter()
        .flat_map(|p| {
            buckets
                .iter()
                .map(|&b| KvBucket::of_partition(p.partition_id, b))
        })
        .collect())
}

/// A scanner with its end offsets: the high watermark each bucket had when
/// the scan started (`i64::MAX` with `--follow`).
struct Scan {
    scanner: LogScanner,
    ends: BTreeMap<ScanBucket, i64>,
    /// Partitions subscribed so far (all of whose buckets were considered).
    partitions: HashSet<i64>,
    /// When partitions were last listed (partitioned tables, `--follow`).
    listed_at: Instant,
}

impl std::ops::Deref for Scan {
    type Target = LogScanner;
    fn deref(&self) -> &LogScanner {
        &self.scanner
    }
}

impl std::ops::DerefMut for Scan {
    fn deref_mut(&mut self) -> &mut LogScanner {
        &mut self.scanner
    }
}

impl Scan {
    fn end(&self, key: ScanBucket) -> i64 {
        self.ends.get(&key).copied().unwrap_or(i64::MAX)
    }
}

/// Subscribes every bucket (of every partition, or of `--partition`) from
/// `start`, skipping buckets with nothing between the start and the end.
async fn subscribe(
    client: &FlussClient,
    table: &TableInfo,
    config: ScannerConfig,
    args: &Args,
    start: StartOffset,
) -> anyhow::Result<Scan> {
    if !table.is_partitioned() {
        if let Some(name) = &args.partition {
            bail!(
                "{} is not partitioned: --partition {name:?} does not apply",
                table.path
            );
        }
        let route = client.table_route(table).await?;
        let mut scan = Scan {
            scanner: LogScanner::new(table.clone(), route, config)?.with_client(client.clone()),
            ends: BTreeMap::new(),
            partitions: HashSet::new(),
            listed_at: Instant::now(),
        };
        for bucket in 0..table.bucket_count() {
            if args.bucket.is_some_and(|b| b != bucket) {
                continue;
            }
            let from = scan.resolve_offset(bucket, start).await?;
            let end = match args.follow {
                true => i64::MAX,
                false => scan.resolve_offset(bucket, StartOffset::Latest).await?,
            };
            if from < end {
                scan.subscribe(bucket, from)?;
            }
            scan.ends.insert(ScanBucket::new(bucket), end);
        }
        return Ok(scan);
    }
    let mut partitions = client.admin().list_partitions(&table.path, None).await?;
    if let Some(name) = &args.partition {
        partitions.retain(|p| p.name == *name);
        if partitions.is_empty() {
            bail!(
                "{} has no partition {name:?} (see fjord partitions list)",
                table.path
            );
        }
    }
    let mut scan = Scan {
        scanner: LogScanner::new_partitioned(table.clone(), config)?.with_client(client.clone()),
        ends: BTreeMap::new(),
        partitions: HashSet::new(),
        listed_at: Instant::now(),
    };
    for partition in &partitions {
        scan.add_partition(client, partition.partition_id, start, args)
            .await?;
    }
    Ok(scan)
}

impl Scan {
    /// Subscribes every bucket of one partition (or `--bucket`) from
    /// `start`, up to its current end unless following.
    async fn add_partition(
        &mut self,
        client: &FlussClient,
        id: i64,
        start: StartOffset,
        args: &Args,
    ) -> anyhow::Result<()> {
        let follow = args.follow;
        let route = client.partition_route(self.table(), id).await?;
        for bucket in 0..route.bucket_count() {
            if args.bucket.is_some_and(|b| b != bucket) {
                continue;
            }
            let from = self
                .resolve_partition_offset(id, &route, bucket, start)
                .await?;
            let end = match follow {
                true => i64::MAX,
                false => {
                    self.resolve_partition_offset(id, &route, bucket, StartOffset::Latest)
                        .await?
                }
            };
            if from < end {
                self.subscribe_partition(id, route.clone(), bucket, from)?;
            }
            self.ends.insert(ScanBucket::of_partition(id, bucket), end);
        }
        self.partitions.insert(id);
        Ok(())
    }

    /// Following every partition of a partitioned table: subscribes the
    /// partitions created since the last listing (from their first record),
    /// at most every [`PARTITION_DISCOVERY_INTERVAL`].
    async fn discover_partitions(
        &mut self,
        client: &FlussClient,
        args: &Args,
    ) -> anyhow::Result<()> {
        if self.listed_at.elapsed() < PARTITION_DISCOVERY_INTERVAL {
            return Ok(());
        }
        self.listed_at = Instant::now();
        let path = self.table().path.clone();
        for partition in client.admin().list_partitions(&path, None).await? {
            if !self.partitions.contains(&partition.partition_id) {
                self.add_partition(client, partition.partition_id, StartOffset::Earliest, args)
                    .await?;
            }
        }
        Ok(())
    }
}

/// Stdout that remembers whether the reader went away: the CSV writer turns
/// I/O errors into text, so the kind is recorded here, where it is known.
/// `fjord lookup` prints through it too.
pub(crate) struct Stdout<W: Write> {
    inner: W,
    closed: Rc<Cell<bool>>,
}

impl<W: Write> Write for Stdout<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.inner.write(buf).inspect_err(|e| self.note(e))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush().inspect_err(|e| self.note(e))
    }
}

impl<W: Write> Stdout<W> {
    /// `inner`, setting `closed` once a write meets a closed pipe.
    pub(crate) fn new(inner: W, closed: Rc<Cell<bool>>) -> Self {
        Self { inner, closed }
    }

    fn note(&self, error: &std::io::Error) {
        if error.kind() == std::io::ErrorKind::BrokenPipe {
            self.closed.set(true);
        }
    }
}

/// Where scanned batches go, in the chosen format. One per run; the CSV
/// writer is boxed to keep the enum small. `fjord lookup` prints with it too.
pub(crate) enum Sink<W: Write> {
    Table(TableSink<W>),
    Csv(Box<arrow_csv::Writer<W>>),
    Json(arrow_json::LineDelimitedWriter<W>),
}

impl<W: Write> Sink<W> {
    /// A sink of `format` writing to `out`.
    pub(crate) fn new(format: OutputFormat, out: W) -> Self {
        match format {
            OutputFormat::Table => Sink::Table(TableSink::new(out)),
            OutputFormat::Csv => Sink::Csv(Box::new(
                arrow_csv::WriterBuilder::new().with_header(true).build(out),
            )),
            OutputFormat::Json => Sink::Json(arrow_json::LineDelimitedWriter::new(out)),
        }
    }

    /// Writes `batch` (the table format may hold its rows back for a group).
    pub(crate) fn write(&mut self, batch: &RecordBatch) -> anyhow::Result<()> {
        match self {
            Sink::Table(t) => t.write(batch)?,
            Sink::Csv(w) => w.write(batch)?,
            Sink::Json(w) => w.write(batch)?,
        }
        Ok(())
    }

    /// Writes out what is buffered (a partial table group included).
    fn flush_pending(&mut self) -> anyhow::Result<()> {
        match self {
            Sink::Table(t) => {
                if !t.rows.is_empty() {
                    t.print_group()?;
                }
                t.out.flush()?;
            }
            // The CSV writer flushes its output after every batch.
            Sink::Csv(_) => {}
            Sink::Json(w) => w.get_mut().flush()?,
        }
        Ok(())
    }

    /// Writes out everything held back and flushes the output.
    pub(crate) fn finish(self) -> anyhow::Result<()> {
        match self {
            Sink::Table(t) => t.finish()?,
            Sink::Csv(w) => w.into_inner().flush()?,
            Sink::Json(mut w) => {
                w.finish()?;
                w.into_inner().flush()?;
            }
        }
        Ok(())
    }
}

/// A bordered text table, printed a group of [`TABLE_GROUP_ROWS`] rows at a
/// time. Cells are formatted to text once each (this format is for people
/// and small outputs; CSV and JSON stream without it).
pub(crate) struct TableSink<W: Write> {
    out: W,
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    options: FormatOptions<'static>,
}

impl<W: Write> TableSink<W> {
    fn new(out: W) -> Self {
        Self {
            out,
            header: Vec::new(),
            rows: Vec::new(),
            options: FormatOptions::default().with_null("NULL"),
        }
    }

    fn write(&mut self, batch: &RecordBatch) -> anyhow::Result<()> {
        if self.header.is_empty() {
            self.header = batch
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect();
        }
        let formatters = batch
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &self.options))
            .collect::<Result<Vec<_>, _>>()?;
        for row in 0..batch.num_rows() {
            self.rows.push(
                formatters
                    .iter()
                    .map(|f| f.value(row).to_string())
                    .collect(),
            );
            if self.rows.len() >= TABLE_GROUP_ROWS {
                self.print_group()?;
            }
        }
        Ok(())
    }

    fn print_group(&mut self) -> std::io::Result<()> {
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        // The formatter pads to a width in chars, as measured above: no
        // padding string is allocated per cell.
        let rule = |out: &mut W| -> std::io::Result<()> {
            for &w in &widths {
                write!(out, "+{:-<width$}", "", width = w + 2)?;
            }
            writeln!(out, "+")
        };
        let line = |out: &mut W, cells: &[String]| -> std::io::Result<()> {
            for (cell, &w) in cells.iter().zip(&widths) {
                write!(out, "| {cell:<w$} ")?;
            }
            writeln!(out, "|")
        };
        rule(&mut self.out)?;
        line(&mut self.out, &self.header)?;
        rule(&mut self.out)?;
        for row in &self.rows {
            line(&mut self.out, row)?;
        }
        rule(&mut self.out)?;
        self.rows.clear();
        Ok(())
    }

    fn finish(mut self) -> std::io::Result<()> {
        if self.header.is_empty() {
            // Nothing was read: say so rather than print nothing.
            writeln!(self.out, "(no rows)")?;
        } else if !self.rows.is_empty() {
            self.print_group()?;
        }
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_offsets_parse_from_every_spelling() {
        let check = |text: &str, expected: StartOffset| {
            assert_eq!(parse_start(text).unwrap(), expected, "{text}");
        };
        check("earliest", StartOffset::Earliest);
        check("latest", StartOffset::Latest);
        check("42", StartOffset::Offset(42));
        check(
            "ts:1700000000000",
            StartOffset::Timestamp(1_700_000_000_000),
        );
        for bad in ["-1", "ts:soon", "first", ""] {
            assert!(parse_start(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn table_output_pads_cells_to_their_columns_widest_in_characters() {
        use std::sync::Arc;

        use arrow_array::{Int64Array, StringArray};

        let batch = RecordBatch::try_from_iter([
            (
                "id",
                Arc::new(Int64Array::from(vec![Some(1), None])) as arrow_array::ArrayRef,
            ),
            (
                "name",
                Arc::new(StringArray::from(vec!["åsa", "bo"])) as arrow_array::ArrayRef,
            ),
        ])
        .unwrap();
        let mut sink = TableSink::new(Vec::new());
        sink.write(&batch).unwrap();
        sink.print_group().unwrap();
        let expected = "\
+------+------+
| id   | name |
+------+------+
| 1    | åsa  |
| NULL | bo   |
+------+------+
";
        assert_eq!(String::from_utf8(sink.out).unwrap(), expected);
    }

    #[test]
    fn table_paths_need_a_database_and_a_table() {
        assert_eq!(parse_table_path("db.t").unwrap(), TablePath::new("db", "t"));
        for bad in ["t", ".t", "db.", "a.b.c"] {
            assert!(parse_table_path(bad).is_err(), "{bad}");
        }
    }
}
