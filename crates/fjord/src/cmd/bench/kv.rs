//! `fjord bench upsert` and `fjord bench lookup`: the primary-key workload
//! through the native upsert writer and lookuper, the same workload and
//! JSON fields as `examples/fluss_rs_kv_bench.rs` (fluss-rs), so the two
//! compare line for line.
//!
//! The workload ([`KvPlan`]): `--keys` distinct keys of `user_behavior`
//! keyed by `(user_id, item_id)`, each written once, in order, and
//! `keys * f / (1 - f)` further writes that update a key written earlier
//! (uniformly at random), spread evenly through the run, so `f`
//! (`--update-fraction`, 0.2) of all writes are updates. Key `k` is
//! `user_id = k / 16` and an `item_id` whose low 4 bits are `k % 16` over a
//! scrambled high part; `category_id = item_id % 9439`, `behavior` from
//! `fjord_format::fixtures::user_behavior_batch`, `ts` a base time plus the
//! write's index. 4 buckets, acks=all, 1 MiB batches by default; the
//! changelog's Arrow compression is NONE unless `--compression` says
//! otherwise.
//!
//! upsert: the timed phase is from the first upsert to the end of the
//! flush; after it, the changelog's end offsets must add up to one record
//! per insert and two per update (Fluss's FULL changelog image).
//!
//! lookup: the table is written first (untimed, by the native writer);
//! then `--lookups` keys drawn uniformly from the written ones are looked
//! up, `--in-flight` outstanding at all times, driven as `--drive` says
//! ([`LookupDrive`]). Each result must be its key's last write (which
//! write that is is found per key before the timed phase, as the fluss-rs
//! example does).
//!
//! CPU: this process's getrusage over the timed phase; the server's
//! utime + stime from `/proc/PID/stat` of the child server (or of
//! `--server-pid` with `--bootstrap`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use arrow_array::cast::AsArray;
use fjord_client::row::{Datum, FieldWriter, InternalRow, Timestamp};
use fjord_client::{
    FlussClient, KvRow, LookupConfig, Lookuper, TableInfo, TablePath, WriterConfig,
};
use fjord_format::schema::{
    DatabaseDescriptor, Schema, TableDescriptor, TableDistribution,
    TABLE_LOG_ARROW_COMPRESSION_TYPE,
};
use fjord_format::types::DataType;
use futures::stream::{FuturesUnordered, StreamExt};

use super::report::{process_cpu, ThreadCpu};
use super::table::BENCH_DATABASE;
use super::workload::Compression;

/// Items per user in the key mapping; a power of two (see [`key_columns`]).
const ITEMS_PER_USER: u64 = 16;
/// Categories, as in `fjord_format::fixtures`.
const CATEGORIES: i64 = 9_439;
/// `ts` of write 0 (2017-11-25, the fixtures' first timestamp).
const BASE_TS_MS: i64 = 1_511_544_070_000;
const BEHAVIORS: [&str; 4] = ["pv", "cart", "fav", "buy"];

/// What the upsert writer is handed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum KvInput {
    /// `[Datum; 5]` rows, the values matched to their columns at run time
    /// (what fluss-rs's `GenericRow` is).
    Rows,
    /// A struct per record whose `write_fields` writes typed fields.
    TypedRows,
}

/// One run's parameters, shared by `upsert` and `lookup`.
pub struct KvRun {
    /// `host:port` of the server.
    pub bootstrap: String,
    /// The server's pid, for its CPU.
    pub server_pid: Option<u32>,
    /// Distinct keys written.
    pub keys: u32,
    /// Share of writes that update a key written before.
    pub update_fraction: f64,
    /// Buckets of the table.
    pub buckets: i32,
    /// The changelog's Arrow compression.
    pub compression: Compression,
    /// Seed of the workload.
    pub seed: u64,
    /// Writer options (`client.writer.*`) over the bench's defaults.
    pub writer_options: Vec<(String, String)>,
    /// Upsert input.
    pub input: KvInput,
    /// Keep the table.
    pub keep_table: bool,
}

/// The workload: which key each write hits, each write's behaviour, and
/// each key's last write. Deterministic in `(keys, update_fraction, seed)`.
pub struct KvPlan {
    /// Key of each write, in write order.
    writes: Vec<u32>,
    /// Index into [`BEHAVIORS`] of each write.
    behaviors: Vec<u8>,
    /// Index of each key's last write.
    last_write: Vec<u32>,
}

impl KvPlan {
    /// The plan of `keys` keys with `update_fraction` of the writes updates.
    pub fn new(keys: u32, update_fraction: f64, seed: u64) -> Self {
        let keys = keys as usize;
        let updates = (keys as f64 * update_fraction / (1.0 - update_fraction)).round() as usize;
        let total = keys + updates;
        let mut rng = SplitMix(seed);
        let mut writes = Vec::with_capacity(total);
        let mut last_write = vec![0u32; keys];
        let (mut written, mut updated) = (0usize, 0usize);
        for w in 0..total {
            let due = (w + 1) * updates / total;
            let update = written == keys || (updated < due && written > 0);
            let k = if update {
                updated += 1;
                (rng.next() % written as u64) as usize
            } else {
                written += 1;
                written - 1
            };
            writes.push(k as u32);
            last_write[k] = w as u32;
        }
        let batch = fjord_format::fixtures::user_behavior_batch(total, seed);
        let behaviors = batch
            .column(3)
            .as_string::<i32>()
            .iter()
            .map(|b| match b {
                Some("cart") => 1,
                Some("fav") => 2,
                Some("buy") => 3,
                _ => 0,
            })
            .collect();
        Self {
            writes,
            behaviors,
            last_write,
        }
    }

    /// Writes in all.
    pub fn writes(&self) -> usize {
        self.writes.len()
    }

    /// Distinct keys.
    pub fn keys(&self) -> usize {
        self.last_write.len()
    }

    /// Write `w` as a row.
    fn row(&self, w: usize) -> BehaviorRow {
        let (user, item) = key_columns(self.writes[w]);
        BehaviorRow {
            user,
            item,
            behavior: BEHAVIORS[self.behaviors[w] as usize],
            ts: BASE_TS_MS + w as i64,
        }
    }

    /// `count` keys drawn uniformly from the written ones, each with what
    /// its lookup must find (its last write), found here, before the
    /// timed phase: read in order while timing, not from tables of
    /// millions of entries at random (two cache misses a lookup, which
    /// were a sixth of the lookup phase's CPU). The fluss-rs example and
    /// `fjord bench lookup` do the same.
    fn lookup_targets(&self, count: usize, seed: u64) -> Vec<Target> {
        let keys = self.last_write.len() as u64;
        let mut rng = SplitMix(seed ^ 0x6C6F_6F6B_7570_7321);
        (0..count)
            .map(|_| {
                let k = (rng.next() % keys) as u32;
                let w = self.last_write[k as usize];
                Target {
                    k,
                    w,
                    behavior: self.behaviors[w as usize],
                }
            })
            .collect()
    }
}

/// One lookup to make: key `k`, whose last write was `w`, of behaviour
/// `behavior` (an index into [`BEHAVIORS`]).
struct Target {
    k: u32,
    w: u32,
    behavior: u8,
}

impl Target {
    /// Whether `row` is the target key's last write: the four columns the
    /// fluss-rs example's check reads (the key columns come from `k`).
    fn check(&self, row: &impl InternalRow) -> Result<(), String> {
        let (k, w) = (self.k, self.w as usize);
        let (user, item) = key_columns(k);
        let read = (row.datum(0), row.datum(1), row.datum(3), row.datum(4));
        let want = (
            Datum::BigInt(user),
            Datum::BigInt(item),
            Datum::String(BEHAVIORS[self.behavior as usize]),
            Datum::Timestamp(Timestamp::from_millis(BASE_TS_MS + w as i64)),
        );
        if read != want {
            return Err(format!(
                "key {k}: read {read:?}, its last write was {want:?}"
            ));
        }
        Ok(())
    }
}

/// `(user_id, item_id)` of key `k`: 16 keys per user, told apart by the
/// item's low 4 bits, over a scrambled high part.
fn key_columns(k: u32) -> (i64, i64) {
    let k = u64::from(k);
    let high = (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as i64;
    (
        (k / ITEMS_PER_USER) as i64,
        high * ITEMS_PER_USER as i64 + (k % ITEMS_PER_USER) as i64,
    )
}

/// splitmix64: a deterministic, dependency-free generator.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// One write of the workload, as a row type of the caller's own.
struct BehaviorRow {
    user: i64,
    item: i64,
    behavior: &'static str,
    ts: i64,
}

impl BehaviorRow {
    fn datums(&self) -> [Datum<'static>; 5] {
        [
            Datum::BigInt(self.user),
            Datum::BigInt(self.item),
            Datum::BigInt(self.item % CATEGORIES),
            Datum::String(self.behavior),
            Datum::Timestamp(Timestamp::from_millis(self.ts)),
        ]
    }
}

impl InternalRow for BehaviorRow {
    fn field_count(&self) -> usize {
        5
    }

    fn datum(&self, pos: usize) -> Datum<'_> {
        self.datums()[pos]
    }

    #[inline]
    fn write_fields(&self, fields: &mut FieldWriter<'_>) {
        fields.bigint(self.user);
        fields.bigint(self.item);
        fields.bigint(self.item % CATEGORIES);
        fields.string(self.behavior);
        fields.timestamp(Timestamp::from_millis(self.ts));
    }
}

/// `user_behavior` with PRIMARY KEY (user_id, item_id), bucketed by it.
fn descriptor(buckets: i32, compression: Compression) -> anyhow::Result<TableDescriptor> {
    let schema = Schema::builder()
        .column("user_id", DataType::bigint().with_nullable(false))
        .column("item_id", DataType::bigint().with_nullable(false))
        .column("category_id", DataType::bigint())
        .column("behavior", DataType::string())
        .column("ts", DataType::timestamp(3)?)
        .primary_key(["user_id", "item_id"])
        .build()?;
    let properties = [(
        TABLE_LOG_ARROW_COMPRESSION_TYPE.to_owned(),
        compression.fluss_name().to_owned(),
    )]
    .into_iter()
    .collect();
    Ok(TableDescriptor::new(
        schema,
        Some("fjord bench primary-key workload".to_owned()),
        Vec::new(),
        Some(TableDistribution {
            bucket_count: Some(buckets),
            bucket_keys: Vec::new(),
        }),
        properties,
        Default::default(),
    )?)
}

/// A fresh table for the run.
async fn create_table(client: &FlussClient, run: &KvRun) -> anyhow::Result<TableInfo> {
    let admin = client.admin();
    admin
        .create_database(BENCH_DATABASE, &DatabaseDescriptor::default(), true)
        .await?;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default();
    let path = TablePath::new(
        BENCH_DATABASE,
        format!(
            "fjord_kv_{}_{}_{stamp}",
            run.compression.name(),
            std::process::id()
        ),
    );
    admin
        .create_table(&path, &descriptor(run.buckets, run.compression)?, false)
        .await?;
    Ok(client.table_info(&path).await?)
}

/// The writer options of the run: 1 MiB batches (the fluss-rs example's
/// default) under `--set`.
fn writer_config(run: &KvRun) -> anyhow::Result<WriterConfig> {
    let mut options = vec![("client.writer.batch-size", "1mb")];
    options.extend(
        run.writer_options
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str())),
    );
    Ok(WriterConfig::from_options(options)?)
}

/// Writes the whole plan through the native upsert writer and flushes;
/// what the writer did, and the CPU split of the timed phase.
async fn write_plan(
    client: &FlussClient,
    table: &TableInfo,
    plan: &KvPlan,
    run: &KvRun,
) -> anyhow::Result<(
    Duration,
    Duration,
    ThreadSplit,
    fjord_client::WriterStats,
    i64,
)> {
    let mut writer = client
        .upsert_writer(&table.path, writer_config(run)?)
        .await?;
    let threads = ThreadCpu::snapshot();
    let (cpu0, wall0) = (process_cpu(), Instant::now());
    match run.input {
        KvInput::Rows => {
            for w in 0..plan.writes() {
                writer.upsert(&plan.row(w).datums()).await?;
            }
        }
        KvInput::TypedRows => {
            for w in 0..plan.writes() {
                writer.upsert(&plan.row(w)).await?;
            }
        }
    }
    writer.flush().await?;
    let (wall, cpu) = (wall0.elapsed(), process_cpu().saturating_sub(cpu0));
    let split = ThreadCpu::snapshot().split(&threads);
    let stats = writer.stats();
    let changelog: i64 = writer
        .log_end_offsets()
        .iter()
        .map(|b| b.log_end_offset)
        .sum();
    writer.close().await?;
    Ok((
        wall,
        cpu,
        ThreadSplit {
            caller_ns: split.caller_ns,
            runtime_ns: split.runtime_ns + split.other_ns + split.encoder_ns,
        },
        stats,
        changelog,
    ))
}

/// CPU of the run by thread kind.
struct ThreadSplit {
    caller_ns: u64,
    runtime_ns: u64,
}

/// Runs `fjord bench upsert`; returns its JSON line.
pub async fn upsert(run: &KvRun) -> anyhow::Result<String> {
    let client = FlussClient::connect(std::slice::from_ref(&run.bootstrap)).await?;
    let table = create_table(&client, run).await?;
    let plan = KvPlan::new(run.keys, run.update_fraction, run.seed);
    eprintln!(
        "upsert: {} writes of {} keys ({} updates) into {}, {} buckets",
        plan.writes(),
        plan.keys(),
        plan.writes() - plan.keys(),
        table.path,
        run.buckets
    );
    let server0 = server_cpu(run.server_pid)?;
    let (wall, cpu, split, stats, changelog) = write_plan(&client, &table, &plan, run).await?;
    let server = server_cpu(run.server_pid)?.zip(server0).map(|(b, a)| b - a);
    let updates = plan.writes() - plan.keys();
    let expected = (plan.keys() + 2 * updates) as i64;
    if changelog != expected {
        bail!(
            "the changelog of {} ends at {changelog} records in all; {} inserts and {updates} updates make {expected}",
            table.path,
            plan.keys()
        );
    }
    if !run.keep_table {
        client.admin().drop_table(&table.path, true).await?;
    }
    let n = plan.writes() as f64;
    let secs = wall.as_secs_f64();
    let batch_size = writer_config(run)?.batch_size_bytes;
    Ok(format!(
        "{{\"bench\":\"upsert\",\"client\":\"fjord\",\"input\":\"{}\",\"compression\":\"{}\",\
         \"records\":{},\"keys\":{},\"updates\":{updates},\"buckets\":{},\"batch_size\":{batch_size},\
         \"secs\":{secs:.3},\"records_per_s\":{:.0},\"client_cpu_ns_per_record\":{:.1},\
         \"server_cpu_ns_per_record\":{},\"caller_cpu_ns_per_record\":{:.1},\
         \"runtime_cpu_ns_per_record\":{:.1},\"batches\":{},\"retries\":{},\"throttles\":{},\
         \"max_buffered_mb\":{:.1}}}",
        match run.input {
            KvInput::Rows => "rows",
            KvInput::TypedRows => "typed_rows",
        },
        run.compression.name(),
        plan.writes(),
        plan.keys(),
        run.buckets,
        n / secs,
        cpu.as_nanos() as f64 / n,
        per(server, n),
        split.caller_ns as f64 / n,
        split.runtime_ns as f64 / n,
        stats.batches,
        stats.retries,
        stats.throttles,
        stats.max_buffered_bytes as f64 / 1e6,
    ))
}

/// `ns per unit` of an optional CPU time, as JSON (`null` when unknown).
fn per(cpu: Option<Duration>, n: f64) -> String {
    cpu.map_or("null".to_owned(), |c| {
        format!("{:.1}", c.as_nanos() as f64 / n)
    })
}

/// How `fjord bench lookup` keeps its lookups outstanding; the fluss-rs
/// example has the same two ways.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LookupDrive {
    /// One task per lookup in flight, each awaiting its lookup and then
    /// starting the next (a service whose requests each look a key up).
    /// The runtime wakes a task per answer, on whichever worker is free.
    Tasks,
    /// One task keeps every lookup in flight in a `FuturesUnordered`,
    /// starting the next as each finishes (a stream of keys enriched in
    /// order of arrival). Answers wake that one task.
    Stream,
}

impl LookupDrive {
    /// The name in the JSON line.
    fn name(self) -> &'static str {
        match self {
            LookupDrive::Tasks => "tasks",
            LookupDrive::Stream => "stream",
        }
    }
}

/// What one lookup task measured.
struct Worker {
    latencies_ns: Vec<u64>,
    errors: usize,
    first_error: Option<String>,
}

impl Worker {
    fn new() -> Self {
        Self {
            latencies_ns: Vec::new(),
            errors: 0,
            first_error: None,
        }
    }

    /// Records one lookup of `target`: its latency, and a problem when the
    /// row is not the target's last write.
    fn record(
        &mut self,
        target: &Target,
        latency: Duration,
        result: fjord_client::Result<Option<KvRow>>,
    ) {
        self.latencies_ns.push(latency.as_nanos() as u64);
        let k = target.k;
        let problem = match result {
            Ok(Some(row)) => target.check(&row).err(),
            Ok(None) => {
                let (user, item) = key_columns(k);
                Some(format!("key {k} ({user}, {item}) not found"))
            }
            Err(e) => Some(format!("key {k}: {e}")),
        };
        if let Some(problem) = problem {
            self.errors += 1;
            self.first_error.get_or_insert(problem);
        }
    }
}

/// Looks `target` up, timed.
async fn timed_lookup<'a>(
    lookuper: &Lookuper,
    target: &'a Target,
) -> (&'a Target, Duration, fjord_client::Result<Option<KvRow>>) {
    let (user, item) = key_columns(target.k);
    let key = [Datum::BigInt(user), Datum::BigInt(item)];
    let start = Instant::now();
    let result = lookuper.lookup(&key).await;
    (target, start.elapsed(), result)
}

/// Looks up the next unclaimed target until none is left; one lookup
/// outstanding per task.
async fn lookup_worker(
    lookuper: Lookuper,
    targets: Arc<Vec<Target>>,
    next: Arc<AtomicUsize>,
) -> Worker {
    let mut done = Worker::new();
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(target) = targets.get(i) else {
            return done;
        };
        let (target, latency, result) = timed_lookup(&lookuper, target).await;
        done.record(target, latency, result);
    }
}

/// Looks up every target from one task, `in_flight` outstanding.
async fn lookup_stream(lookuper: Lookuper, targets: Arc<Vec<Target>>, in_flight: usize) -> Worker {
    let mut done = Worker::new();
    let mut pending = FuturesUnordered::new();
    let mut next = targets.iter();
    let start = |target| timed_lookup(&lookuper, target);
    pending.extend(next.by_ref().take(in_flight).map(start));
    while let Some((target, latency, result)) = pending.next().await {
        done.record(target, latency, result);
        if let Some(target) = next.next() {
            pending.push(start(target));
        }
    }
    done
}

/// Runs `fjord bench lookup`: writes the plan (untimed), then times
/// `lookups` lookups with `in_flight` outstanding; returns its JSON line.
pub async fn lookup(
    run: &KvRun,
    lookups: usize,
    in_flight: usize,
    drive: LookupDrive,
    config: LookupConfig,
) -> anyhow::Result<String> {
    let client = FlussClient::connect(std::slice::from_ref(&run.bootstrap)).await?;
    let table = create_table(&client, run).await?;
    let plan = Arc::new(KvPlan::new(run.keys, run.update_fraction, run.seed));
    write_plan(&client, &table, &plan, run)
        .await
        .context("writing the table to look up")?;
    let lookuper = client.lookuper(&table.path, config).await?;
    let targets = Arc::new(plan.lookup_targets(lookups, run.seed));
    eprintln!(
        "lookup: {lookups} lookups of {}, {in_flight} in flight, driven by {}",
        table.path,
        drive.name()
    );
    let next = Arc::new(AtomicUsize::new(0));
    let server0 = server_cpu(run.server_pid)?;
    let (cpu0, wall0) = (process_cpu(), Instant::now());
    let tasks: Vec<_> = match drive {
        LookupDrive::Tasks => (0..in_flight)
            .map(|_| {
                tokio::spawn(lookup_worker(
                    lookuper.clone(),
                    Arc::clone(&targets),
                    Arc::clone(&next),
                ))
            })
            .collect(),
        // Spawned, so it runs on a worker as the tasks do (not on the
        // thread blocked in `block_on`).
        LookupDrive::Stream => vec![tokio::spawn(lookup_stream(
            lookuper.clone(),
            Arc::clone(&targets),
            in_flight,
        ))],
    };
    let mut latencies = Vec::with_capacity(lookups);
    let (mut errors, mut first) = (0usize, None);
    for task in tasks {
        let done = task.await?;
        latencies.extend_from_slice(&done.latencies_ns);
        errors += done.errors;
        if first.is_none() {
            first = done.first_error;
        }
    }
    let (wall, cpu) = (wall0.elapsed(), process_cpu().saturating_sub(cpu0));
    let server = server_cpu(run.server_pid)?.zip(server0).map(|(b, a)| b - a);
    if errors > 0 {
        bail!(
            "{errors} of {lookups} lookups failed; the first: {}",
            first.unwrap_or_default()
        );
    }
    if latencies.len() != lookups {
        bail!("timed {} of {lookups} lookups", latencies.len());
    }
    if !run.keep_table {
        client.admin().drop_table(&table.path, true).await?;
    }
    latencies.sort_unstable();
    let n = lookups as f64;
    let secs = wall.as_secs_f64();
    Ok(format!(
        "{{\"bench\":\"lookup\",\"client\":\"fjord\",\"lookups\":{lookups},\"keys\":{},\
         \"in_flight\":{in_flight},\"drive\":\"{}\",\"secs\":{secs:.3},\"lookups_per_s\":{:.0},\"p50_us\":{:.1},\
         \"p99_us\":{:.1},\"client_cpu_ns_per_lookup\":{:.1},\"server_cpu_ns_per_lookup\":{}}}",
        plan.keys(),
        drive.name(),
        n / secs,
        percentile(&latencies, 0.50) as f64 / 1e3,
        percentile(&latencies, 0.99) as f64 / 1e3,
        cpu.as_nanos() as f64 / n,
        per(server, n),
    ))
}

/// The value at quantile `q` of sorted `values` (nearest rank).
fn percentile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// utime + stime of process `pid` (all its threads) from /proc/PID/stat.
pub fn server_cpu(pid: Option<u32>) -> anyhow::Result<Option<Duration>> {
    let Some(pid) = pid else {
        return Ok(None);
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat (is the server running?)"))?;
    // The command name, in parentheses, may hold spaces: count after it.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // Field 3 (state) is fields[0]; utime and stime are fields 14 and 15.
    let ticks = |i: usize| -> anyhow::Result<u64> {
        fields
            .get(i)
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("/proc/{pid}/stat: no field {}", i + 3))
    };
    let total = ticks(11)? + ticks(12)?;
    // SAFETY: sysconf only reads a constant of the system.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz <= 0 {
        bail!("sysconf(_SC_CLK_TCK) failed");
    }
    Ok(Some(Duration::from_nanos(
        total * 1_000_000_000 / hz as u64,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_writes_every_key_and_the_asked_share_of_updates() {
        let plan = KvPlan::new(1_000, 0.2, 42);
        assert_eq!(plan.keys(), 1_000);
        assert_eq!(plan.writes(), 1_250);
        let mut seen = vec![false; 1_000];
        for (w, &k) in plan.writes.iter().enumerate() {
            seen[k as usize] = true;
            assert!(plan.last_write[k as usize] as usize >= w);
        }
        assert!(seen.iter().all(|s| *s));
        let (u0, i0) = key_columns(0);
        assert_ne!(key_columns(1), (u0, i0));
        assert_eq!(key_columns(17).0, 1);
    }
}
