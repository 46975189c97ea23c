//! Reads of a primary-key table bucket's current rows, in key order:
//! LimitScan (the first `limit` rows, one request) and ScanKv (the whole
//! bucket, streamed in batches through a scanner session on the server).
//!
//! Both answer with value batches, decoded like lookups ([`KvRows`]).
//! Their errors are in the response body; retriable ones (not leader,
//! unknown table or bucket, KV storage busy, a lost connection) refresh
//! the bucket's leader and try again, at most [`KV_SCAN_ATTEMPTS_MAX`]
//! times. A [`KvScanner`] dropped before its last batch closes its server
//! session (`close_scanner`), so the server's scanner slots (8 per bucket,
//! 200 per server in Fluss) are not held until they expire.

use std::time::Duration;

use bytes::Bytes;
use fjord_proto::messages as pb;
use fjord_proto::{ApiKey, ErrorCode};

use crate::admin::TableInfo;
use crate::client::FlussClient;
use crate::connection::ServerConnection;
use crate::error::{ClientError, Result};
use crate::kv::rows::{KvRows, ValueDecoder};
use crate::writer::sender::backoff;

/// Attempts of one LimitScan, or of one ScanKv call that opens a session,
/// before a retriable error is returned. (A continuation is not retried:
/// the server refuses a call sequence it has seen, and a lost answer
/// loses the session's position.)
pub const KV_SCAN_ATTEMPTS_MAX: i32 = 10;

/// Fluss's `client.scanner.kv.fetch.max-bytes` default: the most bytes of
/// rows one ScanKv answer carries (the server caps it too).
pub const KV_SCAN_FETCH_BYTES_DEFAULT: i32 = 4 << 20;

/// Which bucket of a primary-key table to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvBucket {
    /// The partition, for a partitioned table.
    pub partition_id: Option<i64>,
    /// The bucket.
    pub bucket: i32,
}

impl KvBucket {
    /// A bucket of a non-partitioned table.
    pub const fn new(bucket: i32) -> Self {
        Self {
            partition_id: None,
            bucket,
        }
    }

    /// A bucket of one partition.
    pub const fn of_partition(partition_id: i64, bucket: i32) -> Self {
        Self {
            partition_id: Some(partition_id),
            bucket,
        }
    }
}

/// The error of a response body's `error_code` (0 or absent: none).
fn body_error(api: ApiKey, code: Option<i32>, message: Option<String>) -> Option<ClientError> {
    let code = code.filter(|&c| c != 0)?;
    let error = ErrorCode::from_code(code)
        .unwrap_or(ErrorCode::UnknownServerError)
        .with_message(message.unwrap_or_default());
    Some(ClientError::server(api, error))
}

/// The leader of `bucket`, fresh when `refresh`.
async fn leader(
    client: &FlussClient,
    table: &TableInfo,
    bucket: KvBucket,
    refresh: bool,
) -> Result<ServerConnection> {
    let route = if refresh {
        client.refresh_route(table, bucket.partition_id).await?
    } else {
        match bucket.partition_id {
            None => client.table_route(table).await?,
            Some(id) => client.partition_route(table, id).await?,
        }
    };
    if !(0..route.bucket_count()).contains(&bucket.bucket) {
        return Err(ClientError::Invalid(format!(
            "bucket {} is outside {} ({} buckets)",
            bucket.bucket,
            table.path,
            route.bucket_count()
        )));
    }
    Ok(route.leader(bucket.bucket).clone())
}

/// Runs `call` against `bucket`'s leader, refreshing the leader and
/// trying again after a retriable error, at most [`KV_SCAN_ATTEMPTS_MAX`]
/// times.
async fn with_leader<T, F, Fut>(
    client: &FlussClient,
    table: &TableInfo,
    bucket: KvBucket,
    mut call: F,
) -> Result<T>
where
    F: FnMut(ServerConnection) -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let mut attempt = 1;
    loop {
        let result = match leader(client, table, bucket, attempt > 1).await {
            Ok(connection) => call(connection).await,
            Err(e) => Err(e),
        };
        match result {
            Err(e) if e.is_retriable() && attempt < KV_SCAN_ATTEMPTS_MAX => {
                tracing::debug!(table = %table.path, ?bucket, attempt, error = %e, "KV scan failed; retrying");
                tokio::time::sleep(backoff(attempt)).await;
                attempt += 1;
            }
            other => return other,
        }
    }
}

impl FlussClient {
    /// The first `limit` rows (in key order) of one bucket of the
    /// primary-key table `table` (LimitScan), decoded. `limit` is 1 to the
    /// server's maximum (Fjord: 2^20).
    pub async fn limit_scan(
        &self,
        table: &TableInfo,
        bucket: KvBucket,
        limit: i32,
    ) -> Result<KvRows> {
        let decoder = ValueDecoder::new(table)?;
        let request = pb::LimitScanRequest {
            table_id: table.table_id,
            partition_id: bucket.partition_id,
            bucket_id: bucket.bucket,
            limit,
            routing_bucket_count: None,
        };
        let records = with_leader(self, table, bucket, |connection| async move {
            let response: pb::LimitScanResponse =
                connection.request(ApiKey::LimitScan, &request).await?;
            if let Some(e) = body_error(
                ApiKey::LimitScan,
                response.error_code,
                response.error_message,
            ) {
                return Err(e);
            }
            if response.is_log_table == Some(true) {
                return Err(ClientError::Invalid(
                    "LimitScan answered with log batches: the table is not a primary-key table"
                        .to_owned(),
                ));
            }
            Ok(response.records.unwrap_or_default())
        })
        .await?;
        decoder.value_batch(records)
    }

    /// A scanner of one bucket's current rows (ScanKv), batch after batch
    /// of at most `batch_bytes` (Fluss's `client.scanner.kv.fetch.max-bytes`,
    /// [`KV_SCAN_FETCH_BYTES_DEFAULT`] by default). The server opens a
    /// snapshot of the bucket on the first call: later writes are not seen.
    pub async fn kv_scanner(
        &self,
        table: &TableInfo,
        bucket: KvBucket,
        batch_bytes: i32,
    ) -> Result<KvScanner> {
        if batch_bytes <= 0 {
            return Err(ClientError::Invalid(format!(
                "a KV scan's batch size must be positive, not {batch_bytes}"
            )));
        }
        Ok(KvScanner {
            client: self.clone(),
            table: table.clone(),
            bucket,
            decoder: ValueDecoder::new(table)?,
            batch_bytes,
            session: None,
            next_call: 0,
            finished: false,
            log_offset: None,
        })
    }
}

/// An open server-side scanner: where its continuations go.
struct Session {
    connection: ServerConnection,
    id: Bytes,
}

/// One bucket's rows streamed through a ScanKv session; see the module
/// doc. Guarantees: the batches together hold every row of the bucket as
/// of the first call (its snapshot), each once, in key order.
pub struct KvScanner {
    client: FlussClient,
    table: TableInfo,
    bucket: KvBucket,
    decoder: ValueDecoder,
    batch_bytes: i32,
    session: Option<Session>,
    /// The `call_seq_id` of the next call: 0 opens the session.
    next_call: i32,
    finished: bool,
    log_offset: Option<i64>,
}

impl KvScanner {
    /// The next batch of rows, or `None` once the bucket is read to its end
    /// (the server closed the session). A failed call ends the scan: start
    /// another scanner.
    pub async fn next_batch(&mut self) -> Result<Option<KvRows>> {
        if self.finished {
            return Ok(None);
        }
        let response = match &self.session {
            None => self.open().await,
            Some(session) => {
                let request = pb::ScanKvRequest {
                    scanner_id: Some(session.id.clone()),
                    bucket_scan_req: None,
                    call_seq_id: Some(self.next_call),
                    batch_size_bytes: Some(self.batch_bytes),
                    close_scanner: None,
                };
                session
                    .connection
                    .request::<_, pb::ScanKvResponse>(ApiKey::ScanKv, &request)
                    .await
                    .and_then(|r| {
                        match body_error(ApiKey::ScanKv, r.error_code, r.error_message.clone()) {
                            Some(e) => Err(e),
                            None => Ok(r),
                        }
                    })
            }
        };
        let response = match response {
            Ok(response) => response,
            Err(e) => {
                self.finished = true;
                return Err(e);
            }
        };
        self.next_call += 1;
        let more = response.has_more_results == Some(true);
        if !more {
            // The server closed (or never kept) the session.
            self.finished = true;
            self.session = None;
        }
        Ok(Some(
            self.decoder
                .value_batch(response.records.unwrap_or_default())?,
        ))
    }

    /// Opens the session (call 0), on the bucket's leader.
    async fn open(&mut self) -> Result<pb::ScanKvResponse> {
        let request = pb::ScanKvRequest {
            scanner_id: None,
            bucket_scan_req: Some(pb::PbScanReqForBucket {
                table_id: self.table.table_id,
                partition_id: self.bucket.partition_id,
                bucket_id: self.bucket.bucket,
                limit: None,
                routing_bucket_count: None,
            }),
            call_seq_id: Some(0),
            batch_size_bytes: Some(self.batch_bytes),
            close_scanner: None,
        };
        let (connection, response) =
            with_leader(&self.client, &self.table, self.bucket, |connection| {
                let request = request.clone();
                async move {
                    let response: pb::ScanKvResponse =
                        connection.request(ApiKey::ScanKv, &request).await?;
                    match body_error(
                        ApiKey::ScanKv,
                        response.error_code,
                        response.error_message.clone(),
                    ) {
                        Some(e) => Err(e),
                        None => Ok((connection, response)),
                    }
                }
            })
            .await?;
        self.log_offset = response.log_offset;
        if let Some(id) = response.scanner_id.clone() {
            self.session = Some(Session { connection, id });
        }
        Ok(response)
    }

    /// The changelog offset the scan's snapshot stands for (every change
    /// below it is in the rows), once the first batch was read.
    pub fn log_offset(&self) -> Option<i64> {
        self.log_offset
    }

    /// Closes the server's session now, waiting for its answer (dropping
    /// the scanner does the same without waiting).
    pub async fn close(mut self) -> Result<()> {
        match self.close_request() {
            Some((connection, request)) => {
                let response: pb::ScanKvResponse =
                    connection.request(ApiKey::ScanKv, &request).await?;
                match body_error(ApiKey::ScanKv, response.error_code, response.error_message) {
                    Some(e) => Err(e),
                    None => Ok(()),
                }
            }
            None => Ok(()),
        }
    }

    /// The close of an open session, taken out of the scanner.
    fn close_request(&mut self) -> Option<(ServerConnection, pb::ScanKvRequest)> {
        let session = self.session.take()?;
        self.finished = true;
        let request = pb::ScanKvRequest {
            scanner_id: Some(session.id),
            bucket_scan_req: None,
            call_seq_id: Some(self.next_call),
            batch_size_bytes: None,
            close_scanner: Some(true),
        };
        Some((session.connection, request))
    }
}

/// How long a scanner dropped mid-scan waits for the close of its session.
const CLOSE_ON_DROP_TIMEOUT: Duration = Duration::from_secs(10);

impl Drop for KvScanner {
    /// Closes an open session in the background (on the current tokio
    /// runtime; without one, the server lets it expire).
    fn drop(&mut self) {
        let Some((connection, request)) = self.close_request() else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let closed = tokio::time::timeout(
                    CLOSE_ON_DROP_TIMEOUT,
                    connection.request::<_, pb::ScanKvResponse>(ApiKey::ScanKv, &request),
                )
                .await;
                if !matches!(closed, Ok(Ok(_))) {
                    tracing::debug!(
                        "closing a dropped KV scanner's session failed; the server expires it"
                    );
                }
            });
        }
    }
}
