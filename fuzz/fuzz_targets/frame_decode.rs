#![no_main]
//! Fuzzes Fluss frame decoding over arbitrary bytes, as a server reads
//! requests and a client reads responses: never panics, and every frame
//! taken re-encodes to the same bytes and decodes to the same frame.

use bytes::BytesMut;
use fjord_proto::{
    encode_error_response, encode_raw_request, encode_raw_success_response, encode_server_failure,
    FrameDecoder, ResponseFrame,
};

/// Small enough that the fuzzer reaches the limit, large enough for real frames.
const FUZZ_MAX_FRAME_BYTES: usize = 64 * 1024;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let decoder = FrameDecoder::new(FUZZ_MAX_FRAME_BYTES);

    let mut buf = BytesMut::from(data);
    while let Ok(Some(frame)) = decoder.decode_request(&mut buf) {
        let mut again = BytesMut::new();
        encode_raw_request(&mut again, frame.header, &frame.body).expect("frame fits");
        let consumed = data.len() - buf.len();
        let original = &data[consumed - again.len()..consumed];
        assert_eq!(
            &again[..],
            original,
            "request frame must re-encode byte for byte"
        );
        let redecoded = decoder
            .decode_request(&mut again)
            .expect("re-encoded frame decodes");
        assert_eq!(redecoded, Some(frame));
        assert!(again.is_empty());
    }

    let mut buf = BytesMut::from(data);
    while let Ok(Some(frame)) = decoder.decode_response(&mut buf) {
        let mut again = BytesMut::new();
        match &frame {
            ResponseFrame::Success { request_id, body } => {
                encode_raw_success_response(&mut again, *request_id, body)
            }
            ResponseFrame::Error { request_id, error } => {
                encode_error_response(&mut again, *request_id, error)
            }
            ResponseFrame::ServerFailure { error } => encode_server_failure(&mut again, error),
        }
        .expect("frame fits");
        let redecoded = decoder
            .decode_response(&mut again)
            .expect("re-encoded frame decodes");
        assert_eq!(redecoded, Some(frame));
        assert!(again.is_empty());
    }
});
