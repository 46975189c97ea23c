//! Turning the `records` bytes of one bucket of a FetchLog response into
//! Arrow record batches: split the bytes into log batches, skip what the
//! scanner has already returned, decode each batch from slices of the
//! response (no copy of its bytes by the scanner), and put projected columns in the order the caller asked for.
//!
//! Everything here is per batch; nothing is per record.

use arrow_array::RecordBatch;
use arrow_buffer::Buffer;
use arrow_schema::SchemaRef;
use bytes::Bytes;
use fjord_format::arrow_log::{decode_log_batch_with, DecodeOptions};
use fjord_format::log_batch::{self, BASE_OFFSET_OFFSET};

/// What the decoder needs to know about the batches of one scanner, fixed
/// when the scanner is built.
#[derive(Debug, Clone)]
pub(crate) struct DecodePlan {
    /// The Arrow schema of the fetched batches: every column, or the
    /// projected columns in table order (the order the server sends them).
    pub fetched_schema: SchemaRef,
    /// Positions in `fetched_schema` to return, in the caller's order;
    /// `None` when the fetched order is already the caller's.
    pub reorder: Option<Vec<usize>>,
    /// Whether each batch's CRC-32C is checked (see `LogScanner::new`).
    pub verify_crc: bool,
    /// The Arrow schemas of the table's earlier schema ids, when
    /// `fetched_schema` holds every column of the table (empty for a
    /// projected scan, whose columns every schema id the server accepts
    /// has): a batch of one of these ids (written before columns were added
    /// last, the only change Fluss's ALTER TABLE makes to columns) is
    /// decoded with its own schema, once, and the added columns read as
    /// NULL. Built when the scanner is, from `TableInfo::earlier_schemas`.
    pub earlier_schemas: Vec<(i16, SchemaRef)>,
}

/// The records of one bucket decoded from one response.
#[derive(Debug, Default)]
pub(crate) struct Decoded {
    /// `(offset of the first record, its change types, records)`, in
    /// offset order; the change types (one byte a record, each a valid
    /// `ChangeType`) are `None` for append-only batches.
    pub batches: Vec<(i64, Option<Buffer>, RecordBatch)>,
    /// The offset to fetch next: past the last batch decoded, or the
    /// position given when nothing was.
    pub next_offset: i64,
}

/// Why the records of one bucket could not be decoded.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DecodeError {
    /// A batch header does not describe a batch.
    #[error("at byte {at}: {source}")]
    Batch {
        /// Position of the batch in the records bytes.
        at: usize,
        /// What is wrong with it.
        source: log_batch::LogBatchError,
    },
    /// A batch's body does not decode as Arrow with the expected schema.
    #[error("batch at offset {base_offset}: {source}")]
    Arrow {
        /// The batch's base offset.
        base_offset: i64,
        /// What is wrong with it.
        source: fjord_format::arrow_log::ArrowLogError,
    },
    /// The records end inside their first batch: no whole batch came, so
    /// fetching again would return the same part of it forever.
    #[error(
        "the response holds {received} bytes, only part of its first batch{}; no whole batch arrived",
        declared.map_or(String::new(), |size| format!(" of {size} bytes"))
    )]
    NoWholeBatch {
        /// Bytes of records received for the bucket.
        received: usize,
        /// The first batch's size from its header, when that much arrived.
        declared: Option<usize>,
    },
    /// A batch's record count disagrees with the offsets its header spans,
    /// so its records' offsets cannot be known. Only an empty batch (no
    /// records, `LastOffsetDelta` 0: Fluss writes one to move the offset
    /// past a change-log write that produced nothing) may differ.
    #[error(
        "batch at offset {base_offset} holds {record_count} records but spans {offsets} offsets"
    )]
    OffsetSpan {
        /// The batch's base offset.
        base_offset: i64,
        /// `RecordCount` from the header.
        record_count: i32,
        /// `LastOffsetDelta + 1` from the header.
        offsets: i64,
    },
    /// Reordering the projected columns failed (a bug: the plan is checked).
    #[error("batch at offset {base_offset}: reordering columns failed: {source}")]
    Reorder {
        /// The batch's base offset.
        base_offset: i64,
        /// Arrow's error.
        source: arrow_schema::ArrowError,
    },
}

/// Decodes the log batches in `records`, returning the records at offsets
/// `position` and later. A partial batch at the end (the server cut the
/// response at its byte budget) is left for the next fetch, unless it is the
/// only batch (no progress could ever be made); a malformed one is an
/// error, and nothing of the bucket's response is returned then.
pub(crate) fn decode_records(
    records: Bytes,
    position: i64,
    plan: &DecodePlan,
) -> Result<Decoded, DecodeError> {
    let mut out = Decoded {
        batches: Vec::new(),
        next_offset: position,
    };
    if records.is_empty() {
        return Ok(out);
    }
    // One zero-copy view of the response; each batch is a slice of it, so
    // the decoded Arrow buffers point into the received frame.
    let buffer = Buffer::from(records);
    let bytes = buffer.as_slice();
    let mut at = 0usize;
    while at < bytes.len() {
        let rest = &bytes[at..];
        let header = match BatchPosition::read(rest) {
            Ok(Some(header)) => header,
            // A partial trailing batch: read it again, whole, next time.
            Ok(None) if at > 0 => break,
            // Not one whole batch: the server would send the same bytes
            // again on every fetch, so waiting for more would never end.
            // Fluss and Fjord servers always send the first batch whole.
            Ok(None) => {
                let declared = log_batch::peek_size_and_magic(rest)
                    .ok()
                    .flatten()
                    .map(|(size, _)| size);
                return Err(DecodeError::NoWholeBatch {
                    received: bytes.len(),
                    declared,
                });
            }
            Err(source) => return Err(DecodeError::Batch { at, source }),
        };
        let offsets = header.next_offset - header.base_offset;
        if header.record_count > 0 && i64::from(header.record_count) != offsets {
            return Err(DecodeError::OffsetSpan {
                base_offset: header.base_offset,
                record_count: header.record_count,
                offsets,
            });
        }
        let slice = buffer.slice_with_length(at, header.size);
        at += header.size;
        if header.next_offset <= out.next_offset {
            // Fetches start at the batch holding the offset asked for, so
            // the first batches may have been returned already.
            continue;
        }
        let options = DecodeOptions {
            verify_crc: plan.verify_crc,
        };
        let earlier = plan
            .earlier_schemas
            .iter()
            .find(|(id, _)| *id == header.schema_id);
        let decoded = match earlier {
            Some((_, schema)) => decode_padded(&slice, schema, plan, options),
            None => decode_log_batch_with(&slice, plan.fetched_schema.clone(), options),
        }
        .map_err(|source| DecodeError::Arrow {
            base_offset: header.base_offset,
            source,
        })?;
        let mut records = decoded.records;
        let mut change_types = decoded.change_types;
        // Records before the position were returned by an earlier poll. The
        // decoder checked the rows against `RecordCount`, and that against
        // the offsets above; the clamp only keeps the slice in bounds.
        let skip = (out.next_offset - header.base_offset).clamp(0, records.num_rows() as i64);
        if skip > 0 {
            let rows = records.num_rows() - skip as usize;
            records = records.slice(skip as usize, rows);
            change_types = change_types.map(|c| c.slice_with_length(skip as usize, rows));
        }
        if let Some(order) = &plan.reorder {
            records = records
                .project(order)
                .map_err(|source| DecodeError::Reorder {
                    base_offset: header.base_offset,
                    source,
                })?;
        }
        if records.num_rows() > 0 {
            out.batches
                .push((header.base_offset + skip, change_types, records));
        }
        out.next_offset = header.next_offset;
    }
    Ok(out)
}

/// Decodes a batch of an earlier schema id with that id's schema (`own`,
/// a prefix of the plan's columns) and fills the columns added since with
/// NULLs, so every batch the scanner returns has the plan's schema.
fn decode_padded(
    slice: &Buffer,
    own: &SchemaRef,
    plan: &DecodePlan,
    options: DecodeOptions,
) -> Result<fjord_format::arrow_log::DecodedLogBatch, fjord_format::arrow_log::ArrowLogError> {
    let decoded = decode_log_batch_with(slice, own.clone(), options)?;
    let full = &plan.fetched_schema;
    let rows = decoded.records.num_rows();
    let mut arrays = decoded.records.columns().to_vec();
    for field in &full.fields()[arrays.len().min(full.fields().len())..] {
        arrays.push(arrow_array::new_null_array(field.data_type(), rows));
    }
    let records = RecordBatch::try_new(full.clone(), arrays)
        .map_err(fjord_format::arrow_log::ArrowLogError::from)?;
    Ok(fjord_format::arrow_log::DecodedLogBatch {
        change_types: decoded.change_types,
        records,
    })
}

/// The fields of a batch header the scanner steps by, read without the CRC
/// check (which `decode_log_batch_with` does when asked).
struct BatchPosition {
    size: usize,
    base_offset: i64,
    next_offset: i64,
    record_count: i32,
    schema_id: i16,
}

impl BatchPosition {
    /// The batch at the start of `bytes`; `None` when only part of it is there.
    fn read(bytes: &[u8]) -> Result<Option<Self>, log_batch::LogBatchError> {
        let Some((size, magic)) = log_batch::peek_size_and_magic(bytes)? else {
            return Ok(None);
        };
        let layout =
            log_batch::layout(magic).ok_or(log_batch::LogBatchError::UnknownMagic { magic })?;
        if size < layout.header_size {
            return Err(log_batch::LogBatchError::ShorterThanHeader {
                magic,
                size,
                header_size: layout.header_size,
            });
        }
        if bytes.len() < size {
            return Ok(None);
        }
        let base_offset = read_i64(bytes, BASE_OFFSET_OFFSET);
        let last_offset_delta = read_i32(bytes, layout.last_offset_delta);
        let record_count = read_i32(bytes, layout.record_count);
        if last_offset_delta < 0 || record_count < 0 {
            return Err(log_batch::LogBatchError::NegativeCount {
                last_offset_delta,
                record_count,
            });
        }
        let mut schema_id = [0u8; 2];
        schema_id.copy_from_slice(&bytes[layout.schema_id..layout.schema_id + 2]);
        Ok(Some(Self {
            size,
            base_offset,
            next_offset: base_offset.saturating_add(i64::from(last_offset_delta) + 1),
            record_count,
            schema_id: i16::from_le_bytes(schema_id),
        }))
    }
}

fn read_i32(bytes: &[u8], at: usize) -> i32 {
    let mut raw = [0u8; 4];
    raw.copy_from_slice(&bytes[at..at + 4]);
    i32::from_le_bytes(raw)
}

fn read_i64(bytes: &[u8], at: usize) -> i64 {
    let mut raw = [0u8; 8];
    raw.copy_from_slice(&bytes[at..at + 8]);
    i64::from_le_bytes(raw)
}

#[cfg(test)]
// `log(&[0..3])` reads as "one batch of ids 0..3"; it is not a Vec of a range.
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Int64Array, StringArray};
    use arrow_schema::{DataType, Field, Schema};
    use fjord_format::arrow_log::{ArrowCompression, ArrowLogEncoder};
    use fjord_format::log_batch::{BatchHeader, V0_LAYOUT};

    use super::*;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
        ]))
    }

    fn batch(ids: std::ops::Range<i64>) -> RecordBatch {
        let names: Vec<String> = ids.clone().map(|i| format!("n{i}")).collect();
        RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(Int64Array::from_iter_values(ids)),
                Arc::new(StringArray::from_iter_values(names)),
            ],
        )
        .unwrap()
    }

    /// Log batches holding `ids` ranges, stamped with base offsets as a
    /// server would, concatenated.
    fn log(ranges: &[std::ops::Range<i64>]) -> Vec<u8> {
        let mut encoder = ArrowLogEncoder::new(schema(), ArrowCompression::None).unwrap();
        let mut out = Vec::new();
        for range in ranges {
            let start = out.len();
            let records = batch(range.clone());
            let header = BatchHeader::append_only(0, records.num_rows() as i32);
            encoder.encode(&records, &header, None, &mut out).unwrap();
            out[start..start + 8].copy_from_slice(&range.start.to_le_bytes());
        }
        out
    }

    fn plan(reorder: Option<Vec<usize>>, verify_crc: bool) -> DecodePlan {
        DecodePlan {
            fetched_schema: schema(),
            reorder,
            verify_crc,
            earlier_schemas: Vec::new(),
        }
    }

    #[test]
    fn batches_of_an_older_schema_id_read_the_columns_added_since_as_null() {
        use arrow_array::Array;
        // Schema id 1: `id` only; schema id 2 adds `name` last.
        let old = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        let mut encoder = ArrowLogEncoder::new(old.clone(), ArrowCompression::None).unwrap();
        let mut bytes = Vec::new();
        let records =
            RecordBatch::try_new(old, vec![Arc::new(Int64Array::from_iter_values(0..2))]).unwrap();
        encoder
            .encode(&records, &BatchHeader::append_only(1, 2), None, &mut bytes)
            .unwrap();
        let start = bytes.len();
        let mut encoder = ArrowLogEncoder::new(schema(), ArrowCompression::None).unwrap();
        encoder
            .encode(
                &batch(2..3),
                &BatchHeader::append_only(2, 1),
                None,
                &mut bytes,
            )
            .unwrap();
        bytes[start..start + 8].copy_from_slice(&2i64.to_le_bytes());
        let id_only = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        let padded = DecodePlan {
            earlier_schemas: vec![(1, id_only)],
            ..plan(None, true)
        };
        let decoded = decode_records(Bytes::from(bytes.clone()), 0, &padded).unwrap();
        assert_eq!(ids(&decoded), [0, 1, 2]);
        let names: Vec<Option<String>> = decoded
            .batches
            .iter()
            .flat_map(|(_, _, r)| {
                let names = r.column(1).as_any().downcast_ref::<StringArray>().unwrap();
                (0..names.len())
                    .map(|i| names.is_valid(i).then(|| names.value(i).to_string()))
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(names, [None, None, Some("n2".to_string())]);
        // Without the earlier schema, the older batch is an error.
        assert!(decode_records(Bytes::from(bytes), 0, &plan(None, true)).is_err());
    }

    fn ids(decoded: &Decoded) -> Vec<i64> {
        decoded
            .batches
            .iter()
            .flat_map(|(_, _, b)| {
                let col = b.column_by_name("id").unwrap();
                col.as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap()
                    .values()
                    .to_vec()
            })
            .collect()
    }

    #[test]
    fn records_before_the_position_are_skipped_within_and_across_batches() {
        let bytes = Bytes::from(log(&[0..3, 3..7, 7..10]));
        let decoded = decode_records(bytes, 5, &plan(None, true)).unwrap();
        assert_eq!(ids(&decoded), vec![5, 6, 7, 8, 9]);
        assert_eq!(decoded.batches[0].0, 5);
        assert_eq!(decoded.batches[1].0, 7);
        assert_eq!(decoded.next_offset, 10);
    }

    #[test]
    fn a_partial_trailing_batch_is_left_for_the_next_fetch() {
        let mut bytes = log(&[0..3, 3..7]);
        bytes.truncate(bytes.len() - 5);
        let decoded = decode_records(Bytes::from(bytes), 0, &plan(None, true)).unwrap();
        assert_eq!(ids(&decoded), vec![0, 1, 2]);
        assert_eq!(decoded.next_offset, 3);
    }

    #[test]
    fn a_response_holding_only_part_of_one_batch_is_an_error_not_an_endless_wait() {
        let whole = log(&[0..3]);
        for cut in [5, whole.len() - 1] {
            let error = decode_records(Bytes::copy_from_slice(&whole[..cut]), 0, &plan(None, true))
                .expect_err("no whole batch");
            let declared = (cut >= log_batch::HEADER_SIZE_UP_TO_MAGIC).then_some(whole.len());
            assert!(
                matches!(error, DecodeError::NoWholeBatch { received, declared: d } if received == cut && d == declared),
                "cut at {cut}: {error}"
            );
        }
    }

    #[test]
    fn a_corrupted_body_fails_the_crc_check_only_when_it_is_enabled() {
        let mut bytes = log(&[0..3]);
        // Flip a byte in the CRC itself: the body stays decodable.
        bytes[V0_LAYOUT.crc] ^= 0xff;
        let checked = decode_records(Bytes::from(bytes.clone()), 0, &plan(None, true));
        let message = checked.unwrap_err().to_string();
        assert!(message.contains("CRC"), "{message}");
        let unchecked = decode_records(Bytes::from(bytes), 0, &plan(None, false)).unwrap();
        assert_eq!(ids(&unchecked), vec![0, 1, 2]);
    }

    #[test]
    fn projected_columns_come_back_in_the_callers_order() {
        let decoded =
            decode_records(Bytes::from(log(&[0..2])), 0, &plan(Some(vec![1, 0]), true)).unwrap();
        let records = &decoded.batches[0].2;
        assert_eq!(records.schema().field(0).name(), "name");
        assert_eq!(records.schema().field(1).name(), "id");
    }

    #[test]
    fn malformed_headers_are_errors_not_panics() {
        let check = |bytes: Vec<u8>| {
            let result = decode_records(Bytes::from(bytes), 0, &plan(None, false));
            assert!(result.is_err(), "accepted a malformed batch");
        };
        // Negative length.
        let mut negative = log(&[0..3]);
        negative[8..12].copy_from_slice(&(-5i32).to_le_bytes());
        check(negative);
        // Unknown magic.
        let mut magic = log(&[0..3]);
        magic[12] = 9;
        check(magic);
        // A length shorter than the header.
        let mut short = log(&[0..3]);
        short[8..12].copy_from_slice(&10i32.to_le_bytes());
        check(short);
        // A negative last offset delta.
        let mut delta = log(&[0..3]);
        let at = V0_LAYOUT.last_offset_delta;
        delta[at..at + 4].copy_from_slice(&(-1i32).to_le_bytes());
        check(delta);
        // A body that is not Arrow.
        let mut body = log(&[0..3]);
        for b in &mut body[V0_LAYOUT.header_size..] {
            *b = 0xab;
        }
        check(body);
    }

    #[test]
    fn a_batch_whose_record_count_disagrees_with_its_offsets_is_refused() {
        // Three records; the header says they span one offset, then six:
        // either way the offsets of the records are unknown.
        for last_offset_delta in [0i32, 5] {
            let mut bytes = log(&[0..3]);
            let at = V0_LAYOUT.last_offset_delta;
            bytes[at..at + 4].copy_from_slice(&last_offset_delta.to_le_bytes());
            let error = decode_records(Bytes::from(bytes), 0, &plan(None, false))
                .expect_err("offsets disagree with the records");
            assert!(
                matches!(
                    error,
                    DecodeError::OffsetSpan {
                        base_offset: 0,
                        record_count: 3,
                        ..
                    }
                ),
                "{error}"
            );
        }
    }

    #[test]
    fn an_empty_batch_moves_the_position_past_its_offset() {
        // A header-only batch of no records at offset 3 (what a Fluss server
        // writes when a change-log write produced nothing), between records.
        let mut empty = log(&[3..4]);
        empty.truncate(V0_LAYOUT.header_size);
        let length = (V0_LAYOUT.header_size - log_batch::LOG_OVERHEAD) as i32;
        empty[log_batch::LENGTH_OFFSET..log_batch::LENGTH_OFFSET + 4]
            .copy_from_slice(&length.to_le_bytes());
        let at = V0_LAYOUT.record_count;
        empty[at..at + 4].copy_from_slice(&0i32.to_le_bytes());
        let at = V0_LAYOUT.last_offset_delta;
        empty[at..at + 4].copy_from_slice(&0i32.to_le_bytes());
        let mut bytes = log(&[0..3]);
        bytes.extend_from_slice(&empty);
        bytes.extend_from_slice(&log(&[4..6]));
        let decoded = decode_records(Bytes::from(bytes), 0, &plan(None, false)).unwrap();
        assert_eq!(ids(&decoded), vec![0, 1, 2, 4, 5]);
        assert_eq!(decoded.batches[1].0, 4);
        assert_eq!(decoded.next_offset, 6);
    }
}
