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
//! The table is open addressing with linear probing over the slots alone
//! (the stored hash is the tag), so the slot a key starts at is known from
//! its hash: a caller walking many keys prefetches the slots of keys a few
//! places ahead ([`Run::prefetch_slot`], then [`Run::prefetch`] for the
//! change), and the misses of a probe and of its change overlap instead of
//! being waited for one at a time. Keys are never removed (a delete is a
//! change), so probing needs no tombstones.
//!
//! A change that replaces an earlier one of its key marks the earlier one
//! superseded and leaves its bytes in place until the run is written out.
//! [`Run::reaches`] weighs a run against the write buffer by its live
//! changes (as a map of each key's latest change would), and by all it
//! packed against twice that, so a run of many updates to a few keys is
//! still written out once its superseded bytes pile up.

use std::hash::BuildHasher;

/// Bytes of a chunk of packed changes (a change longer than this gets a
/// chunk of its own size).
pub const RUN_CHUNK_BYTES: usize = 1 << 20;

/// Changes ahead whose first bytes [`Run::sorted`] loads into the cache.
const SORTED_PREFETCH_DISTANCE: usize = 8;

/// Fewest slots of a table that holds any key.
const SLOTS_MIN: usize = 16;

/// Bytes of a change's header: key length, then value length (both u32 LE).
const HEADER_BYTES: usize = 8;

/// Set in a change's key length once a later change of its key replaced it.
const SUPERSEDED: u32 = 1 << 31;

/// Value length of a delete.
const DELETE: u32 = u32::MAX;

/// A slot: `[HASH]` is the key's hash, `[AT]` where its latest change
/// sits, plus one (chunk index in the high 32 bits, byte offset in the low
/// 32). `[AT] == 0` is an empty slot, so a zeroed table is an empty one.
type Slot = [u64; 2];
const HASH: usize = 0;
const AT: usize = 1;

/// A change as a run hands it out: key, then value (`None`: a delete).
pub type Change<'a> = (&'a [u8], Option<&'a [u8]>);

/// Each key's latest change, in insertion order within packed chunks.
/// Keys and values are byte strings; a key is at most `i32::MAX` bytes (the
/// KV batch format's bound) and a value below 4 GiB.
#[derive(Default)]
pub struct Run {
    /// A power of two of slots (or none), at most three quarters used.
    slots: Vec<Slot>,
    /// Keys with a change.
    len: usize,
    /// foldhash: cheap on short keys; seeded at random (per tablet, shared
    /// by its runs and its pre-write buffer so a key is hashed once per
    /// write), so clients cannot aim collisions.
    hasher: foldhash::fast::RandomState,
    chunks: Vec<Vec<u8>>,
    /// Key and value bytes of every change packed, superseded ones too.
    bytes: usize,
    /// Key and value bytes of each key's latest change.
    live_bytes: usize,
}

impl Run {
    /// An empty run with slots for `keys` keys (a run is usually about as
    /// large as the one before it) that hashes keys with `hasher`: runs
    /// built with one hasher take each other's [`Run::hash`] in the
    /// `*_hashed` methods.
    pub fn with_hasher(keys: usize, hasher: foldhash::fast::RandomState) -> Self {
        Self {
            slots: if keys == 0 {
                Vec::new()
            } else {
                empty_slots(slots_for(keys))
            },
            hasher,
            ..Self::default()
        }
    }

    /// The hasher the run files keys with.
    pub fn hasher(&self) -> foldhash::fast::RandomState {
        self.hasher.clone()
    }

    /// The hash the run files `key` under (what the `*_hashed` methods take).
    pub fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Keys with a change in the run.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the run holds no change.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Key and value bytes of each key's latest change.
    pub fn live_bytes(&self) -> usize {
        self.live_bytes
    }

    /// Key and value bytes of every change packed, superseded ones too.
    pub fn packed_bytes(&self) -> usize {
        self.bytes
    }

    /// Whether the run is due to be written out under a write buffer of
    /// `write_buffer_bytes`: its live changes reach it, or every change
    /// packed (superseded ones included) reaches twice it.
    pub fn reaches(&self, write_buffer_bytes: usize) -> bool {
        self.live_bytes >= write_buffer_bytes || self.bytes >= write_buffer_bytes.saturating_mul(2)
    }

    /// The latest change of `key`: `Some(Some(value))`, `Some(None)` for a
    /// delete, `None` when the run has none.
    pub fn get(&self, key: &[u8]) -> Option<Option<&[u8]>> {
        self.get_hashed(self.hash(key), key)
    }

    /// [`Run::get`] of `key`, whose [`Run::hash`] is `hash`.
    #[inline]
    pub fn get_hashed(&self, hash: u64, key: &[u8]) -> Option<Option<&[u8]>> {
        debug_assert_eq!(hash, self.hash(key), "a hash of another hasher");
        self.find(hash, key)
            .map(|i| change_at(&self.chunks, self.slots[i][AT]).1)
    }

    /// Starts loading the slot `key` starts probing at into the CPU's cache,
    /// without waiting for it. A hint only: it changes nothing.
    pub fn prefetch_slot(&self, key: &[u8]) {
        self.prefetch_slot_hashed(self.hash(key));
    }

    /// [`Run::prefetch_slot`] of the key whose [`Run::hash`] is `hash`.
    #[inline]
    pub fn prefetch_slot_hashed(&self, hash: u64) {
        if self.len != 0 {
            prefetch_read(&self.slots[self.home(hash)]);
        }
    }

    /// Starts loading the latest change of `key` into the CPU's cache
    /// without waiting for it (its slot is read: prefetch that a few keys
    /// earlier). A hint only: it changes nothing and reads no key.
    pub fn prefetch(&self, key: &[u8]) {
        self.prefetch_hashed(self.hash(key));
    }

    /// [`Run::prefetch`] of the key whose [`Run::hash`] is `hash`.
    #[inline]
    pub fn prefetch_hashed(&self, hash: u64) {
        // Empty: also a table sized for the run before, which would cost a
        // miss on its slots to learn nothing.
        if self.len == 0 {
            return;
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(hash);
        loop {
            let slot = self.slots[i];
            if slot[AT] == 0 {
                return;
            }
            if slot[HASH] == hash {
                let at = slot[AT] - 1;
                let chunk = &self.chunks[(at >> 32) as usize];
                prefetch_read(&chunk[(at & u64::from(u32::MAX)) as usize]);
                return;
            }
            i = (i + 1) & mask;
        }
    }

    /// Records `value` (`None`: a delete) as the latest change of `key`;
    /// returns the length of the change it replaced: `Some(Some(len))` a
    /// value, `Some(None)` a delete, `None` when the key had none.
    pub fn insert(&mut self, key: &[u8], value: Option<&[u8]>) -> Option<Option<usize>> {
        self.insert_hashed(self.hash(key), key, value)
    }

    /// [`Run::insert`] of `key`, whose [`Run::hash`] is `hash`.
    pub fn insert_hashed(
        &mut self,
        hash: u64,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Option<Option<usize>> {
        debug_assert_eq!(hash, self.hash(key), "a hash of another hasher");
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.grow();
        }
        let at = self.pack(key, value) + 1;
        let mask = self.slots.len() - 1;
        let mut i = self.home(hash);
        loop {
            let slot = self.slots[i];
            if slot[AT] == 0 {
                self.slots[i] = [hash, at];
                self.len += 1;
                self.live_bytes += key.len() + value.map_or(0, <[u8]>::len);
                return None;
            }
            if slot[HASH] == hash {
                let (old_key, old_value) = change_at(&self.chunks, slot[AT]);
                if old_key == key {
                    let old_len = old_value.map(<[u8]>::len);
                    self.live_bytes =
                        self.live_bytes + value.map_or(0, <[u8]>::len) - old_len.unwrap_or(0);
                    self.slots[i][AT] = at;
                    mark_superseded(&mut self.chunks, slot[AT]);
                    return Some(old_len);
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// Every key's latest change, in the order the changes were made.
    pub fn iter(&self) -> impl Iterator<Item = Change<'_>> + '_ {
        self.chunks
            .iter()
            .flat_map(|chunk| Changes { chunk, at: 0 })
    }

    /// Every key's latest change in ascending key order (bytewise), as a
    /// store's sorted run takes them.
    ///
    /// Sorted as 16-byte entries (the key's first eight bytes, where its
    /// change sits): most comparisons are decided by the prefix without
    /// following the position into the chunks (a cache miss each; sorting
    /// behind pointers was a quarter of the server's CPU in
    /// `scripts/bench-cdc-fluss.sh`), and the entries are a third of
    /// sorting the changes' slices with the prefix (40 bytes), so a spill
    /// faults in and moves that much less.
    pub fn sorted(&self) -> impl Iterator<Item = Change<'_>> + '_ {
        let mut order: Vec<[u64; 2]> = Vec::with_capacity(self.len);
        for (index, chunk) in self.chunks.iter().enumerate() {
            let mut offset = 0;
            while offset < chunk.len() {
                let (key, _, superseded, next) = parse(chunk, offset);
                if !superseded {
                    order.push([key_prefix(key), ((index as u64) << 32) | offset as u64]);
                }
                offset = next;
            }
        }
        let chunks = &self.chunks;
        order.sort_unstable_by(|a, b| {
            a[0].cmp(&b[0]).then_with(|| {
                change_at(chunks, a[1] + 1)
                    .0
                    .cmp(change_at(chunks, b[1] + 1).0)
            })
        });
        // In key order the changes are read all over the chunks: a cache
        // miss each, which was nearly all of the store ingestion's own time
        // (`cargo bench -p fjord-server --bench kv_put` at 3 M rows), so
        // the change a few places ahead is loaded while this one is written.
        (0..order.len()).map(move |i| {
            if let Some(&[_, ahead]) = order.get(i + SORTED_PREFETCH_DISTANCE) {
                let chunk = &chunks[(ahead >> 32) as usize];
                prefetch_read(&chunk[(ahead & u64::from(u32::MAX)) as usize]);
            }
            change_at(chunks, order[i][1] + 1)
        })
    }

    /// The slot holding `key`, if any.
    fn find(&self, hash: u64, key: &[u8]) -> Option<usize> {
        // Empty: also a table sized for the run before, which would cost a
        // miss on its slots to learn nothing.
        if self.len == 0 {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(hash);
        loop {
            let slot = self.slots[i];
            if slot[AT] == 0 {
                return None;
            }
            if slot[HASH] == hash && change_at(&self.chunks, slot[AT]).0 == key {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// The slot a key of `hash` starts probing at.
    fn home(&self, hash: u64) -> usize {
        hash as usize & (self.slots.len() - 1)
    }

    /// Twice the slots (at least [`SLOTS_MIN`]), every key placed again by
    /// its stored hash.
    fn grow(&mut self) {
        let size = (self.slots.len() * 2).max(SLOTS_MIN);
        let old = std::mem::replace(&mut self.slots, empty_slots(size));
        let mask = size - 1;
        for slot in old.into_iter().filter(|s| s[AT] != 0) {
            let mut i = slot[HASH] as usize & mask;
            while self.slots[i][AT] != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = slot;
        }
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

/// A table of `n` empty slots, every page written now. A table the
/// allocator hands out zeroed (`vec![[0; 2]; n]`, calloc) maps untouched
/// pages to the shared zero page on a probe's first read, and the later
/// write of that slot then costs a copy-on-write fault with a TLB flush on
/// every core: a fifth of a fresh server's upsert CPU. Zeroing up front
/// faults each page in once, on a write.
fn empty_slots(n: usize) -> Vec<Slot> {
    let mut slots = Vec::with_capacity(n);
    slots.resize(n, [0; 2]);
    slots
}

/// Slots for `keys` keys at most three quarters full: a power of two.
fn slots_for(keys: usize) -> usize {
    (keys.saturating_mul(4) / 3 + 1)
        .next_power_of_two()
        .max(SLOTS_MIN)
}

/// Asks the CPU to bring the cache line of `value` in (no-op off x86-64).
#[inline]
fn prefetch_read<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the pointer comes from a live reference, and a prefetch
    // neither faults nor changes memory; it is only a cache hint.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(value).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

/// The change a slot's `at` names: its key and value (`None`: a delete).
#[inline]
fn change_at(chunks: &[Vec<u8>], at: u64) -> Change<'_> {
    let at = at - 1;
    let chunk = &chunks[(at >> 32) as usize];
    let (key, value, _, _) = parse(chunk, (at & u64::from(u32::MAX)) as usize);
    (key, value)
}

/// The first eight bytes of `key` (zero-padded) as a big-endian number:
/// ordered as the keys' byte order wherever the prefixes differ.
fn key_prefix(key: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    let n = key.len().min(8);
    bytes[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(bytes)
}

/// Marks the change a slot's `at` named as replaced.
fn mark_superseded(chunks: &mut [Vec<u8>], at: u64) {
    let at = at - 1;
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
        assert_eq!(run.live_bytes(), 1 + 2 + 1 + 1);
        assert!(run.reaches(5) && !run.reaches(6), "by live bytes");
        run.insert(b"a", Some(b"1"));
        run.insert(b"a", Some(b"22"));
        assert_eq!(run.live_bytes(), 5);
        assert!(run.reaches(6), "12 bytes packed reach twice 6");
        assert!(!run.reaches(7));
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

    /// The table stays at most three quarters full (so a probe for an absent
    /// key ends at an empty slot) and counts its keys, through every growth.
    #[test]
    fn absent_keys_read_absent_at_every_fill() {
        let mut run = Run::with_hasher(0, Default::default());
        for k in 0..300u64 {
            run.insert(&k.to_le_bytes(), Some(b"v"));
            assert_eq!(run.len(), k as usize + 1);
            assert!(
                run.len() * 4 <= run.slots.len() * 3,
                "{} keys in {} slots",
                run.len(),
                run.slots.len()
            );
            assert_eq!(run.get(b"absent"), None);
            assert_eq!(run.get(&k.to_le_bytes()), Some(Some(&b"v"[..])));
        }
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
        /// yields each key once with that change, an insert answers the
        /// length of the change it replaced, and the byte counts add up.
        #[test]
        fn a_run_holds_each_keys_latest_change(
            changes in proptest::collection::vec(
                (0u8..40, proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40))),
                0..300,
            ),
        ) {
            let mut run = Run::with_hasher(4, Default::default());
            let mut model: HashMap<Vec<u8>, Option<Vec<u8>>> = HashMap::new();
            for (k, v) in &changes {
                let key = vec![*k; usize::from(*k % 5) + 1];
                let replaced = run.insert(&key, v.as_deref());
                let expected = model.insert(key, v.clone()).map(|old| old.map(|o| o.len()));
                prop_assert_eq!(replaced, expected);
            }
            prop_assert_eq!(run.len(), model.len());
            let size = |(k, v): (&Vec<u8>, &Option<Vec<u8>>)| k.len() + v.as_ref().map_or(0, Vec::len);
            prop_assert_eq!(run.live_bytes(), model.iter().map(size).sum::<usize>());
            let packed: usize = changes
                .iter()
                .map(|(k, v)| usize::from(*k % 5) + 1 + v.as_ref().map_or(0, Vec::len))
                .sum();
            prop_assert_eq!(run.packed_bytes(), packed);
            for (k, v) in &model {
                prop_assert_eq!(run.get(k), Some(v.as_deref()));
            }
            let mut seen: HashMap<Vec<u8>, Option<Vec<u8>>> = HashMap::new();
            for (k, v) in run.iter() {
                prop_assert!(seen.insert(k.to_vec(), v.map(<[u8]>::to_vec)).is_none());
            }
            prop_assert_eq!(seen, model);
        }

        /// Against an ordered map: the sorted changes are each key's latest,
        /// once, in byte order, also among keys sharing their first eight
        /// bytes (keys over a two-letter alphabet share prefixes often).
        #[test]
        fn sorted_changes_are_the_latest_in_key_order(
            changes in proptest::collection::vec(
                (
                    proptest::collection::vec(0u8..2, 0..12),
                    proptest::option::of(proptest::collection::vec(any::<u8>(), 0..8)),
                ),
                0..300,
            ),
        ) {
            let mut run = Run::default();
            let mut model = std::collections::BTreeMap::new();
            for (k, v) in &changes {
                run.insert(k, v.as_deref());
                model.insert(k.clone(), v.clone());
            }
            let sorted: Vec<(Vec<u8>, Option<Vec<u8>>)> = run
                .sorted()
                .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
                .collect();
            prop_assert_eq!(sorted, model.into_iter().collect::<Vec<_>>());
        }

        /// Where two keys' prefixes differ, they order the keys as their
        /// bytes do, so a sort by (prefix, key) is byte order.
        #[test]
        fn key_prefixes_order_as_the_keys_bytes(
            a in proptest::collection::vec(any::<u8>(), 0..12),
            b in proptest::collection::vec(any::<u8>(), 0..12),
        ) {
            let by_prefix = key_prefix(&a)
                .cmp(&key_prefix(&b))
                .then_with(|| a.cmp(&b));
            prop_assert_eq!(by_prefix, a.cmp(&b));
        }
    }
}
