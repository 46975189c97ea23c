//! FetchLog success frames written as a list of chunks, so that record data
//! read from log segments reaches the socket without being copied into the
//! frame buffer.
//!
//! The bytes are a valid FetchLog response frame, equal after decoding to
//! what [`crate::encode_success_response`] writes; only the position of each
//! bucket's `records` field differs: it is written last in its bucket message
//! (protobuf readers, prost and Fluss's Java parser alike, accept fields in
//! any order), so the protobuf scaffolding before it can be cut off into its
//! own chunk.

use bytes::{BufMut, Bytes, BytesMut};
use prost::Message;

use crate::chunks::put_records;
use crate::frame::{
    frame_length, FrameError, LENGTH_FIELD_BYTES, RESPONSE_HEADER_BYTES, RESPONSE_TYPE_SUCCESS,
};
use crate::messages::FetchLogResponse;
use crate::wire::{put_key, put_varint, WIRE_TYPE_LEN, WIRE_TYPE_VARINT};

/// `FetchLogResponse.tables_resp`.
const TAG_TABLES_RESP: u32 = 1;
/// `PbFetchLogRespForTable.table_id`.
const TAG_TABLE_ID: u32 = 1;
/// `PbFetchLogRespForTable.buckets_resp`.
const TAG_BUCKETS_RESP: u32 = 2;
/// `PbFetchLogRespForBucket.records`.
const TAG_RECORDS: u32 = 8;

/// Appends a success frame answering `request_id` with `response` to
/// `chunks`, as byte chunks to be written in order. Protobuf scaffolding is
/// written into `scratch` and split off (its spare capacity is reused by the
/// next call); each bucket's `records` larger than
/// [`crate::INLINE_RECORDS_MAX_BYTES`] becomes a chunk of its own, the very
/// `Bytes` given, not a copy.
pub fn encode_fetch_log_response_chunks(
    scratch: &mut BytesMut,
    request_id: i32,
    response: FetchLogResponse,
    chunks: &mut Vec<Bytes>,
) -> Result<(), FrameError> {
    let length = frame_length(RESPONSE_HEADER_BYTES, response.encoded_len())?;
    scratch.reserve(LENGTH_FIELD_BYTES + RESPONSE_HEADER_BYTES);
    scratch.put_i32(length);
    scratch.put_i8(RESPONSE_TYPE_SUCCESS);
    scratch.put_i32(request_id);
    for table in response.tables_resp {
        put_key(scratch, TAG_TABLES_RESP, WIRE_TYPE_LEN);
        put_varint(scratch, table.encoded_len() as u64);
        put_key(scratch, TAG_TABLE_ID, WIRE_TYPE_VARINT);
        // int64 fields are varints of the two's-complement value.
        put_varint(scratch, table.table_id as u64);
        for mut bucket in table.buckets_resp {
            put_key(scratch, TAG_BUCKETS_RESP, WIRE_TYPE_LEN);
            // The length counts `records`, so it is taken before they are.
            put_varint(scratch, bucket.encoded_len() as u64);
            let records = bucket.records.take();
            bucket.encode_raw(scratch);
            let Some(records) = records else {
                continue;
            };
            put_records(scratch, chunks, TAG_RECORDS, records);
        }
    }
    if !scratch.is_empty() {
        chunks.push(scratch.split().freeze());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{FrameDecoder, ResponseFrame};
    use crate::messages::{PbFetchLogRespForBucket, PbFetchLogRespForTable};
    use crate::request::{decode_response, Response};
    use crate::ApiKey;
    use crate::INLINE_RECORDS_MAX_BYTES;
    use proptest::prelude::*;

    fn bucket(bucket_id: i32, records: Option<Bytes>) -> PbFetchLogRespForBucket {
        PbFetchLogRespForBucket {
            partition_id: Some(-7),
            bucket_id,
            high_watermark: Some(i64::MAX),
            log_start_offset: Some(0),
            records,
            filtered_end_offset: Some(3),
            min_retain_offset: Some(1),
            ..Default::default()
        }
    }

    /// Decodes the concatenated chunks as one response frame.
    fn decode_chunks(chunks: &[Bytes]) -> (i32, Response) {
        let mut wire = BytesMut::new();
        for chunk in chunks {
            wire.extend_from_slice(chunk);
        }
        let frame = FrameDecoder::default()
            .decode_response(&mut wire)
            .unwrap()
            .unwrap();
        assert!(wire.is_empty(), "chunks must hold exactly one frame");
        let ResponseFrame::Success { request_id, body } = frame else {
            panic!("expected a success frame, got {frame:?}");
        };
        (
            request_id,
            decode_response(ApiKey::FetchLog, 0, body).unwrap(),
        )
    }

    #[test]
    fn large_records_are_passed_through_not_copied() {
        let big = Bytes::from(vec![1u8; INLINE_RECORDS_MAX_BYTES + 1]);
        let response = FetchLogResponse {
            tables_resp: vec![PbFetchLogRespForTable {
                table_id: 9,
                buckets_resp: vec![
                    bucket(0, Some(big.clone())),
                    bucket(1, Some(Bytes::from_static(b"tiny"))),
                ],
            }],
        };
        let mut chunks = Vec::new();
        let mut scratch = BytesMut::new();
        encode_fetch_log_response_chunks(&mut scratch, 4, response.clone(), &mut chunks).unwrap();
        assert_eq!(
            chunks.len(),
            3,
            "head, big records, tail with the tiny records inlined"
        );
        assert_eq!(chunks[1].as_ptr(), big.as_ptr());
        assert_eq!(decode_chunks(&chunks), (4, Response::FetchLog(response)));
    }

    proptest! {
        /// Whatever the mix of tables, buckets and record sizes, the chunks
        /// decode to the response given.
        #[test]
        fn chunks_decode_to_the_response(
            tables in proptest::collection::vec(
                (any::<i64>(), proptest::collection::vec(
                    (any::<i32>(), proptest::option::of(0..2 * INLINE_RECORDS_MAX_BYTES)), 0..4)),
                0..3),
            request_id in any::<i32>(),
        ) {
            let response = FetchLogResponse {
                tables_resp: tables
                    .into_iter()
                    .map(|(table_id, buckets)| PbFetchLogRespForTable {
                        table_id,
                        buckets_resp: buckets
                            .into_iter()
                            .map(|(id, size)| bucket(id, size.map(|n| Bytes::from(vec![n as u8; n]))))
                            .collect(),
                    })
                    .collect(),
            };
            let mut plain = BytesMut::new();
            crate::encode_success_response(&mut plain, request_id, &response).unwrap();
            let mut chunks = Vec::new();
            encode_fetch_log_response_chunks(&mut BytesMut::new(), request_id, response.clone(), &mut chunks).unwrap();
            let total: usize = chunks.iter().map(Bytes::len).sum();
            prop_assert_eq!(total, plain.len());
            prop_assert_eq!(decode_chunks(&chunks), (request_id, Response::FetchLog(response)));
        }
    }
}
