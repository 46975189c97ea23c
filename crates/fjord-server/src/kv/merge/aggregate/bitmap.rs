//! `rbm32`: the union of two 32-bit roaring bitmaps in the portable
//! serialization (RoaringFormatSpec), producing the bytes Fluss's server
//! produces.
//!
//! Fluss (`FieldRoaringBitmap32Agg`, `RoaringBitmapUtils`) deserializes both
//! values into Java `RoaringBitmap`s (RoaringBitmap 1.3.0), ORs the input
//! into the accumulator, calls `runOptimize()` and serializes. The values
//! are a pure function of the two sets; the container kinds (array, bitmap,
//! run) are not, because Java's `runOptimize` decides by the kind a
//! container has after the OR, and that kind depends on the kinds of the two
//! inputs. With `c` the cardinality and `r` the number of runs of a result
//! container (sizes in bytes as Java counts them):
//! - array-kind ("A"): becomes a run container iff `2c > 2 + 4r`;
//! - bitmap-kind ("B"): becomes a run container iff `2 + 4r < 8192`;
//! - run-kind ("R", `toEfficientContainer`): stays a run container iff
//!   `2 + 4r <= min(8192, 2c + 2)`, else array if `c <= 4096`, else bitmap.
//!
//! The kind after the OR: a container on one side only keeps its kind (a
//! deserialized container is a run container if flagged, else an array if
//! `c <= 4096`, else a bitmap); array|array is A if the union has
//! `c <= 4096`, else B; any bitmap with no run, and run|bitmap, is B;
//! run|array and run|run are R.
//!
//! No allocation once the scratch buffers have grown to the largest values
//! seen.

use std::ops::Range;

const SERIAL_COOKIE_NO_RUNCONTAINER: u32 = 12346;
const SERIAL_COOKIE: u32 = 12347;
/// With run containers, the offset table is written only from this many
/// containers on (Java's `NO_OFFSET_THRESHOLD`).
const NO_OFFSET_THRESHOLD: usize = 4;
/// Largest cardinality an array container holds (Java's `DEFAULT_MAX_SIZE`).
const ARRAY_MAX: u32 = 4096;
/// Bytes of a bitmap container.
pub(super) const BITMAP_BYTES: usize = 8192;
/// 64-bit words of a bitmap container.
pub(super) const BITMAP_WORDS: usize = 1024;
/// At most 2^16 containers: one per 16-bit high key.
const CONTAINERS_MAX: usize = 1 << 16;

/// A container's kind: how its values are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Array,
    Bitmap,
    Run,
}

/// One container of a serialized input: its key, kind and payload bytes.
#[derive(Clone, Debug)]
pub(super) struct ContainerRef {
    pub(super) key: u16,
    pub(super) kind: Kind,
    pub(super) data: Range<usize>,
}

/// One container of the result: its key, cardinality, chosen kind and
/// payload length in `BitmapScratch::payload`.
#[derive(Clone, Copy, Debug)]
struct OutContainer {
    key: u16,
    cardinality: u32,
    kind: Kind,
    payload_bytes: usize,
}

/// Buffers reused across unions.
#[derive(Debug, Default)]
pub(crate) struct BitmapScratch {
    words: Vec<u64>,
    left: Vec<ContainerRef>,
    right: Vec<ContainerRef>,
    out: Vec<OutContainer>,
    payload: Vec<u8>,
}

/// Writes into `out` the serialized union of the serialized bitmaps `acc`
/// and `input`, byte for byte as Fluss would store it. Fails on bytes that
/// are not a serialized 32-bit roaring bitmap.
pub(crate) fn union32(
    acc: &[u8],
    input: &[u8],
    scratch: &mut BitmapScratch,
    out: &mut Vec<u8>,
) -> Result<(), &'static str> {
    let BitmapScratch {
        words,
        left,
        right,
        out: result,
        payload,
    } = scratch;
    parse(acc, left)?;
    parse(input, right)?;
    words.resize(BITMAP_WORDS, 0);
    result.clear();
    payload.clear();

    let (mut i, mut j) = (0, 0);
    while i < left.len() || j < right.len() {
        let take_left = j == right.len() || (i < left.len() && left[i].key <= right[j].key);
        let take_right = i == left.len() || (j < right.len() && right[j].key <= left[i].key);
        words.fill(0);
        let (key, rule) = match (take_left, take_right) {
            (true, true) => {
                let (a, b) = (&left[i], &right[j]);
                add(acc, a, words);
                add(input, b, words);
                i += 1;
                j += 1;
                (a.key, Rule::Both(a.kind, b.kind))
            }
            (true, false) => {
                let a = &left[i];
                add(acc, a, words);
                i += 1;
                (a.key, Rule::One(a.kind))
            }
            _ => {
                let b = &right[j];
                add(input, b, words);
                j += 1;
                (b.key, Rule::One(b.kind))
            }
        };
        let (cardinality, runs) = count(words);
        if cardinality == 0 {
            return Err("a container is empty");
        }
        let kind = rule.after_run_optimize(cardinality, runs);
        let before = payload.len();
        encode(words, kind, runs, payload);
        result.push(OutContainer {
            key,
            cardinality,
            kind,
            payload_bytes: payload.len() - before,
        });
    }
    write(result, payload, out);
    Ok(())
}

/// Which of Java's `runOptimize` rules a result container follows.
#[derive(Clone, Copy)]
pub(super) enum Rule {
    One(Kind),
    Both(Kind, Kind),
}

impl Rule {
    pub(super) fn after_run_optimize(self, c: u32, r: u32) -> Kind {
        let kind_after_or = match self {
            Rule::One(kind) => kind,
            Rule::Both(Kind::Run, Kind::Bitmap) | Rule::Both(Kind::Bitmap, Kind::Run) => {
                Kind::Bitmap
            }
            Rule::Both(Kind::Run, _) | Rule::Both(_, Kind::Run) => Kind::Run,
            Rule::Both(Kind::Array, Kind::Array) if c <= ARRAY_MAX => Kind::Array,
            Rule::Both(_, _) => Kind::Bitmap,
        };
        let run_bytes = 2 + 4 * u64::from(r);
        let array_bytes = 2 * u64::from(c);
        let bitmap_bytes = BITMAP_BYTES as u64;
        match kind_after_or {
            Kind::Array if array_bytes > run_bytes => Kind::Run,
            Kind::Array => Kind::Array,
            Kind::Bitmap if run_bytes < bitmap_bytes => Kind::Run,
            Kind::Bitmap => Kind::Bitmap,
            Kind::Run if run_bytes <= bitmap_bytes.min(array_bytes + 2) => Kind::Run,
            Kind::Run if c <= ARRAY_MAX => Kind::Array,
            Kind::Run => Kind::Bitmap,
        }
    }
}

fn u16_at(bytes: &[u8], at: usize) -> Result<u16, &'static str> {
    bytes
        .get(at..at + 2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .ok_or("the value is truncated")
}

fn u32_at(bytes: &[u8], at: usize) -> Result<u32, &'static str> {
    bytes
        .get(at..at + 4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or("the value is truncated")
}

/// Reads the container directory of a serialized bitmap into `out`.
/// Like Java, it reads the payloads in order and ignores the offset table
/// and any trailing bytes.
fn parse(bytes: &[u8], out: &mut Vec<ContainerRef>) -> Result<(), &'static str> {
    out.clear();
    let cookie = u32_at(bytes, 0)?;
    let (size, run_flags, mut pos) = if cookie & 0xFFFF == SERIAL_COOKIE {
        let size = (cookie >> 16) as usize + 1;
        (size, Some(4), 4 + size.div_ceil(8))
    } else if cookie == SERIAL_COOKIE_NO_RUNCONTAINER {
        let size = u32_at(bytes, 4)? as usize;
        (size, None, 8)
    } else {
        return Err("the value is not a serialized 32-bit roaring bitmap (unknown cookie)");
    };
    if size > CONTAINERS_MAX {
        return Err("the value claims more than 65536 containers");
    }
    let directory = pos;
    pos += 4 * size;
    if run_flags.is_none() || size >= NO_OFFSET_THRESHOLD {
        pos += 4 * size;
    }
    for index in 0..size {
        let key = u16_at(bytes, directory + 4 * index)?;
        let cardinality = u32::from(u16_at(bytes, directory + 4 * index + 2)?) + 1;
        if let Some(last) = out.last() {
            if last.key >= key {
                return Err("the container keys are not increasing");
            }
        }
        let is_run = match run_flags {
            Some(flags) => {
                let byte = *bytes
                    .get(flags + index / 8)
                    .ok_or("the value is truncated")?;
                byte & (1 << (index % 8)) != 0
            }
            None => false,
        };
        let (kind, len) = if is_run {
            let runs = usize::from(u16_at(bytes, pos)?);
            (Kind::Run, 2 + 4 * runs)
        } else if cardinality <= ARRAY_MAX {
            (Kind::Array, 2 * cardinality as usize)
        } else {
            (Kind::Bitmap, BITMAP_BYTES)
        };
        if bytes.len() < pos + len {
            return Err("the value is truncated");
        }
        out.push(ContainerRef {
            key,
            kind,
            data: pos..pos + len,
        });
        pos += len;
    }
    Ok(())
}

/// ORs one container's values into `words`.
pub(super) fn add(bytes: &[u8], container: &ContainerRef, words: &mut [u64]) {
    let data = &bytes[container.data.clone()];
    match container.kind {
        Kind::Array => {
            for pair in data.chunks_exact(2) {
                let v = usize::from(u16::from_le_bytes([pair[0], pair[1]]));
                words[v / 64] |= 1 << (v % 64);
            }
        }
        Kind::Bitmap => {
            for (word, chunk) in words.iter_mut().zip(data.chunks_exact(8)) {
                let mut b = [0u8; 8];
                b.copy_from_slice(chunk);
                *word |= u64::from_le_bytes(b);
            }
        }
        Kind::Run => {
            for run in data[2..].chunks_exact(4) {
                let start = usize::from(u16::from_le_bytes([run[0], run[1]]));
                let length = usize::from(u16::from_le_bytes([run[2], run[3]]));
                // A run past 65535 is clipped, as a bit beyond the container cannot exist.
                let end = (start + length).min(65535);
                set_range(words, start, end);
            }
        }
    }
}

/// Sets bits `start..=end`.
fn set_range(words: &mut [u64], start: usize, end: usize) {
    let (first, last) = (start / 64, end / 64);
    for (index, word) in words.iter_mut().enumerate().take(last + 1).skip(first) {
        let lo = if index == first { start % 64 } else { 0 };
        let hi = if index == last { end % 64 } else { 63 };
        let width = hi - lo + 1;
        let mask = if width == 64 {
            u64::MAX
        } else {
            ((1u64 << width) - 1) << lo
        };
        *word |= mask;
    }
}

/// Cardinality and number of runs of a container's bits.
pub(super) fn count(words: &[u64]) -> (u32, u32) {
    let mut cardinality = 0;
    let mut runs = 0;
    let mut carry = 0u64;
    for &w in words {
        cardinality += w.count_ones();
        runs += (w & !((w << 1) | carry)).count_ones();
        carry = w >> 63;
    }
    (cardinality, runs)
}

/// Appends a container's payload in `kind`'s layout (the same in the
/// 32-bit format and in `Roaring64Bitmap`'s containers).
pub(super) fn encode(words: &[u64], kind: Kind, runs: u32, payload: &mut Vec<u8>) {
    match kind {
        Kind::Array => {
            for (index, &word) in words.iter().enumerate() {
                let mut w = word;
                while w != 0 {
                    let v = index * 64 + w.trailing_zeros() as usize;
                    payload.extend_from_slice(&(v as u16).to_le_bytes());
                    w &= w - 1;
                }
            }
        }
        Kind::Bitmap => {
            for &word in words {
                payload.extend_from_slice(&word.to_le_bytes());
            }
        }
        Kind::Run => {
            payload.extend_from_slice(&(runs as u16).to_le_bytes());
            let mut start = None;
            for v in 0..=BITMAP_WORDS * 64 {
                let set = v < BITMAP_WORDS * 64 && words[v / 64] & (1 << (v % 64)) != 0;
                match (set, start) {
                    (true, None) => start = Some(v),
                    (false, Some(s)) => {
                        payload.extend_from_slice(&(s as u16).to_le_bytes());
                        payload.extend_from_slice(&((v - 1 - s) as u16).to_le_bytes());
                        start = None;
                    }
                    _ => {}
                }
            }
        }
    }
}

/// Writes header, directory, offsets and payloads (Java's
/// `RoaringArray.serialize`).
fn write(containers: &[OutContainer], payload: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let size = containers.len();
    let has_run = containers.iter().any(|c| c.kind == Kind::Run);
    let mut header = if has_run {
        let cookie = SERIAL_COOKIE | ((size as u32 - 1) << 16);
        out.extend_from_slice(&cookie.to_le_bytes());
        let flags_at = out.len();
        out.resize(flags_at + size.div_ceil(8), 0);
        for (index, c) in containers.iter().enumerate() {
            if c.kind == Kind::Run {
                out[flags_at + index / 8] |= 1 << (index % 8);
            }
        }
        4 + size.div_ceil(8) + 4 * size
    } else {
        out.extend_from_slice(&SERIAL_COOKIE_NO_RUNCONTAINER.to_le_bytes());
        out.extend_from_slice(&(size as u32).to_le_bytes());
        8 + 4 * size
    };
    for c in containers {
        out.extend_from_slice(&c.key.to_le_bytes());
        out.extend_from_slice(&((c.cardinality - 1) as u16).to_le_bytes());
    }
    if !has_run || size >= NO_OFFSET_THRESHOLD {
        header += 4 * size;
        let mut offset = header;
        for c in containers {
            out.extend_from_slice(&(offset as u32).to_le_bytes());
            offset += c.payload_bytes;
        }
    }
    debug_assert_eq!(out.len(), header);
    out.extend_from_slice(payload);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serialize(containers: &[(u16, Kind, &[u16])]) -> Vec<u8> {
        // Builds a serialized bitmap with the given container kinds, from
        // sorted values; used to feed inputs of every kind.
        let mut out = Vec::new();
        let mut payload = Vec::new();
        let mut meta = Vec::new();
        for &(key, kind, values) in containers {
            let mut words = vec![0u64; BITMAP_WORDS];
            for &v in values {
                words[usize::from(v) / 64] |= 1 << (v % 64);
            }
            let (cardinality, runs) = count(&words);
            let before = payload.len();
            encode(&words, kind, runs, &mut payload);
            meta.push(OutContainer {
                key,
                cardinality,
                kind,
                payload_bytes: payload.len() - before,
            });
        }
        write(&meta, &payload, &mut out);
        out
    }

    fn union(a: &[u8], b: &[u8]) -> Vec<u8> {
        let mut scratch = BitmapScratch::default();
        let mut out = Vec::new();
        union32(a, b, &mut scratch, &mut out).unwrap();
        out
    }

    fn values(bytes: &[u8]) -> Vec<u32> {
        let mut refs = Vec::new();
        parse(bytes, &mut refs).unwrap();
        let mut out = Vec::new();
        for r in &refs {
            let mut words = vec![0u64; BITMAP_WORDS];
            add(bytes, r, &mut words);
            for v in 0..65536u32 {
                if words[v as usize / 64] & (1 << (v % 64)) != 0 {
                    out.push((u32::from(r.key) << 16) | v);
                }
            }
        }
        out
    }

    #[test]
    fn empty_bitmaps_union_to_the_eight_byte_empty_bitmap() {
        let empty = serialize(&[]);
        assert_eq!(empty, [0x3A, 0x30, 0, 0, 0, 0, 0, 0]);
        assert_eq!(union(&empty, &empty), empty);
    }

    #[test]
    fn union_holds_the_values_of_both_sides() {
        let a = serialize(&[(0, Kind::Array, &[1, 5, 9]), (2, Kind::Array, &[7])]);
        let b = serialize(&[(0, Kind::Array, &[2, 5]), (3, Kind::Array, &[0])]);
        let u = union(&a, &b);
        assert_eq!(values(&u), [1, 2, 5, 9, (2 << 16) | 7, 3 << 16], "{u:?}");
    }

    #[test]
    fn array_union_becomes_a_run_container_only_when_strictly_smaller() {
        // {0,1,2} as array: 6 bytes vs run 6 bytes: stays an array (rule A).
        let a = serialize(&[(0, Kind::Array, &[0, 1])]);
        let b = serialize(&[(0, Kind::Array, &[2])]);
        let u = union(&a, &b);
        assert_eq!(u32_at(&u, 0).unwrap(), SERIAL_COOKIE_NO_RUNCONTAINER);
        // {0,1,2,3}: 8 bytes vs 6: becomes a run container.
        let b = serialize(&[(0, Kind::Array, &[2, 3])]);
        let u = union(&a, &b);
        assert_eq!(u32_at(&u, 0).unwrap() & 0xFFFF, SERIAL_COOKIE);
        assert_eq!(values(&u), [0, 1, 2, 3]);
    }

    #[test]
    fn a_run_input_keeps_a_tie_as_a_run_container() {
        // {0,1,2} after run|array: 6 bytes as run <= 8 as array (rule R).
        let a = serialize(&[(0, Kind::Run, &[0, 1])]);
        let b = serialize(&[(0, Kind::Array, &[2])]);
        let u = union(&a, &b);
        assert_eq!(u32_at(&u, 0).unwrap() & 0xFFFF, SERIAL_COOKIE);
        // {0, 2}: run 10 bytes > array 6: an array.
        let b = serialize(&[(0, Kind::Array, &[2])]);
        let a = serialize(&[(0, Kind::Run, &[0])]);
        let u = union(&a, &b);
        assert_eq!(u32_at(&u, 0).unwrap(), SERIAL_COOKIE_NO_RUNCONTAINER);
    }

    #[test]
    fn dense_unions_are_bitmaps_or_runs() {
        let evens: Vec<u16> = (0..10_000u16).map(|v| v * 2).collect();
        let a = serialize(&[(1, Kind::Bitmap, &evens)]);
        let b = serialize(&[(1, Kind::Array, &[1])]);
        let u = union(&a, &b);
        // 9_999 runs: 39_998 bytes as runs, so it stays a bitmap.
        assert_eq!(u32_at(&u, 0).unwrap(), SERIAL_COOKIE_NO_RUNCONTAINER);
        assert_eq!(u.len(), 8 + 4 + 4 + BITMAP_BYTES);
        let all: Vec<u16> = (0..=u16::MAX).collect();
        let full = serialize(&[(1, Kind::Bitmap, &all)]);
        let u = union(&full, &b);
        // A full container is one run: 6 bytes.
        assert_eq!(
            u,
            [0x3B, 0x30, 0, 0, 1, 1, 0, 0xFF, 0xFF, 1, 0, 0, 0, 0xFF, 0xFF]
        );
    }

    #[test]
    fn garbage_is_refused() {
        let mut scratch = BitmapScratch::default();
        let mut out = Vec::new();
        let good = serialize(&[(0, Kind::Array, &[1])]);
        assert!(union32(&[1, 2, 3], &good, &mut scratch, &mut out).is_err());
        assert!(union32(&good, &good[..good.len() - 1], &mut scratch, &mut out).is_err());
        assert!(union32(&[0, 0, 0, 0, 0, 0, 0, 0], &good, &mut scratch, &mut out).is_err());
    }
}

/// Differential check against Java: `rbm32_java_1_3_0.txt` holds lines
/// `acc input union` (hex) written by RoaringBitmap 1.3.0 (Fluss's
/// version) doing what `FieldRoaringBitmap32Agg` does: deserialize both,
/// `acc.or(input)`, `runOptimize()`, serialize. Inputs were serialized with
/// and without `runOptimize`, so every container kind meets every other.
#[cfg(test)]
mod java_vectors {
    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    pub(super) fn check(vectors: &str) -> usize {
        let mut scratch = BitmapScratch::default();
        let mut out = Vec::new();
        let mut count = 0;
        for (line_no, line) in vectors.lines().enumerate() {
            let mut parts = line.split(' ').map(unhex);
            let (acc, input, expected) = (
                parts.next().unwrap(),
                parts.next().unwrap(),
                parts.next().unwrap(),
            );
            union32(&acc, &input, &mut scratch, &mut out).unwrap();
            assert_eq!(out, expected, "line {}", line_no + 1);
            count += 1;
        }
        count
    }

    #[test]
    fn unions_match_java_roaring_bitmap_byte_for_byte() {
        assert_eq!(check(include_str!("rbm32_java_1_3_0.txt")), 120);
    }

    #[test]
    #[ignore = "needs a vector file: RBM32_VECTORS=path (see the module doc)"]
    fn unions_match_a_larger_java_vector_file() {
        let path = std::env::var("RBM32_VECTORS").expect("RBM32_VECTORS");
        let vectors = std::fs::read_to_string(path).unwrap();
        assert!(check(&vectors) > 0);
    }
}
