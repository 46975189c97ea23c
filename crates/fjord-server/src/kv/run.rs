//! [`Run`]: a bucket's committed changes not yet in its KV store — each
//! key's latest change (a value, or a delete), found by key.
//!
//! Changes are packed one after another into chunks (`key length ‖ value
//! length ‖ key ‖ value`), and the hash table holds only 16-byte slots
//! (the key's hash and where its latest change sits). A table of keys and
//! rows held inline (~100-byte slots) was a quarter of the server's CPU in
//! `scripts/bench-kv.sh` just faulting in its pages as it doubled; packed
//! changes take what their bytes take, and the slots a sixth of that.
//! The stored hash lets the table grow without reading any key back.
//!
//! A change that replaces an earlier one of its key marks the earlier one
//! superseded and leaves its bytes in place until the run is written out:
//! [`Run::bytes`] counts them, so a run of many updates to a few keys still
//! reaches the write buffer's size and is written out.

use std::hash::BuildHasher;

use hashbrown::HashTable;

/// Bytes of a chunk of packed changes (a change longer than this gets a
/// chunk of its own size).
pub const RUN_CHUNK_BYTES: usize = 1 << 20;

/// Bytes of a change's header: key length, then value length (both u32 LE).
const HEADER_BYTES: usize = 8;

/// Set in a change's key length once a later change of its key replaced it.
const SUPERSEDED: u32 = 1 << 31;

/// Value length of a delete.
const DELETE: u32 = u32::MAX;

/// Where a key's latest change sits: chunk index in the high 32 bits, byte
/// offset in the low 32.
#[derive(Clone, Copy)]
struct Slot {
    hash: u64,
    at: u64,
}

/// A change as a run hands it out: key, then value (`None`: a delete).
pub type Change<'a> = (&'a [u8], Option<&'a [u8]>);

/// Each key's latest change, in insertion order within packed chunks.
/// Keys and values are byte strings; a key is at most `i32::MAX` bytes (the
/// KV batch format's bound) and a value below 4 GiB.
#[derive(Default)]
pub struct Run {
    slots: HashTable<Slot>,
    /// foldhash: cheap on short keys; seeded per run, so clients cannot aim
    /// collisions.
    hasher: foldhash::fast::RandomState,
    chunks: Vec<Vec<u8>>,
    /// Key and value bytes of every change packed, superseded ones too.
    bytes: usize,
}

impl Run {
    /// An empty run with slots for `keys` keys (a run is usually about as
    /// large as the one before it).
    pub fn with_capacity(keys: usize) -> Self {
        Self {
            slots: HashTable::with_capacity(keys),
            ..Self::default()
        }
    }

    /// Keys with a change in the run.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether the run holds no change.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Key and value bytes packed so far, superseded changes included: what
    /// the run holds against the write buffer.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The latest change of `key`: `Some(Some(value))`, `Some(None)` for a
    /// delete, `None` when the run has none.
    pub fn get(&self, key: &[u8]) -> Option<Option<&[u8]>> {
        let hash = self.hasher.hash_one(key);
        let chunks = &self.chunks;
        self.slots
            .find(hash, |s| s.hash == hash && change_at(chunks, s.at).0 == key)
            .map(|s| change_at(chunks, s.at).1)
    }

    /// Starts loading the latest change of `key` into the CPU's cache
    /// without waiting for it, so a batch of lookups overlaps its misses on
    /// the packed changes: prefetch each key of the batch, then [`Run::get`]
    /// each. A hint only: it changes nothing and reads no key.
    pub fn prefetch(&self, key: &[u8]) {
        let hash = self.hasher.hash_one(key);
        if let Some(slot) = self.slots.find(hash, |s| s.hash == hash) {
            let chunk = &self.chunks[(slot.at >> 32) as usize];
            prefetch_read(&chunk[(slot.at & u64::from(u32::MAX)) as usize]);
        }
    }

    /// Records `value` (`None`: a delete) as the latest change of `key`.
    pub fn insert(&mut self, key: &[u8], value: Option<&[u8]>) {
        let hash = self.hasher.hash_one(key);
        let at = self.pack(key, value);
        let chunks = &mut self.chunks;
        match self
            .slots
            .find_mut(hash, |s| s.hash == hash && change_at(chunks, s.at).0 == key)
        {
            Some(slot) => {
                let replaced = std::mem::replace(&mut slot.at, at);
                mark_superseded(chunks, replaced);
            }
            None => {
                self.slots
                    .insert_unique(hash, Slot { hash, at }, |s| s.hash);
            }
        }
    }

    /// Every key's latest change, in the order the changes were made.
    pub fn iter(&self) -> impl Iterator<Item = Change<'_>> + '_ {
        self.chunks
            .iter()
            .flat_map(|chunk| Changes { chunk, at: 0 })
    }

    /// Appends the change to the last chunk (a new one when it does not fit)
    /// and returns where it sits.
    fn pack(&mut self, key: &[u8], value: Option<&[u8]>) -> u64 {
        let value_len = value.map_or(0, <[u8]>::len);
        let size = HEADER_BYTES + key.len() + value_len;
        let fits = self
            .chunks
            .last()
            .is_some_and(|c| c.capacity() - c.len() >= size);
        if !fits {
            self.chunks
                .push(Vec::with_capacity(size.max(RUN_CHUNK_BYTES)));
        }
        let index = self.chunks.len() - 1;
        let chunk = &mut self.chunks[index];
        let offset = chunk.len();
        let key_len = u32::try_from(key.len())
            .ok()
            .filter(|&l| l < SUPERSEDED)
            .expect("a key is at most i32::MAX bytes");
        let value_len = match value {
            Some(v) => u32::try_from(v.len())
                .ok()
                .filter(|&l| l != DELETE)
                .expect("a value is below 4 GiB"),
            None => DELETE,
        };
        chunk.extend_from_slice(&key_len.to_le_bytes());
        chunk.extend_from_slice(&value_len.to_le_bytes());
        chunk.extend_from_slice(key);
        chunk.extend_from_slice(value.unwrap_or_default());
        self.bytes += key.len() + value.map_or(0, <[u8]>::len);
        ((index as u64) << 32) | offset as u64
    }
}

/// Asks the CPU to bring the cache line of `byte` in (no-op off x86-64).
#[inline]
fn prefetch_read(byte: &u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the pointer comes from a live reference, and a prefetch
    // neither faults nor changes memory; it is only a cache hint.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(byte).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = byte;
}

/// The change at `at`: its key and value (`None`: a delete).
#[inline]
fn change_at(chunks: &[Vec<u8>], at: u64) -> (&[u8], Option<&[u8]>) {
    let chunk = &chunks[(at >> 32) as usize];
    let (key, value, _, _) = parse(chunk, (at & u64::from(u32::MAX)) as usize);
    (key, value)
}

fn mark_superseded(chunks: &mut [Vec<u8>], at: u64) {
    let chunk = &mut chunks[(at >> 32) as usize];
    let offset = (at & u64::from(u32::MAX)) as usize;
    let key_len = u32::from_le_bytes(chunk[offset..offset + 4].try_into().expect("4 bytes"));
    chunk[offset..offset + 4].copy_from_slice(&(key_len | SUPERSEDED).to_le_bytes());
}

/// The change at `offset` of `chunk`: key, value, whether superseded, and
/// the offset of the next change. The run wrote every byte it reads.
#[inline]
fn parse(chunk: &[u8], offset: usize) -> (&[u8], Option<&[u8]>, bool, usize) {
    let word = |at: usize| u32::from_le_bytes(chunk[at..at + 4].try_into().expect("4 bytes"));
    let key_word = word(offset);
    let value_len = word(offset + 4);
    let key_start = offset + HEADER_BYTES;
    let key_end = key_start + (key_word & !SUPERSEDED) as usize;
    let key = &chunk[key_start..key_end];
    if value_len == DELETE {
        (key, None, key_word & SUPERSEDED != 0, key_end)
    } else {
        let end = key_end + value_len as usize;
        (
            key,
            Some(&chunk[key_end..end]),
            key_word & SUPERSEDED != 0,
            end,
        )
    }
}

/// The live changes of one chunk, in order.
struct Changes<'a> {
    chunk: &'a [u8],
    at: usize,
}

impl<'a> Iterator for Changes<'a> {
    type Item = Change<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        while self.at < self.chunk.len() {
            let (key, value, superseded, next) = parse(self.chunk, self.at);
            self.at = next;
            if !superseded {
                return Some((key, value));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_key_reads_its_latest_change_and_iterates_once() {
        let mut run = Run::default();
        run.insert(b"a", Some(b"1"));
        run.insert(b"b", None);
        run.insert(b"a", Some(b"22"));
        run.insert(b"c", Some(b""));
        assert_eq!(run.get(b"a"), Some(Some(&b"22"[..])));
        assert_eq!(run.get(b"b"), Some(None));
        assert_eq!(run.get(b"c"), Some(Some(&b""[..])));
        assert_eq!(run.get(b"d"), None);
        assert_eq!(run.len(), 3);
        let changes: Vec<_> = run.iter().collect();
        assert_eq!(
            changes,
            vec![
                (&b"b"[..], None),
                (&b"a"[..], Some(&b"22"[..])),
                (&b"c"[..], Some(&b""[..]))
            ]
        );
        assert_eq!(run.bytes(), 1 + 1 + 1 + 1 + 2 + 1, "superseded bytes count");
    }

    #[test]
    fn a_change_larger_than_a_chunk_gets_a_chunk_of_its_own() {
        let mut run = Run::default();
        let big = vec![7u8; RUN_CHUNK_BYTES + 10];
        run.insert(b"small", Some(b"x"));
        run.insert(b"big", Some(&big));
        run.insert(b"after", Some(b"y"));
        assert_eq!(run.get(b"big"), Some(Some(&big[..])));
        assert_eq!(run.get(b"small"), Some(Some(&b"x"[..])));
        assert_eq!(run.get(b"after"), Some(Some(&b"y"[..])));
        assert_eq!(run.iter().count(), 3);
    }

    #[test]
    fn changes_across_many_chunks_read_back() {
        let mut run = Run::default();
        let value = [3u8; 40];
        let keys = 3 * RUN_CHUNK_BYTES / (HEADER_BYTES + 8 + value.len());
        for round in 0..2u8 {
            for k in 0..keys as u64 {
                let mut v = value;
                v[0] = round;
                run.insert(&k.to_be_bytes(), Some(&v));
            }
        }
        assert!(run.chunks.len() > 4, "{} chunks", run.chunks.len());
        assert_eq!(run.len(), keys);
        for k in [0, keys as u64 / 2, keys as u64 - 1] {
            assert_eq!(run.get(&k.to_be_bytes()).unwrap().unwrap()[0], 1);
        }
        assert!(run.iter().all(|(_, v)| v.unwrap()[0] == 1));
        assert_eq!(run.iter().count(), keys);
    }

    proptest! {
        /// Against a map: every key reads its last change, the iteration
        /// yields each key once with that change.
        #[test]
        fn a_run_holds_each_keys_latest_change(
            changes in proptest::collection::vec(
                (0u8..40, proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40))),
                0..300,
            ),
        ) {
            let mut run = Run::with_capacity(4);
            let mut model: HashMap<Vec<u8>, Option<Vec<u8>>> = HashMap::new();
            for (k, v) in &changes {
                let key = vec![*k; usize::from(*k % 5) + 1];
                run.insert(&key, v.as_deref());
                model.insert(key, v.clone());
            }
            prop_assert_eq!(run.len(), model.len());
            for (k, v) in &model {
                prop_assert_eq!(run.get(k), Some(v.as_deref()));
            }
            let mut seen: HashMap<Vec<u8>, Option<Vec<u8>>> = HashMap::new();
            for (k, v) in run.iter() {
                prop_assert!(seen.insert(k.to_vec(), v.map(<[u8]>::to_vec)).is_none());
            }
            prop_assert_eq!(seen, model);
        }
    }
}
