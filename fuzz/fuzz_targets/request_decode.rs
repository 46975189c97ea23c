#![no_main]
//! Fuzzes request and response body decoding of every API Fjord serves:
//! never panics, and whatever decodes survives encode -> frame -> decode
//! with identical bytes (compared as bytes, since a float literal in a
//! filter predicate may be NaN).
//!
//! Input layout: byte 0 chooses the api key (below 0xf0: the served key at
//! that index modulo their count, version 0; otherwise bytes 1..5 are a raw
//! api key and version, to reach the refusal paths); the rest is the body.

use bytes::{Bytes, BytesMut};
use fjord_proto::{decode_request, decode_response, ApiKey, FrameDecoder, Request, ResponseFrame};

fn request_bytes(request: &Request) -> BytesMut {
    let mut wire = BytesMut::new();
    request
        .encode_frame(&mut wire, 0, 1)
        .expect("request fits a frame");
    wire
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let served: Vec<ApiKey> = ApiKey::served().map(|(key, _)| key).collect();
    let (api_key, api_version, body) = if selector < 0xf0 {
        (served[selector as usize % served.len()].id(), 0, rest)
    } else if rest.len() >= 4 {
        (
            i16::from_be_bytes([rest[0], rest[1]]),
            i16::from_be_bytes([rest[2], rest[3]]),
            &rest[4..],
        )
    } else {
        return;
    };
    let body = Bytes::copy_from_slice(body);
    let decoder = FrameDecoder::default();

    match decode_request(api_key, api_version, body.clone()) {
        Ok(request) => {
            assert_eq!(request.api_key().id(), api_key);
            let mut wire = request_bytes(&request);
            let first = wire.clone();
            let frame = decoder.decode_request(&mut wire).unwrap().unwrap();
            let again = decode_request(frame.header.api_key, frame.header.api_version, frame.body)
                .expect("an encoded request decodes");
            assert_eq!(request_bytes(&again), first);
        }
        Err(error) => {
            // Every refusal is answerable with a Fluss error code.
            let api_error = error.to_api_error();
            assert_ne!(api_error.code().code(), 0);
        }
    }

    if let Some(key) = ApiKey::from_id(api_key) {
        if let Ok(response) = decode_response(key, api_version, body) {
            let mut wire = BytesMut::new();
            response
                .encode_frame(&mut wire, 7)
                .expect("response fits a frame");
            let first = wire.clone();
            let Some(ResponseFrame::Success {
                request_id: 7,
                body,
            }) = decoder.decode_response(&mut wire).unwrap()
            else {
                panic!("an encoded response is a success frame for request 7");
            };
            let again =
                decode_response(key, api_version, body).expect("an encoded response decodes");
            let mut second = BytesMut::new();
            again.encode_frame(&mut second, 7).unwrap();
            assert_eq!(second, first);
        }
    }
});
