//! Tests of request/response framing: exact bytes, malformed frames, and
//! property tests over arbitrary split points and concatenated frames.

use bytes::{BufMut, Bytes, BytesMut};
use proptest::prelude::*;

use super::*;
use crate::error::ErrorCode;
use crate::messages::{ApiVersionsRequest, DatabaseExistsResponse};

/// Builds raw bytes: a big-endian i32 length followed by `rest`.
fn framed(length: i32, rest: &[u8]) -> BytesMut {
    let mut buf = BytesMut::new();
    buf.put_i32(length);
    buf.put_slice(rest);
    buf
}

/// Data-driven check of one request-decoding case: the decoder result, and
/// the number of bytes left in the buffer afterwards.
fn check_request(max: usize, input: BytesMut, expected: Result<Option<RequestFrame>, FrameError>) {
    let mut buf = input.clone();
    let decoded = FrameDecoder::new(max).decode_request(&mut buf);
    assert_eq!(decoded, expected, "input {input:?}");
    if !matches!(decoded, Ok(Some(_))) {
        assert_eq!(
            buf, input,
            "buffer must be untouched unless a frame was taken"
        );
    }
}

fn check_response(input: BytesMut, expected: Result<Option<ResponseFrame>, FrameError>) {
    let mut buf = input.clone();
    let decoded = FrameDecoder::default().decode_response(&mut buf);
    assert_eq!(decoded, expected, "input {input:?}");
    if !matches!(decoded, Ok(Some(_))) {
        assert_eq!(
            buf, input,
            "buffer must be untouched unless a frame was taken"
        );
    }
}

#[test]
fn request_frame_bytes_are_fluss_layout() {
    let mut buf = BytesMut::new();
    let body = ApiVersionsRequest {
        client_software_name: "x".into(),
        client_software_version: "1".into(),
    };
    let header = RequestHeader {
        api_key: 1000,
        api_version: 0,
        request_id: 7,
    };
    encode_request(&mut buf, header, &body).unwrap();
    let expected: &[u8] = &[
        0, 0, 0, 14, // length: 8 header + 6 body
        0x03, 0xe8, // api key 1000
        0, 0, // version 0
        0, 0, 0, 7, // request id
        0x0a, 1, b'x', 0x12, 1, b'1', // body: field 1 "x", field 2 "1"
    ];
    assert_eq!(&buf[..], expected);
}

#[test]
fn success_response_bytes_are_fluss_layout() {
    let mut buf = BytesMut::new();
    encode_success_response(&mut buf, -5, &DatabaseExistsResponse { exists: false }).unwrap();
    // A proto2 required field is written even when it holds its default:
    // Java's generated parser rejects a message missing it.
    let expected: &[u8] = &[0, 0, 0, 7, 0, 0xff, 0xff, 0xff, 0xfb, 0x08, 0x00];
    assert_eq!(&buf[..], expected);
}

#[test]
fn error_response_bytes_are_fluss_layout() {
    let mut buf = BytesMut::new();
    let error = ErrorCode::UnsupportedVersion.with_message("no");
    encode_error_response(&mut buf, 3, &error).unwrap();
    let expected: &[u8] = &[0, 0, 0, 11, 1, 0, 0, 0, 3, 0x08, 2, 0x12, 2, b'n', b'o'];
    assert_eq!(&buf[..], expected);
}

#[test]
fn server_failure_has_no_request_id() {
    let mut buf = BytesMut::new();
    let error = ErrorCode::UnknownServerError.with_message("x");
    encode_server_failure(&mut buf, &error).unwrap();
    // -1 as a proto int32 is a 10-byte varint.
    let mut expected = vec![0, 0, 0, 15, 2, 0x08];
    expected.extend([0xff; 9]);
    expected.extend([0x01, 0x12, 1, b'x']);
    assert_eq!(&buf[..], &expected[..]);
    check_response(buf, Ok(Some(ResponseFrame::ServerFailure { error })));
}

#[test]
fn malformed_request_frames() {
    let max = 64;
    let header = [0x03, 0xe8, 0, 0, 0, 0, 0, 1];
    let frame = |body: &'static [u8]| RequestFrame {
        header: RequestHeader {
            api_key: 1000,
            api_version: 0,
            request_id: 1,
        },
        body: Bytes::from_static(body),
    };
    // Partial frames are not errors.
    check_request(max, BytesMut::new(), Ok(None));
    check_request(max, BytesMut::from(&[0, 0, 0][..]), Ok(None));
    check_request(max, framed(8, &header[..7]), Ok(None));
    check_request(max, framed(9, &header), Ok(None));
    // Exactly a header: an empty body.
    check_request(max, framed(8, &header), Ok(Some(frame(b""))));
    check_request(
        max,
        framed(10, &[&header[..], b"ab"].concat()),
        Ok(Some(frame(b"ab"))),
    );
    // Lengths that cannot be right are refused as soon as the prefix is in.
    check_request(
        max,
        framed(-1, &[]),
        Err(FrameError::NegativeLength { length: -1 }),
    );
    check_request(
        max,
        framed(i32::MIN, &[]),
        Err(FrameError::NegativeLength { length: i32::MIN }),
    );
    check_request(
        max,
        framed(0, &[]),
        Err(FrameError::TooShort { length: 0, min: 8 }),
    );
    check_request(
        max,
        framed(7, &header[..7]),
        Err(FrameError::TooShort { length: 7, min: 8 }),
    );
    // The limit counts the prefix: 60 + 4 = 64 passes, 61 + 4 does not,
    // and it is checked before the body arrives.
    check_request(max, framed(60, &header), Ok(None));
    check_request(
        max,
        framed(61, &header),
        Err(FrameError::TooLarge {
            frame_bytes: 65,
            max_frame_bytes: 64,
        }),
    );
    check_request(
        DEFAULT_MAX_FRAME_BYTES,
        framed(i32::MAX, &[]),
        Err(FrameError::TooLarge {
            frame_bytes: i32::MAX as usize + 4,
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
        }),
    );
}

#[test]
fn malformed_response_frames() {
    check_response(
        framed(0, &[]),
        Err(FrameError::TooShort { length: 0, min: 1 }),
    );
    check_response(
        framed(1, &[3]),
        Err(FrameError::UnknownResponseType { type_id: 3 }),
    );
    check_response(
        framed(1, &[0xff]),
        Err(FrameError::UnknownResponseType { type_id: -1 }),
    );
    check_response(
        framed(4, &[0, 0, 0, 0]),
        Err(FrameError::TooShort { length: 4, min: 5 }),
    );
    check_response(
        framed(4, &[1, 0, 0, 0]),
        Err(FrameError::TooShort { length: 4, min: 5 }),
    );
    check_response(framed(5, &[0, 0, 0, 0]), Ok(None));
    check_response(
        framed(5, &[0, 0, 0, 0, 9]),
        Ok(Some(ResponseFrame::Success {
            request_id: 9,
            body: Bytes::new(),
        })),
    );
    // An error body that is not protobuf (field 1 with wire type 7) is an
    // error of the frame, and the buffer is left as it was.
    let input = framed(6, &[1, 0, 0, 0, 9, 0x0f]);
    let mut buf = input.clone();
    let decoded = FrameDecoder::default().decode_response(&mut buf);
    assert!(
        matches!(decoded, Err(FrameError::MalformedErrorBody(_))),
        "{decoded:?}"
    );
    assert_eq!(buf, input);
}

#[test]
fn refusing_oversized_frame_does_not_reserve_memory() {
    let mut buf = framed(i32::MAX - 4, &[]);
    let capacity = buf.capacity();
    let decoded = FrameDecoder::default().decode_request(&mut buf);
    assert!(matches!(decoded, Err(FrameError::TooLarge { .. })));
    assert_eq!(buf.capacity(), capacity);
}

/// A request header and a body, as proptest generates them.
fn arb_request() -> impl Strategy<Value = (RequestHeader, Vec<u8>)> {
    (
        any::<i16>(),
        any::<i16>(),
        any::<i32>(),
        proptest::collection::vec(any::<u8>(), 0..64),
    )
        .prop_map(|(api_key, api_version, request_id, body)| {
            (
                RequestHeader {
                    api_key,
                    api_version,
                    request_id,
                },
                body,
            )
        })
}

proptest! {
    /// Concatenated request frames fed in arbitrary pieces come out whole,
    /// in order, with nothing left over.
    #[test]
    fn requests_survive_arbitrary_split_points(
        requests in proptest::collection::vec(arb_request(), 1..6),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let mut wire = BytesMut::new();
        for (header, body) in &requests {
            encode_raw_request(&mut wire, *header, body).unwrap();
        }
        let wire = wire.freeze();
        let mut cut_points: Vec<usize> = cuts.iter().map(|i| i.index(wire.len() + 1)).collect();
        cut_points.push(wire.len());
        cut_points.sort_unstable();

        let decoder = FrameDecoder::new(1024);
        let mut buf = BytesMut::new();
        let mut decoded = Vec::new();
        let mut fed = 0;
        for cut in cut_points {
            buf.extend_from_slice(&wire[fed..cut]);
            fed = cut;
            while let Some(frame) = decoder.decode_request(&mut buf).unwrap() {
                decoded.push((frame.header, frame.body.to_vec()));
            }
        }
        prop_assert_eq!(decoded, requests);
        prop_assert!(buf.is_empty());
    }

    /// Success, error and server-failure responses round-trip through the
    /// client-side decoder, split anywhere.
    #[test]
    fn responses_survive_arbitrary_split_points(
        kinds in proptest::collection::vec((0u8..3, any::<i32>(), proptest::collection::vec(any::<u8>(), 0..32), -1i32..74, ".{0,20}"), 1..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut wire = BytesMut::new();
        let mut expected = Vec::new();
        for (kind, request_id, body, code, message) in kinds {
            let error = ErrorCode::from_code(code).unwrap().with_message(message);
            let frame = match kind {
                0 => {
                    encode_raw_success_response(&mut wire, request_id, &body).unwrap();
                    ResponseFrame::Success { request_id, body: Bytes::from(body) }
                }
                1 => {
                    encode_error_response(&mut wire, request_id, &error).unwrap();
                    ResponseFrame::Error { request_id, error }
                }
                _ => {
                    encode_server_failure(&mut wire, &error).unwrap();
                    ResponseFrame::ServerFailure { error }
                }
            };
            expected.push(frame);
        }
        let cut = cut.index(wire.len() + 1);
        let decoder = FrameDecoder::default();
        let mut buf = BytesMut::from(&wire[..cut]);
        let mut decoded = Vec::new();
        while let Some(frame) = decoder.decode_response(&mut buf).unwrap() {
            decoded.push(frame);
        }
        buf.extend_from_slice(&wire[cut..]);
        while let Some(frame) = decoder.decode_response(&mut buf).unwrap() {
            decoded.push(frame);
        }
        prop_assert_eq!(decoded, expected);
        prop_assert!(buf.is_empty());
    }

    /// No input makes the decoder panic, and whatever it accepts it accepts
    /// whole: the bytes taken are exactly one frame.
    #[test]
    fn arbitrary_bytes_never_panic(input in proptest::collection::vec(any::<u8>(), 0..64)) {
        let mut buf = BytesMut::from(&input[..]);
        let decoder = FrameDecoder::new(48);
        if let Ok(Some(frame)) = decoder.decode_request(&mut buf) {
            prop_assert_eq!(input.len() - buf.len(), LENGTH_FIELD_BYTES + REQUEST_HEADER_BYTES + frame.body.len());
        }
        let mut buf = BytesMut::from(&input[..]);
        let _ = decoder.decode_response(&mut buf);
    }
}

#[test]
fn a_request_held_whole_decodes_like_one_cut_from_a_stream() {
    let header = RequestHeader {
        api_key: 1014,
        api_version: 0,
        request_id: 99,
    };
    let mut buf = BytesMut::new();
    encode_request(&mut buf, header, &ApiVersionsRequest::default()).unwrap();
    let whole = buf.clone().freeze();
    let from_stream = FrameDecoder::default()
        .decode_request(&mut buf)
        .unwrap()
        .unwrap();
    let held = FrameDecoder::default().decode_whole_request(whole).unwrap();
    assert_eq!(held, from_stream);
}

#[test]
fn a_request_held_whole_must_match_its_length_prefix() {
    let decoder = FrameDecoder::new(64);
    let short = framed(20, &[0; 12]).freeze();
    assert_eq!(
        decoder.decode_whole_request(short),
        Err(FrameError::LengthMismatch {
            frame_bytes: 24,
            held: 16
        })
    );
    let long = framed(8, &[0; 12]).freeze();
    assert_eq!(
        decoder.decode_whole_request(long),
        Err(FrameError::LengthMismatch {
            frame_bytes: 12,
            held: 16
        })
    );
    assert_eq!(
        decoder.decode_whole_request(framed(100, &[0; 96]).freeze()),
        Err(FrameError::TooLarge {
            frame_bytes: 104,
            max_frame_bytes: 64
        })
    );
    assert_eq!(
        decoder.decode_whole_request(framed(7, &[0; 7]).freeze()),
        Err(FrameError::TooShort { length: 7, min: 8 })
    );
    assert!(decoder
        .decode_whole_request(Bytes::from_static(&[0, 0]))
        .is_err());
}
