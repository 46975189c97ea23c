//! How the rows of a primary-key table map to keys and buckets, resolved
//! once per table and read per record by the upsert writer and the
//! lookuper.
//!
//! - The key is the compacted key of the physical primary key (the primary
//!   key without the partition keys): Fluss's `CompactedKeyEncoder`, the
//!   encoder [`crate::bucket::key`] already implements for bucket keys.
//! - The bucket is Fluss's Murmur hash of the encoded bucket key
//!   ([`crate::bucket::fluss_bucket_of_key`], as for log tables with bucket
//!   keys). The default bucket key *is* the physical primary key, so the
//!   key bytes are hashed as they are; a declared bucket key (a subset of
//!   it) is encoded on its own.
//! - Lookups name a row by its key columns only: [`KeyColumns`] lays such
//!   a row over the table's columns ([`KeyColumns::full_row`]), so the same
//!   encoders and the partition router, which read whole rows, serve it.

use crate::admin::TableInfo;
use crate::bucket::key::KeyEncoder;
use crate::bucket::{fluss_bucket_of_key, BucketAssigner, NoKeyAssigner};
use crate::error::{ClientError, Result};
use crate::row::{Datum, InternalRow};

/// The table's primary-key columns without its partition keys, in
/// primary-key order: what a key encodes.
pub(crate) fn physical_primary_key(table: &TableInfo) -> Result<Vec<String>> {
    let Some(pk) = table.descriptor.schema().primary_key() else {
        return Err(ClientError::Invalid(format!(
            "{} has no primary key: upserts, deletes, lookups and KV scans need a primary-key table",
            table.path
        )));
    };
    let partition_keys = table.partition_keys();
    Ok(pk
        .iter()
        .filter(|k| !partition_keys.contains(k))
        .cloned()
        .collect())
}

/// The key and bucket of the rows of one primary-key table.
///
/// Guarantees: the key bytes and the bucket are the ones fluss-rs and the
/// Java client compute for the same row (Fluss's compacted key and
/// bucketing function; tables that tier to Paimon or Iceberg, whose keys
/// differ, are refused when the plan is built).
pub(crate) struct KeyPlan {
    primary: KeyEncoder,
    /// The bucket key's own encoder when it differs from the physical
    /// primary key.
    bucket: Option<KeyEncoder>,
    bucket_count: i32,
}

impl KeyPlan {
    /// The plan of `table`'s whole rows. Fails for a table without a
    /// primary key, a key column that cannot be a key, and a lake format
    /// whose bucketing Fjord does not implement.
    pub(crate) fn new(table: &TableInfo) -> Result<Self> {
        let physical = physical_primary_key(table)?;
        // The append writer's rules for hashed tables (bucket count, lake
        // formats) hold for primary-key tables too.
        BucketAssigner::new(table, NoKeyAssigner::Sticky)?;
        let schema = table.descriptor.schema();
        let bucket_keys = table.descriptor.bucket_keys();
        let bucket = if bucket_keys.is_empty() || bucket_keys == physical.as_slice() {
            None
        } else {
            Some(KeyEncoder::new(schema, bucket_keys)?)
        };
        Ok(Self {
            primary: KeyEncoder::primary_key(schema, &physical)?,
            bucket,
            bucket_count: table.bucket_count(),
        })
    }

    /// The key of `row` (a whole row of the table) and its bucket. The key
    /// is in the plan's buffer until the next call.
    #[inline(always)]
    pub(crate) fn key_and_bucket<R: InternalRow + ?Sized>(
        &mut self,
        row: &R,
    ) -> Result<(&[u8], i32)> {
        let bucket = match &mut self.bucket {
            None => None,
            Some(encoder) => Some(fluss_bucket_of_key(
                encoder.encode_row(row)?,
                self.bucket_count,
            )),
        };
        let key = self.primary.encode_row(row)?;
        let bucket = bucket.unwrap_or_else(|| fluss_bucket_of_key(key, self.bucket_count));
        Ok((key, bucket))
    }

    /// Like [`KeyPlan::key_and_bucket`] for a shared plan: the key is
    /// appended to `out` (empty on entry), which the caller keeps.
    pub(crate) fn key_into<R: InternalRow + ?Sized>(
        &self,
        row: &R,
        out: &mut Vec<u8>,
    ) -> Result<i32> {
        let bucket = match &self.bucket {
            None => None,
            Some(encoder) => {
                // Hashed first, in the key's own buffer, then cleared.
                encoder.encode_row_into(row, out)?;
                let bucket = fluss_bucket_of_key(out, self.bucket_count);
                out.clear();
                Some(bucket)
            }
        };
        self.primary.encode_row_into(row, out)?;
        Ok(bucket.unwrap_or_else(|| fluss_bucket_of_key(out, self.bucket_count)))
    }

    /// Buckets of the table.
    pub(crate) fn bucket_count(&self) -> i32 {
        self.bucket_count
    }
}

/// The columns a caller names a row by (a lookup's key columns, a prefix
/// lookup's prefix columns), placed among the table's columns: built once
/// per lookuper.
pub(crate) struct KeyColumns {
    names: Box<[String]>,
    /// For each table column, its position among the key columns
    /// ([`NOT_A_KEY`] when it is not one).
    slot_of: Box<[u32]>,
}

/// [`KeyColumns::slot_of`] of a table column that is not a key column.
const NOT_A_KEY: u32 = u32::MAX;

impl KeyColumns {
    /// The columns `names` of `table`, in that order. Fails for a name that
    /// is not a column or appears twice.
    pub(crate) fn new(table: &TableInfo, names: &[String]) -> Result<Self> {
        let schema = table.descriptor.schema();
        let mut slot_of = vec![NOT_A_KEY; schema.columns().len()].into_boxed_slice();
        for (slot, name) in names.iter().enumerate() {
            let pos = schema.column_index(name).ok_or_else(|| {
                ClientError::Invalid(format!("`{name}` is not a column of {}", table.path))
            })?;
            if slot_of[pos] != NOT_A_KEY {
                return Err(ClientError::Invalid(format!(
                    "column `{name}` is named twice among the key columns"
                )));
            }
            slot_of[pos] = slot as u32;
        }
        Ok(Self {
            names: names.into(),
            slot_of,
        })
    }

    /// The key columns' names, in the order a key row holds them.
    pub(crate) fn names(&self) -> &[String] {
        &self.names
    }

    /// `key_row` (one value per key column, in order) seen as a whole row
    /// of the table: the key columns hold its values, the others NULL.
    /// Fails when the row does not have one field per key column.
    pub(crate) fn full_row<'r, R: InternalRow + ?Sized>(
        &'r self,
        key_row: &'r R,
    ) -> Result<FullRow<'r, R>> {
        if key_row.field_count() != self.names.len() {
            return Err(ClientError::Invalid(format!(
                "the key row has {} fields; it needs one per key column ({})",
                key_row.field_count(),
                self.names.join(", ")
            )));
        }
        Ok(FullRow {
            key_row,
            slot_of: &self.slot_of,
        })
    }
}

/// A key row laid over the table's columns ([`KeyColumns::full_row`]).
pub(crate) struct FullRow<'r, R: ?Sized> {
    key_row: &'r R,
    slot_of: &'r [u32],
}

impl<R: InternalRow + ?Sized> InternalRow for FullRow<'_, R> {
    fn field_count(&self) -> usize {
        self.slot_of.len()
    }

    fn datum(&self, pos: usize) -> Datum<'_> {
        match self.slot_of[pos] {
            NOT_A_KEY => Datum::Null,
            slot => self.key_row.datum(slot as usize),
        }
    }
}
