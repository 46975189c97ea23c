//! The append writer for log tables, taking Arrow `RecordBatch`es.
//!
//! Each appended `RecordBatch` becomes one Fluss log batch (ARROW format,
//! the table's compression) sent to one bucket, buckets taken round-robin
//! per batch. Everything derived from the table (Arrow schema, encoder,
//! compression, routes) is built once in [`AppendWriter::new`]. Sends are
//! pipelined: up to [`WriterConfig::max_inflight_batches`] produce requests
//! are outstanding; `append` waits for a slot (back-pressure) and `flush`
//! waits for all of them. Completion is per batch, never per record.

use std::sync::Arc;

use arrow_array::RecordBatch;
use bytes::Bytes;
use fjord_format::arrow_log::{ArrowCompression, ArrowLogEncoder};
use fjord_format::arrow_schema::to_arrow_schema;
use fjord_format::log_batch::BatchHeader;
use fjord_proto::messages as pb;
use fjord_proto::{ApiKey, ErrorCode};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::admin::TableInfo;
use crate::error::{ClientError, Result};
use crate::metadata::TableRoute;

/// Default bound on produce requests in flight per writer.
pub const DEFAULT_MAX_INFLIGHT_BATCHES: usize = 8;

/// Writer options.
#[derive(Clone, Debug)]
pub struct WriterConfig {
    /// `acks`: 0 (no wait), 1 (leader appended) or -1 (durable, the default).
    pub acks: i32,
    /// Produce requests outstanding at most; bounds the writer's memory.
    pub max_inflight_batches: usize,
    /// Server-side timeout of a produce request.
    pub request_timeout_ms: i32,
}

impl Default for WriterConfig {
    fn default() -> Self {
        Self {
            acks: -1,
            max_inflight_batches: DEFAULT_MAX_INFLIGHT_BATCHES,
            request_timeout_ms: 30_000,
        }
    }
}

/// Where one sent batch landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchAck {
    /// The bucket it went to.
    pub bucket: i32,
    /// Offset of its first record (-1 with acks=0).
    pub base_offset: i64,
}

/// Appends Arrow record batches to one log table.
pub struct AppendWriter {
    table: TableInfo,
    route: TableRoute,
    encoder: ArrowLogEncoder,
    config: WriterConfig,
    next_bucket: i32,
    slots: Arc<Semaphore>,
    inflight: JoinSet<Result<BatchAck>>,
    acks: Vec<BatchAck>,
}

impl AppendWriter {
    /// A writer for `table`, sending to the leaders in `route`.
    pub fn new(table: TableInfo, route: TableRoute, config: WriterConfig) -> Result<Self> {
        if table.descriptor.has_primary_key() {
            return Err(ClientError::Invalid(format!(
                "{} has a primary key: append writers write log tables only",
                table.path
            )));
        }
        let compression = ArrowCompression::from_table_properties(table.descriptor.properties())
            .map_err(|e| ClientError::Format(e.to_string()))?;
        let arrow_schema = to_arrow_schema(table.descriptor.schema());
        let encoder = ArrowLogEncoder::new(arrow_schema, compression)
            .map_err(|e| ClientError::Format(e.to_string()))?;
        let slots = Arc::new(Semaphore::new(config.max_inflight_batches.max(1)));
        Ok(Self {
            table,
            route,
            encoder,
            config,
            next_bucket: 0,
            slots,
            inflight: JoinSet::new(),
            acks: Vec::new(),
        })
    }

    /// The Arrow schema batches must have.
    pub fn arrow_schema(&self) -> &arrow_schema::SchemaRef {
        self.encoder.schema()
    }

    /// Encodes `batch` into one log batch and sends it to the next bucket.
    /// Waits only when the in-flight bound is reached.
    pub async fn append(&mut self, batch: &RecordBatch) -> Result<()> {
        let bucket = self.next_bucket;
        self.next_bucket = (self.next_bucket + 1) % self.route.bucket_count();
        self.send(bucket, batch).await
    }

    /// Encodes `batch` into one log batch and sends it to `bucket`.
    pub async fn append_to_bucket(&mut self, bucket: i32, batch: &RecordBatch) -> Result<()> {
        if bucket < 0 || bucket >= self.route.bucket_count() {
            return Err(ClientError::Invalid(format!(
                "bucket {bucket} out of range: {} has {} buckets",
                self.table.path,
                self.route.bucket_count()
            )));
        }
        self.send(bucket, batch).await
    }

    async fn send(&mut self, bucket: i32, batch: &RecordBatch) -> Result<()> {
        let permit = Arc::clone(&self.slots)
            .acquire_owned()
            .await
            .map_err(|_| ClientError::Invalid("writer closed".into()))?;
        // Collect what finished meanwhile, surfacing the first failure early.
        while let Some(done) = self.inflight.try_join_next() {
            self.acks.push(joined(done)?);
        }
        let header = BatchHeader::append_only(self.table.schema_id as i16, batch.num_rows() as i32);
        let mut out = Vec::with_capacity(batch.get_array_memory_size() / 2 + 256);
        self.encoder
            .encode(batch, &header, None, &mut out)
            .map_err(|e| ClientError::Format(e.to_string()))?;
        let request = pb::ProduceLogRequest {
            acks: self.config.acks,
            table_id: self.table.table_id,
            timeout_ms: self.config.request_timeout_ms,
            buckets_req: vec![pb::PbProduceLogReqForBucket {
                partition_id: None,
                bucket_id: bucket,
                records: Bytes::from(out),
                original_partition_name: None,
                routing_bucket_count: None,
            }],
        };
        let connection = self.route.leader(bucket).clone();
        self.inflight.spawn(async move {
            let _permit = permit;
            let response: pb::ProduceLogResponse =
                connection.request(ApiKey::ProduceLog, &request).await?;
            let answer = response
                .buckets_resp
                .into_iter()
                .find(|b| b.bucket_id == bucket)
                .ok_or_else(|| ClientError::Protocol {
                    api: ApiKey::ProduceLog.name(),
                    message: format!("no answer for bucket {bucket}"),
                })?;
            if let Some(code) = answer.error_code.filter(|&c| c != 0) {
                let error = ErrorCode::from_code(code)
                    .unwrap_or(ErrorCode::UnknownServerError)
                    .with_message(answer.error_message.unwrap_or_default());
                return Err(ClientError::Server {
                    api: ApiKey::ProduceLog.name(),
                    error,
                });
            }
            Ok(BatchAck {
                bucket,
                base_offset: answer.base_offset.unwrap_or(-1),
            })
        });
        Ok(())
    }

    /// Waits until every batch sent so far is acknowledged; returns their
    /// acknowledgements since the last flush, or the first error.
    pub async fn flush(&mut self) -> Result<Vec<BatchAck>> {
        let mut first_error = None;
        while let Some(done) = self.inflight.join_next().await {
            match joined(done) {
                Ok(ack) => self.acks.push(ack),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(std::mem::take(&mut self.acks)),
        }
    }
}

fn joined(done: std::result::Result<Result<BatchAck>, tokio::task::JoinError>) -> Result<BatchAck> {
    done.map_err(|e| ClientError::Invalid(format!("send task failed: {e}")))?
}
