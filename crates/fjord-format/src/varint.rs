//! Unsigned LEB128 varints as Fluss writes them: seven bits a byte, least
//! significant group first, the high bit set on every byte but the last.
//!
//! ```text
//! 300 = 0b10_0101100  ->  [1_0101100] [0_0000010]  =  0xac 0x02
//! ```
//!
//! Writers: `CompactedRowWriter.writeInt` / `writeLong` and
//! `VarLengthUtils.writeUnsignedVarInt` (fluss-common), fluss-rs
//! `util/varint.rs`. Negative 32- and 64-bit values are written as their
//! two's-complement bits, so they take 5 and 10 bytes.
//!
//! The readers here accept only the canonical form those writers produce:
//! no more than 5 (10) bytes, no bits beyond 32 (64) in the last byte, and no
//! overlong encoding (a final zero byte after a continuation byte). Java's
//! readers are laxer (they drop high bits, accept overlong forms); refusing
//! them makes decoding a bijection, which keys stored as bytes rely on.

/// Most bytes a 32-bit varint takes.
pub(crate) const VARINT32_BYTES_MAX: usize = 5;
/// Most bytes a 64-bit varint takes.
pub(crate) const VARINT64_BYTES_MAX: usize = 10;

/// Why a varint could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum VarintFault {
    /// The bytes end inside the varint; `read` bytes of it were present.
    Truncated { read: usize },
    /// Too long, bits beyond the width, or an overlong encoding.
    Malformed,
}

/// Appends `v` as an unsigned varint (at most 5 bytes).
#[inline]
pub(crate) fn put_u32(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends `v` as an unsigned varint (at most 10 bytes).
#[inline]
pub(crate) fn put_u64(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Bytes [`put_u32`] writes for `v`.
#[inline]
pub(crate) const fn size_u32(v: u32) -> usize {
    // 1 byte per started group of 7 bits, at least one.
    let bits = 32 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Reads a canonical 32-bit varint at `*pos`, advancing `*pos` past it.
#[inline]
pub(crate) fn read_u32(bytes: &[u8], pos: &mut usize) -> Result<u32, VarintFault> {
    let start = *pos;
    let mut result = 0u32;
    for i in 0..VARINT32_BYTES_MAX {
        let Some(&b) = bytes.get(start + i) else {
            return Err(VarintFault::Truncated { read: i });
        };
        result |= u32::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            // The fifth byte carries bits 28..31 only; a zero final byte
            // after a continuation byte is an overlong encoding.
            if (i == VARINT32_BYTES_MAX - 1 && b > 0x0f) || (i > 0 && b == 0) {
                return Err(VarintFault::Malformed);
            }
            *pos = start + i + 1;
            return Ok(result);
        }
    }
    Err(VarintFault::Malformed)
}

/// Reads a canonical 64-bit varint at `*pos`, advancing `*pos` past it.
#[inline]
pub(crate) fn read_u64(bytes: &[u8], pos: &mut usize) -> Result<u64, VarintFault> {
    let start = *pos;
    let mut result = 0u64;
    for i in 0..VARINT64_BYTES_MAX {
        let Some(&b) = bytes.get(start + i) else {
            return Err(VarintFault::Truncated { read: i });
        };
        result |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            // The tenth byte carries bit 63 only.
            if (i == VARINT64_BYTES_MAX - 1 && b > 0x01) || (i > 0 && b == 0) {
                return Err(VarintFault::Malformed);
            }
            *pos = start + i + 1;
            return Ok(result);
        }
    }
    Err(VarintFault::Malformed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check32(bytes: &[u8], expected: Result<(u32, usize), VarintFault>) {
        let mut pos = 0;
        let got = read_u32(bytes, &mut pos).map(|v| (v, pos));
        assert_eq!(got, expected, "{bytes:02x?}");
    }

    #[test]
    fn known_encodings_match_the_java_writer() {
        // Values worked by hand from CompactedRowWriter.writeInt's loop.
        let cases: [(u32, &[u8]); 5] = [
            (0, &[0x00]),
            (127, &[0x7f]),
            (128, &[0x80, 0x01]),
            (300, &[0xac, 0x02]),
            (u32::MAX, &[0xff, 0xff, 0xff, 0xff, 0x0f]),
        ];
        for (v, bytes) in cases {
            let mut out = Vec::new();
            put_u32(&mut out, v);
            assert_eq!(out, bytes);
            assert_eq!(size_u32(v), bytes.len());
            check32(bytes, Ok((v, bytes.len())));
        }
        let mut out = Vec::new();
        put_u64(&mut out, u64::MAX);
        assert_eq!(
            out,
            [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]
        );
    }

    #[test]
    fn non_canonical_forms_are_refused() {
        check32(&[0x80], Err(VarintFault::Truncated { read: 1 }));
        check32(&[], Err(VarintFault::Truncated { read: 0 }));
        check32(&[0x80, 0x00], Err(VarintFault::Malformed));
        check32(&[0xff, 0xff, 0xff, 0xff, 0x1f], Err(VarintFault::Malformed));
        check32(
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            Err(VarintFault::Malformed),
        );
        let mut pos = 0;
        let ten = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert_eq!(read_u64(&ten, &mut pos), Err(VarintFault::Malformed));
    }

    proptest! {
        #[test]
        fn round_trips(v32 in any::<u32>(), v64 in any::<u64>()) {
            let mut out = vec![9];
            put_u32(&mut out, v32);
            put_u64(&mut out, v64);
            let mut pos = 1;
            prop_assert_eq!(read_u32(&out, &mut pos), Ok(v32));
            prop_assert_eq!(pos, 1 + size_u32(v32));
            prop_assert_eq!(read_u64(&out, &mut pos), Ok(v64));
            prop_assert_eq!(pos, out.len());
        }
    }
}
