//! Bucket assignment for appends: which bucket of a table each row (or each
//! Arrow batch) goes to, exactly as the official Fluss clients choose it.
//!
//! - Tables with bucket keys hash them: the key columns are encoded in
//!   Fluss's compacted key format ([`key`]), hashed with Fluss's Murmur3
//!   variant and reduced modulo the bucket count ([`fluss_bucket_of_key`]),
//!   so a key lands in the bucket fluss-rs and the Java client pick for it.
//! - Tables without bucket keys follow `client.writer.bucket.no-key-assigner`:
//!   STICKY (default; one random bucket until its batch is sealed, then
//!   another) or ROUND_ROBIN (the next bucket for every record).
//!
//! Everything derivable from the table (key positions, encoders, the
//! strategy) is resolved in [`BucketAssigner::new`]; the per-row path encodes
//! into one reused buffer and allocates nothing.

pub mod key;

use std::hash::{BuildHasher, Hasher};
use std::str::FromStr;

use arrow_array::RecordBatch;

use crate::admin::TableInfo;
use crate::error::{ClientError, Result};
use crate::row::InternalRow;
use key::KeyEncoder;

/// Table property naming the data lake a table tiers to; it decides the
/// bucketing function of hashed tables (Fluss's `table.datalake.format`).
pub const DATALAKE_FORMAT_PROPERTY: &str = "table.datalake.format";

/// Fluss's `client.writer.bucket.no-key-assigner`: how rows of a table
/// without bucket keys are spread over its buckets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NoKeyAssigner {
    /// One bucket (picked at random) until the batch for it is sealed, then
    /// another: fewer, fuller batches (Fluss's default).
    #[default]
    Sticky,
    /// The next bucket for every record, in turn.
    RoundRobin,
}

impl FromStr for NoKeyAssigner {
    type Err = ClientError;

    /// Parses Fluss's option values `STICKY` and `ROUND_ROBIN` (any case).
    fn from_str(value: &str) -> Result<Self> {
        if value.eq_ignore_ascii_case("sticky") {
            Ok(Self::Sticky)
        } else if value.eq_ignore_ascii_case("round_robin") {
            Ok(Self::RoundRobin)
        } else {
            Err(ClientError::Invalid(format!(
                "client.writer.bucket.no-key-assigner must be STICKY or ROUND_ROBIN, not {value:?}"
            )))
        }
    }
}

/// The buckets of one Arrow batch: all rows to one bucket, or one bucket per
/// row (hashed tables whose rows hash to different buckets).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BatchBuckets {
    /// Every row goes to this bucket.
    Single(i32),
    /// Row `i` goes to bucket `buckets[i]` (one allocation per batch, which
    /// the caller splits by bucket anyway).
    PerRow(Vec<i32>),
}

/// Picks the bucket of each row; built once per writer (and again when the
/// table's metadata changes) from the table's bucket keys and bucket count.
///
/// Guarantees: every bucket returned is in `0..bucket_count`; for hashed
/// tables the bucket is the one the official clients compute for the same key.
pub struct BucketAssigner {
    bucket_count: i32,
    strategy: Strategy,
}

enum Strategy {
    /// `current` is -1 until the first pick.
    Sticky {
        current: i32,
        rng: XorShift,
    },
    RoundRobin {
        counter: i32,
    },
    Hash(Box<HashState>),
}

struct HashState {
    encoder: KeyEncoder,
    column_count: usize,
}

impl BucketAssigner {
    /// The assigner of `table`: hashing when it has bucket keys, `no_key`
    /// otherwise. Fails when a bucket key names no column, has a type keys
    /// cannot have, or the table tiers to a lake whose bucketing differs
    /// from Fluss's own (Paimon, Iceberg: not supported yet).
    pub fn new(table: &TableInfo, no_key: NoKeyAssigner) -> Result<Self> {
        let bucket_count = table.bucket_count();
        if bucket_count <= 0 {
            return Err(ClientError::Invalid(format!(
                "table {} has {bucket_count} buckets; it needs at least one",
                table.path
            )));
        }
        let descriptor = &table.descriptor;
        let bucket_keys = descriptor.bucket_keys();
        let strategy = if !bucket_keys.is_empty() {
            if let Some(format) = descriptor.properties().get(DATALAKE_FORMAT_PROPERTY) {
                // Lance tables bucket like plain Fluss tables.
                if !format.eq_ignore_ascii_case("lance") {
                    return Err(ClientError::Invalid(format!(
                        "table {} tiers to {format}, whose bucketing function is not supported \
                         by this client yet",
                        table.path
                    )));
                }
            }
            let schema = descriptor.schema();
            Strategy::Hash(Box::new(HashState {
                encoder: KeyEncoder::new(schema, bucket_keys)?,
                column_count: schema.columns().len(),
            }))
        } else {
            match no_key {
                NoKeyAssigner::Sticky => Strategy::Sticky {
                    current: -1,
                    rng: XorShift::from_entropy(),
                },
                NoKeyAssigner::RoundRobin => Strategy::RoundRobin {
                    // Fluss starts at a random point so writers do not all
                    // begin at bucket 0.
                    counter: XorShift::from_entropy().next() as i32,
                },
            }
        };
        Ok(Self {
            bucket_count,
            strategy,
        })
    }

    /// Number of buckets rows are spread over.
    pub fn bucket_count(&self) -> i32 {
        self.bucket_count
    }

    /// Whether [`BucketAssigner::assign`] reads the row: true only for
    /// hashed tables (callers can skip building a row otherwise).
    pub fn needs_row(&self) -> bool {
        matches!(self.strategy, Strategy::Hash(_))
    }

    /// Whether the assigner is sticky: the writer should call
    /// [`BucketAssigner::on_batch_sealed`] when a batch fills, and put the
    /// record that did not fit into the next bucket rather than a new batch
    /// of the same one (Fluss's `abortIfBatchFull`).
    pub fn is_sticky(&self) -> bool {
        matches!(self.strategy, Strategy::Sticky { .. })
    }

    /// The bucket of `row` (a row of the whole table, every column). Fails
    /// for hashed tables when the row's width differs from the table's, a
    /// key column is NULL, or its datum does not match the column's type.
    #[inline(always)]
    pub fn assign<R: InternalRow + ?Sized>(&mut self, row: &R) -> Result<i32> {
        // The default (sticky, bucket chosen) answers inline: this runs per row.
        if let Strategy::Sticky { current, .. } = &self.strategy {
            if *current >= 0 {
                return Ok(*current);
            }
        }
        self.assign_slow(row)
    }

    // Out of line so that `assign` stays small enough to inline: a hashed
    // key costs far more than the call.
    #[inline(never)]
    fn assign_slow<R: InternalRow + ?Sized>(&mut self, row: &R) -> Result<i32> {
        let bucket_count = self.bucket_count;
        match &mut self.strategy {
            Strategy::Sticky { current, rng } => {
                if *current < 0 {
                    *current = rng.bucket(bucket_count);
                }
                Ok(*current)
            }
            Strategy::RoundRobin { counter } => Ok(next_round_robin(counter, bucket_count)),
            Strategy::Hash(state) => {
                if row.field_count() != state.column_count {
                    return Err(ClientError::Invalid(format!(
                        "row has {} fields but the table has {} columns",
                        row.field_count(),
                        state.column_count
                    )));
                }
                let key = state.encoder.encode_row(row)?;
                Ok(fluss_bucket_of_key(key, bucket_count))
            }
        }
    }

    /// Tells a sticky assigner that the batch of `bucket` was sealed: if
    /// that is its current bucket, it moves to another one (at random,
    /// never the same when there are several). No effect otherwise.
    pub fn on_batch_sealed(&mut self, bucket: i32) {
        let bucket_count = self.bucket_count;
        if let Strategy::Sticky { current, rng } = &mut self.strategy {
            if *current < 0 || *current == bucket {
                *current = rng.other_bucket(*current, bucket_count);
            }
        }
    }

    /// The buckets of a whole Arrow batch with the table's columns: the
    /// current bucket (sticky, which then moves on: the batch is sealed by
    /// itself) or the next one (round-robin) for all rows, or each row's
    /// hashed bucket. Fails when the batch's columns differ
    /// from the table's or a key value is NULL.
    pub fn assign_batch(&mut self, batch: &RecordBatch) -> Result<BatchBuckets> {
        let bucket_count = self.bucket_count;
        match &mut self.strategy {
            Strategy::Sticky { current, rng } => {
                if *current < 0 {
                    *current = rng.bucket(bucket_count);
                }
                // A whole RecordBatch is a sealed batch of its own: it takes
                // the current bucket and the assigner moves on, as after any
                // sealed batch (fluss-rs sends each Arrow batch as a new batch,
                // which moves its sticky bucket too).
                let bucket = *current;
                *current = rng.other_bucket(bucket, bucket_count);
                Ok(BatchBuckets::Single(bucket))
            }
            Strategy::RoundRobin { counter } => Ok(BatchBuckets::Single(next_round_robin(
                counter,
                bucket_count,
            ))),
            Strategy::Hash(state) => {
                if batch.num_columns() != state.column_count {
                    return Err(ClientError::Invalid(format!(
                        "batch has {} columns but the table has {}",
                        batch.num_columns(),
                        state.column_count
                    )));
                }
                let encoder = &mut state.encoder;
                let keys = encoder.batch_keys(batch)?;
                let mut row_buckets = Vec::with_capacity(batch.num_rows());
                for row in 0..batch.num_rows() {
                    let key = encoder.encode_batch_row(&keys, row)?;
                    row_buckets.push(fluss_bucket_of_key(key, bucket_count));
                }
                match row_buckets.first().copied() {
                    // An empty batch has no bucket to speak of; bucket 0 is as good as any.
                    None => Ok(BatchBuckets::Single(0)),
                    Some(first) if row_buckets.iter().all(|&b| b == first) => {
                        Ok(BatchBuckets::Single(first))
                    }
                    Some(_) => Ok(BatchBuckets::PerRow(row_buckets)),
                }
            }
        }
    }
}

fn next_round_robin(counter: &mut i32, bucket_count: i32) -> i32 {
    let value = *counter;
    *counter = counter.wrapping_add(1);
    (value & i32::MAX) % bucket_count
}

/// A small xorshift generator for sticky picks: no dependency, seeded from
/// the standard library's per-process random hasher keys.
struct XorShift(u64);

impl XorShift {
    fn from_entropy() -> Self {
        let seed = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        Self(seed | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A random bucket in `0..bucket_count` (`bucket_count > 0`).
    fn bucket(&mut self, bucket_count: i32) -> i32 {
        ((self.next() >> 33) as i32) % bucket_count
    }

    /// A random bucket other than `old` when there is another one.
    fn other_bucket(&mut self, old: i32, bucket_count: i32) -> i32 {
        if old < 0 || bucket_count == 1 {
            return self.bucket(bucket_count);
        }
        let pick = self.bucket(bucket_count - 1);
        if pick >= old {
            pick + 1
        } else {
            pick
        }
    }
}

/// Seed of Fluss's (Flink's) Murmur3 variant used for bucketing.
const FLUSS_MURMUR_SEED: u32 = 42;
const C1: u32 = 0xcc9e_2d51;
const C2: u32 = 0x1b87_3593;

#[inline]
fn mix_k1(k1: u32) -> u32 {
    k1.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2)
}

#[inline]
fn mix_h1(h1: u32, k1: u32) -> u32 {
    (h1 ^ k1)
        .rotate_left(13)
        .wrapping_mul(5)
        .wrapping_add(0xe654_6b64)
}

#[inline]
fn avalanche(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// Fluss's `MurmurHashUtils.hashBytes`: Murmur3-32 with seed 42, except that
/// the trailing `len % 4` bytes are mixed in one by one like whole blocks.
fn fluss_hash_bytes(data: &[u8]) -> i32 {
    let mut chunks = data.chunks_exact(4);
    let mut h1 = FLUSS_MURMUR_SEED;
    for chunk in &mut chunks {
        let block = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        h1 = mix_h1(h1, mix_k1(block));
    }
    for &byte in chunks.remainder() {
        h1 = mix_h1(h1, mix_k1(u32::from(byte)));
    }
    // Fluss mixes in the length as a Java int.
    avalanche(h1 ^ data.len() as u32) as i32
}

/// Fluss's `MathUtils.murmurHash(int)`: a non-negative spread of an int.
fn fluss_hash_int(code: i32) -> i32 {
    let mut h = mix_k1(code as u32);
    h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    // The length of one int.
    h ^= 4;
    let h = avalanche(h) as i32;
    if h >= 0 {
        h
    } else if h != i32::MIN {
        -h
    } else {
        0
    }
}

/// The bucket the official clients pick for an encoded bucket key (Fluss's
/// default bucketing function): Murmur hash of the key bytes, spread again
/// and reduced modulo `bucket_count`. Returns 0 when `bucket_count` is not
/// positive (no table has that; [`BucketAssigner::new`] refuses it).
pub fn fluss_bucket_of_key(encoded_key: &[u8], bucket_count: i32) -> i32 {
    if bucket_count <= 0 {
        return 0;
    }
    fluss_hash_int(fluss_hash_bytes(encoded_key)) % bucket_count
}

#[cfg(test)]
mod tests;
