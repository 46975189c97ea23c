//! The benchmark workloads: their Fluss schemas, the table descriptors the
//! benchmarks create, and the deterministic data, generated up front as Arrow
//! batches so that the timed phase measures the client, not the generator.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch};
use arrow_buffer::Buffer;
use arrow_data::ArrayData;
use fjord_format::arrow_schema::to_arrow_schema;
use fjord_format::fixtures::{user_behavior_batch, user_behavior_schema};
use fjord_format::schema::{
    Schema, TableDescriptor, TableDistribution, TABLE_LOG_ARROW_COMPRESSION_TYPE,
    TABLE_LOG_ARROW_COMPRESSION_ZSTD_LEVEL,
};
use fjord_format::types::DataType;

/// Buckets of every benchmark table (the workload: 4 buckets).
pub const BENCH_BUCKETS: i32 = 4;
/// ZSTD level of the benchmark tables: Fluss's default.
pub const BENCH_ZSTD_LEVEL: i32 = 3;
/// Days the `--partitioned` workload spreads over, one partition each.
pub const PARTITION_DAYS: usize = 30;
/// Name of the partition column of the `--partitioned` workload.
pub const PARTITION_COLUMN: &str = "dt";

/// Rows per generated Arrow batch. About 2 MiB of `user_behavior` (38 bytes a
/// row), the writer's default `client.writer.batch-size`, and close to the
/// seed's ~53 k records per batch; it is also the unit the compression floor
/// compresses, so floor and writer see buffers of the same size.
pub const DEFAULT_BATCH_ROWS: usize = 55_000;

/// Which table the benchmark writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SchemaKind {
    /// `user_id BIGINT, item_id BIGINT, category_id BIGINT, behavior STRING,
    /// ts TIMESTAMP(3)`: the seed documents' workload.
    UserBehavior,
    /// One `BIGINT` column: the record of Flink's point-to-point benchmark.
    Long,
}

impl SchemaKind {
    /// The name printed in the JSON line.
    pub fn name(self) -> &'static str {
        match self {
            SchemaKind::UserBehavior => "user_behavior",
            SchemaKind::Long => "long",
        }
    }

    /// The table's Fluss schema; `partitioned` adds a last column
    /// [`PARTITION_COLUMN`] (`STRING`), the partition key.
    pub fn table_schema(self, partitioned: bool) -> Schema {
        if !partitioned {
            return self.schema();
        }
        let mut builder = Schema::builder();
        for column in self.schema().columns() {
            builder = builder.column(column.name.clone(), column.data_type.clone());
        }
        builder
            .column(PARTITION_COLUMN, DataType::string())
            .build()
            .expect("a fixed, valid schema")
    }

    /// The workload's Fluss schema (without a partition column).
    pub fn schema(self) -> Schema {
        match self {
            SchemaKind::UserBehavior => user_behavior_schema(),
            SchemaKind::Long => Schema::builder()
                .column("v", DataType::bigint())
                .build()
                .expect("a fixed, valid schema"),
        }
    }

    /// Batch number `seq` of the workload, `rows` rows, where every batch
    /// but the last has `batch_rows`; the same arguments give the same rows.
    fn batch(self, rows: usize, batch_rows: usize, seq: u64) -> RecordBatch {
        match self {
            SchemaKind::UserBehavior => user_behavior_batch(rows, seq),
            SchemaKind::Long => {
                let first = seq as i64 * batch_rows as i64;
                let values: ArrayRef =
                    Arc::new(Int64Array::from_iter_values(first..first + rows as i64));
                RecordBatch::try_new(to_arrow_schema(&self.schema()), vec![values])
                    .expect("one BIGINT column matches the schema")
            }
        }
    }
}

/// The table's Arrow body compression (`table.log.arrow.compression.type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Compression {
    /// `ZSTD`, level [`BENCH_ZSTD_LEVEL`] (Fluss's default).
    Zstd,
    /// `LZ4_FRAME`.
    Lz4,
    /// `NONE`: where the client's own overhead shows.
    None,
}

impl Compression {
    /// The name printed in the JSON line.
    pub fn name(self) -> &'static str {
        match self {
            Compression::Zstd => "zstd",
            Compression::Lz4 => "lz4",
            Compression::None => "none",
        }
    }

    /// The value of `table.log.arrow.compression.type`.
    pub(super) fn fluss_name(self) -> &'static str {
        match self {
            Compression::Zstd => "ZSTD",
            Compression::Lz4 => "LZ4_FRAME",
            Compression::None => "NONE",
        }
    }
}

/// The descriptor of a fresh benchmark table: [`BENCH_BUCKETS`] buckets, no
/// bucket key (sticky assignment, as the official clients do), `compression`;
/// `partitioned`: partitioned by [`PARTITION_COLUMN`].
pub fn table_descriptor(
    schema: SchemaKind,
    compression: Compression,
    partitioned: bool,
    day_column: bool,
) -> anyhow::Result<TableDescriptor> {
    let mut properties = BTreeMap::new();
    properties.insert(
        TABLE_LOG_ARROW_COMPRESSION_TYPE.to_owned(),
        compression.fluss_name().to_owned(),
    );
    if compression == Compression::Zstd {
        properties.insert(
            TABLE_LOG_ARROW_COMPRESSION_ZSTD_LEVEL.to_owned(),
            BENCH_ZSTD_LEVEL.to_string(),
        );
    }
    let partition_keys = match partitioned {
        true => vec![PARTITION_COLUMN.to_owned()],
        false => Vec::new(),
    };
    Ok(TableDescriptor::new(
        schema.table_schema(partitioned || day_column),
        Some("fjord bench workload".to_owned()),
        partition_keys,
        Some(TableDistribution {
            bucket_count: Some(BENCH_BUCKETS),
            bucket_keys: Vec::new(),
        }),
        properties,
        BTreeMap::new(),
    )?)
}

/// The generated rows of one run, as Arrow batches.
pub struct Workload {
    /// The batches, in order; together they hold exactly `rows` rows.
    pub batches: Vec<RecordBatch>,
    /// Total rows.
    pub rows: usize,
    /// Uncompressed Arrow buffer bytes of all batches (the IPC body before
    /// compression): the basis of `mb_per_s`.
    pub arrow_bytes: u64,
}

/// Generates `rows` rows of `schema` in batches of `batch_rows`.
pub fn generate(schema: SchemaKind, rows: usize, batch_rows: usize) -> Workload {
    let batch_rows = batch_rows.max(1);
    let mut batches = Vec::with_capacity(rows.div_ceil(batch_rows));
    let mut arrow_bytes = 0u64;
    let mut left = rows;
    let mut seq = 0u64;
    while left > 0 {
        let n = left.min(batch_rows);
        let batch = schema.batch(n, batch_rows, seq);
        arrow_bytes += arrow_body_bytes(&batch) as u64;
        batches.push(batch);
        left -= n;
        seq += 1;
    }
    Workload {
        batches,
        rows,
        arrow_bytes,
    }
}

/// Bytes of every buffer of `batch` (validity bitmaps, offsets, values), as
/// the Arrow IPC body carries them before compression and padding.
pub fn arrow_body_bytes(batch: &RecordBatch) -> usize {
    let mut total = 0;
    for column in batch.columns() {
        for_each_buffer(&column.to_data(), &mut |buffer| total += buffer.len());
    }
    total
}

/// Calls `f` with each buffer of `data` and its children, in the order the
/// Arrow IPC writer emits them (validity first, then the data buffers).
pub fn for_each_buffer(data: &ArrayData, f: &mut impl FnMut(&Buffer)) {
    if let Some(nulls) = data.nulls() {
        f(nulls.buffer());
    }
    for buffer in data.buffers() {
        f(buffer);
    }
    for child in data.child_data() {
        for_each_buffer(child, f);
    }
}

/// The [`PARTITION_DAYS`] partition values, `2017-11-01` onwards (the month
/// of the seed's Taobao data), built once per run.
pub fn partition_days() -> Vec<String> {
    (1..=PARTITION_DAYS)
        .map(|d| format!("2017-11-{d:02}"))
        .collect()
}

/// The day (index into [`partition_days`]) of record `index` of `rows`: the
/// records are a time-ordered replay, so each day is one contiguous run.
pub fn day_of(index: usize, rows: usize) -> usize {
    ((index as u128 * PARTITION_DAYS as u128) / rows.max(1) as u128) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_workload_is_deterministic_and_sized_as_asked() {
        let a = generate(SchemaKind::UserBehavior, 10_001, 4_000);
        let b = generate(SchemaKind::UserBehavior, 10_001, 4_000);
        assert_eq!(a.batches, b.batches);
        assert_eq!(a.batches.len(), 3);
        let rows: usize = a.batches.iter().map(RecordBatch::num_rows).sum();
        assert_eq!((a.rows, rows), (10_001, 10_001));
    }

    #[test]
    fn long_workload_is_one_counter_and_eight_bytes_a_record() {
        let w = generate(SchemaKind::Long, 10, 4);
        assert_eq!(w.arrow_bytes, 80);
        let values: Vec<i64> = w
            .batches
            .iter()
            .flat_map(|b| {
                b.column(0)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap()
                    .values()
                    .to_vec()
            })
            .collect();
        assert_eq!(values, (0..10).collect::<Vec<i64>>());
    }

    #[test]
    fn days_cover_every_partition_in_order() {
        let rows = 1_000;
        let days: Vec<usize> = (0..rows).map(|i| day_of(i, rows)).collect();
        assert_eq!(days[0], 0);
        assert_eq!(days[rows - 1], PARTITION_DAYS - 1);
        assert!(days.windows(2).all(|w| w[1] == w[0] || w[1] == w[0] + 1));
        assert_eq!(partition_days().len(), PARTITION_DAYS);
    }

    #[test]
    fn partitioned_descriptor_adds_the_day_column_as_partition_key() {
        let d = table_descriptor(SchemaKind::UserBehavior, Compression::Zstd, true, false).unwrap();
        let columns = d.schema().columns();
        assert_eq!(columns.last().unwrap().name, PARTITION_COLUMN);
        assert_eq!(columns.len(), 6);
        assert_eq!(d.partition_keys(), [PARTITION_COLUMN.to_owned()]);
        assert_eq!(
            d.properties()
                .get(TABLE_LOG_ARROW_COMPRESSION_ZSTD_LEVEL)
                .map(String::as_str),
            Some("3")
        );
    }
}
