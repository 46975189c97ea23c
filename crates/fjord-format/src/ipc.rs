//! Locating the parts of an Arrow IPC encapsulated RecordBatch message, the
//! form the ARROW log format carries after the change-type bytes:
//!
//! ```text
//! 0xFFFFFFFF | metadata_size: i32 LE | Message flatbuffer (padded) | body
//! ```
//!
//! Writers (arrow-rs `StreamWriter`, Java `MessageSerializer`) pad so that
//! the body starts 8-byte aligned; like fluss-rs we round `8 + metadata_size`
//! up to 8 to find it. The body is `Message.bodyLength` bytes.
//!
//! Everything here checks bounds before use: the input is untrusted bytes
//! (a produce request or a segment file), and must never cause a panic.

use arrow_ipc::{Message, MessageHeader, RecordBatch as IpcRecordBatch};
use arrow_schema::DataType as ArrowType;

/// Marker opening every encapsulated IPC message since Arrow 0.15.
pub(crate) const CONTINUATION_MARKER: [u8; 4] = [0xFF; 4];
/// Continuation marker plus the metadata size.
pub(crate) const IPC_PREFIX_LEN: usize = 8;
/// Alignment of the message body and of every buffer in it.
pub(crate) const IPC_ALIGNMENT: usize = 8;

/// Rounds `n` up to a multiple of [`IPC_ALIGNMENT`].
#[inline]
pub(crate) const fn align8(n: usize) -> usize {
    (n + IPC_ALIGNMENT - 1) & !(IPC_ALIGNMENT - 1)
}

/// Largest decoded (decompressed) body a batch may declare. A client batch
/// is ~2 MiB by default and a Fluss batch at most a few MiB compressed; this
/// bounds what a corrupt or hostile uncompressed-length prefix can make the
/// decoder allocate (arrow-rs allocates the declared size up front).
pub const MAX_DECODED_BODY_BYTES: usize = 256 << 20;

/// Buffers an IPC writer emits for one node of this type (Arrow Java's
/// `TypeLayout.getTypeBufferCount`), children not included.
pub(crate) fn own_buffer_count(data_type: &ArrowType) -> usize {
    match data_type {
        ArrowType::Null => 0,
        ArrowType::Struct(_) | ArrowType::FixedSizeList(_, _) => 1,
        ArrowType::Utf8 | ArrowType::Binary | ArrowType::LargeUtf8 | ArrowType::LargeBinary => 3,
        _ => 2,
    }
}

/// Appends `(tag, is_struct, own buffer count)` for a field of this type
/// and its descendants in IPC (pre-order, depth-first) order.
pub(crate) fn flatten_nodes<T: Copy>(
    data_type: &ArrowType,
    tag: T,
    out: &mut Vec<(T, bool, usize)>,
) {
    out.push((
        tag,
        matches!(data_type, ArrowType::Struct(_)),
        own_buffer_count(data_type),
    ));
    match data_type {
        ArrowType::Struct(fields) => {
            for f in fields {
                flatten_nodes(f.data_type(), tag, out);
            }
        }
        ArrowType::List(f)
        | ArrowType::LargeList(f)
        | ArrowType::FixedSizeList(f, _)
        | ArrowType::Map(f, _) => flatten_nodes(f.data_type(), tag, out),
        _ => {}
    }
}

/// Checks the field nodes against what arrow-rs's decoder assumes without
/// checking (it panics otherwise): non-negative lengths and null counts,
/// `null_count <= length`, and — for every node with nulls — a validity
/// buffer holding at least `length` bits (reading the uncompressed-length
/// prefix of compressed buffers, without decompressing).
pub(crate) fn check_nodes(
    parsed: &IpcBatchMessage<'_>,
    body: &[u8],
    schema: &arrow_schema::Schema,
) -> Result<(), IpcMessageError> {
    let (Some(nodes), Some(buffers)) = (parsed.batch.nodes(), parsed.batch.buffers()) else {
        return Err(IpcMessageError::MissingVector("nodes"));
    };
    let mut flat: Vec<((), bool, usize)> = Vec::with_capacity(nodes.len());
    for field in schema.fields() {
        flatten_nodes(field.data_type(), (), &mut flat);
    }
    let compressed = parsed.batch.compression().is_some();
    if compressed {
        // The decoder allocates what each length prefix says before
        // decompressing: bound their sum before handing the body over.
        let mut total: u64 = 0;
        for (index, b) in buffers.iter().enumerate() {
            let raw = &body[b.offset() as usize..(b.offset() + b.length()) as usize];
            let declared = match raw.len() {
                0 => 0,
                1..=7 => -2,
                _ => i64::from_le_bytes(raw[..8].try_into().expect("8 bytes")),
            };
            let bytes = match declared {
                -1 => raw.len() as u64 - 8,
                n if n >= 0 => n as u64,
                _ => u64::MAX,
            };
            total = total.saturating_add(bytes);
            if total > MAX_DECODED_BODY_BYTES as u64 {
                return Err(IpcMessageError::DecodedBodyTooLarge { index, declared });
            }
        }
    }
    let mut buffer_index = 0usize;
    for (index, node) in nodes.iter().enumerate() {
        let (length, null_count) = (node.length(), node.null_count());
        if length < 0 || null_count < 0 || null_count > length {
            return Err(IpcMessageError::BadFieldNode {
                index,
                length,
                null_count,
            });
        }
        // More nodes than the schema implies: arrow reports that itself.
        let Some(&(_, _, own)) = flat.get(index) else {
            break;
        };
        if own > 0 && null_count > 0 {
            if buffer_index >= buffers.len() {
                break;
            }
            let b = buffers.get(buffer_index);
            // parse_batch_message checked the buffer lies inside the body.
            let raw = &body[b.offset() as usize..(b.offset() + b.length()) as usize];
            let bytes = if !compressed || raw.is_empty() {
                raw.len() as i64
            } else if raw.len() < 8 {
                -2
            } else {
                let prefix = i64::from_le_bytes(raw[..8].try_into().expect("8 bytes"));
                if prefix == -1 {
                    raw.len() as i64 - 8
                } else {
                    prefix
                }
            };
            if bytes < 0 || (bytes as u64) * 8 < length as u64 {
                return Err(IpcMessageError::BadFieldNode {
                    index,
                    length,
                    null_count,
                });
            }
        }
        buffer_index += own;
    }
    Ok(())
}

/// A parsed IPC RecordBatch message borrowed from its bytes.
pub(crate) struct IpcBatchMessage<'a> {
    /// The flatbuffer message (verified).
    pub message: Message<'a>,
    /// Its RecordBatch header.
    pub batch: IpcRecordBatch<'a>,
    /// Offset of the body within the message bytes.
    pub body_start: usize,
    /// Length of the body (`Message.bodyLength`).
    pub body_len: usize,
}

/// Why bytes are not a usable IPC RecordBatch message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IpcMessageError {
    /// Fewer than 8 bytes.
    #[error("Arrow IPC message truncated: {len} bytes, need at least 8")]
    TooShort {
        /// Bytes present.
        len: usize,
    },
    /// The first four bytes are not 0xFFFFFFFF.
    #[error("Arrow IPC message does not start with the continuation marker 0xFFFFFFFF")]
    NoContinuation,
    /// Metadata size negative or past the end.
    #[error("Arrow IPC metadata size {size} does not fit in {available} bytes")]
    BadMetadataSize {
        /// Declared metadata size.
        size: i32,
        /// Bytes available after the prefix.
        available: usize,
    },
    /// The flatbuffer does not verify.
    #[error("Arrow IPC metadata is not a valid flatbuffer: {0}")]
    BadFlatbuffer(String),
    /// A valid message of another kind (schema, dictionary, ...).
    #[error("Arrow IPC message is not a RecordBatch")]
    NotRecordBatch,
    /// The RecordBatch lacks its nodes or buffers vector.
    #[error("Arrow IPC RecordBatch has no {0} vector")]
    MissingVector(&'static str),
    /// Body length negative or past the end.
    #[error(
        "Arrow IPC body length {body_len} does not fit in the {available} bytes after the metadata"
    )]
    BadBodyLength {
        /// Declared body length.
        body_len: i64,
        /// Bytes after the metadata.
        available: usize,
    },
    /// A field node whose length or null count is impossible.
    #[error("Arrow IPC field node {index} has length {length} and null count {null_count}, which its buffers cannot hold")]
    BadFieldNode {
        /// Node index (pre-order).
        index: usize,
        /// Declared length.
        length: i64,
        /// Declared null count.
        null_count: i64,
    },
    /// The compressed buffers declare more decoded bytes than allowed.
    #[error("Arrow IPC buffer {index} declares uncompressed length {declared}, taking the batch past the {MAX_DECODED_BODY_BYTES}-byte decode limit (or the prefix is malformed)")]
    DecodedBodyTooLarge {
        /// Buffer index.
        index: usize,
        /// The declared uncompressed length (-2: prefix shorter than 8 bytes).
        declared: i64,
    },
    /// A buffer reaches outside the body.
    #[error("Arrow IPC buffer {index} (offset {offset}, length {length}) lies outside the {body_len}-byte body")]
    BufferOutOfBody {
        /// Buffer index.
        index: usize,
        /// Declared offset.
        offset: i64,
        /// Declared length.
        length: i64,
        /// Body length.
        body_len: usize,
    },
}

/// Parses and bounds-checks an IPC RecordBatch message at the start of `bytes`.
/// Bytes after the body are allowed (and ignored).
pub(crate) fn parse_batch_message(bytes: &[u8]) -> Result<IpcBatchMessage<'_>, IpcMessageError> {
    if bytes.len() < IPC_PREFIX_LEN {
        return Err(IpcMessageError::TooShort { len: bytes.len() });
    }
    if bytes[..4] != CONTINUATION_MARKER {
        return Err(IpcMessageError::NoContinuation);
    }
    let size = i32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
    let available = bytes.len() - IPC_PREFIX_LEN;
    let metadata_len = usize::try_from(size)
        .ok()
        .filter(|&n| n <= available)
        .ok_or(IpcMessageError::BadMetadataSize { size, available })?;
    let metadata = &bytes[IPC_PREFIX_LEN..IPC_PREFIX_LEN + metadata_len];
    let message = arrow_ipc::root_as_message(metadata)
        .map_err(|e| IpcMessageError::BadFlatbuffer(e.to_string()))?;
    if message.header_type() != MessageHeader::RecordBatch {
        return Err(IpcMessageError::NotRecordBatch);
    }
    let batch = message
        .header_as_record_batch()
        .ok_or(IpcMessageError::NotRecordBatch)?;
    let body_start = align8(IPC_PREFIX_LEN + metadata_len).min(bytes.len());
    let after = bytes.len() - body_start;
    let declared = message.bodyLength();
    let body_len = usize::try_from(declared)
        .ok()
        .filter(|&n| n <= after)
        .ok_or(IpcMessageError::BadBodyLength {
            body_len: declared,
            available: after,
        })?;
    let buffers = batch
        .buffers()
        .ok_or(IpcMessageError::MissingVector("buffers"))?;
    if batch.nodes().is_none() {
        return Err(IpcMessageError::MissingVector("nodes"));
    }
    for (index, buffer) in buffers.iter().enumerate() {
        let (offset, length) = (buffer.offset(), buffer.length());
        let inside = offset >= 0
            && length >= 0
            && offset
                .checked_add(length)
                .is_some_and(|end| end as u64 <= body_len as u64);
        if !inside {
            return Err(IpcMessageError::BufferOutOfBody {
                index,
                offset,
                length,
                body_len,
            });
        }
    }
    Ok(IpcBatchMessage {
        message,
        batch,
        body_start,
        body_len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arrow_log::{ArrowCompression, ArrowLogEncoder};
    use crate::arrow_schema::to_arrow_schema;
    use crate::fixtures::{nested_batch, nested_schema};
    use crate::log_batch::{BatchHeader, V0_HEADER_SIZE};

    /// A valid IPC message (the records section of an encoded V0 batch).
    fn message() -> Vec<u8> {
        let schema = nested_schema();
        let mut encoder = ArrowLogEncoder::new(to_arrow_schema(&schema), ArrowCompression::None)
            .expect("encoder");
        let mut out = Vec::new();
        encoder
            .encode(
                &nested_batch(5),
                &BatchHeader::append_only(0, 0),
                None,
                &mut out,
            )
            .expect("encode");
        out.split_off(V0_HEADER_SIZE)
    }

    fn check(bytes: &[u8], expected: IpcMessageError) {
        match parse_batch_message(bytes) {
            Ok(_) => panic!("expected {expected:?}"),
            Err(e) => assert_eq!(e, expected),
        }
    }

    #[test]
    fn a_valid_message_parses_with_aligned_body() {
        let bytes = message();
        let parsed = parse_batch_message(&bytes).unwrap();
        assert_eq!(parsed.body_start % IPC_ALIGNMENT, 0);
        assert_eq!(parsed.body_start + parsed.body_len, bytes.len());
        assert_eq!(parsed.batch.length(), 5);
    }

    #[test]
    fn each_defect_is_named() {
        let good = message();
        check(&good[..7], IpcMessageError::TooShort { len: 7 });
        let mut bad = good.clone();
        bad[0] = 0;
        check(&bad, IpcMessageError::NoContinuation);
        let mut bad = good.clone();
        bad[4..8].copy_from_slice(&(-1i32).to_le_bytes());
        check(
            &bad,
            IpcMessageError::BadMetadataSize {
                size: -1,
                available: good.len() - 8,
            },
        );
        let mut bad = good.clone();
        bad[8..16].fill(0xEE);
        assert!(matches!(
            parse_batch_message(&bad),
            Err(IpcMessageError::BadFlatbuffer(_))
        ));
        let parsed = parse_batch_message(&good).unwrap();
        let truncated = &good[..good.len() - 8];
        check(
            truncated,
            IpcMessageError::BadBodyLength {
                body_len: parsed.body_len as i64,
                available: parsed.body_len - 8,
            },
        );
    }
}
