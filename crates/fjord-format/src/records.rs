//! Where the parts of one log batch lie — header, statistics, change types,
//! Arrow IPC message — read from the header fields without checking the CRC.
//!
//! Used by projection (the source was validated when appended, and its CRC
//! is recomputed anyway) and by decoding when CRC checking is off (a Fluss
//! server sends projected batches with the source's, now stale, CRC).
//! Every offset is bounds-checked: the input is untrusted.

use crate::log_batch::{self, Layout, LogBatchError, APPEND_ONLY_FLAG_MASK, MAGIC_OFFSET};

/// The located parts of one batch; all ranges lie within `size`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchParts {
    /// Header layout of the batch's magic.
    pub layout: &'static Layout,
    /// Total batch size (`LOG_OVERHEAD + Length`).
    pub size: usize,
    /// `SchemaId`.
    pub schema_id: i16,
    /// `RecordCount`.
    pub record_count: i32,
    /// Whether the append-only attribute is set (no change-type vector).
    pub append_only: bool,
    /// Start of the records section (after any statistics).
    pub records_start: usize,
    /// Start of the Arrow IPC message (after any change types).
    pub ipc_start: usize,
}

/// Why the parts of a batch cannot be located.
#[derive(Debug)]
pub(crate) enum SplitError {
    /// Header-level defect.
    Batch(LogBatchError),
    /// The change-type vector runs past the end of the batch.
    ChangeTypesTruncated {
        /// Records section length.
        len: usize,
        /// Record count from the header.
        records: usize,
    },
}

impl From<LogBatchError> for SplitError {
    fn from(e: LogBatchError) -> Self {
        Self::Batch(e)
    }
}

fn read_i32(b: &[u8], at: usize) -> i32 {
    i32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Locates the parts of the batch at the start of `bytes` (trailing bytes
/// after the batch are ignored).
pub(crate) fn split_batch(bytes: &[u8]) -> Result<BatchParts, SplitError> {
    let (size, magic) = log_batch::peek_size_and_magic(bytes)?.ok_or(LogBatchError::Truncated {
        needed: MAGIC_OFFSET + 1,
        available: bytes.len(),
    })?;
    let layout = log_batch::layout(magic).ok_or(LogBatchError::UnknownMagic { magic })?;
    if bytes.len() < size {
        return Err(LogBatchError::Truncated {
            needed: size,
            available: bytes.len(),
        }
        .into());
    }
    if size < layout.header_size {
        return Err(LogBatchError::ShorterThanHeader {
            magic,
            size,
            header_size: layout.header_size,
        }
        .into());
    }
    let batch = &bytes[..size];
    let schema_id = i16::from_le_bytes([batch[layout.schema_id], batch[layout.schema_id + 1]]);
    let record_count = read_i32(batch, layout.record_count);
    let statistics_len = match layout.statistics_length {
        None => 0,
        Some(at) => {
            let raw = read_i32(batch, at);
            usize::try_from(raw)
                .ok()
                .filter(|&n| n <= size - layout.header_size)
                .ok_or(LogBatchError::BadStatisticsLength {
                    statistics_length: raw,
                    size,
                })?
        }
    };
    let records_start = layout.header_size + statistics_len;
    let append_only = batch[layout.attributes] & APPEND_ONLY_FLAG_MASK != 0;
    let change_types_len = if append_only || size == layout.header_size {
        0
    } else {
        usize::try_from(record_count)
            .ok()
            .filter(|&n| n <= size - records_start)
            .ok_or(SplitError::ChangeTypesTruncated {
                len: size - records_start,
                records: record_count.max(0) as usize,
            })?
    };
    Ok(BatchParts {
        layout,
        size,
        schema_id,
        record_count,
        append_only,
        records_start,
        ipc_start: records_start + change_types_len,
    })
}
