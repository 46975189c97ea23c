//! Hand-written protobuf wire primitives for the chunked encoders
//! ([`crate::fetch_response`], [`crate::produce_request`]), which write a
//! message's scaffolding themselves so its record payloads can stay
//! separate chunks.

use bytes::{BufMut, BytesMut};

/// Protobuf wire type of length-delimited fields.
pub(crate) const WIRE_TYPE_LEN: u32 = 2;
/// Protobuf wire type of varint fields.
pub(crate) const WIRE_TYPE_VARINT: u32 = 0;

/// Appends `value` as a base-128 varint.
pub(crate) fn put_varint(buf: &mut BytesMut, mut value: u64) {
    while value >= 0x80 {
        buf.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    buf.put_u8(value as u8);
}

/// Appends the key (field number and wire type) of a field.
pub(crate) fn put_key(buf: &mut BytesMut, tag: u32, wire_type: u32) {
    put_varint(buf, u64::from(tag << 3 | wire_type));
}
