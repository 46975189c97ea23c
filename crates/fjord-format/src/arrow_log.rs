//! The ARROW log format: encoding an Arrow `RecordBatch` into a complete
//! Fluss log batch, and decoding one back.
//!
//! A batch's records section (after the fixed header and any V1+
//! statistics) is
//!
//! ```text
//! [change type: u8 × RecordCount]      only when the batch is not append-only
//! 0xFFFFFFFF | metadata_size: i32 LE | Message flatbuffer, padded to 8
//! body: every buffer, each padded to 8; with compression each buffer is
//!       [uncompressed length: i64 LE][LZ4 frame or ZSTD frame]
//! ```
//!
//! — an IPC *stream* without its schema message, exactly what fluss-rs
//! (`record/arrow.rs` `build()`: writes a stream, strips the schema bytes)
//! and the Java client (`ArrowWriter` → `MessageSerializer.serialize` of the
//! RecordBatch alone) write. We write buffers 8-byte aligned, as Java does
//! (arrow-rs defaults to 64), which keeps batches small.
//!
//! Encoding writes straight into the caller's buffer: the header space is
//! reserved, the IPC message is written after it, then the storage crate's
//! [`crate::log_batch::finish_batch`] fills the header and CRC in place.
//! The encoder is built once per (table schema, compression) and reused;
//! flat columns go through `ipc_write`, which compresses straight into the
//! batch's buffer instead of allocating per buffer.
//! Decoding slices the input's buffers where alignment allows.

use std::io::Write;
use std::ops::Range;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_buffer::Buffer;
use arrow_ipc::writer::{IpcWriteOptions, StreamWriter};
use arrow_ipc::{CompressionType, MetadataVersion};
use arrow_schema::{ArrowError, SchemaRef};

use crate::ipc::{check_nodes, parse_batch_message, IpcMessageError};
use crate::ipc_write::FlatRecordBatchWriter;
use crate::log_batch::{self, BatchHeader, LogBatch, LogBatchError, APPEND_ONLY_FLAG_MASK};
use crate::records::{split_batch, SplitError};
use crate::schema::{TABLE_LOG_ARROW_COMPRESSION_TYPE, TABLE_LOG_ARROW_COMPRESSION_ZSTD_LEVEL};

/// ZSTD level Fluss uses when the table does not set one
/// (`table.log.arrow.compression.zstd.level` default).
pub const DEFAULT_ZSTD_LEVEL: i32 = 3;
/// ZSTD levels Fluss accepts (1..=22).
pub const ZSTD_LEVELS: std::ops::RangeInclusive<i32> = 1..=22;

/// Per-buffer body compression of the Arrow IPC message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArrowCompression {
    /// No compression (`NONE`).
    None,
    /// LZ4 frame format (`LZ4_FRAME`).
    Lz4Frame,
    /// ZSTD at the given level (`ZSTD`).
    Zstd {
        /// Compression level, within [`ZSTD_LEVELS`].
        level: i32,
    },
}

impl Default for ArrowCompression {
    /// Fluss's default: ZSTD level 3.
    fn default() -> Self {
        Self::Zstd {
            level: DEFAULT_ZSTD_LEVEL,
        }
    }
}

impl ArrowCompression {
    /// Reads `table.log.arrow.compression.type` (NONE, LZ4_FRAME, ZSTD;
    /// case-insensitive, default ZSTD) and `table.log.arrow.compression.zstd.level`
    /// (default 3) from table properties.
    pub fn from_table_properties(
        properties: &std::collections::BTreeMap<String, String>,
    ) -> Result<Self, ArrowLogError> {
        let kind = properties
            .get(TABLE_LOG_ARROW_COMPRESSION_TYPE)
            .map(String::as_str)
            .unwrap_or("ZSTD");
        if kind.eq_ignore_ascii_case("NONE") {
            Ok(Self::None)
        } else if kind.eq_ignore_ascii_case("LZ4_FRAME") {
            Ok(Self::Lz4Frame)
        } else if kind.eq_ignore_ascii_case("ZSTD") {
            let level = match properties.get(TABLE_LOG_ARROW_COMPRESSION_ZSTD_LEVEL) {
                None => DEFAULT_ZSTD_LEVEL,
                Some(raw) => raw
                    .trim()
                    .parse::<i32>()
                    .ok()
                    .filter(|l| ZSTD_LEVELS.contains(l))
                    .ok_or_else(|| ArrowLogError::BadOption {
                        key: TABLE_LOG_ARROW_COMPRESSION_ZSTD_LEVEL,
                        value: raw.clone(),
                        expected: "an integer from 1 to 22",
                    })?,
            };
            Ok(Self::Zstd { level })
        } else {
            Err(ArrowLogError::BadOption {
                key: TABLE_LOG_ARROW_COMPRESSION_TYPE,
                value: kind.to_owned(),
                expected: "one of NONE, LZ4_FRAME, ZSTD",
            })
        }
    }
}

/// A record's change type, one byte per record in non-append-only batches
/// (Fluss `ChangeType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ChangeType {
    /// `+A`: append to a log table.
    AppendOnly = 0,
    /// `+I`: insert.
    Insert = 1,
    /// `-U`: the row before an update.
    UpdateBefore = 2,
    /// `+U`: the row after an update.
    UpdateAfter = 3,
    /// `-D`: delete.
    Delete = 4,
}

impl ChangeType {
    /// The change type a byte encodes, if any.
    pub fn from_byte(byte: u8) -> Option<Self> {
        Some(match byte {
            0 => Self::AppendOnly,
            1 => Self::Insert,
            2 => Self::UpdateBefore,
            3 => Self::UpdateAfter,
            4 => Self::Delete,
            _ => return None,
        })
    }
}

/// What went wrong encoding or decoding an ARROW log batch.
#[derive(Debug, thiserror::Error)]
pub enum ArrowLogError {
    /// The batch header is malformed or the CRC does not match.
    #[error(transparent)]
    Batch(#[from] LogBatchError),
    /// The records section is not an Arrow IPC RecordBatch message.
    #[error(transparent)]
    Ipc(#[from] IpcMessageError),
    /// arrow-rs refused to encode or decode.
    #[error("Arrow error: {0}")]
    Arrow(#[from] ArrowError),
    /// A table option has a value Fluss would not accept.
    #[error("table option `{key}` = `{value}` is invalid: expected {expected}")]
    BadOption {
        /// Option key.
        key: &'static str,
        /// The value given.
        value: String,
        /// What it must be.
        expected: &'static str,
    },
    /// The change-type vector does not have one entry per record.
    #[error("{change_types} change types given for {records} records")]
    ChangeTypeCount {
        /// Entries in the change-type vector.
        change_types: usize,
        /// Records in the batch.
        records: usize,
    },
    /// A change-type byte that is not one of Fluss's change types.
    #[error("invalid change type byte {byte} at record {index}")]
    BadChangeType {
        /// Record index.
        index: usize,
        /// The byte found.
        byte: u8,
    },
    /// The records section is shorter than its change-type vector.
    #[error("records section of {len} bytes cannot hold {records} change types")]
    ChangeTypesTruncated {
        /// Records section length.
        len: usize,
        /// Record count from the header.
        records: usize,
    },
    /// The Arrow batch holds a different number of rows than the header says.
    #[error("header declares {declared} records but the Arrow batch holds {actual}")]
    RecordCountMismatch {
        /// `RecordCount` from the header.
        declared: i32,
        /// Rows in the decoded batch.
        actual: usize,
    },
    /// The Arrow data is inconsistent in a way arrow-rs only detects by
    /// panicking (caught and reported here).
    #[error("malformed Arrow data: {0}")]
    MalformedArrow(String),
    /// The `RecordBatch` to encode does not have the encoder's schema.
    #[error("record batch schema does not match the table's Arrow schema")]
    SchemaMismatch,
    /// An empty `RecordBatch` was given; Fluss never writes empty Arrow batches.
    #[error("cannot encode an Arrow batch with no rows")]
    Empty,
}

/// The write target of the IPC stream writer: the caller's buffer, swapped
/// in for the duration of one [`ArrowLogEncoder::encode`] call.
#[derive(Default)]
struct SwapSink {
    buf: Vec<u8>,
}

impl Write for SwapSink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.buf.extend_from_slice(bytes);
        Ok(())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Encodes Arrow `RecordBatch`es of one table schema into complete log
/// batches. Built once per (table schema, compression) and reused: the IPC
/// schema message is encoded once, at construction, and discarded.
pub struct ArrowLogEncoder {
    schema: SchemaRef,
    writer: StreamWriter<SwapSink>,
    /// The direct writer, for schemas of flat columns with NONE or ZSTD
    /// (the common case); `writer` serves the rest.
    flat: Option<FlatRecordBatchWriter>,
    compression: ArrowCompression,
}

impl std::fmt::Debug for ArrowLogEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArrowLogEncoder")
            .field("compression", &self.compression)
            .field("fields", &self.schema.fields().len())
            .finish()
    }
}

impl ArrowLogEncoder {
    /// An encoder for batches of `schema` with the given body compression.
    pub fn new(schema: SchemaRef, compression: ArrowCompression) -> Result<Self, ArrowLogError> {
        let options = IpcWriteOptions::try_new(8, false, MetadataVersion::V5)?;
        let options = match compression {
            ArrowCompression::None => options,
            ArrowCompression::Lz4Frame => {
                options.try_with_compression(Some(CompressionType::LZ4_FRAME))?
            }
            ArrowCompression::Zstd { level } => options
                .try_with_compression(Some(CompressionType::ZSTD))?
                .try_with_compression_level(Some(level))?,
        };
        let mut writer = StreamWriter::try_new_with_options(SwapSink::default(), &schema, options)?;
        // The stream's schema message is not part of a log batch.
        writer.get_mut().buf = Vec::new();
        let flat = match compression {
            _ if !FlatRecordBatchWriter::supports(&schema) => None,
            ArrowCompression::None => Some(FlatRecordBatchWriter::new(None)?),
            ArrowCompression::Zstd { level } => Some(FlatRecordBatchWriter::new(Some(level))?),
            ArrowCompression::Lz4Frame => None,
        };
        Ok(Self {
            schema,
            writer,
            flat,
            compression,
        })
    }

    /// The Arrow schema this encoder writes.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The body compression this encoder applies.
    pub fn compression(&self) -> ArrowCompression {
        self.compression
    }

    /// Appends one complete log batch holding `batch` to `out` and returns
    /// its byte range in `out`.
    ///
    /// `header` supplies magic, schema id, writer id, batch sequence (and
    /// offsets/timestamps, normally 0); `record_count`, `last_offset_delta`
    /// and the append-only flag are set here from `batch` and
    /// `change_types` (`None`: append-only, no change-type vector). No
    /// statistics are written. On error `out` is left as it was.
    pub fn encode(
        &mut self,
        batch: &RecordBatch,
        header: &BatchHeader,
        change_types: Option<&[u8]>,
        out: &mut Vec<u8>,
    ) -> Result<Range<usize>, ArrowLogError> {
        self.encode_with_statistics(batch, header, change_types, &[], out)
    }

    /// [`encode`](Self::encode) with a statistics block (see
    /// [`crate::statistics`]) between the header and the records;
    /// `header.magic` must then be V1 or later.
    pub fn encode_with_statistics(
        &mut self,
        batch: &RecordBatch,
        header: &BatchHeader,
        change_types: Option<&[u8]>,
        statistics: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<Range<usize>, ArrowLogError> {
        let rows = batch.num_rows();
        if rows == 0 {
            return Err(ArrowLogError::Empty);
        }
        if !Arc::ptr_eq(batch.schema_ref(), &self.schema)
            && batch.schema_ref().fields() != self.schema.fields()
        {
            return Err(ArrowLogError::SchemaMismatch);
        }
        if let Some(change_types) = change_types {
            if change_types.len() != rows {
                return Err(ArrowLogError::ChangeTypeCount {
                    change_types: change_types.len(),
                    records: rows,
                });
            }
            if let Some(index) = change_types
                .iter()
                .position(|&b| ChangeType::from_byte(b).is_none())
            {
                return Err(ArrowLogError::BadChangeType {
                    index,
                    byte: change_types[index],
                });
            }
        }
        let record_count =
            i32::try_from(rows).map_err(|_| LogBatchError::TooLarge { size: rows })?;
        let layout = log_batch::layout(header.magic).ok_or(LogBatchError::UnknownMagic {
            magic: header.magic,
        })?;

        let start = out.len();
        out.resize(start + layout.header_size, 0);
        out.extend_from_slice(statistics);
        if let Some(change_types) = change_types {
            out.extend_from_slice(change_types);
        }
        let written = match &mut self.flat {
            Some(flat) => flat.write(batch, out),
            None => {
                std::mem::swap(&mut self.writer.get_mut().buf, out);
                let written = self.writer.write(batch);
                std::mem::swap(&mut self.writer.get_mut().buf, out);
                written
            }
        };
        if let Err(e) = written {
            out.truncate(start);
            return Err(e.into());
        }

        let mut full = *header;
        full.record_count = record_count;
        full.last_offset_delta = record_count - 1;
        full.attributes = if change_types.is_none() {
            header.attributes | APPEND_ONLY_FLAG_MASK
        } else {
            header.attributes & !APPEND_ONLY_FLAG_MASK
        };
        if let Err(e) = log_batch::finish_batch(&mut out[start..], &full, statistics.len()) {
            out.truncate(start);
            return Err(e.into());
        }
        Ok(start..out.len())
    }
}

/// A decoded ARROW log batch.
#[derive(Debug, Clone)]
pub struct DecodedLogBatch {
    /// One change-type byte per record; `None` for append-only batches.
    /// Each byte is a valid [`ChangeType`].
    pub change_types: Option<Buffer>,
    /// The records.
    pub records: RecordBatch,
}

/// How [`decode_log_batch_with`] checks a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeOptions {
    /// Verify the CRC-32C (default). Turn off for batches from a Fluss
    /// server's projection pushdown, which keeps the source batch's CRC
    /// (Fjord recomputes it); the structure is bounds-checked either way.
    pub verify_crc: bool,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        Self { verify_crc: true }
    }
}

/// Decodes one whole log batch (header included) into Arrow, given the
/// Arrow schema of the batch's schema id (or of the projection the batch
/// was fetched with). Validates the header and CRC first; buffers are
/// zero-copy slices of `batch` where alignment allows.
pub fn decode_log_batch(
    batch: &Buffer,
    schema: SchemaRef,
) -> Result<DecodedLogBatch, ArrowLogError> {
    decode_log_batch_with(batch, schema, DecodeOptions::default())
}

/// [`decode_log_batch`] with explicit [`DecodeOptions`].
pub fn decode_log_batch_with(
    batch: &Buffer,
    schema: SchemaRef,
    options: DecodeOptions,
) -> Result<DecodedLogBatch, ArrowLogError> {
    if options.verify_crc {
        LogBatch::validate(batch.as_slice())?;
    }
    let parts = split_batch(batch.as_slice()).map_err(|e| match e {
        SplitError::Batch(e) => ArrowLogError::Batch(e),
        SplitError::ChangeTypesTruncated { len, records } => {
            ArrowLogError::ChangeTypesTruncated { len, records }
        }
    })?;
    let declared = parts.record_count;
    let change_types = if parts.append_only {
        None
    } else {
        let change_types =
            batch.slice_with_length(parts.records_start, parts.ipc_start - parts.records_start);
        if let Some(index) = change_types
            .as_slice()
            .iter()
            .position(|&b| ChangeType::from_byte(b).is_none())
        {
            return Err(ArrowLogError::BadChangeType {
                index,
                byte: change_types.as_slice()[index],
            });
        }
        Some(change_types)
    };
    let ipc = batch.slice_with_length(parts.ipc_start, parts.size - parts.ipc_start);
    if declared == 0 && ipc.is_empty() {
        return Ok(DecodedLogBatch {
            change_types,
            records: RecordBatch::new_empty(schema),
        });
    }
    let records = decode_ipc_message(&ipc, schema)?;
    if i64::from(declared) != records.num_rows() as i64 {
        return Err(ArrowLogError::RecordCountMismatch {
            declared,
            actual: records.num_rows(),
        });
    }
    Ok(DecodedLogBatch {
        change_types,
        records,
    })
}

/// [`decode_log_batch`] for a borrowed slice: copies it into an Arrow
/// buffer first (one copy per batch), for callers that hold plain bytes.
pub fn decode_log_batch_from_slice(
    batch: &[u8],
    schema: SchemaRef,
) -> Result<DecodedLogBatch, ArrowLogError> {
    decode_log_batch(&Buffer::from(batch), schema)
}

/// Decodes one encapsulated Arrow IPC RecordBatch message (continuation
/// marker, metadata, body) with the given schema.
pub fn decode_ipc_message(ipc: &Buffer, schema: SchemaRef) -> Result<RecordBatch, ArrowLogError> {
    let parsed = parse_batch_message(ipc.as_slice())?;
    let body = ipc.slice_with_length(parsed.body_start, parsed.body_len);
    check_nodes(&parsed, body.as_slice(), &schema)?;
    let dictionaries = std::collections::HashMap::new();
    let version = parsed.message.version();
    let decoder = arrow_ipc::reader::RecordBatchDecoder::try_new(
        &body,
        parsed.batch,
        schema,
        &dictionaries,
        &version,
    )?;
    // arrow-rs 59 asserts (panics) on some malformed inputs instead of
    // returning an error (validity buffers shorter than the node, offset
    // buffers of odd length, ...). `check_nodes` rejects the cases we know
    // cheaply; this turns any other such panic into an error. Sound: the
    // decoder and everything it built are dropped with the panic.
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| decoder.read_record_batch())) {
        Ok(result) => Ok(result?),
        Err(panic) => {
            let reason = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown reason".to_owned());
            Err(ArrowLogError::MalformedArrow(reason))
        }
    }
}
