//! ProduceLog request frames written as a list of chunks, so that a
//! writer's encoded batches reach the socket without being copied into the
//! frame buffer (the client's counterpart of [`crate::fetch_response`]).
//!
//! The bytes are a valid ProduceLog request frame, equal after decoding to
//! what [`crate::encode_request`] writes; only the position of each bucket's
//! `records` field differs: it is written last in its bucket message
//! (protobuf readers, prost and Fluss's Java parser alike, accept fields in
//! any order), so the protobuf scaffolding before it can be cut off into its
//! own chunk.

use bytes::{BufMut, Bytes, BytesMut};
use prost::Message;

use crate::chunks::put_records;
use crate::frame::{frame_length, FrameError, RequestHeader, REQUEST_HEADER_BYTES};
use crate::messages::{PbProduceLogReqForBucket, ProduceLogRequest};
use crate::wire::{put_key, put_varint, WIRE_TYPE_LEN, WIRE_TYPE_VARINT};

/// `ProduceLogRequest.buckets_req`.
const TAG_BUCKETS_REQ: u32 = 4;
/// `PbProduceLogReqForBucket.partition_id`.
const TAG_PARTITION_ID: u32 = 1;
/// `PbProduceLogReqForBucket.bucket_id`.
const TAG_BUCKET_ID: u32 = 2;
/// `PbProduceLogReqForBucket.records`.
const TAG_RECORDS: u32 = 3;
/// `PbProduceLogReqForBucket.original_partition_name`.
const TAG_ORIGINAL_PARTITION_NAME: u32 = 4;
/// `PbProduceLogReqForBucket.routing_bucket_count`.
const TAG_ROUTING_BUCKET_COUNT: u32 = 5;

/// Appends the request frame of `request` under `header` to `chunks`, as
/// byte chunks to be written in order. Protobuf scaffolding is written into
/// `scratch` and split off (its spare capacity is reused by the next call);
/// each bucket's `records` larger than [`crate::INLINE_RECORDS_MAX_BYTES`]
/// becomes a chunk of its own, the very `Bytes` given, not a copy.
pub fn encode_produce_log_request_chunks(
    scratch: &mut BytesMut,
    header: RequestHeader,
    request: ProduceLogRequest,
    chunks: &mut Vec<Bytes>,
) -> Result<(), FrameError> {
    let length = frame_length(REQUEST_HEADER_BYTES, request.encoded_len())?;
    scratch.put_i32(length);
    scratch.put_i16(header.api_key);
    scratch.put_i16(header.api_version);
    scratch.put_i32(header.request_id);
    let ProduceLogRequest {
        acks,
        table_id,
        timeout_ms,
        buckets_req,
    } = request;
    // The scalar fields, exactly as prost writes them.
    ProduceLogRequest {
        acks,
        table_id,
        timeout_ms,
        buckets_req: Vec::new(),
    }
    .encode_raw(scratch);
    for bucket in buckets_req {
        put_key(scratch, TAG_BUCKETS_REQ, WIRE_TYPE_LEN);
        // The length counts `records`, so it is taken before they are.
        put_varint(scratch, bucket.encoded_len() as u64);
        // Destructured whole: a field added to the message fails to compile
        // here instead of silently going missing from the frame.
        let PbProduceLogReqForBucket {
            partition_id,
            bucket_id,
            records,
            original_partition_name,
            routing_bucket_count,
        } = bucket;
        if let Some(partition_id) = partition_id {
            put_key(scratch, TAG_PARTITION_ID, WIRE_TYPE_VARINT);
            // int64 and int32 fields are varints of the two's-complement
            // value, sign-extended to 64 bits.
            put_varint(scratch, partition_id as u64);
        }
        put_key(scratch, TAG_BUCKET_ID, WIRE_TYPE_VARINT);
        put_varint(scratch, i64::from(bucket_id) as u64);
        if let Some(name) = &original_partition_name {
            put_key(scratch, TAG_ORIGINAL_PARTITION_NAME, WIRE_TYPE_LEN);
            put_varint(scratch, name.len() as u64);
            scratch.put_slice(name.as_bytes());
        }
        if let Some(count) = routing_bucket_count {
            put_key(scratch, TAG_ROUTING_BUCKET_COUNT, WIRE_TYPE_VARINT);
            put_varint(scratch, i64::from(count) as u64);
        }
        put_records(scratch, chunks, TAG_RECORDS, records);
    }
    if !scratch.is_empty() {
        chunks.push(scratch.split().freeze());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::FrameDecoder;
    use crate::request::{decode_request, Request};
    use crate::ApiKey;
    use crate::INLINE_RECORDS_MAX_BYTES;
    use proptest::prelude::*;

    fn header(request_id: i32) -> RequestHeader {
        RequestHeader {
            api_key: ApiKey::ProduceLog.id(),
            api_version: 0,
            request_id,
        }
    }

    /// Decodes the concatenated chunks as one request frame.
    fn decode_chunks(chunks: &[Bytes]) -> (RequestHeader, Request) {
        let mut wire = BytesMut::new();
        for chunk in chunks {
            wire.extend_from_slice(chunk);
        }
        let frame = FrameDecoder::default()
            .decode_request(&mut wire)
            .unwrap()
            .unwrap();
        assert!(wire.is_empty(), "chunks must hold exactly one frame");
        let request = decode_request(frame.header.api_key, frame.header.api_version, frame.body)
            .expect("a valid ProduceLog request");
        (frame.header, request)
    }

    fn bucket(bucket_id: i32, records: Bytes) -> PbProduceLogReqForBucket {
        PbProduceLogReqForBucket {
            partition_id: None,
            bucket_id,
            records,
            original_partition_name: None,
            routing_bucket_count: None,
        }
    }

    #[test]
    fn large_records_are_passed_through_not_copied() {
        let big = Bytes::from(vec![7u8; INLINE_RECORDS_MAX_BYTES + 1]);
        let request = ProduceLogRequest {
            acks: -1,
            table_id: 12,
            timeout_ms: 30_000,
            buckets_req: vec![
                bucket(0, big.clone()),
                bucket(3, Bytes::from_static(b"tiny")),
            ],
        };
        let mut chunks = Vec::new();
        let mut scratch = BytesMut::new();
        encode_produce_log_request_chunks(&mut scratch, header(5), request.clone(), &mut chunks)
            .unwrap();
        assert_eq!(
            chunks.len(),
            3,
            "head, big records, tail with the tiny records inlined"
        );
        assert_eq!(chunks[1].as_ptr(), big.as_ptr());
        assert_eq!(
            decode_chunks(&chunks),
            (header(5), Request::ProduceLog(request))
        );
    }

    proptest! {
        /// Whatever the mix of buckets, optional fields and record sizes,
        /// the chunks are as long as the plain frame and decode to the
        /// request given.
        #[test]
        fn chunks_decode_to_the_request(
            buckets in proptest::collection::vec(
                (
                    proptest::option::of(any::<i64>()),
                    any::<i32>(),
                    0..2 * INLINE_RECORDS_MAX_BYTES,
                    proptest::option::of("[a-z0-9=]{0,12}"),
                    proptest::option::of(any::<i32>()),
                ),
                0..5,
            ),
            acks in -1..=1i32,
            table_id in any::<i64>(),
            timeout_ms in any::<i32>(),
            request_id in any::<i32>(),
        ) {
            let request = ProduceLogRequest {
                acks,
                table_id,
                timeout_ms,
                buckets_req: buckets
                    .into_iter()
                    .map(|(partition_id, bucket_id, size, name, routing)| PbProduceLogReqForBucket {
                        partition_id,
                        bucket_id,
                        records: Bytes::from(vec![size as u8; size]),
                        original_partition_name: name,
                        routing_bucket_count: routing,
                    })
                    .collect(),
            };
            let mut plain = BytesMut::new();
            crate::encode_request(&mut plain, header(request_id), &request).unwrap();
            let mut chunks = Vec::new();
            encode_produce_log_request_chunks(&mut BytesMut::new(), header(request_id), request.clone(), &mut chunks).unwrap();
            let total: usize = chunks.iter().map(Bytes::len).sum();
            prop_assert_eq!(total, plain.len());
            prop_assert_eq!(decode_chunks(&chunks), (header(request_id), Request::ProduceLog(request)));
        }
    }
}
