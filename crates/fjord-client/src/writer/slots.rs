//! One open-batch slot per bucket of a table (of each partition of a
//! partitioned table), found per record: the per-bucket state of the
//! append writer's accumulator (Arrow column builders) and of the upsert
//! writer's (KV batch builders) alike.
//!
//! A non-partitioned table's slots are a vector indexed by bucket. A
//! partitioned table's are one such vector per partition seen, found by
//! partition id, or, for a record of the previous record's partition (the
//! common case: records come in long runs per partition), without a hash.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::error::{ClientError, Result};
use crate::writer::accumulator::BucketKey;

/// The slots of one writer's buckets; see the module doc.
pub(crate) struct Slots<S> {
    bucket_count: i32,
    /// Non-partitioned table: one slot per bucket, created on first use.
    plain: Vec<Option<S>>,
    /// Partitioned table: the slots of each partition seen, in the order
    /// first seen ...
    partition_slots: Vec<Vec<Option<S>>>,
    /// ... found by partition id ...
    partition_index: HashMap<i64, usize, BuildHasherDefault<PartitionIdHasher>>,
    /// ... or, for a record of the previous record's partition, without a
    /// hash.
    last_partition: Option<(i64, usize)>,
}

impl<S> Slots<S> {
    /// No slot yet, for a table of `bucket_count` buckets.
    pub(crate) fn new(bucket_count: i32) -> Self {
        Self {
            bucket_count,
            plain: (0..bucket_count).map(|_| None).collect(),
            partition_slots: Vec::new(),
            partition_index: HashMap::default(),
            last_partition: None,
        }
    }

    /// The slot of `key`, made by `make` (once per bucket) on first use.
    /// Touches no reference count: this runs per record, so the common
    /// case (the slot exists; for a partitioned table, in the previous
    /// record's partition) is inlined and the rest is out of line. Fails
    /// for a bucket outside the table.
    #[inline(always)]
    pub(crate) fn get(
        &mut self,
        key: BucketKey,
        make: impl FnOnce() -> Result<S>,
    ) -> Result<&mut S> {
        let index = usize::try_from(key.1).unwrap_or(usize::MAX);
        let partition = match (key.0, self.last_partition) {
            (None, _) => None,
            (Some(id), Some((last, at))) if id == last => Some(at),
            (Some(_), _) => return self.get_slow(key, make),
        };
        let slots = match partition {
            None => &mut self.plain,
            Some(at) => &mut self.partition_slots[at],
        };
        let found = slots
            .get_mut(index)
            .and_then(Option::as_mut)
            .map(|slot| slot as *mut S);
        match found {
            // SAFETY: the pointer comes from a `&mut` borrow of `self` that
            // this function's `&mut self` covers, and nothing touches
            // `self` between taking it and handing it out. The round trip
            // through a pointer only tells the borrow checker what it cannot
            // see yet (returning a borrow on one branch and borrowing again
            // on the other, NLL's "problem case 3"): without it the slot was
            // looked up twice, ~10 instructions a row.
            Some(slot) => Ok(unsafe { &mut *slot }),
            None => self.get_slow(key, make),
        }
    }

    /// [`Slots::get`] for a bucket's first record or another partition
    /// than the previous record's; also reports a bucket out of range.
    #[inline(never)]
    fn get_slow(&mut self, key: BucketKey, make: impl FnOnce() -> Result<S>) -> Result<&mut S> {
        let count = self.bucket_count;
        let index = usize::try_from(key.1)
            .ok()
            .filter(|&b| b < count as usize)
            .ok_or_else(|| bucket_out_of_range(key.1, count))?;
        let slots = match key.0 {
            None => &mut self.plain,
            Some(id) => {
                let at = match self.last_partition {
                    Some((last, at)) if last == id => at,
                    _ => self.partition_position(id),
                };
                &mut self.partition_slots[at]
            }
        };
        let entry = &mut slots[index];
        if entry.is_none() {
            *entry = Some(make()?);
        }
        Ok(entry.as_mut().expect("slot was just created"))
    }

    /// Where partition `id`'s slots are (made on its first record);
    /// remembered for the next record.
    fn partition_position(&mut self, id: i64) -> usize {
        let slots = &mut self.partition_slots;
        let count = self.bucket_count;
        let at = *self.partition_index.entry(id).or_insert_with(|| {
            slots.push((0..count).map(|_| None).collect());
            slots.len() - 1
        });
        self.last_partition = Some((id, at));
        at
    }

    /// Every slot made so far.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut S> {
        let plain = self.plain.iter_mut();
        let partitioned = self.partition_slots.iter_mut().flatten();
        plain.chain(partitioned).flatten()
    }
}

#[cold]
fn bucket_out_of_range(bucket: i32, count: i32) -> ClientError {
    ClientError::Invalid(format!(
        "bucket {bucket} out of range: the table has {count} buckets"
    ))
}

/// Hashes a partition id for the per-record slot lookup of a partitioned
/// table (a record outside the previous record's partition): one multiply
/// instead of SipHash, which is per-record work the partitioned writer
/// must not add. Ids are assigned by the server, not chosen by a peer, so
/// flooding resistance buys nothing here.
#[derive(Default)]
struct PartitionIdHasher(u64);

impl Hasher for PartitionIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_i64(&mut self, id: i64) {
        self.write_u64(id as u64);
    }

    fn write_u64(&mut self, v: u64) {
        // Fibonacci hashing: the top bits (which hashbrown uses) depend on
        // every bit of the id.
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}
