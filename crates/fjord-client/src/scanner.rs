//! The log scanner: reads buckets of a log table from given offsets,
//! returning Arrow `RecordBatch`es, with column projection pushed to the
//! server (the server prunes columns; the scanner decodes only what came).
//!
//! One FetchLog request per leader per poll covers every subscribed bucket
//! it leads; the response's record bytes are decoded batch by batch without
//! copying them (Arrow buffers slice the response).

use std::collections::BTreeMap;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use fjord_format::arrow_log::decode_log_batch;
use fjord_format::arrow_schema::{to_arrow_schema, to_projected_arrow_schema};
use fjord_format::log_batch::LogBatches;
use fjord_proto::messages as pb;
use fjord_proto::{ApiKey, ErrorCode};

use crate::admin::TableInfo;
use crate::connection::ServerConnection;
use crate::error::{ClientError, Result};
use crate::metadata::TableRoute;

/// Default `max_bytes` of one FetchLog request (Fluss's
/// `client.scanner.log.fetch.max-bytes` default, 16 MiB).
pub const DEFAULT_FETCH_MAX_BYTES: i32 = 16 * 1024 * 1024;
/// Default per-bucket byte cap (`client.scanner.log.fetch.max-bytes-for-bucket`, 1 MiB).
pub const DEFAULT_FETCH_MAX_BYTES_FOR_BUCKET: i32 = 1024 * 1024;
/// Default long-poll wait when no data is there yet (`client.scanner.log.fetch.wait-max-time`, 500 ms).
pub const DEFAULT_FETCH_MAX_WAIT_MS: i32 = 500;

/// Scanner options.
#[derive(Clone, Debug)]
pub struct ScannerConfig {
    /// Column indexes to read, in table order; `None` reads all columns.
    pub projection: Option<Vec<usize>>,
    /// `max_bytes` of one fetch.
    pub fetch_max_bytes: i32,
    /// Per-bucket byte cap of one fetch.
    pub fetch_max_bytes_for_bucket: i32,
    /// How long the server may hold a fetch that found no data.
    pub fetch_max_wait_ms: i32,
}

impl Default for ScannerConfig {
    fn default() -> Self {
        Self {
            projection: None,
            fetch_max_bytes: DEFAULT_FETCH_MAX_BYTES,
            fetch_max_bytes_for_bucket: DEFAULT_FETCH_MAX_BYTES_FOR_BUCKET,
            fetch_max_wait_ms: DEFAULT_FETCH_MAX_WAIT_MS,
        }
    }
}

/// Records read from one bucket.
#[derive(Debug, Clone)]
pub struct ScanBatch {
    /// The bucket read.
    pub bucket: i32,
    /// Offset of the first record of `records`.
    pub base_offset: i64,
    /// The records (projected columns only when a projection is set).
    pub records: RecordBatch,
}

/// Reads subscribed buckets of one log table.
pub struct LogScanner {
    table: TableInfo,
    route: TableRoute,
    config: ScannerConfig,
    arrow_schema: SchemaRef,
    projected_fields: Vec<i32>,
    /// Next offset to read per subscribed bucket.
    offsets: BTreeMap<i32, i64>,
}

impl LogScanner {
    /// A scanner of `table` reading from the leaders in `route`.
    pub fn new(table: TableInfo, route: TableRoute, config: ScannerConfig) -> Result<Self> {
        let schema = table.descriptor.schema();
        let (arrow_schema, projected_fields) = match &config.projection {
            None => (to_arrow_schema(schema), Vec::new()),
            Some(columns) => {
                // The server returns projected columns in table order, so the
                // scanner asks for them that way (reordering is the caller's).
                let ascending = !columns.is_empty() && columns.windows(2).all(|w| w[0] < w[1]);
                let arrow = ascending
                    .then(|| to_projected_arrow_schema(schema, columns))
                    .flatten()
                    .ok_or_else(|| {
                    ClientError::Invalid(format!(
                        "projection {columns:?} is not a list of distinct ascending column indexes of {} ({} columns)",
                        table.path,
                        schema.columns().len()
                    ))
                })?;
                (arrow, columns.iter().map(|&c| c as i32).collect())
            }
        };
        Ok(Self {
            table,
            route,
            config,
            arrow_schema,
            projected_fields,
            offsets: BTreeMap::new(),
        })
    }

    /// The Arrow schema of the batches this scanner returns.
    pub fn arrow_schema(&self) -> &SchemaRef {
        &self.arrow_schema
    }

    /// Starts (or moves) reading `bucket` at `offset`.
    pub fn subscribe(&mut self, bucket: i32, offset: i64) -> Result<()> {
        if bucket < 0 || bucket >= self.route.bucket_count() {
            return Err(ClientError::Invalid(format!(
                "bucket {bucket} out of range: {} has {} buckets",
                self.table.path,
                self.route.bucket_count()
            )));
        }
        self.offsets.insert(bucket, offset);
        Ok(())
    }

    /// The next offset to be read of each subscribed bucket.
    pub fn positions(&self) -> &BTreeMap<i32, i64> {
        &self.offsets
    }

    /// Fetches once from the leaders of the subscribed buckets; returns
    /// what arrived (possibly nothing after the long-poll wait).
    pub async fn poll(&mut self) -> Result<Vec<ScanBatch>> {
        // Group buckets by leader so each leader gets one request.
        let mut by_leader: Vec<(ServerConnection, Vec<pb::PbFetchLogReqForBucket>)> = Vec::new();
        for (&bucket, &offset) in &self.offsets {
            let leader = self.route.leader(bucket);
            let entry = pb::PbFetchLogReqForBucket {
                partition_id: None,
                bucket_id: bucket,
                fetch_offset: offset,
                max_fetch_bytes: self.config.fetch_max_bytes_for_bucket,
                routing_bucket_count: None,
            };
            match by_leader
                .iter_mut()
                .find(|(c, _)| c.addr() == leader.addr())
            {
                Some((_, buckets)) => buckets.push(entry),
                None => by_leader.push((leader.clone(), vec![entry])),
            }
        }
        let mut out = Vec::new();
        for (connection, buckets) in by_leader {
            let request = pb::FetchLogRequest {
                follower_server_id: -1,
                max_bytes: self.config.fetch_max_bytes,
                tables_req: vec![pb::PbFetchLogReqForTable {
                    table_id: self.table.table_id,
                    projection_pushdown_enabled: !self.projected_fields.is_empty(),
                    projected_fields: self.projected_fields.clone(),
                    buckets_req: buckets,
                    filter_predicate: None,
                    filter_schema_id: None,
                }],
                max_wait_ms: Some(self.config.fetch_max_wait_ms),
                min_bytes: Some(1),
                read_preference: None,
            };
            let response: pb::FetchLogResponse =
                connection.request(ApiKey::FetchLog, &request).await?;
            for table in response.tables_resp {
                for bucket in table.buckets_resp {
                    self.take_bucket(bucket, &mut out)?;
                }
            }
        }
        Ok(out)
    }

    fn take_bucket(
        &mut self,
        bucket: pb::PbFetchLogRespForBucket,
        out: &mut Vec<ScanBatch>,
    ) -> Result<()> {
        let id = bucket.bucket_id;
        if let Some(code) = bucket.error_code.filter(|&c| c != 0) {
            let error = ErrorCode::from_code(code)
                .unwrap_or(ErrorCode::UnknownServerError)
                .with_message(bucket.error_message.unwrap_or_default());
            return Err(ClientError::Server {
                api: ApiKey::FetchLog.name(),
                error,
            });
        }
        let Some(records) = bucket.records else {
            return Ok(());
        };
        let Some(next) = self.offsets.get(&id).copied() else {
            return Ok(());
        };
        let mut position = next;
        let buffer = arrow_buffer::Buffer::from(records.clone());
        let mut start = 0usize;
        for batch in LogBatches::new(&records) {
            let batch = batch.map_err(|e| ClientError::Format(format!("bucket {id}: {e}")))?;
            let size = batch.size_in_bytes();
            let base = batch.base_offset();
            let next_offset = batch.next_offset();
            let slice = buffer.slice_with_length(start, size);
            start += size;
            if next_offset <= position {
                continue;
            }
            let decoded = decode_log_batch(&slice, self.arrow_schema.clone())
                .map_err(|e| ClientError::Format(format!("bucket {id} offset {base}: {e}")))?;
            // A fetch starts at the batch holding the offset: skip records before it.
            let skip = (position - base).max(0) as usize;
            let records = if skip > 0 {
                decoded
                    .records
                    .slice(skip, decoded.records.num_rows() - skip)
            } else {
                decoded.records
            };
            out.push(ScanBatch {
                bucket: id,
                base_offset: base + skip as i64,
                records,
            });
            position = next_offset;
        }
        self.offsets.insert(id, position);
        Ok(())
    }
}
