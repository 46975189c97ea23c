//! Fluss framing: how requests and responses are cut out of a byte stream
//! and written into one.
//!
//! Every frame starts with a 4-byte big-endian signed length counting the
//! bytes after it. Then:
//!
//! ```text
//! request:         len:i32 | api_key:i16 | api_version:i16 | request_id:i32 | body
//! success:         len:i32 | 0:i8        | request_id:i32  | body
//! error:           len:i32 | 1:i8        | request_id:i32  | ErrorResponse
//! server failure:  len:i32 | 2:i8        | ErrorResponse          (no request id)
//! ```
//!
//! All integers are big-endian; bodies are proto2 messages with no further
//! header (no client id, no header version). This is Fluss's `MessageCodec`
//! and what fluss-rs 1.0.0 writes and reads. A server-failure frame carries no
//! request id because it is not about one request; fluss-rs 1.0.0 does not
//! parse it correctly (it always reads a request id), so a server should
//! answer per request with an error frame and keep server failures for
//! fatal, connection-wide conditions.
//!
//! Decoding is incremental over a caller-owned [`BytesMut`]: a partial frame
//! is `Ok(None)` and leaves the buffer untouched, a complete one is split off
//! without copying. The length is checked against the maximum before anything
//! is reserved or split, so a corrupt or hostile length costs nothing.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use prost::Message;

use crate::error::ApiError;
use crate::messages::ErrorResponse;

/// Size of the length prefix of every frame.
pub const LENGTH_FIELD_BYTES: usize = 4;
/// Size of a request header after the length: api key, api version, request id.
pub const REQUEST_HEADER_BYTES: usize = 8;
/// Size of a success or error response header after the length: type, request id.
pub const RESPONSE_HEADER_BYTES: usize = 5;
/// Size of a server-failure response header after the length: the type only.
pub const SERVER_FAILURE_HEADER_BYTES: usize = 1;

/// Default largest frame accepted, counting the 4-byte length prefix as
/// Netty's `LengthFieldBasedFrameDecoder` in Fluss does: 100 MiB, Fluss's
/// default for `netty.server.max-request-size`. It bounds the memory one
/// connection can make the reader buffer for a single frame; a produce
/// request with a batch near the client's own batch-size limit stays far
/// below it.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 100 * 1024 * 1024;

/// Response type byte of a successful response.
pub const RESPONSE_TYPE_SUCCESS: i8 = 0;
/// Response type byte of an error response about one request.
pub const RESPONSE_TYPE_ERROR: i8 = 1;
/// Response type byte of a server failure not tied to a request.
pub const RESPONSE_TYPE_SERVER_FAILURE: i8 = 2;

/// Why bytes could not be cut into a frame, or a frame could not be written.
/// After a decode error the stream position is lost: close the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The length prefix is negative.
    #[error("frame length {length} is negative")]
    NegativeLength {
        /// The length read.
        length: i32,
    },
    /// The length is smaller than the header the frame must carry.
    #[error("frame length {length} is smaller than the {min}-byte header")]
    TooShort {
        /// The length read.
        length: usize,
        /// The smallest length allowed for this frame kind.
        min: usize,
    },
    /// The frame, counting its length prefix, is larger than allowed.
    #[error("frame of {frame_bytes} bytes exceeds the maximum of {max_frame_bytes} bytes")]
    TooLarge {
        /// Size of the frame including the 4-byte prefix.
        frame_bytes: usize,
        /// The configured maximum.
        max_frame_bytes: usize,
    },
    /// A frame held whole is not as long as its length prefix says.
    #[error("the length prefix announces a {frame_bytes}-byte frame, but {held} bytes are held")]
    LengthMismatch {
        /// Size announced by the prefix, including the prefix.
        frame_bytes: usize,
        /// Bytes actually held.
        held: usize,
    },
    /// A response's type byte is none of success, error, server failure.
    #[error("unknown response type {type_id}")]
    UnknownResponseType {
        /// The type byte read.
        type_id: i8,
    },
    /// The ErrorResponse body of an error or server-failure frame is not valid protobuf.
    #[error("malformed error response body: {0}")]
    MalformedErrorBody(#[from] prost::DecodeError),
}

/// The fixed header of a request frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestHeader {
    /// Raw API key id; see [`crate::ApiKey::from_id`].
    pub api_key: i16,
    /// API version the client chose from the ApiVersions exchange.
    pub api_version: i16,
    /// Client-chosen id the response must echo.
    pub request_id: i32,
}

/// A complete request frame: its header and its undecoded body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestFrame {
    /// The header.
    pub header: RequestHeader,
    /// The proto2 body, a slice of the read buffer (not a copy).
    pub body: Bytes,
}

/// A complete response frame as a client sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponseFrame {
    /// Type 0: the body is the response message of the request's API.
    Success {
        /// Id of the request answered.
        request_id: i32,
        /// The proto2 body, a slice of the read buffer.
        body: Bytes,
    },
    /// Type 1: the request failed with this error.
    Error {
        /// Id of the request answered.
        request_id: i32,
        /// The error.
        error: ApiError,
    },
    /// Type 2: the server failed in a way not tied to one request.
    ServerFailure {
        /// The error.
        error: ApiError,
    },
}

/// Cuts frames out of a read buffer, enforcing a maximum frame size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameDecoder {
    max_frame_bytes: usize,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_FRAME_BYTES)
    }
}

impl FrameDecoder {
    /// A decoder refusing frames larger than `max_frame_bytes`, counting the
    /// 4-byte length prefix.
    pub const fn new(max_frame_bytes: usize) -> Self {
        Self { max_frame_bytes }
    }

    /// The largest frame accepted, including the length prefix.
    pub const fn max_frame_bytes(&self) -> usize {
        self.max_frame_bytes
    }

    /// Total size (prefix included) of the frame at the start of `buf`, once
    /// its length prefix has arrived and passed the checks; `Ok(None)` while
    /// fewer than 4 bytes are buffered. Lets a reader reserve exactly once.
    pub fn peek_frame_bytes(&self, buf: &[u8], min: usize) -> Result<Option<usize>, FrameError> {
        let Some(prefix) = buf.first_chunk::<LENGTH_FIELD_BYTES>() else {
            return Ok(None);
        };
        let length = i32::from_be_bytes(*prefix);
        let length = usize::try_from(length).map_err(|_| FrameError::NegativeLength { length })?;
        // `length` fits in i32, so adding 4 cannot overflow usize.
        let frame_bytes = LENGTH_FIELD_BYTES + length;
        if frame_bytes > self.max_frame_bytes {
            return Err(FrameError::TooLarge {
                frame_bytes,
                max_frame_bytes: self.max_frame_bytes,
            });
        }
        if length < min {
            return Err(FrameError::TooShort { length, min });
        }
        Ok(Some(frame_bytes))
    }

    /// Splits the next whole frame (without its length prefix) off `buf`.
    fn split_frame(&self, buf: &mut BytesMut, min: usize) -> Result<Option<BytesMut>, FrameError> {
        let Some(frame_bytes) = self.peek_frame_bytes(buf, min)? else {
            return Ok(None);
        };
        if buf.len() < frame_bytes {
            return Ok(None);
        }
        let mut frame = buf.split_to(frame_bytes);
        frame.advance(LENGTH_FIELD_BYTES);
        Ok(Some(frame))
    }

    /// Server side: the next request frame in `buf`, `Ok(None)` if it is not
    /// complete yet. On success the frame's bytes are removed from `buf`; on
    /// `Ok(None)` and on error `buf` is left as it was.
    pub fn decode_request(&self, buf: &mut BytesMut) -> Result<Option<RequestFrame>, FrameError> {
        let Some(mut frame) = self.split_frame(buf, REQUEST_HEADER_BYTES)? else {
            return Ok(None);
        };
        let header = RequestHeader {
            api_key: frame.get_i16(),
            api_version: frame.get_i16(),
            request_id: frame.get_i32(),
        };
        Ok(Some(RequestFrame {
            header,
            body: frame.freeze(),
        }))
    }

    /// Server side: the request frame held whole in `frame` (length prefix
    /// included), e.g. a large frame a reader gathered in a buffer of its
    /// own. Checks the prefix as [`FrameDecoder::decode_request`] does and
    /// that it matches `frame`'s length; the body is a slice of `frame`.
    pub fn decode_whole_request(&self, frame: Bytes) -> Result<RequestFrame, FrameError> {
        let frame_bytes =
            self.peek_frame_bytes(&frame, REQUEST_HEADER_BYTES)?
                .ok_or(FrameError::TooShort {
                    length: frame.len(),
                    min: LENGTH_FIELD_BYTES,
                })?;
        if frame_bytes != frame.len() {
            return Err(FrameError::LengthMismatch {
                frame_bytes,
                held: frame.len(),
            });
        }
        let mut body = frame.slice(LENGTH_FIELD_BYTES..);
        let header = RequestHeader {
            api_key: body.get_i16(),
            api_version: body.get_i16(),
            request_id: body.get_i32(),
        };
        Ok(RequestFrame { header, body })
    }

    /// Client side: the next response frame in `buf`, `Ok(None)` if it is not
    /// complete yet. Error bodies are decoded into an [`ApiError`]. As with
    /// requests, `buf` only changes when a frame is returned.
    pub fn decode_response(&self, buf: &mut BytesMut) -> Result<Option<ResponseFrame>, FrameError> {
        // Check the type byte before splitting so that a bad frame leaves
        // `buf` untouched, like every other error.
        let Some(frame_bytes) = self.peek_frame_bytes(buf, SERVER_FAILURE_HEADER_BYTES)? else {
            return Ok(None);
        };
        if buf.len() < frame_bytes {
            return Ok(None);
        }
        let type_id = buf[LENGTH_FIELD_BYTES] as i8;
        let min = match type_id {
            RESPONSE_TYPE_SUCCESS | RESPONSE_TYPE_ERROR => RESPONSE_HEADER_BYTES,
            RESPONSE_TYPE_SERVER_FAILURE => SERVER_FAILURE_HEADER_BYTES,
            _ => return Err(FrameError::UnknownResponseType { type_id }),
        };
        let length = frame_bytes - LENGTH_FIELD_BYTES;
        if length < min {
            return Err(FrameError::TooShort { length, min });
        }
        let response = match type_id {
            RESPONSE_TYPE_SUCCESS => {
                let mut frame = buf.split_to(frame_bytes);
                frame.advance(LENGTH_FIELD_BYTES + 1);
                ResponseFrame::Success {
                    request_id: frame.get_i32(),
                    body: frame.freeze(),
                }
            }
            RESPONSE_TYPE_ERROR => {
                let body_start = LENGTH_FIELD_BYTES + RESPONSE_HEADER_BYTES;
                let error = decode_error_body(&buf[body_start..frame_bytes])?;
                let request_id = (&buf[LENGTH_FIELD_BYTES + 1..]).get_i32();
                buf.advance(frame_bytes);
                ResponseFrame::Error { request_id, error }
            }
            _ => {
                let body_start = LENGTH_FIELD_BYTES + SERVER_FAILURE_HEADER_BYTES;
                let error = decode_error_body(&buf[body_start..frame_bytes])?;
                buf.advance(frame_bytes);
                ResponseFrame::ServerFailure { error }
            }
        };
        Ok(Some(response))
    }
}

/// Decodes the ErrorResponse body of an error or server-failure frame.
fn decode_error_body(body: &[u8]) -> Result<ApiError, FrameError> {
    Ok(ApiError::from_response(ErrorResponse::decode(body)?))
}

/// The length field of a frame with `header_bytes` of header and
/// `body_bytes` of body, or `TooLarge` if it does not fit the i32 field.
pub(crate) fn frame_length(header_bytes: usize, body_bytes: usize) -> Result<i32, FrameError> {
    let length = header_bytes.saturating_add(body_bytes);
    i32::try_from(length).map_err(|_| FrameError::TooLarge {
        frame_bytes: LENGTH_FIELD_BYTES.saturating_add(length),
        max_frame_bytes: LENGTH_FIELD_BYTES + i32::MAX as usize,
    })
}

/// Writes the length prefix for `header_bytes + body_bytes`, reserving the
/// whole frame in `buf` first so the body encodes without reallocation.
fn put_length(
    buf: &mut BytesMut,
    header_bytes: usize,
    body_bytes: usize,
) -> Result<(), FrameError> {
    let length = frame_length(header_bytes, body_bytes)?;
    buf.reserve(LENGTH_FIELD_BYTES + header_bytes + body_bytes);
    buf.put_i32(length);
    Ok(())
}

/// Encodes `message` into `buf`, which already has room for it (reserved by
/// [`put_length`]); `encode_raw` skips prost's capacity check, which a
/// growable `BytesMut` never fails anyway.
fn put_body(buf: &mut BytesMut, message: &impl Message) {
    message.encode_raw(buf);
}

/// Client side: appends a request frame for `body` to `buf`.
pub fn encode_request(
    buf: &mut BytesMut,
    header: RequestHeader,
    body: &impl Message,
) -> Result<(), FrameError> {
    put_length(buf, REQUEST_HEADER_BYTES, body.encoded_len())?;
    buf.put_i16(header.api_key);
    buf.put_i16(header.api_version);
    buf.put_i32(header.request_id);
    put_body(buf, body);
    Ok(())
}

/// Server side: appends a success response frame answering `request_id`.
pub fn encode_success_response(
    buf: &mut BytesMut,
    request_id: i32,
    body: &impl Message,
) -> Result<(), FrameError> {
    put_length(buf, RESPONSE_HEADER_BYTES, body.encoded_len())?;
    buf.put_i8(RESPONSE_TYPE_SUCCESS);
    buf.put_i32(request_id);
    put_body(buf, body);
    Ok(())
}

/// Client side: appends a request frame whose body is already encoded.
pub fn encode_raw_request(
    buf: &mut BytesMut,
    header: RequestHeader,
    body: &[u8],
) -> Result<(), FrameError> {
    put_length(buf, REQUEST_HEADER_BYTES, body.len())?;
    buf.put_i16(header.api_key);
    buf.put_i16(header.api_version);
    buf.put_i32(header.request_id);
    buf.put_slice(body);
    Ok(())
}

/// Server side: appends a success response frame whose body is already
/// encoded (for example a response cached per table).
pub fn encode_raw_success_response(
    buf: &mut BytesMut,
    request_id: i32,
    body: &[u8],
) -> Result<(), FrameError> {
    put_length(buf, RESPONSE_HEADER_BYTES, body.len())?;
    buf.put_i8(RESPONSE_TYPE_SUCCESS);
    buf.put_i32(request_id);
    buf.put_slice(body);
    Ok(())
}

/// Server side: appends an error response frame answering `request_id`
/// with `error`'s code and message.
pub fn encode_error_response(
    buf: &mut BytesMut,
    request_id: i32,
    error: &ApiError,
) -> Result<(), FrameError> {
    let body = error.to_response();
    put_length(buf, RESPONSE_HEADER_BYTES, body.encoded_len())?;
    buf.put_i8(RESPONSE_TYPE_ERROR);
    buf.put_i32(request_id);
    put_body(buf, &body);
    Ok(())
}

/// Server side: appends a server-failure frame (no request id). See the
/// module doc for why a server should rarely send one.
pub fn encode_server_failure(buf: &mut BytesMut, error: &ApiError) -> Result<(), FrameError> {
    let body = error.to_response();
    put_length(buf, SERVER_FAILURE_HEADER_BYTES, body.encoded_len())?;
    buf.put_i8(RESPONSE_TYPE_SERVER_FAILURE);
    put_body(buf, &body);
    Ok(())
}

const _: () = assert!(REQUEST_HEADER_BYTES == 2 + 2 + 4);
const _: () = assert!(RESPONSE_HEADER_BYTES == 1 + 4);
const _: () = assert!(DEFAULT_MAX_FRAME_BYTES <= i32::MAX as usize);

#[cfg(test)]
mod tests;
