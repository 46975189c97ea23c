//! The Fluss log record batch header: layout per magic (V0, V1, V2),
//! validation (length, magic, header size, CRC-32C), in-place stamping of the
//! server-assigned fields, splitting a buffer of several batches, and writing
//! a header over a caller-supplied body.
//!
//! Every multi-byte field is little-endian. A batch is
//! `[fixed header][statistics (V1+, optional)][records]`; the `Length` field
//! counts every byte after itself, so a batch occupies
//! `LOG_OVERHEAD + Length` bytes. The CRC-32C (Castagnoli) covers the bytes
//! from `SchemaId` to the end of the batch, so the fields before it
//! (`BaseOffset`, `Length`, `Magic`, `CommitTimestamp` and, in V2,
//! `LeaderEpoch`) can be stamped by the server without recomputing it.
//!
//! ```text
//! V0 (48 bytes)                  V1 (52 bytes)                  V2 (56 bytes)
//!  0 BaseOffset       i64         0 BaseOffset       i64         0 BaseOffset       i64
//!  8 Length           i32         8 Length           i32         8 Length           i32
//! 12 Magic            i8         12 Magic            i8         12 Magic            i8
//! 13 CommitTimestamp  i64        13 CommitTimestamp  i64        13 CommitTimestamp  i64
//!                                                               21 LeaderEpoch      i32
//! 21 CRC              u32        21 CRC              u32        25 CRC              u32
//! 25 SchemaId         i16        25 SchemaId         i16        29 SchemaId         i16
//! 27 Attributes       i8         27 Attributes       i8         31 Attributes       i8
//! 28 LastOffsetDelta  i32        28 LastOffsetDelta  i32        32 LastOffsetDelta  i32
//! 32 WriterId         i64        32 WriterId         i64        36 WriterId         i64
//! 40 BatchSequence    i32        40 BatchSequence    i32        44 BatchSequence    i32
//! 44 RecordCount      i32        44 RecordCount      i32        48 RecordCount      i32
//!                                48 StatisticsLength i32        52 StatisticsLength i32
//! 48 Records ...                 52 Statistics, Records ...     56 Statistics, Records ...
//! ```
//!
//! Facts taken from Fluss's `LogRecordBatchFormat` / `DefaultLogRecordBatch`
//! and fluss-rs 1.0.0's `record/arrow.rs` (which writes V0, or V1 when batch
//! statistics are enabled).

use std::ops::Range;

/// Magic byte of the original format (Fluss 0.1+). fluss-rs 1.0.0 writes it.
pub const LOG_MAGIC_V0: u8 = 0;
/// Magic byte of the format with a statistics section (Fluss 1.0).
pub const LOG_MAGIC_V1: u8 = 1;
/// Magic byte of the format with a leader epoch (Fluss 1.0).
pub const LOG_MAGIC_V2: u8 = 2;

/// `WriterId` of a batch from a non-idempotent writer.
pub const NO_WRITER_ID: i64 = -1;
/// `BatchSequence` of a batch from a non-idempotent writer.
pub const NO_BATCH_SEQUENCE: i32 = -1;
/// `LeaderEpoch` value before a leader stamped it, and the value reported for
/// V0/V1 batches, which have no such field.
pub const NO_LEADER_EPOCH: i32 = -1;
/// Bit 0 of `Attributes`: the batch has no change-type vector (every record
/// is an append).
pub const APPEND_ONLY_FLAG_MASK: u8 = 0x01;

/// Byte position of `BaseOffset` (same in every magic).
pub const BASE_OFFSET_OFFSET: usize = 0;
/// Byte position of `Length` (same in every magic).
pub const LENGTH_OFFSET: usize = 8;
/// Byte position of `Magic` (same in every magic).
pub const MAGIC_OFFSET: usize = 12;
/// Byte position of `CommitTimestamp` (same in every magic).
pub const COMMIT_TIMESTAMP_OFFSET: usize = 13;
/// Bytes before the region the `Length` field counts (`BaseOffset` + `Length`).
pub const LOG_OVERHEAD: usize = LENGTH_OFFSET + 4;
/// Bytes needed to learn a batch's total size and magic.
pub const HEADER_SIZE_UP_TO_MAGIC: usize = MAGIC_OFFSET + 1;

/// Largest batch this module will describe: the `Length` field is an `i32`.
/// Storage and the server apply their own, much smaller, configured limits.
pub const MAX_BATCH_SIZE_BYTES: usize = LOG_OVERHEAD + i32::MAX as usize;

/// Byte positions of the fields of one magic version's fixed header.
///
/// Positions are relative to the start of the batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// The magic byte this layout describes.
    pub magic: u8,
    /// Position of `LeaderEpoch` (V2 only).
    pub leader_epoch: Option<usize>,
    /// Position of `CRC`.
    pub crc: usize,
    /// Position of `SchemaId`; the CRC covers from here to the end.
    pub schema_id: usize,
    /// Position of `Attributes`.
    pub attributes: usize,
    /// Position of `LastOffsetDelta`.
    pub last_offset_delta: usize,
    /// Position of `WriterId`.
    pub writer_id: usize,
    /// Position of `BatchSequence`.
    pub batch_sequence: usize,
    /// Position of `RecordCount`.
    pub record_count: usize,
    /// Position of `StatisticsLength` (V1 and later).
    pub statistics_length: Option<usize>,
    /// Size of the fixed header: statistics (if any) then records follow it.
    pub header_size: usize,
}

const fn layout_after_crc(magic: u8, leader_epoch: Option<usize>, crc: usize) -> Layout {
    let schema_id = crc + 4;
    let attributes = schema_id + 2;
    let last_offset_delta = attributes + 1;
    let writer_id = last_offset_delta + 4;
    let batch_sequence = writer_id + 8;
    let record_count = batch_sequence + 4;
    let after_count = record_count + 4;
    let (statistics_length, header_size) = if magic >= LOG_MAGIC_V1 {
        (Some(after_count), after_count + 4)
    } else {
        (None, after_count)
    };
    Layout {
        magic,
        leader_epoch,
        crc,
        schema_id,
        attributes,
        last_offset_delta,
        writer_id,
        batch_sequence,
        record_count,
        statistics_length,
        header_size,
    }
}

/// Field positions of a magic V0 batch.
pub const V0_LAYOUT: Layout = layout_after_crc(LOG_MAGIC_V0, None, COMMIT_TIMESTAMP_OFFSET + 8);
/// Field positions of a magic V1 batch.
pub const V1_LAYOUT: Layout = layout_after_crc(LOG_MAGIC_V1, None, COMMIT_TIMESTAMP_OFFSET + 8);
/// Field positions of a magic V2 batch.
pub const V2_LAYOUT: Layout = layout_after_crc(
    LOG_MAGIC_V2,
    Some(COMMIT_TIMESTAMP_OFFSET + 8),
    COMMIT_TIMESTAMP_OFFSET + 8 + 4,
);

/// Fixed header size of a V0 batch.
pub const V0_HEADER_SIZE: usize = V0_LAYOUT.header_size;
/// Fixed header size of a V1 batch (without statistics data).
pub const V1_HEADER_SIZE: usize = V1_LAYOUT.header_size;
/// Fixed header size of a V2 batch (without statistics data).
pub const V2_HEADER_SIZE: usize = V2_LAYOUT.header_size;
/// The smallest fixed header of any known magic.
pub const MIN_HEADER_SIZE: usize = V0_HEADER_SIZE;

// The sizes Fluss's Java `LogRecordBatchFormat` and fluss-rs agree on.
const _: () = assert!(LOG_OVERHEAD == 12);
const _: () = assert!(V0_HEADER_SIZE == 48);
const _: () = assert!(V1_HEADER_SIZE == 52);
const _: () = assert!(V2_HEADER_SIZE == 56);
const _: () = assert!(V0_LAYOUT.crc == 21 && V0_LAYOUT.schema_id == 25);
const _: () = assert!(V2_LAYOUT.crc == 25 && V2_LAYOUT.schema_id == 29);
const _: () = assert!(matches!(V2_LAYOUT.leader_epoch, Some(21)));
const _: () = assert!(matches!(V1_LAYOUT.statistics_length, Some(48)));
const _: () = assert!(matches!(V2_LAYOUT.statistics_length, Some(52)));
// Everything stampable sits before the CRC'd region.
const _: () =
    assert!(V0_LAYOUT.crc <= STAMPED_PREFIX_BYTES_MAX && V1_LAYOUT.crc <= STAMPED_PREFIX_BYTES_MAX);
const _: () = assert!(COMMIT_TIMESTAMP_OFFSET + 8 <= V0_LAYOUT.crc);
const _: () = assert!(MIN_HEADER_SIZE >= HEADER_SIZE_UP_TO_MAGIC);

/// The layout of `magic`, or `None` for a magic this build does not know.
pub const fn layout(magic: u8) -> Option<&'static Layout> {
    match magic {
        LOG_MAGIC_V0 => Some(&V0_LAYOUT),
        LOG_MAGIC_V1 => Some(&V1_LAYOUT),
        LOG_MAGIC_V2 => Some(&V2_LAYOUT),
        _ => None,
    }
}

/// What is wrong with bytes that claim to be a log batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogBatchError {
    /// Fewer bytes than the batch declares (or than its fixed prefix).
    #[error("log batch truncated: needs {needed} bytes, only {available} present")]
    Truncated {
        /// Bytes the batch needs.
        needed: usize,
        /// Bytes that were present.
        available: usize,
    },
    /// The slice holds more bytes than the batch's `Length` field accounts for.
    #[error("log batch declares {declared} bytes but {available} were given")]
    TrailingBytes {
        /// Total size from the `Length` field.
        declared: usize,
        /// Size of the slice.
        available: usize,
    },
    /// The `Length` field is negative.
    #[error("log batch length field is negative ({length})")]
    NegativeLength {
        /// The raw field value.
        length: i32,
    },
    /// The magic byte is not V0, V1 or V2.
    #[error("unsupported log batch magic {magic} (known: 0, 1, 2)")]
    UnknownMagic {
        /// The magic byte found.
        magic: u8,
    },
    /// The batch is smaller than the fixed header of its magic.
    #[error("log batch of {size} bytes is smaller than the {header_size}-byte V{magic} header")]
    ShorterThanHeader {
        /// Magic of the batch.
        magic: u8,
        /// Total batch size.
        size: usize,
        /// Fixed header size for that magic.
        header_size: usize,
    },
    /// `StatisticsLength` is negative or runs past the end of the batch.
    #[error("log batch statistics length {statistics_length} does not fit in a {size}-byte batch")]
    BadStatisticsLength {
        /// The raw field value.
        statistics_length: i32,
        /// Total batch size.
        size: usize,
    },
    /// `LastOffsetDelta` or `RecordCount` is negative.
    #[error(
        "log batch has negative counts (last offset delta {last_offset_delta}, record count {record_count})"
    )]
    NegativeCount {
        /// The raw `LastOffsetDelta`.
        last_offset_delta: i32,
        /// The raw `RecordCount`.
        record_count: i32,
    },
    /// The stored CRC-32C does not match the bytes.
    #[error("log batch CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch {
        /// CRC in the header.
        stored: u32,
        /// CRC of the bytes.
        computed: u32,
    },
    /// A builder was asked to write statistics into a V0 batch.
    #[error("magic V0 batches cannot carry statistics")]
    StatisticsUnsupported,
    /// A builder was given a body that makes the batch exceed `i32` length.
    #[error("log batch of {size} bytes exceeds the format maximum {MAX_BATCH_SIZE_BYTES}")]
    TooLarge {
        /// Requested batch size.
        size: usize,
    },
}

#[inline]
fn read_i16(b: &[u8], at: usize) -> i16 {
    i16::from_le_bytes([b[at], b[at + 1]])
}
#[inline]
fn read_i32(b: &[u8], at: usize) -> i32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    i32::from_le_bytes(a)
}
#[inline]
fn read_u32(b: &[u8], at: usize) -> u32 {
    read_i32(b, at) as u32
}
#[inline]
fn read_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_le_bytes(a)
}

/// The cheap first look at a batch: its total size and magic from the first
/// 13 bytes, without checking anything else.
///
/// Returns `Ok(None)` when fewer than [`HEADER_SIZE_UP_TO_MAGIC`] bytes are
/// present (not enough to tell), and an error for a negative length.
pub fn peek_size_and_magic(bytes: &[u8]) -> Result<Option<(usize, u8)>, LogBatchError> {
    if bytes.len() < HEADER_SIZE_UP_TO_MAGIC {
        return Ok(None);
    }
    let length = read_i32(bytes, LENGTH_OFFSET);
    if length < 0 {
        return Err(LogBatchError::NegativeLength { length });
    }
    Ok(Some((LOG_OVERHEAD + length as usize, bytes[MAGIC_OFFSET])))
}

/// Checks everything except the CRC and that the slice is exactly one batch:
/// returns the layout and total size for the batch at the start of `bytes`.
fn check_structure(bytes: &[u8]) -> Result<(&'static Layout, usize), LogBatchError> {
    let Some((size, magic)) = peek_size_and_magic(bytes)? else {
        return Err(LogBatchError::Truncated {
            needed: HEADER_SIZE_UP_TO_MAGIC,
            available: bytes.len(),
        });
    };
    let layout = layout(magic).ok_or(LogBatchError::UnknownMagic { magic })?;
    if size < layout.header_size {
        return Err(LogBatchError::ShorterThanHeader {
            magic,
            size,
            header_size: layout.header_size,
        });
    }
    if bytes.len() < size {
        return Err(LogBatchError::Truncated {
            needed: size,
            available: bytes.len(),
        });
    }
    if let Some(at) = layout.statistics_length {
        let statistics_length = read_i32(bytes, at);
        if statistics_length < 0 || layout.header_size + statistics_length as usize > size {
            return Err(LogBatchError::BadStatisticsLength {
                statistics_length,
                size,
            });
        }
    }
    let last_offset_delta = read_i32(bytes, layout.last_offset_delta);
    let record_count = read_i32(bytes, layout.record_count);
    if last_offset_delta < 0 || record_count < 0 {
        return Err(LogBatchError::NegativeCount {
            last_offset_delta,
            record_count,
        });
    }
    Ok((layout, size))
}

fn check_crc(batch: &[u8], layout: &Layout) -> Result<(), LogBatchError> {
    let stored = read_u32(batch, layout.crc);
    let computed = crc32c::crc32c(&batch[layout.schema_id..]);
    if stored != computed {
        return Err(LogBatchError::CrcMismatch { stored, computed });
    }
    Ok(())
}

/// Validates the batch at the start of `bytes` and returns it with its size;
/// bytes after it are not looked at.
fn validate_prefix(bytes: &[u8]) -> Result<LogBatch<'_>, LogBatchError> {
    let (layout, size) = check_structure(bytes)?;
    let batch = &bytes[..size];
    check_crc(batch, layout)?;
    Ok(LogBatch {
        bytes: batch,
        layout,
    })
}

/// A log batch whose length, magic, header size, statistics length, counts
/// and CRC-32C have been checked. Only [`LogBatch::validate`] and
/// [`LogBatches`] build one, so every accessor reads in bounds.
#[derive(Debug, Clone, Copy)]
pub struct LogBatch<'a> {
    bytes: &'a [u8],
    layout: &'static Layout,
}

impl<'a> LogBatch<'a> {
    /// Validates that `bytes` is exactly one well-formed batch: the length
    /// field matches the slice, the magic is known, the size covers the fixed
    /// header and statistics, counts are non-negative, and the CRC-32C over
    /// `SchemaId..end` matches.
    pub fn validate(bytes: &'a [u8]) -> Result<Self, LogBatchError> {
        let batch = validate_prefix(bytes)?;
        if batch.bytes.len() != bytes.len() {
            return Err(LogBatchError::TrailingBytes {
                declared: batch.bytes.len(),
                available: bytes.len(),
            });
        }
        Ok(batch)
    }

    /// The whole batch, header included, as stored and sent.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }
    /// Total size in bytes (`LOG_OVERHEAD + Length`).
    pub fn size_in_bytes(&self) -> usize {
        self.bytes.len()
    }
    /// The field layout of this batch's magic.
    pub fn layout(&self) -> &'static Layout {
        self.layout
    }
    /// `BaseOffset`: the offset of the first record (0 as a client sends it).
    pub fn base_offset(&self) -> i64 {
        read_i64(self.bytes, BASE_OFFSET_OFFSET)
    }
    /// The raw `Length` field: bytes after it.
    pub fn length(&self) -> i32 {
        read_i32(self.bytes, LENGTH_OFFSET)
    }
    /// `Magic`.
    pub fn magic(&self) -> u8 {
        self.layout.magic
    }
    /// `CommitTimestamp` in epoch milliseconds (stamped by the server).
    pub fn commit_timestamp(&self) -> i64 {
        read_i64(self.bytes, COMMIT_TIMESTAMP_OFFSET)
    }
    /// `LeaderEpoch` for V2, [`NO_LEADER_EPOCH`] for V0/V1.
    pub fn leader_epoch(&self) -> i32 {
        match self.layout.leader_epoch {
            Some(at) => read_i32(self.bytes, at),
            None => NO_LEADER_EPOCH,
        }
    }
    /// The stored CRC-32C (already checked against the bytes).
    pub fn crc(&self) -> u32 {
        read_u32(self.bytes, self.layout.crc)
    }
    /// `SchemaId`.
    pub fn schema_id(&self) -> i16 {
        read_i16(self.bytes, self.layout.schema_id)
    }
    /// `Attributes`.
    pub fn attributes(&self) -> u8 {
        self.bytes[self.layout.attributes]
    }
    /// Whether the append-only flag is set (no change-type vector in the body).
    pub fn is_append_only(&self) -> bool {
        self.attributes() & APPEND_ONLY_FLAG_MASK != 0
    }
    /// `LastOffsetDelta` (non-negative).
    pub fn last_offset_delta(&self) -> i32 {
        read_i32(self.bytes, self.layout.last_offset_delta)
    }
    /// `BaseOffset + LastOffsetDelta` (saturating, so corrupt input cannot overflow).
    pub fn last_offset(&self) -> i64 {
        self.base_offset()
            .saturating_add(i64::from(self.last_offset_delta()))
    }
    /// The offset after this batch's last (`last_offset + 1`, saturating).
    pub fn next_offset(&self) -> i64 {
        self.last_offset().saturating_add(1)
    }
    /// `WriterId`, [`NO_WRITER_ID`] for a non-idempotent writer.
    pub fn writer_id(&self) -> i64 {
        read_i64(self.bytes, self.layout.writer_id)
    }
    /// `BatchSequence`, [`NO_BATCH_SEQUENCE`] for a non-idempotent writer.
    pub fn batch_sequence(&self) -> i32 {
        read_i32(self.bytes, self.layout.batch_sequence)
    }
    /// `RecordCount` (non-negative).
    pub fn record_count(&self) -> i32 {
        read_i32(self.bytes, self.layout.record_count)
    }
    /// `StatisticsLength` (V1+; 0 for V0 and for batches without statistics).
    pub fn statistics_length(&self) -> usize {
        match self.layout.statistics_length {
            Some(at) => read_i32(self.bytes, at) as usize,
            None => 0,
        }
    }
    /// The statistics bytes (empty when absent).
    pub fn statistics(&self) -> &'a [u8] {
        let start = self.layout.header_size;
        &self.bytes[start..start + self.statistics_length()]
    }
    /// Position of the records (body) within the batch.
    pub fn records_range(&self) -> Range<usize> {
        self.layout.header_size + self.statistics_length()..self.bytes.len()
    }
    /// The records (body) bytes: for the ARROW log format, the change-type
    /// vector (unless append-only) followed by an Arrow IPC record batch.
    pub fn records(&self) -> &'a [u8] {
        &self.bytes[self.records_range()]
    }
}

/// A validated batch over mutable bytes, for stamping the server-assigned
/// fields in place. Every field it writes lies before the CRC'd region, so
/// the batch stays valid.
#[derive(Debug)]
pub struct LogBatchMut<'a> {
    bytes: &'a mut [u8],
    layout: &'static Layout,
}

impl<'a> LogBatchMut<'a> {
    /// Validates `bytes` exactly as [`LogBatch::validate`] does.
    pub fn validate(bytes: &'a mut [u8]) -> Result<Self, LogBatchError> {
        let layout = LogBatch::validate(bytes)?.layout;
        Ok(Self { bytes, layout })
    }
    /// A read-only view of the same batch.
    pub fn as_batch(&self) -> LogBatch<'_> {
        LogBatch {
            bytes: self.bytes,
            layout: self.layout,
        }
    }
    /// Writes `BaseOffset`.
    pub fn set_base_offset(&mut self, base_offset: i64) {
        self.bytes[BASE_OFFSET_OFFSET..BASE_OFFSET_OFFSET + 8]
            .copy_from_slice(&base_offset.to_le_bytes());
    }
    /// Writes `CommitTimestamp` (epoch milliseconds).
    pub fn set_commit_timestamp(&mut self, commit_timestamp: i64) {
        self.bytes[COMMIT_TIMESTAMP_OFFSET..COMMIT_TIMESTAMP_OFFSET + 8]
            .copy_from_slice(&commit_timestamp.to_le_bytes());
    }
    /// Writes `LeaderEpoch` on a V2 batch; V0/V1 have no such field and are
    /// left unchanged (returns `false`).
    pub fn set_leader_epoch(&mut self, leader_epoch: i32) -> bool {
        match self.layout.leader_epoch {
            Some(at) => {
                self.bytes[at..at + 4].copy_from_slice(&leader_epoch.to_le_bytes());
                true
            }
            None => false,
        }
    }
    /// Stamps all three server-assigned fields at once.
    pub fn stamp(&mut self, base_offset: i64, commit_timestamp: i64, leader_epoch: i32) {
        self.set_base_offset(base_offset);
        self.set_commit_timestamp(commit_timestamp);
        self.set_leader_epoch(leader_epoch);
    }
}

/// Stamps the server-assigned fields (`BaseOffset`, `CommitTimestamp` and,
/// for V2, `LeaderEpoch`) of the batch at the start of `bytes` in place.
///
/// Checks the length, magic, header size and counts but not the CRC, which
/// the stamped fields are outside of: for a caller (the storage append path)
/// that already validated these exact bytes and does not want to checksum
/// them twice. Returns the batch size.
pub fn stamp_in_place(
    bytes: &mut [u8],
    base_offset: i64,
    commit_timestamp: i64,
    leader_epoch: i32,
) -> Result<usize, LogBatchError> {
    let (layout, size) = check_structure(bytes)?;
    let mut batch = LogBatchMut {
        bytes: &mut bytes[..size],
        layout,
    };
    batch.stamp(base_offset, commit_timestamp, leader_epoch);
    Ok(size)
}

/// The most bytes before the CRC of any known magic: the prefix
/// [`stamp_prefix`] stamps. Every server-assigned field lies in it.
pub const STAMPED_PREFIX_BYTES_MAX: usize = V2_LAYOUT.crc;

/// Stamps the server-assigned fields (as [`stamp_in_place`] does) into
/// `prefix`, a copy of the first `layout.crc` bytes of a batch laid out as
/// `layout`. Those fields all sit before the CRC'd region, so the storage
/// append path writes the stamped prefix followed by the rest of the batch
/// exactly as received, without copying the body to stamp it.
///
/// Panics if `prefix` is shorter than `layout.crc` (a caller bug: the
/// length comes from the same layout).
pub fn stamp_prefix(
    prefix: &mut [u8],
    layout: &'static Layout,
    base_offset: i64,
    commit_timestamp: i64,
    leader_epoch: i32,
) {
    let mut head = LogBatchMut {
        bytes: &mut prefix[..layout.crc],
        layout,
    };
    head.stamp(base_offset, commit_timestamp, leader_epoch);
}

/// Splits a contiguous buffer of batches (e.g. a ProduceLog request's
/// `records`, or a span of a segment file) into validated batches without
/// copying.
///
/// Yields `Ok(batch)` per whole valid batch. Iteration ends (`None`) when the
/// remaining bytes are empty or hold only a partial batch — see
/// [`LogBatches::remaining`] to tell the two apart. A structurally invalid or
/// CRC-failing batch yields one `Err` and ends the iteration; its position is
/// [`LogBatches::position`].
#[derive(Debug, Clone)]
pub struct LogBatches<'a> {
    bytes: &'a [u8],
    position: usize,
    failed: bool,
}

impl<'a> LogBatches<'a> {
    /// Starts splitting at the beginning of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self {
            bytes,
            position: 0,
            failed: false,
        }
    }
    /// Bytes consumed by the batches yielded so far (the start of the next
    /// batch, or of the failed one).
    pub fn position(&self) -> usize {
        self.position
    }
    /// Bytes after the last yielded batch. After `None` without an error,
    /// non-empty means a partial trailing batch.
    pub fn remaining(&self) -> &'a [u8] {
        &self.bytes[self.position..]
    }
}

impl<'a> Iterator for LogBatches<'a> {
    type Item = Result<LogBatch<'a>, LogBatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let rest = &self.bytes[self.position..];
        let size = match peek_size_and_magic(rest) {
            Ok(None) => return None,
            Ok(Some((size, _))) => size,
            Err(e) => {
                self.failed = true;
                return Some(Err(e));
            }
        };
        // A batch that is too short for any header can never be completed by
        // more bytes: report it rather than waiting for them.
        if size >= MIN_HEADER_SIZE && rest.len() < size {
            return None;
        }
        match validate_prefix(rest) {
            Ok(batch) => {
                self.position += batch.size_in_bytes();
                Some(Ok(batch))
            }
            Err(LogBatchError::Truncated { .. }) => None,
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

/// The header fields a writer chooses, for [`write_batch`] and
/// [`finish_batch`]. Plain data: nothing here is validated until written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    /// Magic to write (V0, V1 or V2).
    pub magic: u8,
    /// `BaseOffset` (clients send 0; the server stamps the real one).
    pub base_offset: i64,
    /// `CommitTimestamp` (clients send 0; the server stamps it).
    pub commit_timestamp: i64,
    /// `LeaderEpoch` (V2 only; ignored otherwise).
    pub leader_epoch: i32,
    /// `SchemaId`.
    pub schema_id: i16,
    /// `Attributes` (bit 0: append-only).
    pub attributes: u8,
    /// `LastOffsetDelta` (`record_count - 1` for a plain log batch, 0 if empty).
    pub last_offset_delta: i32,
    /// `WriterId` ([`NO_WRITER_ID`] when not idempotent).
    pub writer_id: i64,
    /// `BatchSequence` ([`NO_BATCH_SEQUENCE`] when not idempotent).
    pub batch_sequence: i32,
    /// `RecordCount`.
    pub record_count: i32,
}

impl BatchHeader {
    /// An append-only, non-idempotent V0 header for `record_count` records,
    /// as fluss-rs writes by default.
    pub fn append_only(schema_id: i16, record_count: i32) -> Self {
        Self {
            magic: LOG_MAGIC_V0,
            base_offset: 0,
            commit_timestamp: 0,
            leader_epoch: NO_LEADER_EPOCH,
            schema_id,
            attributes: APPEND_ONLY_FLAG_MASK,
            last_offset_delta: (record_count - 1).max(0),
            writer_id: NO_WRITER_ID,
            batch_sequence: NO_BATCH_SEQUENCE,
            record_count,
        }
    }
}

/// Writes the fixed header described by `header` into the front of `batch`
/// and the CRC over the rest. The caller has already placed
/// `statistics_length` bytes of statistics at `layout.header_size` and the
/// records after them; `batch` is the whole batch.
///
/// Lets a writer encode the body straight into its own buffer and add the
/// header last, with no copy of the body.
pub fn finish_batch(
    batch: &mut [u8],
    header: &BatchHeader,
    statistics_length: usize,
) -> Result<(), LogBatchError> {
    let layout = layout(header.magic).ok_or(LogBatchError::UnknownMagic {
        magic: header.magic,
    })?;
    let size = batch.len();
    if size > MAX_BATCH_SIZE_BYTES {
        return Err(LogBatchError::TooLarge { size });
    }
    if statistics_length > 0 && layout.statistics_length.is_none() {
        return Err(LogBatchError::StatisticsUnsupported);
    }
    if layout.header_size + statistics_length > size {
        return Err(LogBatchError::Truncated {
            needed: layout.header_size + statistics_length,
            available: size,
        });
    }
    // Encoder mirrors the diagram in the module doc.
    let put = |b: &mut [u8], at: usize, v: &[u8]| b[at..at + v.len()].copy_from_slice(v);
    put(batch, BASE_OFFSET_OFFSET, &header.base_offset.to_le_bytes());
    put(
        batch,
        LENGTH_OFFSET,
        &((size - LOG_OVERHEAD) as i32).to_le_bytes(),
    );
    batch[MAGIC_OFFSET] = header.magic;
    put(
        batch,
        COMMIT_TIMESTAMP_OFFSET,
        &header.commit_timestamp.to_le_bytes(),
    );
    if let Some(at) = layout.leader_epoch {
        put(batch, at, &header.leader_epoch.to_le_bytes());
    }
    put(batch, layout.schema_id, &header.schema_id.to_le_bytes());
    batch[layout.attributes] = header.attributes;
    put(
        batch,
        layout.last_offset_delta,
        &header.last_offset_delta.to_le_bytes(),
    );
    put(batch, layout.writer_id, &header.writer_id.to_le_bytes());
    put(
        batch,
        layout.batch_sequence,
        &header.batch_sequence.to_le_bytes(),
    );
    put(
        batch,
        layout.record_count,
        &header.record_count.to_le_bytes(),
    );
    if let Some(at) = layout.statistics_length {
        put(batch, at, &(statistics_length as i32).to_le_bytes());
    }
    let crc = crc32c::crc32c(&batch[layout.schema_id..]);
    put(batch, layout.crc, &crc.to_le_bytes());
    Ok(())
}

/// Appends one whole batch (header, `statistics`, `records`) to `out` and
/// returns its byte range in `out`. `out` is left unchanged on error.
pub fn write_batch(
    out: &mut Vec<u8>,
    header: &BatchHeader,
    statistics: &[u8],
    records: &[u8],
) -> Result<Range<usize>, LogBatchError> {
    let layout = layout(header.magic).ok_or(LogBatchError::UnknownMagic {
        magic: header.magic,
    })?;
    if !statistics.is_empty() && layout.statistics_length.is_none() {
        return Err(LogBatchError::StatisticsUnsupported);
    }
    let size = layout.header_size + statistics.len() + records.len();
    if size > MAX_BATCH_SIZE_BYTES {
        return Err(LogBatchError::TooLarge { size });
    }
    let start = out.len();
    out.reserve(size);
    out.resize(start + layout.header_size, 0);
    out.extend_from_slice(statistics);
    out.extend_from_slice(records);
    finish_batch(&mut out[start..], header, statistics.len())?;
    Ok(start..start + size)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn header(magic: u8) -> BatchHeader {
        BatchHeader {
            magic,
            base_offset: 0,
            commit_timestamp: 0,
            leader_epoch: NO_LEADER_EPOCH,
            schema_id: 3,
            attributes: APPEND_ONLY_FLAG_MASK,
            last_offset_delta: 4,
            writer_id: 77,
            batch_sequence: 9,
            record_count: 5,
        }
    }

    fn one_batch(magic: u8, stats: &[u8], body: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        write_batch(&mut out, &header(magic), stats, body).expect("valid header");
        out
    }

    /// Data-driven check: validating `bytes` gives `expected`.
    fn check(bytes: &[u8], expected: Result<(), LogBatchError>) {
        assert_eq!(LogBatch::validate(bytes).map(|_| ()), expected);
    }

    #[test]
    fn known_v0_bytes_match_the_fluss_layout() {
        // A V0 header written field by field as fluss-rs does, body "abc".
        let mut b = Vec::new();
        b.extend_from_slice(&0i64.to_le_bytes()); // base offset
        b.extend_from_slice(&(48i32 + 3 - 12).to_le_bytes()); // length
        b.push(0); // magic
        b.extend_from_slice(&0i64.to_le_bytes()); // commit timestamp
        b.extend_from_slice(&0u32.to_le_bytes()); // crc placeholder
        b.extend_from_slice(&7i16.to_le_bytes()); // schema id
        b.push(1); // attributes: append-only
        b.extend_from_slice(&2i32.to_le_bytes()); // last offset delta
        b.extend_from_slice(&(-1i64).to_le_bytes()); // writer id
        b.extend_from_slice(&(-1i32).to_le_bytes()); // batch sequence
        b.extend_from_slice(&3i32.to_le_bytes()); // record count
        b.extend_from_slice(b"abc");
        let crc = crc32c::crc32c(&b[25..]);
        b[21..25].copy_from_slice(&crc.to_le_bytes());

        let batch = LogBatch::validate(&b).expect("valid V0 batch");
        assert_eq!(batch.magic(), 0);
        assert_eq!(batch.schema_id(), 7);
        assert!(batch.is_append_only());
        assert_eq!(batch.last_offset_delta(), 2);
        assert_eq!(batch.writer_id(), NO_WRITER_ID);
        assert_eq!(batch.batch_sequence(), NO_BATCH_SEQUENCE);
        assert_eq!(batch.record_count(), 3);
        assert_eq!(batch.leader_epoch(), NO_LEADER_EPOCH);
        assert_eq!(batch.statistics_length(), 0);
        assert_eq!(batch.records(), b"abc");

        let mut ours = Vec::new();
        let h = BatchHeader {
            last_offset_delta: 2,
            ..BatchHeader::append_only(7, 3)
        };
        write_batch(&mut ours, &h, &[], b"abc").expect("valid");
        assert_eq!(ours, b);
    }

    #[test]
    fn validation_names_each_defect() {
        let good = one_batch(LOG_MAGIC_V1, b"st", b"body");
        check(&good, Ok(()));
        check(
            &good[..5],
            Err(LogBatchError::Truncated {
                needed: 13,
                available: 5,
            }),
        );
        check(
            &good[..good.len() - 1],
            Err(LogBatchError::Truncated {
                needed: good.len(),
                available: good.len() - 1,
            }),
        );
        let mut longer = good.clone();
        longer.push(0);
        check(
            &longer,
            Err(LogBatchError::TrailingBytes {
                declared: good.len(),
                available: good.len() + 1,
            }),
        );
        let mut bad_magic = good.clone();
        bad_magic[MAGIC_OFFSET] = 3;
        check(&bad_magic, Err(LogBatchError::UnknownMagic { magic: 3 }));
        let mut negative = good.clone();
        negative[LENGTH_OFFSET..LENGTH_OFFSET + 4].copy_from_slice(&(-5i32).to_le_bytes());
        check(&negative, Err(LogBatchError::NegativeLength { length: -5 }));
        let mut short = good[..40].to_vec();
        short[LENGTH_OFFSET..LENGTH_OFFSET + 4].copy_from_slice(&28i32.to_le_bytes());
        check(
            &short,
            Err(LogBatchError::ShorterThanHeader {
                magic: 1,
                size: 40,
                header_size: 52,
            }),
        );
        let mut stats = good.clone();
        stats[48..52].copy_from_slice(&100i32.to_le_bytes());
        check(
            &stats,
            Err(LogBatchError::BadStatisticsLength {
                statistics_length: 100,
                size: good.len(),
            }),
        );
        let mut flipped = good.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 0x40;
        assert!(matches!(
            LogBatch::validate(&flipped),
            Err(LogBatchError::CrcMismatch { .. })
        ));
    }

    #[test]
    fn negative_counts_are_rejected_even_with_a_good_crc() {
        let mut out = Vec::new();
        let h = BatchHeader {
            last_offset_delta: -1,
            ..header(LOG_MAGIC_V0)
        };
        write_batch(&mut out, &h, &[], b"x").expect("writable");
        check(
            &out,
            Err(LogBatchError::NegativeCount {
                last_offset_delta: -1,
                record_count: 5,
            }),
        );
    }

    #[test]
    fn v0_cannot_carry_statistics() {
        let mut out = vec![1, 2];
        assert_eq!(
            write_batch(&mut out, &header(LOG_MAGIC_V0), b"s", b""),
            Err(LogBatchError::StatisticsUnsupported)
        );
        assert_eq!(out, vec![1, 2]);
    }

    #[test]
    fn stamping_v2_keeps_the_crc_valid_and_sets_the_epoch() {
        let mut b = one_batch(LOG_MAGIC_V2, b"", b"payload");
        let mut m = LogBatchMut::validate(&mut b).expect("valid");
        m.stamp(1000, 1_700_000_000_000, 4);
        let batch = LogBatch::validate(&b).expect("still valid after stamping");
        assert_eq!(batch.base_offset(), 1000);
        assert_eq!(batch.last_offset(), 1004);
        assert_eq!(batch.commit_timestamp(), 1_700_000_000_000);
        assert_eq!(batch.leader_epoch(), 4);
    }

    #[test]
    fn a_stamped_prefix_followed_by_the_received_rest_equals_a_batch_stamped_in_place() {
        for magic in [LOG_MAGIC_V0, LOG_MAGIC_V1, LOG_MAGIC_V2] {
            let received = one_batch(magic, b"", b"payload");
            let mut in_place = received.clone();
            stamp_in_place(&mut in_place, 41, 42, 43).expect("stamp");
            let layout = layout(magic).expect("known magic");
            let mut prefix = [0u8; STAMPED_PREFIX_BYTES_MAX];
            prefix[..layout.crc].copy_from_slice(&received[..layout.crc]);
            stamp_prefix(&mut prefix, layout, 41, 42, 43);
            let mut joined = prefix[..layout.crc].to_vec();
            joined.extend_from_slice(&received[layout.crc..]);
            assert_eq!(joined, in_place, "magic {magic}");
            assert!(LogBatch::validate(&joined).is_ok(), "magic {magic}");
        }
    }

    #[test]
    fn stamp_in_place_touches_only_the_first_batch() {
        let mut b = one_batch(LOG_MAGIC_V2, b"", b"one");
        let first = b.len();
        b.extend(one_batch(LOG_MAGIC_V0, b"", b"two"));
        let second = b[first..].to_vec();
        assert_eq!(stamp_in_place(&mut b, 5, 6, 7), Ok(first));
        let batch = LogBatch::validate(&b[..first]).expect("valid");
        assert_eq!(
            (
                batch.base_offset(),
                batch.commit_timestamp(),
                batch.leader_epoch()
            ),
            (5, 6, 7)
        );
        assert_eq!(&b[first..], &second[..]);
    }

    #[test]
    fn leader_epoch_is_not_written_into_v0() {
        let mut b = one_batch(LOG_MAGIC_V0, b"", b"payload");
        let before = b.clone();
        let mut m = LogBatchMut::validate(&mut b).expect("valid");
        assert!(!m.set_leader_epoch(9));
        assert_eq!(b, before);
    }

    #[test]
    fn splitter_stops_at_a_partial_trailing_batch() {
        let mut buf = one_batch(LOG_MAGIC_V0, b"", b"one");
        buf.extend(one_batch(LOG_MAGIC_V2, b"", b"two"));
        let whole = buf.len();
        buf.extend(&one_batch(LOG_MAGIC_V1, b"", b"three")[..30]);
        let mut it = LogBatches::new(&buf);
        let bodies: Vec<&[u8]> = it.by_ref().map(|b| b.expect("valid").records()).collect();
        assert_eq!(bodies, vec![&b"one"[..], &b"two"[..]]);
        assert_eq!(it.position(), whole);
        assert_eq!(it.remaining().len(), 30);
    }

    #[test]
    fn splitter_reports_corruption_once_and_stops() {
        let mut buf = one_batch(LOG_MAGIC_V0, b"", b"one");
        let second = buf.len();
        buf.extend(one_batch(LOG_MAGIC_V0, b"", b"two"));
        buf[second + 50] ^= 1;
        buf.extend(one_batch(LOG_MAGIC_V0, b"", b"three"));
        let mut it = LogBatches::new(&buf);
        assert!(it.next().expect("first").is_ok());
        assert!(matches!(
            it.next(),
            Some(Err(LogBatchError::CrcMismatch { .. }))
        ));
        assert_eq!(it.position(), second);
        assert!(it.next().is_none());
    }

    #[test]
    fn splitter_reports_a_length_too_small_for_any_header() {
        let mut buf = vec![0u8; 20];
        buf[LENGTH_OFFSET..LENGTH_OFFSET + 4].copy_from_slice(&4i32.to_le_bytes());
        let mut it = LogBatches::new(&buf);
        assert!(matches!(
            it.next(),
            Some(Err(LogBatchError::ShorterThanHeader { .. }))
        ));
    }

    fn arb_header() -> impl Strategy<Value = BatchHeader> {
        (
            0u8..3,
            any::<i64>(),
            any::<i64>(),
            any::<i32>(),
            any::<i16>(),
            any::<u8>(),
            0i32..i32::MAX,
            any::<i64>(),
            any::<i32>(),
            0i32..i32::MAX,
        )
            .prop_map(
                |(magic, bo, ts, le, sid, attr, lod, wid, seq, rc)| BatchHeader {
                    magic,
                    base_offset: bo,
                    commit_timestamp: ts,
                    leader_epoch: le,
                    schema_id: sid,
                    attributes: attr,
                    last_offset_delta: lod,
                    writer_id: wid,
                    batch_sequence: seq,
                    record_count: rc,
                },
            )
    }

    proptest! {
        #[test]
        fn written_batches_validate_with_the_same_fields(
            h in arb_header(),
            stats in proptest::collection::vec(any::<u8>(), 0..40),
            body in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            let stats = if h.magic == LOG_MAGIC_V0 { Vec::new() } else { stats };
            let mut out = vec![0xAA; 3];
            let range = write_batch(&mut out, &h, &stats, &body).expect("valid header");
            let b = LogBatch::validate(&out[range.clone()]).expect("round trip");
            prop_assert_eq!(b.magic(), h.magic);
            prop_assert_eq!(b.base_offset(), h.base_offset);
            prop_assert_eq!(b.commit_timestamp(), h.commit_timestamp);
            let epoch = if h.magic == LOG_MAGIC_V2 { h.leader_epoch } else { NO_LEADER_EPOCH };
            prop_assert_eq!(b.leader_epoch(), epoch);
            prop_assert_eq!(b.schema_id(), h.schema_id);
            prop_assert_eq!(b.attributes(), h.attributes);
            prop_assert_eq!(b.last_offset_delta(), h.last_offset_delta);
            prop_assert_eq!(b.writer_id(), h.writer_id);
            prop_assert_eq!(b.batch_sequence(), h.batch_sequence);
            prop_assert_eq!(b.record_count(), h.record_count);
            prop_assert_eq!(b.statistics(), &stats[..]);
            prop_assert_eq!(b.records(), &body[..]);
            prop_assert_eq!(b.size_in_bytes(), range.len());
        }

        #[test]
        fn any_flipped_bit_after_the_crc_is_caught(
            h in arb_header(),
            body in proptest::collection::vec(any::<u8>(), 1..200),
            pick in any::<prop::sample::Index>(),
            bit in 0u8..8,
        ) {
            let mut out = Vec::new();
            write_batch(&mut out, &h, &[], &body).expect("valid header");
            let from = layout(h.magic).expect("known").schema_id;
            let at = from + pick.index(out.len() - from);
            out[at] ^= 1 << bit;
            prop_assert!(LogBatch::validate(&out).is_err());
        }

        #[test]
        fn stamping_never_breaks_validity(
            h in arb_header(),
            body in proptest::collection::vec(any::<u8>(), 0..100),
            bo in any::<i64>(), ts in any::<i64>(), le in any::<i32>(),
        ) {
            let mut out = Vec::new();
            write_batch(&mut out, &h, &[], &body).expect("valid header");
            LogBatchMut::validate(&mut out).expect("valid").stamp(bo, ts, le);
            let b = LogBatch::validate(&out).expect("valid after stamp");
            prop_assert_eq!(b.base_offset(), bo);
            prop_assert_eq!(b.commit_timestamp(), ts);
        }

        #[test]
        fn splitter_yields_every_whole_batch_of_a_concatenation(
            headers in proptest::collection::vec(arb_header(), 0..6),
            cut in 0usize..60,
        ) {
            let mut buf = Vec::new();
            for (i, h) in headers.iter().enumerate() {
                write_batch(&mut buf, h, &[], &vec![i as u8; i * 7]).expect("valid header");
            }
            let whole = buf.len();
            // A partial trailing batch of `cut` bytes.
            let mut tail = Vec::new();
            write_batch(&mut tail, &header(LOG_MAGIC_V2), &[], b"tail").expect("valid");
            let cut = cut.min(tail.len() - 1);
            buf.extend_from_slice(&tail[..cut]);
            let mut it = LogBatches::new(&buf);
            let mut n = 0;
            for b in it.by_ref() {
                prop_assert!(b.is_ok());
                n += 1;
            }
            prop_assert_eq!(n, headers.len());
            prop_assert_eq!(it.position(), whole);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = LogBatch::validate(&bytes);
            for b in LogBatches::new(&bytes).flatten() {
                let _ = (b.records(), b.statistics(), b.last_offset());
            }
        }
    }
}
