//! [`KvKey`]: an encoded primary key as the KV tablet's maps hold it —
//! inline when short (most keys: a few varints), so a map lookup that finds
//! its key compares bytes that sit in the map's own slot instead of
//! following a pointer to a request buffer (that second cache miss was the
//! largest single cost of an upsert in `benches/kv_put.rs`).

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};

use bytes::{Bytes, BytesMut};

/// Longest key kept inline (the enum is then at most 40 bytes).
pub const INLINE_KEY_BYTES_MAX: usize = 30;

/// An encoded key: inline up to [`INLINE_KEY_BYTES_MAX`] bytes, else shared.
/// Hashes, compares and borrows exactly as its bytes (`[u8]`), so maps keyed
/// by it are looked up with a plain `&[u8]`.
#[derive(Clone)]
pub enum KvKey {
    /// A short key in place.
    Inline {
        /// Bytes used of `bytes`.
        len: u8,
        /// The key, then zeros.
        bytes: [u8; INLINE_KEY_BYTES_MAX],
    },
    /// A longer key, shared.
    Shared(Bytes),
}

impl KvKey {
    /// The key of `bytes`: inline when short, else split off `arena` (one
    /// copy into the caller's per-batch buffer, no allocation of its own).
    pub fn new(bytes: &[u8], arena: &mut BytesMut) -> Self {
        if bytes.len() <= INLINE_KEY_BYTES_MAX {
            let mut inline = [0u8; INLINE_KEY_BYTES_MAX];
            inline[..bytes.len()].copy_from_slice(bytes);
            KvKey::Inline {
                len: bytes.len() as u8,
                bytes: inline,
            }
        } else {
            arena.extend_from_slice(bytes);
            KvKey::Shared(arena.split().freeze())
        }
    }

    /// The key of `bytes`, copied (a long one into a buffer of its own).
    pub fn copy_from_slice(bytes: &[u8]) -> Self {
        if bytes.len() <= INLINE_KEY_BYTES_MAX {
            let mut inline = [0u8; INLINE_KEY_BYTES_MAX];
            inline[..bytes.len()].copy_from_slice(bytes);
            KvKey::Inline {
                len: bytes.len() as u8,
                bytes: inline,
            }
        } else {
            KvKey::Shared(Bytes::copy_from_slice(bytes))
        }
    }

    /// The key's bytes.
    pub fn as_slice(&self) -> &[u8] {
        match self {
            KvKey::Inline { len, bytes } => &bytes[..usize::from(*len)],
            KvKey::Shared(b) => b,
        }
    }

    /// The key's length.
    pub fn len(&self) -> usize {
        self.as_slice().len()
    }

    /// Whether the key is empty (never, for a validated key).
    pub fn is_empty(&self) -> bool {
        self.as_slice().is_empty()
    }
}

impl std::ops::Deref for KvKey {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl Borrow<[u8]> for KvKey {
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}

impl PartialEq for KvKey {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for KvKey {}

impl PartialOrd for KvKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for KvKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_slice().cmp(other.as_slice())
    }
}

impl Hash for KvKey {
    // As `[u8]` hashes, so `Borrow<[u8]>` lookups find it.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state);
    }
}

impl std::fmt::Debug for KvKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KvKey({:02x?})", self.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn keys_inline_or_shared_look_up_as_their_bytes() {
        let mut arena = BytesMut::new();
        let short = KvKey::new(b"abc", &mut arena);
        let long_bytes = [7u8; INLINE_KEY_BYTES_MAX + 1];
        let long = KvKey::new(&long_bytes, &mut arena);
        assert!(matches!(short, KvKey::Inline { .. }));
        assert!(matches!(long, KvKey::Shared(_)));
        assert!(
            std::mem::size_of::<KvKey>() <= 40,
            "a key stays small in a map slot"
        );
        let mut map: HashMap<KvKey, i32, foldhash::fast::RandomState> = HashMap::default();
        map.insert(short.clone(), 1);
        map.insert(long.clone(), 2);
        assert_eq!(map.get(&b"abc"[..]), Some(&1));
        assert_eq!(map.get(&long_bytes[..]), Some(&2));
        assert_eq!(map.get(&b"ab"[..]), None);
        assert_eq!(KvKey::copy_from_slice(b"abc"), short);
        assert!(long < short, "ordered as bytes: 7... < a...");
        let edge = [9u8; INLINE_KEY_BYTES_MAX];
        assert_eq!(&*KvKey::copy_from_slice(&edge), &edge[..]);
    }
}

/// Longest stored value kept inline in [`KvRow`].
pub const INLINE_ROW_BYTES_MAX: usize = 62;

/// A stored value (`schemaId ‖ row`) as the KV tablet's maps hold it: inline
/// when short (most rows of narrow tables), else shared. Inline values need
/// no per-batch buffer kept alive, no reference count and no allocation when
/// they move between the tablet's layers.
#[derive(Clone)]
pub enum KvRow {
    /// A short value in place.
    Inline {
        /// Bytes used of `bytes`.
        len: u8,
        /// The value, then zeros.
        bytes: [u8; INLINE_ROW_BYTES_MAX],
    },
    /// A longer value, shared.
    Shared(Bytes),
}

impl KvRow {
    /// The value `head ‖ tail`: inline when short, else split off `arena`.
    pub fn new(head: &[u8], tail: &[u8], arena: &mut BytesMut) -> Self {
        let len = head.len() + tail.len();
        if len <= INLINE_ROW_BYTES_MAX {
            let mut inline = [0u8; INLINE_ROW_BYTES_MAX];
            inline[..head.len()].copy_from_slice(head);
            inline[head.len()..len].copy_from_slice(tail);
            KvRow::Inline {
                len: len as u8,
                bytes: inline,
            }
        } else {
            arena.extend_from_slice(head);
            arena.extend_from_slice(tail);
            KvRow::Shared(arena.split().freeze())
        }
    }

    /// The value of `bytes`, copied (a long one into a buffer of its own,
    /// so no request buffer stays referenced).
    pub fn copy_from_slice(bytes: &[u8]) -> Self {
        if bytes.len() <= INLINE_ROW_BYTES_MAX {
            let mut inline = [0u8; INLINE_ROW_BYTES_MAX];
            inline[..bytes.len()].copy_from_slice(bytes);
            KvRow::Inline {
                len: bytes.len() as u8,
                bytes: inline,
            }
        } else {
            KvRow::Shared(Bytes::copy_from_slice(bytes))
        }
    }

    /// The same value, holding no shared buffer of a batch (inline values
    /// are returned as they are).
    pub fn compacted(&self) -> Self {
        match self {
            KvRow::Inline { .. } => self.clone(),
            KvRow::Shared(b) => KvRow::Shared(Bytes::copy_from_slice(b)),
        }
    }

    /// The value's bytes.
    pub fn as_slice(&self) -> &[u8] {
        match self {
            KvRow::Inline { len, bytes } => &bytes[..usize::from(*len)],
            KvRow::Shared(b) => b,
        }
    }

    /// The value as `Bytes` (a copy of an inline one).
    pub fn to_bytes(&self) -> Bytes {
        match self {
            KvRow::Inline { .. } => Bytes::copy_from_slice(self.as_slice()),
            KvRow::Shared(b) => b.clone(),
        }
    }
}

impl std::ops::Deref for KvRow {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl std::fmt::Debug for KvRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KvRow({:02x?})", self.as_slice())
    }
}

#[cfg(test)]
mod row_tests {
    use super::*;

    #[test]
    fn rows_inline_or_shared_hold_their_bytes() {
        let mut arena = BytesMut::new();
        let short = KvRow::new(&[1, 0], b"row", &mut arena);
        assert!(matches!(short, KvRow::Inline { .. }));
        assert_eq!(&*short, b"\x01\x00row");
        let long_tail = [5u8; INLINE_ROW_BYTES_MAX];
        let long = KvRow::new(&[1, 0], &long_tail, &mut arena);
        assert!(matches!(long, KvRow::Shared(_)));
        assert_eq!(long.len(), INLINE_ROW_BYTES_MAX + 2);
        assert_eq!(&*long.compacted(), &*long);
        assert_eq!(&long.to_bytes()[..], &*long);
        assert_eq!(&*KvRow::copy_from_slice(&long_tail), &long_tail[..]);
        assert!(std::mem::size_of::<KvRow>() <= 64);
    }
}
