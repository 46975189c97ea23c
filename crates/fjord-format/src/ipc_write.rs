//! Arrow IPC RecordBatch messages (stream framing, metadata version V5,
//! 8-byte alignment, per-buffer body compression) written straight into a
//! log batch's buffer, for flat column types.
//!
//! Why not arrow-ipc's `StreamWriter` for these: with body compression it
//! allocates a fresh vector for every compressed buffer (and another for
//! the codec's output), which on a long-running writer means fresh pages —
//! page faults — for every buffer of every batch. Here the codec context
//! lives as long as the encoder, and a buffer is compressed straight into
//! the log batch's buffer when it has room. The bytes written
//! are the same as arrow-ipc's (a test compares them), so every Arrow
//! reader — arrow-rs in fluss-rs and pyfluss, Java Arrow in Fluss — reads
//! them as before. Nested types and LZ4_FRAME still go through arrow-ipc
//! ([`FlatRecordBatchWriter::supports`]).

use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_buffer::Buffer;
use arrow_ipc::{
    BodyCompressionBuilder, BodyCompressionMethod, CompressionType, FieldNode, MessageBuilder,
    MessageHeader, MetadataVersion, RecordBatchBuilder,
};
use arrow_schema::{ArrowError, DataType, Schema};
use flatbuffers::FlatBufferBuilder;

/// IPC alignment of metadata and of every body buffer (the log format's).
const ALIGNMENT: usize = 8;
/// Stream continuation marker preceding every message's metadata length.
const CONTINUATION_MARKER: [u8; 4] = [0xff; 4];
/// Prefix of a buffer stored uncompressed in a compressed body (its
/// compressed form was not smaller).
const LENGTH_NO_COMPRESSED_DATA: i64 = -1;
const PADDING: [u8; ALIGNMENT] = [0; ALIGNMENT];

/// Writes RecordBatch messages for one schema of flat columns (see
/// [`FlatRecordBatchWriter::supports`]), NONE or ZSTD body compression.
/// Reusable: its codec context and scratch vector are kept across batches.
pub(crate) struct FlatRecordBatchWriter {
    fbb: FlatBufferBuilder<'static>,
    zstd: Option<zstd::bulk::Compressor<'static>>,
    nodes: Vec<FieldNode>,
    buffers: Vec<arrow_ipc::Buffer>,
    /// One buffer's codec output when the log batch's buffer has no room
    /// for its worst case.
    compressed: Vec<u8>,
    /// Per column, the buffers written in IPC order (validity, then data).
    column_buffers: Vec<Vec<Buffer>>,
}

impl FlatRecordBatchWriter {
    /// Whether every column of `schema` is a type this writer handles.
    pub(crate) fn supports(schema: &Schema) -> bool {
        schema.fields().iter().all(|f| {
            matches!(
                f.data_type(),
                DataType::Int8
                    | DataType::Int16
                    | DataType::Int32
                    | DataType::Int64
                    | DataType::Float32
                    | DataType::Float64
                    | DataType::Utf8
                    | DataType::Binary
                    | DataType::FixedSizeBinary(_)
                    | DataType::Decimal128(_, _)
                    | DataType::Date32
                    | DataType::Time32(_)
                    | DataType::Time64(_)
                    | DataType::Timestamp(_, _)
            )
        })
    }

    /// A writer with no body compression (`zstd_level: None`) or ZSTD at
    /// `zstd_level`.
    pub(crate) fn new(zstd_level: Option<i32>) -> Result<Self, ArrowError> {
        let zstd = zstd_level
            .map(zstd::bulk::Compressor::new)
            .transpose()
            .map_err(|e| ArrowError::ExternalError(Box::new(e)))?;
        Ok(Self {
            fbb: FlatBufferBuilder::new(),
            zstd,
            nodes: Vec::new(),
            buffers: Vec::new(),
            compressed: Vec::new(),
            column_buffers: Vec::new(),
        })
    }

    /// Appends the RecordBatch message of `batch` (continuation marker,
    /// metadata length, metadata, padding, body) to `out`. The caller
    /// checked the schema with [`FlatRecordBatchWriter::supports`].
    ///
    /// With ZSTD, each buffer is compressed straight into `out`, behind
    /// room left for the metadata: the metadata (which holds the buffers'
    /// compressed lengths) is built once with placeholder lengths to learn
    /// its size, and again with the real ones into that room. Its size does
    /// not depend on those values (buffers are fixed-size structs), so a
    /// buffer compressed into `out` is not copied again (one that does not
    /// fit goes through a scratch vector: [`Self::compress_buffer`]).
    pub(crate) fn write(
        &mut self,
        batch: &RecordBatch,
        out: &mut Vec<u8>,
    ) -> Result<(), ArrowError> {
        self.nodes.clear();
        self.buffers.clear();
        self.column_buffers
            .resize_with(batch.num_columns(), Vec::new);
        for (column, array) in batch.columns().iter().enumerate() {
            self.nodes.push(FieldNode::new(
                array.len() as i64,
                array.null_count() as i64,
            ));
            let buffers = &mut self.column_buffers[column];
            buffers.clear();
            ipc_buffers(array, buffers)?;
        }
        let written = if self.zstd.is_some() {
            self.write_compressed(batch.num_rows(), out)
        } else {
            self.write_plain(batch.num_rows(), out);
            Ok(())
        };
        self.fbb.reset();
        // Drop the references to the batch's buffers now: the writer's
        // caller may hand them back to whoever fills the next batch, which
        // needs them unshared to write into them again.
        self.column_buffers.iter_mut().for_each(Vec::clear);
        written
    }

    /// The body's buffers as they are: every length is known before the
    /// metadata, which is written first and the buffers copied behind it.
    fn write_plain(&mut self, rows: usize, out: &mut Vec<u8>) {
        let mut offset = 0usize;
        for buffer in self.column_buffers.iter().flatten() {
            let len = buffer.len();
            self.buffers
                .push(arrow_ipc::Buffer::new(offset as i64, len as i64));
            offset += len + pad_to_alignment(len);
        }
        let body_len = offset;
        let header_start = out.len();
        let header_len = padded_header_len(self.metadata(rows, body_len).len());
        out.reserve(header_len + body_len);
        out.resize(header_start + header_len, 0);
        write_header(&mut out[header_start..], self.fbb.finished_data());
        for buffer in self.column_buffers.iter().flatten() {
            out.extend_from_slice(buffer.as_slice());
            out.extend_from_slice(&PADDING[..pad_to_alignment(buffer.len())]);
        }
    }

    /// The body's buffers compressed straight into `out`, behind room for
    /// the metadata sized by a first build with placeholder lengths.
    fn write_compressed(&mut self, rows: usize, out: &mut Vec<u8>) -> Result<(), ArrowError> {
        let count = self.column_buffers.iter().map(Vec::len).sum();
        let any_data = self.column_buffers.iter().flatten().any(|b| !b.is_empty());
        // A zero field is left out of a flatbuffer, so the placeholder body
        // length is zero exactly when the real one will be (no buffer holds
        // data, so none is encoded to a byte).
        self.buffers.resize(count, arrow_ipc::Buffer::new(0, 0));
        let header_len = padded_header_len(self.metadata(rows, usize::from(any_data)).len());
        self.fbb.reset();
        self.buffers.clear();

        let header_start = out.len();
        out.resize(header_start + header_len, 0);
        let body_start = out.len();
        for column in 0..self.column_buffers.len() {
            for slot in 0..self.column_buffers[column].len() {
                let offset = out.len() - body_start;
                let len = self.compress_buffer(column, slot, out)?;
                out.extend_from_slice(&PADDING[..pad_to_alignment(len)]);
                self.buffers
                    .push(arrow_ipc::Buffer::new(offset as i64, len as i64));
            }
        }
        let body_len = out.len() - body_start;
        let metadata = self.metadata(rows, body_len);
        if padded_header_len(metadata.len()) == header_len {
            write_header(&mut out[header_start..body_start], metadata);
        } else {
            // Not expected (the size is the placeholders'); kept correct
            // rather than assumed, at the cost of moving the body once.
            let mut header = vec![0; padded_header_len(metadata.len())];
            write_header(&mut header, metadata);
            out.splice(header_start..body_start, header);
        }
        Ok(())
    }

    /// Compresses buffer `slot` of `column` onto the end of `out`, behind
    /// its uncompressed length; returns the bytes written. The codec writes
    /// straight into `out` when `out` has room for the worst case; else
    /// (the output buffer is sized for the batch's expected compressed
    /// size, not every buffer's worst case) into a scratch vector, copied
    /// once, rather than growing `out` past what the batch needs.
    fn compress_buffer(
        &mut self,
        column: usize,
        slot: usize,
        out: &mut Vec<u8>,
    ) -> Result<usize, ArrowError> {
        let input = self.column_buffers[column][slot].as_slice();
        if input.is_empty() {
            return Ok(0);
        }
        let codec = self
            .zstd
            .as_mut()
            .expect("write_compressed runs with a codec");
        let start = out.len();
        let bound = zstd::zstd_safe::compress_bound(input.len());
        out.extend_from_slice(&(input.len() as i64).to_le_bytes());
        let direct = out.capacity() - out.len() >= bound;
        let compressed = if direct {
            // The codec writes at the cursor, into `out`'s spare capacity,
            // and sets `out`'s length to the end of what it wrote.
            let mut cursor = std::io::Cursor::new(&mut *out);
            cursor.set_position((start + 8) as u64);
            codec.compress_to_buffer(input, &mut cursor)
        } else {
            self.compressed.clear();
            self.compressed.reserve(bound);
            codec.compress_to_buffer(input, &mut self.compressed)
        }
        .map_err(|e| ArrowError::ExternalError(Box::new(e)))?;
        if compressed + 8 > input.len() {
            // Not smaller: stored as is, flagged by a -1 length.
            out.truncate(start);
            out.extend_from_slice(&LENGTH_NO_COMPRESSED_DATA.to_le_bytes());
            out.extend_from_slice(input);
        } else if !direct {
            out.extend_from_slice(&self.compressed);
        }
        Ok(out.len() - start)
    }

    /// The Message flatbuffer, built in the order arrow-ipc builds it (so
    /// the bytes are the same).
    fn metadata(&mut self, rows: usize, body_len: usize) -> &[u8] {
        let fbb = &mut self.fbb;
        let compression = self.zstd.as_ref().map(|_| {
            let mut c = BodyCompressionBuilder::new(fbb);
            c.add_method(BodyCompressionMethod::BUFFER);
            c.add_codec(CompressionType::ZSTD);
            c.finish()
        });
        let buffers = fbb.create_vector(&self.buffers);
        let nodes = fbb.create_vector(&self.nodes);
        let root = {
            let mut batch = RecordBatchBuilder::new(fbb);
            batch.add_length(rows as i64);
            batch.add_nodes(nodes);
            batch.add_buffers(buffers);
            if let Some(c) = compression {
                batch.add_compression(c);
            }
            batch.finish().as_union_value()
        };
        let mut message = MessageBuilder::new(fbb);
        message.add_version(MetadataVersion::V5);
        message.add_header_type(MessageHeader::RecordBatch);
        message.add_bodyLength(body_len as i64);
        message.add_header(root);
        let root = message.finish();
        fbb.finish(root, None);
        fbb.finished_data()
    }
}

/// The buffers of a flat column in IPC order, trimmed to the array's own
/// rows (a sliced array writes only its slice): validity (empty when there
/// is no NULL), then offsets and data, or the values.
fn ipc_buffers(array: &ArrayRef, out: &mut Vec<Buffer>) -> Result<(), ArrowError> {
    let data = array.to_data();
    let (offset, len) = (data.offset(), data.len());
    out.push(match data.nulls() {
        Some(nulls) if data.null_count() > 0 => nulls.inner().sliced(),
        _ => Buffer::from(Vec::<u8>::new()),
    });
    match data.data_type() {
        DataType::Utf8 | DataType::Binary => {
            let offsets = data.buffers()[0].typed_data::<i32>();
            let offsets = &offsets[offset..offset + len + 1];
            let (first, last) = (offsets[0], offsets[len]);
            let offsets = if first == 0 {
                data.buffers()[0].slice_with_length(offset * 4, (len + 1) * 4)
            } else {
                // Rebased to start at 0, as the format requires.
                Buffer::from_iter(offsets.iter().map(|o| o - first))
            };
            out.push(offsets);
            out.push(data.buffers()[1].slice_with_length(first as usize, (last - first) as usize));
        }
        DataType::FixedSizeBinary(width) => {
            let width = usize::try_from(*width).unwrap_or(0);
            out.push(data.buffers()[0].slice_with_length(offset * width, len * width));
        }
        data_type => {
            let width = data_type.primitive_width().ok_or_else(|| {
                ArrowError::InvalidArgumentError(format!("{data_type} is not a flat column type"))
            })?;
            out.push(data.buffers()[0].slice_with_length(offset * width, len * width));
        }
    }
    Ok(())
}

/// The bytes in front of a body for metadata of `metadata_len` bytes:
/// marker, length and metadata, padded so the body starts aligned.
fn padded_header_len(metadata_len: usize) -> usize {
    (metadata_len + 8).next_multiple_of(ALIGNMENT)
}

/// Writes the stream framing of `metadata` into `header` (zeroed, of
/// [`padded_header_len`] bytes): the continuation marker, the padded
/// metadata length, the metadata; the padding stays zero.
fn write_header(header: &mut [u8], metadata: &[u8]) {
    let padded_metadata_len = header.len() - 8;
    header[..4].copy_from_slice(&CONTINUATION_MARKER);
    header[4..8].copy_from_slice(&(padded_metadata_len as i32).to_le_bytes());
    header[8..8 + metadata.len()].copy_from_slice(metadata);
}

fn pad_to_alignment(len: usize) -> usize {
    len.next_multiple_of(ALIGNMENT) - len
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::types::Int64Type;
    use arrow_array::{
        BinaryArray, Date32Array, Decimal128Array, FixedSizeBinaryArray, Float64Array, Int16Array,
        Int32Array, Int64Array, PrimitiveArray, StringArray, TimestampMillisecondArray,
    };
    use arrow_ipc::writer::{IpcWriteOptions, StreamWriter};

    use super::*;

    /// The message arrow-ipc's stream writer writes for `batch` (the schema
    /// message before it cut off).
    fn arrow_ipc_message(batch: &RecordBatch, zstd_level: Option<i32>) -> Vec<u8> {
        let mut options = IpcWriteOptions::try_new(8, false, MetadataVersion::V5).unwrap();
        if let Some(level) = zstd_level {
            options = options
                .try_with_compression(Some(CompressionType::ZSTD))
                .unwrap()
                .try_with_compression_level(Some(level))
                .unwrap();
        }
        let mut writer =
            StreamWriter::try_new_with_options(Vec::new(), &batch.schema(), options).unwrap();
        let schema_len = writer.get_ref().len();
        writer.write(batch).unwrap();
        writer.get_ref()[schema_len..].to_vec()
    }

    fn ours(batch: &RecordBatch, zstd_level: Option<i32>) -> Vec<u8> {
        assert!(FlatRecordBatchWriter::supports(&batch.schema()));
        let mut writer = FlatRecordBatchWriter::new(zstd_level).unwrap();
        let mut out = b"prefix".to_vec();
        writer.write(batch, &mut out).unwrap();
        // A second batch through the same writer: nothing of the first leaks.
        // Into an empty vector, the codec writes into the scratch vector
        // (no room for a buffer's worst case) ...
        let mut again = Vec::new();
        writer.write(batch, &mut again).unwrap();
        assert_eq!(out[6..], again[..]);
        // ... and into one with room for every buffer's worst case, straight
        // into the output.
        let mut roomy = Vec::with_capacity(4 << 20);
        writer.write(batch, &mut roomy).unwrap();
        assert_eq!(roomy, again);
        again
    }

    fn every_flat_type(rows: usize) -> RecordBatch {
        let n = rows as i64;
        let text: Vec<Option<String>> = (0..n)
            .map(|i| (i % 7 != 3).then(|| "x".repeat((i % 5) as usize)))
            .collect();
        let columns: Vec<(&str, ArrayRef)> = vec![
            ("i64", Arc::new(Int64Array::from_iter_values(0..n))),
            (
                "i32",
                Arc::new(Int32Array::from_iter(
                    (0..n).map(|i| (i % 3 != 0).then_some(i as i32)),
                )),
            ),
            (
                "i16",
                Arc::new(Int16Array::from_iter_values((0..n).map(|i| i as i16))),
            ),
            (
                "f64",
                Arc::new(Float64Array::from_iter_values(
                    (0..n).map(|i| i as f64 / 3.0),
                )),
            ),
            ("s", Arc::new(StringArray::from(text))),
            (
                "b",
                Arc::new(BinaryArray::from_iter_values(
                    (0..n).map(|i| vec![i as u8; (i % 4) as usize]),
                )),
            ),
            (
                "fixed",
                Arc::new(
                    FixedSizeBinaryArray::try_from_iter((0..n).map(|i| [i as u8; 3])).unwrap(),
                ),
            ),
            (
                "dec",
                Arc::new(
                    Decimal128Array::from_iter_values((0..n).map(i128::from))
                        .with_precision_and_scale(10, 2)
                        .unwrap(),
                ),
            ),
            (
                "date",
                Arc::new(Date32Array::from_iter_values((0..n).map(|i| i as i32))),
            ),
            (
                "ts",
                Arc::new(TimestampMillisecondArray::from_iter_values(
                    (0..n).map(|i| 1_500_000_000_000 + i),
                )),
            ),
        ];
        RecordBatch::try_from_iter(columns).unwrap()
    }

    #[test]
    fn messages_are_byte_for_byte_arrow_ipcs_for_every_flat_type() {
        for level in [None, Some(3)] {
            for batch in [every_flat_type(1), every_flat_type(1_000)] {
                assert_eq!(
                    ours(&batch, level),
                    arrow_ipc_message(&batch, level),
                    "{level:?}"
                );
            }
        }
    }

    #[test]
    fn sliced_batches_write_only_their_rows_as_arrow_ipc_does() {
        let batch = every_flat_type(1_000);
        for (offset, len) in [(1, 10), (7, 500), (999, 1)] {
            let slice = batch.slice(offset, len);
            for level in [None, Some(3)] {
                assert_eq!(ours(&slice, level), arrow_ipc_message(&slice, level));
            }
        }
    }

    #[test]
    fn incompressible_buffers_are_stored_raw_as_arrow_ipc_stores_them() {
        // Pseudo-random values: ZSTD cannot shrink them.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let values: PrimitiveArray<Int64Type> = (0..64)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as i64
            })
            .collect();
        let batch = RecordBatch::try_from_iter([("v", Arc::new(values) as ArrayRef)]).unwrap();
        assert_eq!(ours(&batch, Some(3)), arrow_ipc_message(&batch, Some(3)));
    }

    #[test]
    fn a_written_batch_is_not_referenced_by_the_writer_afterwards() {
        // The writer's caller recycles a written batch's buffers, which
        // needs them unshared.
        let batch = every_flat_type(100);
        let mut writer = FlatRecordBatchWriter::new(Some(3)).unwrap();
        writer.write(&batch, &mut Vec::new()).unwrap();
        let values = batch.column(0).to_data().buffers()[0].clone();
        drop(batch);
        assert!(
            values.into_mutable().is_ok(),
            "the writer still holds the buffer"
        );
    }

    #[test]
    fn nested_and_boolean_columns_are_left_to_arrow_ipc() {
        let schema = Schema::new(vec![arrow_schema::Field::new(
            "flag",
            DataType::Boolean,
            true,
        )]);
        assert!(!FlatRecordBatchWriter::supports(&schema));
        let list = DataType::List(Arc::new(arrow_schema::Field::new(
            "item",
            DataType::Int32,
            true,
        )));
        let schema = Schema::new(vec![arrow_schema::Field::new("l", list, true)]);
        assert!(!FlatRecordBatchWriter::supports(&schema));
    }
}
