//! A looked-up key's encoded bytes, as a caller hands them to the batcher.
//!
//! Short keys (every key of a few fixed-width columns) are kept inline, so
//! a lookup allocates nothing to hand its key over. On a multi-threaded
//! runtime the caller and the batcher often run on different threads, and
//! a heap block allocated by one and freed by the other costs the
//! allocator's cross-thread path on every lookup. The batcher copies a
//! request's keys into one buffer of its own when it sends them.

/// Bytes of a key kept inline; longer keys go to the heap.
pub(crate) const INLINE_KEY_MAX: usize = 30;

/// One encoded key (the compacted key of the primary key, or of a prefix).
pub(crate) enum KeyBytes {
    /// `len` bytes at the start of the array.
    Inline {
        len: u8,
        bytes: [u8; INLINE_KEY_MAX],
    },
    Heap(Box<[u8]>),
}

impl KeyBytes {
    /// A copy of `key`: inline when it fits.
    pub(crate) fn new(key: &[u8]) -> Self {
        match u8::try_from(key.len()) {
            Ok(len) if key.len() <= INLINE_KEY_MAX => {
                let mut bytes = [0; INLINE_KEY_MAX];
                bytes[..key.len()].copy_from_slice(key);
                KeyBytes::Inline { len, bytes }
            }
            _ => KeyBytes::Heap(key.into()),
        }
    }

    /// The key's bytes.
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            KeyBytes::Inline { len, bytes } => &bytes[..usize::from(*len)],
            KeyBytes::Heap(bytes) => bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_reads_back_as_given_inline_or_not() {
        for len in [
            0,
            1,
            INLINE_KEY_MAX - 1,
            INLINE_KEY_MAX,
            INLINE_KEY_MAX + 1,
            300,
        ] {
            let key: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let kept = KeyBytes::new(&key);
            assert_eq!(kept.as_slice(), key.as_slice(), "a key of {len} bytes");
            assert_eq!(
                matches!(kept, KeyBytes::Inline { .. }),
                len <= INLINE_KEY_MAX,
                "a key of {len} bytes is inline only when it fits"
            );
        }
    }
}
