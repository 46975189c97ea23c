//! Reads of primary-key tables: their current rows, never the changelog.
//!
//! - An equality on every primary-key column: one point lookup through the
//!   engine's [`Lookuper`](fjord_client::Lookuper) for the table.
//! - Under a LIMIT: LimitScan, bucket after bucket, until the limit is met
//!   (one request per bucket read).
//! - Otherwise: every bucket of every partition left after pruning through
//!   a ScanKv session (a snapshot of the bucket taken by its first call),
//!   dealt round-robin to at most `target_partitions` partitions.
//!
//! Rows arrive as values and are turned into Arrow once per answer
//! (`KvRows::to_record_batch`), then projected.

use std::sync::Arc;

use arrow_array::{RecordBatch, RecordBatchOptions};
use arrow_schema::SchemaRef;
use datafusion::common::ScalarValue;
use datafusion::error::Result as DfResult;
use datafusion::execution::TaskContext;
use datafusion::physical_plan::streaming::{PartitionStream, StreamingTableExec};
use datafusion::physical_plan::{ExecutionPlan, SendableRecordBatchStream};
use fjord_client::admin::PartitionInfo;
use fjord_client::row::{Datum, GenericRow, RowBatchBuilder, Timestamp};
use fjord_client::{KvBucket, TableInfo};
use fjord_format::types::TypeKind;
use tokio::sync::mpsc;

use crate::error::client_err;
use crate::log_scan::{channel_stream, PREFETCH_BATCHES};
use crate::table::{ScanRequest, ScanStats, TableServices, KV_BATCH_BYTES_DEFAULT};

/// The largest LIMIT answered with LimitScan (Fjord's server caps one
/// LimitScan at 2^20 rows); larger ones scan.
const LIMIT_SCAN_ROWS_MAX: usize = 1 << 20;

/// The plan of a point lookup of `keys` (one value per primary-key column).
pub(crate) fn lookup_plan(
    req: ScanRequest,
    keys: Vec<ScalarValue>,
) -> DfResult<Arc<dyn ExecutionPlan>> {
    let schema = req.output_schema()?;
    let part = Arc::new(KvPartition {
        services: Arc::clone(&req.services),
        table: req.table.clone(),
        schema: schema.clone(),
        projection: req.projection.clone(),
        work: KvWork::Lookup(keys),
    });
    Ok(Arc::new(StreamingTableExec::try_new(
        schema,
        vec![part],
        None,
        [],
        false,
        req.limit,
    )?))
}

/// The plan of a scan of every bucket of `partitions`.
pub(crate) fn scan_plan(
    req: ScanRequest,
    partitions: Vec<Option<PartitionInfo>>,
) -> DfResult<Arc<dyn ExecutionPlan>> {
    let schema = req.output_schema()?;
    let buckets: Vec<KvBucket> = partitions
        .iter()
        .flat_map(|p| {
            (0..req.table.bucket_count()).map(move |b| KvBucket {
                partition_id: p.as_ref().map(|p| p.partition_id),
                bucket: b,
            })
        })
        .collect();
    let limited = req.limit.filter(|&l| l <= LIMIT_SCAN_ROWS_MAX);
    let groups = match limited {
        // A limit reads bucket after bucket in one partition.
        Some(_) => 1,
        None => req.target_partitions.min(buckets.len()).max(1),
    };
    let mut parts: Vec<Vec<KvBucket>> = vec![Vec::new(); groups];
    for (i, b) in buckets.into_iter().enumerate() {
        parts[i % groups].push(b);
    }
    let streams = parts
        .into_iter()
        .map(|buckets| {
            Arc::new(KvPartition {
                services: Arc::clone(&req.services),
                table: req.table.clone(),
                schema: schema.clone(),
                projection: req.projection.clone(),
                work: match limited {
                    Some(limit) => KvWork::Limit(buckets, limit),
                    None => KvWork::Scan(buckets),
                },
            }) as Arc<dyn PartitionStream>
        })
        .collect();
    Ok(Arc::new(StreamingTableExec::try_new(
        schema,
        streams,
        None,
        [],
        false,
        req.limit,
    )?))
}

#[derive(Clone, Debug)]
enum KvWork {
    Lookup(Vec<ScalarValue>),
    Limit(Vec<KvBucket>, usize),
    Scan(Vec<KvBucket>),
}

#[derive(Debug)]
struct KvPartition {
    services: Arc<TableServices>,
    table: TableInfo,
    schema: SchemaRef,
    projection: Option<Vec<usize>>,
    work: KvWork,
}

impl PartitionStream for KvPartition {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let (tx, rx) = mpsc::channel(PREFETCH_BATCHES);
        let task = KvTask {
            services: Arc::clone(&self.services),
            table: self.table.clone(),
            schema: self.schema.clone(),
            projection: self.projection.clone(),
        };
        let work = self.work.clone();
        tokio::spawn(async move {
            if let Err(e) = task.run(work, &tx).await {
                let _ = tx.send(Err(e)).await;
            }
        });
        channel_stream(self.schema.clone(), rx)
    }
}

struct KvTask {
    services: Arc<TableServices>,
    table: TableInfo,
    schema: SchemaRef,
    projection: Option<Vec<usize>>,
}

impl KvTask {
    async fn run(self, work: KvWork, tx: &mpsc::Sender<DfResult<RecordBatch>>) -> DfResult<()> {
        let client = &self.services.client;
        let stats = &self.services.stats;
        match work {
            KvWork::Lookup(keys) => {
                let lookuper = self.services.lookuper(&self.table).await?;
                let Some(datums) = key_datums(&self.table, &keys) else {
                    // A key value no row can hold (out of the column's range).
                    return Ok(());
                };
                ScanStats::add(&stats.lookups, 1);
                let row = lookuper
                    .lookup(&GenericRow::from_values(datums))
                    .await
                    .map_err(client_err)?;
                if let Some(row) = row {
                    let mut builder = RowBatchBuilder::new(lookuper.arrow_schema().clone())
                        .map_err(client_err)?;
                    builder.append(&row).map_err(client_err)?;
                    let batch = builder.finish().map_err(client_err)?;
                    let _ = tx.send(self.project(batch)).await;
                }
            }
            KvWork::Limit(buckets, limit) => {
                let mut remaining = limit;
                for bucket in buckets {
                    if remaining == 0 {
                        break;
                    }
                    let rows = client
                        .limit_scan(&self.table, bucket, remaining as i32)
                        .await
                        .map_err(client_err)?;
                    ScanStats::add(&stats.kv_scans, 1);
                    if rows.is_empty() {
                        continue;
                    }
                    remaining = remaining.saturating_sub(rows.len());
                    let batch = rows.to_record_batch().map_err(client_err)?;
                    if tx.send(self.project(batch)).await.is_err() {
                        return Ok(());
                    }
                }
            }
            KvWork::Scan(buckets) => {
                for bucket in buckets {
                    let mut scanner = client
                        .kv_scanner(&self.table, bucket, KV_BATCH_BYTES_DEFAULT)
                        .await
                        .map_err(client_err)?;
                    while let Some(rows) = scanner.next_batch().await.map_err(client_err)? {
                        ScanStats::add(&stats.kv_scans, 1);
                        if rows.is_empty() {
                            continue;
                        }
                        let batch = rows.to_record_batch().map_err(client_err)?;
                        if tx.send(self.project(batch)).await.is_err() {
                            return Ok(());
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn project(&self, batch: RecordBatch) -> DfResult<RecordBatch> {
        match &self.projection {
            None => Ok(RecordBatch::try_new(
                self.schema.clone(),
                batch.columns().to_vec(),
            )?),
            Some(p) if p.is_empty() => Ok(RecordBatch::try_new_with_options(
                self.schema.clone(),
                vec![],
                &RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
            )?),
            Some(p) => Ok(RecordBatch::try_new(
                self.schema.clone(),
                p.iter().map(|&i| batch.column(i).clone()).collect(),
            )?),
        }
    }
}

/// The primary-key values as the key row's datums, each converted to its
/// column's type; `None` when a value cannot be held by its column (no row
/// can match it).
fn key_datums<'a>(table: &TableInfo, keys: &'a [ScalarValue]) -> Option<Vec<Datum<'a>>> {
    let schema = table.descriptor.schema();
    let pk = schema.primary_key()?;
    pk.iter()
        .zip(keys)
        .map(|(name, value)| {
            let column = &schema.columns()[schema.column_index(name)?];
            scalar_to_datum(column.data_type.kind(), value)
        })
        .collect()
}

/// A literal as a datum of a column of `kind`, if it fits.
pub(crate) fn scalar_to_datum<'a>(kind: &TypeKind, value: &'a ScalarValue) -> Option<Datum<'a>> {
    let int = || -> Option<i64> {
        match value {
            ScalarValue::Int8(Some(v)) => Some(*v as i64),
            ScalarValue::Int16(Some(v)) => Some(*v as i64),
            ScalarValue::Int32(Some(v)) => Some(*v as i64),
            ScalarValue::Int64(Some(v)) => Some(*v),
            ScalarValue::UInt8(Some(v)) => Some(*v as i64),
            ScalarValue::UInt16(Some(v)) => Some(*v as i64),
            ScalarValue::UInt32(Some(v)) => Some(*v as i64),
            ScalarValue::UInt64(Some(v)) => i64::try_from(*v).ok(),
            _ => None,
        }
    };
    Some(match kind {
        TypeKind::Boolean => match value {
            ScalarValue::Boolean(Some(b)) => Datum::Boolean(*b),
            _ => return None,
        },
        TypeKind::TinyInt => Datum::TinyInt(i8::try_from(int()?).ok()?),
        TypeKind::SmallInt => Datum::SmallInt(i16::try_from(int()?).ok()?),
        TypeKind::Int => Datum::Int(i32::try_from(int()?).ok()?),
        TypeKind::BigInt => Datum::BigInt(int()?),
        TypeKind::Float => match value {
            ScalarValue::Float32(Some(v)) => Datum::Float(*v),
            _ => return None,
        },
        TypeKind::Double => match value {
            ScalarValue::Float64(Some(v)) => Datum::Double(*v),
            _ => return None,
        },
        TypeKind::String | TypeKind::Char { .. } => match value {
            ScalarValue::Utf8(Some(s))
            | ScalarValue::LargeUtf8(Some(s))
            | ScalarValue::Utf8View(Some(s)) => Datum::String(s),
            _ => return None,
        },
        TypeKind::Bytes | TypeKind::Binary { .. } => match value {
            ScalarValue::Binary(Some(b))
            | ScalarValue::LargeBinary(Some(b))
            | ScalarValue::BinaryView(Some(b))
            | ScalarValue::FixedSizeBinary(_, Some(b)) => Datum::Binary(b),
            _ => return None,
        },
        TypeKind::Decimal { scale, .. } => match value {
            ScalarValue::Decimal128(Some(v), _, s) if *s == *scale as i8 => Datum::Decimal(*v),
            _ => return None,
        },
        TypeKind::Date => match value {
            ScalarValue::Date32(Some(d)) => Datum::Date(*d),
            _ => return None,
        },
        TypeKind::Timestamp { .. } | TypeKind::TimestampLtz { .. } => {
            let ts = match value {
                ScalarValue::TimestampSecond(Some(v), _) => {
                    Timestamp::from_millis(v.checked_mul(1000)?)
                }
                ScalarValue::TimestampMillisecond(Some(v), _) => Timestamp::from_millis(*v),
                ScalarValue::TimestampMicrosecond(Some(v), _) => Timestamp::from_micros(*v),
                ScalarValue::TimestampNanosecond(Some(v), _) => Timestamp::from_nanos(*v),
                _ => return None,
            };
            match kind {
                TypeKind::Timestamp { .. } => Datum::Timestamp(ts),
                _ => Datum::TimestampLtz(ts),
            }
        }
        _ => return None,
    })
}
