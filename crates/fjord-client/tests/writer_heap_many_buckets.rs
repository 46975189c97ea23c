//! The writer's REAL heap on a table with many buckets, in a trickle that
//! follows a burst.
//!
//! A bucket's next batch is presized from that bucket's last batch
//! (accumulator.rs `open_batch`: at most the seal size, at most a quarter
//! beyond the last batch, at least one reservation step; batch_builder.rs
//! `prepare`: at least the last batch's rows). After a burst every bucket's
//! last batch was a full one, so when a trickle then opens a small batch in
//! every bucket at once, each is presized for a full batch. Buffer memory
//! (`client.writer.buffer.memory-size`) counts the rows, not that room.
//! This binary measures what the process holds then.
//!
//! The scenario: a log table hash-bucketed by `id` receives a burst in key
//! order (a backfill sorted by key: every bucket in turn gets
//! [`BATCHES_PER_BUCKET`] batches that each reach the seal size exactly),
//! then [`TRICKLE_ROUNDS`] rounds of live traffic (a few rows in every
//! bucket, interleaved, then `flush`, which seals every small batch as the
//! batch timeout would). Two tables ([`Scenario`]): 64 buckets without
//! compression (batches seal at `batch-size`), and 16 buckets with ZSTD,
//! whose learned ratio takes the seal size to its cap, a quarter of the
//! buffer memory. A counting `#[global_allocator]` tracks the live heap of
//! the client's threads (the test thread, the client runtime's workers, the
//! writer's encoder thread) and its exact peak: every allocation updates
//! the peak, nothing is sampled. The in-process server runs on a runtime
//! whose threads are not counted.
//!
//! What is counted is bytes allocated, not pages resident. The room a batch
//! is presized with is not written until rows arrive, so the process's RSS
//! grows far less: in one run (glibc 2.36, transparent huge pages on
//! `madvise`) the first trickle round added 0.1–0.7 MB of RSS while the
//! counted heap grew by 16–27 MB. The budgets below are about what the
//! writer commits — what `RLIMIT_AS`, strict overcommit, an allocator that
//! touches or zeroes its blocks, or always-on huge pages turn into real
//! memory — and about the bound the writer documents.
//!
//! Two budgets, both derived below from what the writer documents:
//! - [`buffer_memory_budget`]: what the writer says it holds at most —
//!   buffer memory, plus the two pools whose doc comments say they bound
//!   "the memory held beyond `client.writer.buffer.memory-size`"
//!   (accumulator.rs `RECYCLED_BATCHES_MAX`, encode.rs `OUTPUT_BUFFERS_MAX`).
//!   It does not grow with the bucket count. Both tables exceeded it
//!   (19.5 MB and 40 MB against 8 MiB) until the writer capped what its
//!   open batches are presized for, together, at buffer memory
//!   (accumulator.rs `Accumulator::presized_bytes`).
//! - [`presize_rule_budget`]: what the presizing rule allows per open batch
//!   times the batches open, plus the same pools. It grows with the bucket
//!   count and checks the rule itself, round by round.
//!
//! The tests take turns ([`counting_heap::serial`]): the counter is
//! process-wide.

mod counting_heap;
mod support;

use std::time::Duration;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use fjord_client::row::Datum;
use fjord_client::{AppendWriter, TableInfo, TablePath, WriterConfig, WriterStats};
use support::{
    create_bucketed_table, id_text_schema, ids_by_bucket, read_all_by_bucket, rows_per_full_batch,
    TestServer,
};

// ---- The workload ----------------------------------------------------------

/// `client.writer.buffer.memory-size` (the option says the same).
const MEMORY_BYTES: usize = 8 << 20;
const MEMORY_OPTION: &str = "8mb";
/// `client.writer.batch-size`: a 32nd of the memory.
const BATCH_BYTES: usize = 256 << 10;
const BATCH_OPTION: &str = "256kb";
/// Bytes of every row's STRING value: few rows per batch keep a debug
/// build quick.
const PAYLOAD_BYTES: usize = 1000;
/// Full batches every bucket receives in the burst.
const BATCHES_PER_BUCKET: usize = 3;
/// Rounds of the trickle.
const TRICKLE_ROUNDS: usize = 3;
/// Rows every bucket receives per trickle round.
const TRICKLE_ROWS_PER_BUCKET: usize = 4;
/// Turns a hang into a failure; a test takes seconds.
const HANG_TIMEOUT: Duration = Duration::from_secs(120);

/// One table the burst and the trickle are written to.
struct Scenario {
    /// The table's name.
    table: &'static str,
    /// Its buckets.
    buckets: usize,
    /// Its `table.log.arrow.compression.type`.
    compression: &'static str,
    /// Estimated Arrow bytes at which the burst's batches are sealed
    /// (accumulator.rs `seal_threshold`: batch-size / learned ratio, the
    /// ratio clamped to [0.05, 1], at most a quarter of the memory).
    seal_bytes: usize,
    /// Rows written to bucket 0 (and flushed) before the burst, so that the
    /// learned compression ratio has taken the seal size where
    /// `seal_bytes` says.
    warmup_rows: usize,
}

/// 64 buckets, no compression: the encoded batch is larger than its
/// estimate, so the ratio is clamped to 1 and batches seal at batch-size.
/// Full batches of all buckets (16 MiB) are twice the buffer memory.
const PLAIN_64_BUCKETS: Scenario = Scenario {
    table: "plain_64_buckets",
    buckets: 64,
    compression: "NONE",
    seal_bytes: BATCH_BYTES,
    warmup_rows: 0,
};

/// 16 buckets, ZSTD: the repeated payload compresses to under 1 %, so
/// batch-size / ratio passes a quarter of the memory and batches seal at
/// that cap, 2 MiB. The ratio starts at 1 and moves 5 % of the way to each
/// batch's (mod.rs `learn_ratio`), so it is below 1/8 — where the cap
/// binds — after about 42 batches, ~37,000 rows; the warm-up's 56,000 leave
/// about ten batches of margin. Full batches of all buckets (32 MiB) are
/// four times the buffer memory.
const ZSTD_16_BUCKETS: Scenario = Scenario {
    table: "zstd_16_buckets",
    buckets: 16,
    compression: "ZSTD",
    seal_bytes: MEMORY_BYTES / 4,
    warmup_rows: 56_000,
};

// ---- The budgets, from the writer's documented holdings --------------------
//
// The writer's constants are crate-private; their values are restated here
// with where they come from (crates/fjord-client/src/writer/).

/// Estimated Arrow bytes of one row (`RowBatchBuilder::estimated_bytes`):
/// BIGINT value, STRING offset and data, two validity bits (rounded up).
const ROW_BYTES: usize = 8 + 4 + PAYLOAD_BYTES + 1;
/// The 64-byte rounding of a batch's buffers (ids, offsets, text, a
/// validity bitmap should a NULL come) and the STRING column's leading
/// offset.
const BATCH_SLACK_BYTES: usize = 4 * 64 + 64;
/// accumulator.rs `PRESIZE_GROWTH_MAX_DIVISOR` and batch_builder.rs
/// `ROOM_GROWTH_DIVISOR`: a batch is presized at most a quarter beyond the
/// last one, and a recycled buffer too small is replaced by one a quarter
/// larger than needed.
const GROWTH_DIVISOR: usize = 4;
/// accumulator.rs `RECYCLED_BATCHES_MAX`: column-buffer sets kept after
/// encoding ("bounds the memory the writer holds beyond
/// client.writer.buffer.memory-size").
const RECYCLED_BATCHES_MAX: usize = 4;
/// encode.rs `OUTPUT_BUFFERS_MAX`: encode buffers kept after
/// acknowledgement ("bounds the memory held beyond
/// client.writer.buffer.memory-size").
const OUTPUT_BUFFERS_MAX: usize = 8;
/// encode.rs `ENCODE_HEADROOM_BYTES`.
const ENCODE_HEADROOM_BYTES: usize = 4096;
/// Log batch header, IPC message and 8-byte padding of a batch beyond its
/// Arrow bytes: well under this.
const FRAMING_BYTES: usize = 1024;
/// One encode buffer of a full batch (encode.rs `OutputPool::take`): its
/// estimate times the learned ratio, plus headroom, and a sixteenth more
/// (`OUTPUT_BUFFER_HEADROOM_DIVISOR`). The seal size is at most
/// batch-size / ratio, so estimate × ratio is at most batch-size and a
/// row, and the ratio's excess over 1 without compression (framing) is
/// under 1/64.
const FULL_OUTPUT_BUFFER_BYTES: usize = {
    let estimate = BATCH_BYTES + ROW_BYTES;
    let need = estimate + estimate / 64 + FRAMING_BYTES + ENCODE_HEADROOM_BYTES;
    need + need / 16
};
/// One encode buffer of a trickle batch: a few rows, whose framing is less
/// than their bytes, so the ratio is under 2.
const TRICKLE_OUTPUT_BUFFER_BYTES: usize = {
    let need = 2 * TRICKLE_ROWS_PER_BUCKET * ROW_BYTES + ENCODE_HEADROOM_BYTES;
    need + need / 16
};
/// Per bucket, what the writer keeps besides rows: its slot and builder
/// (columns, validity builders), the sender's queue and sequence for it,
/// its part of a request and of its answer. A few hundred bytes each;
/// allowed 4 KiB.
const BUCKET_BOOKKEEPING_BYTES: usize = 4 << 10;
/// The writer's fixed bookkeeping (request tasks, channels, the `open`
/// list) beyond the baseline.
const FIXED_BOOKKEEPING_BYTES: usize = 64 << 10;

impl Scenario {
    /// One kept column-buffer set: a full batch (the seal size and the row
    /// that crossed it) with the growth allowance.
    fn recycled_batch_bytes(&self) -> usize {
        let full = self.seal_bytes + ROW_BYTES;
        full + full / GROWTH_DIVISOR + BATCH_SLACK_BYTES
    }

    /// The pools the writer keeps beyond buffer memory: the recycled
    /// column buffers, the kept encode buffers and the one being encoded
    /// into.
    fn pools_bytes(&self) -> usize {
        RECYCLED_BATCHES_MAX * self.recycled_batch_bytes()
            + (OUTPUT_BUFFERS_MAX + 1) * FULL_OUTPUT_BUFFER_BYTES
    }

    fn bookkeeping_bytes(&self) -> usize {
        self.buckets * BUCKET_BOOKKEEPING_BYTES + FIXED_BOOKKEEPING_BYTES
    }

    /// accumulator.rs `open_batch`: the reservation step, the seal size / 4
    /// within [4 KiB, 128 KiB]; also the least a batch is presized for.
    fn chunk_bytes(&self) -> usize {
        (self.seal_bytes / 4).clamp(4 << 10, 128 << 10)
    }
}

/// What the writer documents it holds at most, whatever the bucket count:
/// everything buffer memory counts (open batches' reservations, sealed and
/// unacknowledged batches) with the quarter of growth room the presizing
/// and the buffer replacement allow on top, each open batch's rounding,
/// the two pools documented as the only memory beyond buffer memory, and
/// bookkeeping. Without compression, for 64 buckets: 8 MiB × 5/4 + 20 KiB
/// + 1.26 MiB + 2.48 MiB + 320 KiB = 14.07 MiB (14,755,692 bytes).
fn buffer_memory_budget(s: &Scenario) -> usize {
    MEMORY_BYTES
        + MEMORY_BYTES / GROWTH_DIVISOR
        + s.buckets * BATCH_SLACK_BYTES
        + s.pools_bytes()
        + s.bookkeeping_bytes()
}

/// Heap of an open batch presized for `likely` estimated bytes
/// (`RowBatchBuilder::prepare`: `likely / row + 1` rows of the last batch's
/// shape).
fn presized_batch_bytes(likely: usize) -> usize {
    likely + ROW_BYTES + BATCH_SLACK_BYTES
}

/// What the presizing rule allows in a trickle round whose buckets' last
/// batches had `last_bytes` each: every bucket's open batch presized for
/// `max(chunk, min(seal, last + last / 4))`, every bucket's small batch
/// encoded (until acknowledged), the pools and bookkeeping.
fn presize_rule_budget(s: &Scenario, last_bytes: usize) -> usize {
    let likely = s
        .seal_bytes
        .min(last_bytes + last_bytes / GROWTH_DIVISOR)
        .max(s.chunk_bytes());
    s.buckets * (presized_batch_bytes(likely) + TRICKLE_OUTPUT_BUFFER_BYTES)
        + s.pools_bytes()
        + s.bookkeeping_bytes()
}

// ---- The scenario ----------------------------------------------------------

/// The ids each bucket receives, in order: the warm-up's (bucket 0 only),
/// the burst's, then each trickle round's.
struct Plan {
    /// Rows of the warm-up, at the front of bucket 0's ids.
    warmup_rows: usize,
    /// Rows that fill one batch to the seal size exactly.
    rows_per_batch: usize,
    /// Per bucket: the warm-up ids (bucket 0), `BATCHES_PER_BUCKET *
    /// rows_per_batch` burst ids, then `TRICKLE_ROUNDS *
    /// TRICKLE_ROWS_PER_BUCKET` trickle ids.
    ids: Vec<Vec<i64>>,
}

impl Plan {
    /// Ids routed to each bucket exactly as the writer routes them (the
    /// same `BucketAssigner` over the table the server describes).
    fn new(table: &TableInfo, s: &Scenario, rows_per_batch: usize) -> Self {
        let per_bucket =
            BATCHES_PER_BUCKET * rows_per_batch + TRICKLE_ROUNDS * TRICKLE_ROWS_PER_BUCKET;
        let wanted = |bucket: usize| per_bucket + if bucket == 0 { s.warmup_rows } else { 0 };
        let ids = ids_by_bucket(table, wanted);
        Self {
            warmup_rows: s.warmup_rows,
            rows_per_batch,
            ids,
        }
    }

    fn warmup(&self) -> &[i64] {
        &self.ids[0][..self.warmup_rows]
    }

    /// Where `bucket`'s burst ids start.
    fn start(&self, bucket: usize) -> usize {
        if bucket == 0 {
            self.warmup_rows
        } else {
            0
        }
    }

    fn burst(&self, bucket: usize) -> &[i64] {
        let start = self.start(bucket);
        &self.ids[bucket][start..start + BATCHES_PER_BUCKET * self.rows_per_batch]
    }

    fn trickle(&self, bucket: usize, round: usize) -> &[i64] {
        let start = self.start(bucket)
            + BATCHES_PER_BUCKET * self.rows_per_batch
            + round * TRICKLE_ROWS_PER_BUCKET;
        &self.ids[bucket][start..start + TRICKLE_ROWS_PER_BUCKET]
    }
}

/// What one run observed, heap figures as bytes above the baseline.
struct Observed {
    rows_per_batch: usize,
    /// Live heap when the writer was built and nothing was written.
    baseline: isize,
    /// Peak growth during the warm-up, the burst and their flushes.
    burst_growth: isize,
    /// Growth still held after the burst's flush.
    after_burst_growth: isize,
    /// Peak growth during each trickle round and its flush.
    round_growth: [isize; TRICKLE_ROUNDS],
    warmup_stats: WriterStats,
    burst_stats: WriterStats,
    stats: WriterStats,
}

impl Observed {
    fn trickle_growth(&self) -> isize {
        self.round_growth.iter().copied().max().unwrap_or(0)
    }

    fn report(&self, s: &Scenario) -> String {
        format!(
            "{} buckets, {}, batch-size {BATCH_BYTES}, buffer.memory-size {MEMORY_BYTES}, \
             {} rows of {ROW_BYTES} bytes per full batch of {} bytes; heap above the \
             baseline of {}: burst peak {}, held after the burst {}, trickle round peaks {:?}; \
             budgets: buffer memory {}, presize rule (round 1 / later) {} / {}; \
             warm-up {:?}; burst {:?}; end {:?}",
            s.buckets,
            s.compression,
            self.rows_per_batch,
            s.seal_bytes,
            self.baseline,
            self.burst_growth,
            self.after_burst_growth,
            self.round_growth,
            buffer_memory_budget(s),
            presize_rule_budget(s, s.seal_bytes),
            presize_rule_budget(s, TRICKLE_ROWS_PER_BUCKET * ROW_BYTES),
            self.warmup_stats,
            self.burst_stats,
            self.stats,
        )
    }
}

/// Starts the server on uncounted threads, runs the burst and the trickle
/// on a counted client runtime, reads every row back.
fn burst_then_trickle(s: &Scenario) -> Observed {
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .on_thread_start(counting_heap::uncounted_thread)
        .enable_all()
        .build()
        .expect("server runtime");
    let server = counting_heap::uncounted(|| server_rt.block_on(TestServer::start()));
    let client_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("client runtime");
    let observed = client_rt.block_on(async {
        tokio::time::timeout(HANG_TIMEOUT, write_and_read_back(&server, s))
            .await
            .expect("the burst, the trickle and the read-back finish")
    });
    counting_heap::uncounted(|| server_rt.block_on(server.stop()));
    drop(client_rt);
    drop(server_rt);
    observed
}

/// Appends `ids` one row at a time.
async fn append_ids(writer: &mut AppendWriter, ids: &[i64], payload: &str) {
    for &id in ids {
        writer
            .append(&[Datum::BigInt(id), Datum::String(payload)])
            .await
            .expect("append");
    }
}

async fn write_and_read_back(server: &TestServer, s: &Scenario) -> Observed {
    let client = server.client().await;
    let path = TablePath::new("heap_many", s.table);
    let schema = id_text_schema();
    let info = create_bucketed_table(
        &client,
        &path,
        schema,
        s.buckets as i32,
        &["id"],
        s.compression,
    )
    .await;
    let options = [
        ("client.writer.buffer.memory-size", MEMORY_OPTION),
        ("client.writer.batch-size", BATCH_OPTION),
        // Nothing is sealed by age: the burst's batches by size, the
        // trickle's by flush (as a batch timeout would seal them).
        ("client.writer.batch-timeout", "1 min"),
    ];
    let mut writer = client
        .append_writer(&path, WriterConfig::from_options(options).expect("config"))
        .await
        .expect("writer");
    let payload = "x".repeat(PAYLOAD_BYTES);
    let rows_per_batch = rows_per_full_batch(&writer, &payload, s.seal_bytes);
    let plan = Plan::new(&info, s, rows_per_batch);

    let baseline = counting_heap::mark();
    append_ids(&mut writer, plan.warmup(), &payload).await;
    writer.flush().await.expect("flush after the warm-up");
    let warmup_stats = writer.stats();
    // The burst: bucket after bucket, each filling its batches exactly.
    for bucket in 0..s.buckets {
        append_ids(&mut writer, plan.burst(bucket), &payload).await;
    }
    writer.flush().await.expect("flush after the burst");
    let burst_growth = counting_heap::peak() - baseline;
    let burst_stats = writer.stats();

    let after_burst_growth = counting_heap::mark() - baseline;
    let mut round_growth = [0; TRICKLE_ROUNDS];
    for (round, growth) in round_growth.iter_mut().enumerate() {
        counting_heap::mark();
        // A few rows in every bucket, interleaved as live keys come.
        for row in 0..TRICKLE_ROWS_PER_BUCKET {
            for bucket in 0..s.buckets {
                let id = plan.trickle(bucket, round)[row];
                append_ids(&mut writer, &[id], &payload).await;
            }
        }
        writer.flush().await.expect("flush after a trickle round");
        *growth = counting_heap::peak() - baseline;
    }
    let stats = writer.stats();
    drop(writer);

    check_read_back(&client, &info, &plan).await;
    Observed {
        rows_per_batch,
        baseline,
        burst_growth,
        after_burst_growth,
        round_growth,
        warmup_stats,
        burst_stats,
        stats,
    }
}

/// Every planned row was written once, into the bucket the plan routed it to.
async fn check_read_back(client: &fjord_client::FlussClient, info: &TableInfo, plan: &Plan) {
    let total: usize = plan.ids.iter().map(Vec::len).sum();
    let mut by_bucket = vec![Vec::<i64>::new(); plan.ids.len()];
    for (bucket, batch) in read_all_by_bucket(client, info, total).await {
        by_bucket[bucket as usize].extend(batch.column(0).as_primitive::<Int64Type>().values());
    }
    for (bucket, (mut read, planned)) in by_bucket.into_iter().zip(&plan.ids).enumerate() {
        read.sort_unstable();
        let mut planned = planned.clone();
        planned.sort_unstable();
        assert_eq!(
            read.len(),
            planned.len(),
            "bucket {bucket}: rows read back against rows written"
        );
        assert!(
            read == planned,
            "bucket {bucket}: the ids read back are not those written"
        );
    }
}

/// Checks the run went as the scenario needs: every burst batch (so every
/// bucket's last one) sealed at the seal size, each trickle round sealed
/// one small batch per bucket, and the counter saw the writer.
fn check_scenario(s: &Scenario, observed: &Observed) {
    let report = observed.report(s);
    eprintln!("{report}");
    let burst_batches = (s.buckets * BATCHES_PER_BUCKET) as u64;
    assert_eq!(
        observed.burst_stats.batches - observed.warmup_stats.batches,
        burst_batches,
        "every burst batch was sealed at {} bytes, none by memory, flush or another \
         seal size: {report}",
        s.seal_bytes
    );
    assert_eq!(
        observed.stats.batches - observed.burst_stats.batches,
        (s.buckets * TRICKLE_ROUNDS) as u64,
        "each trickle round sealed one batch per bucket: {report}"
    );
    assert!(
        observed.burst_growth > BATCH_BYTES as isize,
        "the heap grew by only {} bytes in the burst: are the writer's threads counted? {report}",
        observed.burst_growth
    );
}

/// Asserts the trickle's peak is within [`buffer_memory_budget`].
fn check_within_buffer_memory(s: &Scenario) {
    let _turn = counting_heap::serial();
    let observed = burst_then_trickle(s);
    check_scenario(s, &observed);
    let budget = buffer_memory_budget(s) as isize;
    assert!(
        observed.trickle_growth() <= budget,
        "the trickle's heap grew by {} bytes above the baseline, beyond the {budget} bytes \
         the writer documents (buffer memory, its growth room and the two pools): {}",
        observed.trickle_growth(),
        observed.report(s)
    );
}

#[test]
fn a_trickle_over_64_buckets_after_a_burst_holds_no_more_heap_than_buffer_memory_allows() {
    check_within_buffer_memory(&PLAIN_64_BUCKETS);
}

#[test]
fn a_trickle_over_16_zstd_buckets_after_a_burst_holds_no_more_heap_than_buffer_memory_allows() {
    check_within_buffer_memory(&ZSTD_16_BUCKETS);
}

#[test]
fn a_trickle_over_64_buckets_after_a_burst_presizes_each_batch_within_the_documented_rule() {
    let _turn = counting_heap::serial();
    let s = &PLAIN_64_BUCKETS;
    let observed = burst_then_trickle(s);
    check_scenario(s, &observed);
    // Round 1 follows full batches; later rounds follow the trickle's own
    // batches of a few rows, which presize one reservation step.
    for (round, &growth) in observed.round_growth.iter().enumerate() {
        let last_bytes = if round == 0 {
            s.seal_bytes
        } else {
            TRICKLE_ROWS_PER_BUCKET * ROW_BYTES
        };
        let budget = presize_rule_budget(s, last_bytes) as isize;
        assert!(
            growth <= budget,
            "trickle round {round}: the heap grew by {growth} bytes above the baseline, \
             beyond the {budget} bytes the presizing rule allows for {} open batches after \
             batches of {last_bytes} bytes: {}",
            s.buckets,
            observed.report(s)
        );
    }
}
