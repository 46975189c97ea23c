//! Lookup (1017) and PrefixLookup (1034): point and prefix reads of the
//! committed rows of primary-key table buckets. Each bucket's keys are
//! checked against the table's key shape; a point lookup the tablet's
//! memory answers stays on its network task, a read of the KV store (every
//! prefix lookup) runs on the blocking pool. A missing key is an unset
//! value, not an error.

use std::sync::Arc;

use bytes::Bytes;
use fjord_proto::messages as pb;

use crate::error::{ApiError, ErrorCode};
use crate::kv::KvTablet;
use crate::node::Node;
use crate::replica::TableBucket;

/// Most value bytes one PrefixLookup answer may carry: a prefix can match a
/// whole bucket, and the answer must stay far below the frame limit.
pub const PREFIX_LOOKUP_BYTES_MAX: usize = 64 << 20;

/// The KV tablet of a requested bucket, or why not.
fn kv_tablet(
    node: &Node,
    table_id: i64,
    partition_id: Option<i64>,
    bucket_id: i32,
) -> Result<Arc<KvTablet>, ApiError> {
    let table = node.catalog.table_by_id(table_id).ok_or_else(|| {
        ApiError::new(
            ErrorCode::UnknownTableOrBucketException,
            format!("Unknown table id {table_id}"),
        )
    })?;
    let replica = super::replica_of(
        node,
        TableBucket {
            table_id,
            partition_id,
            bucket_id,
        },
    )?;
    replica.kv.clone().ok_or_else(|| {
        ApiError::new(
            ErrorCode::NonPrimaryKeyTableException,
            format!(
                "Table {}.{} is not a primary key table: it has no keys to look up",
                table.path.database, table.path.table
            ),
        )
    })
}

/// Runs `work` on the blocking pool (KV reads may wait for the disk).
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work).await.unwrap_or_else(|e| {
        Err(ApiError::new(
            ErrorCode::UnknownServerError,
            format!("the read failed: {e}"),
        ))
    })
}

/// Point lookups; with `insert_if_not_exists`, a missing key is first
/// inserted as a key-only row (as Fluss's server does) and its new row
/// returned.
pub async fn lookup(node: &Node, r: pb::LookupRequest) -> Result<pb::LookupResponse, ApiError> {
    let insert = r.insert_if_not_exists == Some(true);
    if insert && (r.acks.is_none() || r.timeout_ms.is_none()) {
        return Err(ApiError::new(
            ErrorCode::InvalidRequiredAcks,
            "a lookup with insert_if_not_exists must set acks and timeout_ms",
        ));
    }
    let mut buckets_resp = Vec::with_capacity(r.buckets_req.len());
    for b in r.buckets_req {
        let read = async {
            let kv = kv_tablet(node, r.table_id, b.partition_id, b.bucket_id)?;
            let keys = b.keys;
            check_keys(&kv, &keys)?;
            // Rows in memory are answered here; only store reads (which may
            // wait for the disk) go to the blocking pool.
            let (values, keys) = match kv.get_all_in_memory(&keys) {
                Some(values) => (
                    values
                        .into_iter()
                        .map(|values| pb::PbValue { values })
                        .collect(),
                    keys,
                ),
                None => {
                    let reader = Arc::clone(&kv);
                    blocking(move || {
                        let values = read_values(&reader, &keys)?;
                        Ok((values, keys))
                    })
                    .await?
                }
            };
            if !insert || values.iter().all(|v| v.values.is_some()) {
                return Ok(values);
            }
            let partition_values = partition_values(node, &kv, b.partition_id)?;
            insert_missing(
                node,
                r.table_id,
                b.partition_id,
                b.bucket_id,
                kv,
                keys,
                values,
                partition_values,
                r.acks.unwrap_or(-1),
            )
            .await
        };
        buckets_resp.push(match read.await {
            Ok(values) => pb::PbLookupRespForBucket {
                partition_id: b.partition_id,
                bucket_id: b.bucket_id,
                error_code: None,
                error_message: None,
                values,
                original_partition_name: None,
            },
            Err(e) => pb::PbLookupRespForBucket {
                partition_id: b.partition_id,
                bucket_id: b.bucket_id,
                error_code: Some(e.code().code()),
                error_message: Some(e.message().to_owned()),
                values: Vec::new(),
                original_partition_name: None,
            },
        });
    }
    Ok(pb::LookupResponse { buckets_resp })
}

/// The (column position, value) of each partition key column of the
/// bucket's partition (empty for a non-partitioned table).
fn partition_values(
    node: &Node,
    kv: &KvTablet,
    partition_id: Option<i64>,
) -> Result<Vec<(usize, String)>, ApiError> {
    let Some(partition_id) = partition_id else {
        return Ok(Vec::new());
    };
    let partition = node.catalog.partition_by_id(partition_id).ok_or_else(|| {
        ApiError::new(
            ErrorCode::PartitionNotExists,
            format!("The partition id '{partition_id}' does not exist."),
        )
    })?;
    let table = node
        .catalog
        .table_by_id(partition.table_id)
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::UnknownTableOrBucketException,
                format!("Unknown table id {}", partition.table_id),
            )
        })?;
    let kv_table = kv.table();
    let schema = &kv_table.schema;
    Ok(table
        .partition_keys
        .iter()
        .zip(
            partition
                .name
                .split(fjord_format::schema::PARTITION_NAME_SEPARATOR),
        )
        .filter_map(|(key, value)| schema.column_index(key).map(|i| (i, value.to_owned())))
        .collect())
}

/// Inserts the missing keys of `values` as key-only rows, waits as `acks`
/// asks, and fills in their rows.
#[allow(clippy::too_many_arguments)]
async fn insert_missing(
    node: &Node,
    table_id: i64,
    partition_id: Option<i64>,
    bucket_id: i32,
    kv: Arc<KvTablet>,
    keys: Vec<Bytes>,
    mut values: Vec<pb::PbValue>,
    partition_values: Vec<(usize, String)>,
    acks: i32,
) -> Result<Vec<pb::PbValue>, ApiError> {
    let replica = super::replica_of(
        node,
        TableBucket {
            table_id,
            partition_id,
            bucket_id,
        },
    )?;
    let missing: Vec<usize> = (0..values.len())
        .filter(|&i| values[i].values.is_none())
        .collect();
    let missing_keys: Vec<Bytes> = missing.iter().map(|&i| keys[i].clone()).collect();
    let inserted = blocking(move || {
        let keys: Vec<&[u8]> = missing_keys.iter().map(|k| &k[..]).collect();
        let partition: Vec<(usize, &str)> = partition_values
            .iter()
            .map(|(i, v)| (*i, v.as_str()))
            .collect();
        let outcome = kv.insert_keys(&keys, &partition, crate::replica::now_ms())?;
        if replica.tablet.ack_needs_sync() {
            if acks == -1 {
                replica.wait_durable_blocking(outcome.end_offset - 1)?;
            }
        } else {
            replica.publish();
        }
        let rows = read_values(&kv, &missing_keys)?;
        Ok(rows)
    })
    .await?;
    for (i, row) in missing.into_iter().zip(inserted) {
        values[i] = row;
    }
    Ok(values)
}

fn bad_key(kv: &KvTablet, index: usize, what: &str, e: impl std::fmt::Display) -> ApiError {
    let table = kv.table();
    let schema = &table.schema;
    ApiError::new(
        ErrorCode::CorruptMessage,
        format!(
            "key {index} is not an encoded {what} of the table (columns {:?}): {e}",
            schema
                .columns()
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
        ),
    )
}

/// Checks each key is an encoded primary key of the table.
fn check_keys(kv: &KvTablet, keys: &[Bytes]) -> Result<(), ApiError> {
    let table = kv.table();
    for (i, key) in keys.iter().enumerate() {
        table
            .key_check
            .validate_key(key)
            .map_err(|e| bad_key(kv, i, "primary key", e))?;
    }
    Ok(())
}

/// The stored value of each key, in order (unset for a missing key).
fn read_values(kv: &KvTablet, keys: &[Bytes]) -> Result<Vec<pb::PbValue>, ApiError> {
    check_keys(kv, keys)?;
    keys.iter()
        .map(|key| {
            Ok(pb::PbValue {
                values: kv.get(key)?,
            })
        })
        .collect()
}

/// Prefix lookups: every row whose primary key starts with the given bucket
/// key, in key order.
pub async fn prefix_lookup(
    node: &Node,
    r: pb::PrefixLookupRequest,
) -> Result<pb::PrefixLookupResponse, ApiError> {
    let mut buckets_resp = Vec::with_capacity(r.buckets_req.len());
    for b in r.buckets_req {
        let read = async {
            let kv = kv_tablet(node, r.table_id, b.partition_id, b.bucket_id)?;
            let keys = b.keys;
            blocking(move || read_prefixes(&kv, &keys)).await
        };
        buckets_resp.push(match read.await {
            Ok(value_lists) => pb::PbPrefixLookupRespForBucket {
                partition_id: b.partition_id,
                bucket_id: b.bucket_id,
                error_code: None,
                error_message: None,
                value_lists,
            },
            Err(e) => pb::PbPrefixLookupRespForBucket {
                partition_id: b.partition_id,
                bucket_id: b.bucket_id,
                error_code: Some(e.code().code()),
                error_message: Some(e.message().to_owned()),
                value_lists: Vec::new(),
            },
        });
    }
    Ok(pb::PrefixLookupResponse { buckets_resp })
}

fn read_prefixes(kv: &KvTablet, prefixes: &[Bytes]) -> Result<Vec<pb::PbValueList>, ApiError> {
    let table = kv.table();
    let Some(check) = &table.prefix_check else {
        return Err(ApiError::new(
            ErrorCode::InvalidTableException,
            "prefix lookups need a bucket key that is a strict prefix of the primary key (without partition keys); this table's is not",
        ));
    };
    for (i, prefix) in prefixes.iter().enumerate() {
        check
            .validate_key(prefix)
            .map_err(|e| bad_key(kv, i, "bucket key", e))?;
    }
    let bucket = kv.bucket();
    let mut total = 0usize;
    let mut lists = Vec::with_capacity(prefixes.len());
    for prefix in prefixes {
        let mut values = Vec::new();
        let mut too_large = false;
        kv.scan_prefix(prefix, |value| {
            total += value.len();
            if total > PREFIX_LOOKUP_BYTES_MAX {
                too_large = true;
                return false;
            }
            values.push(Bytes::copy_from_slice(value));
            true
        })?;
        if too_large {
            return Err(ApiError::new(
                ErrorCode::RecordTooLargeException,
                format!(
                    "{bucket}: the prefixes match more than {PREFIX_LOOKUP_BYTES_MAX} bytes of rows; look up fewer prefixes per request"
                ),
            ));
        }
        lists.push(pb::PbValueList { values });
    }
    Ok(lists)
}
