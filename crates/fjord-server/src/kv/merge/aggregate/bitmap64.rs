//! `rbm64`: the union of two serialized `Roaring64Bitmap`s, producing the
//! bytes Fluss's server produces.
//!
//! Fluss (`FieldRoaringBitmap64Agg`, `RoaringBitmapUtils`, the same at
//! 0.9.1 and main) deserializes both values into Java `Roaring64Bitmap`s
//! (RoaringBitmap 1.3.0, the ART-based class, not `Roaring64NavigableMap`)
//! with `deserialize(ByteBuffer)`, ORs the input into the accumulator, calls
//! `runOptimize()` and serializes with `serialize(DataOutput)`. That is the
//! class's own format (not the portable one), and it is a dump of Java's
//! in-memory structure, little-endian throughout:
//!
//! - one byte: 0 for an empty bitmap (nothing follows), else 1;
//! - the ART of 48-bit high parts: its key count (i64), then its nodes in
//!   pre-order. A node is a header — type (0..=3: Node4/16/48/256, 4: leaf),
//!   child count (i16), prefix length (i8) and prefix — and a body: the key
//!   bytes of a Node4/Node16 (in Java's packed ints, so reversed within each
//!   4- or 8-byte word), the 256-byte child index of a Node48 (reversed within
//!   each 8 bytes), the 256-bit child mask of a Node256, or a leaf's 6-byte
//!   high part (big-endian) and container index (i64);
//! - the container store: a list of slot arrays (each: a trim byte, written
//!   0xFE, the array length, then per slot 0 for empty or 1, the container
//!   type (0 run, 1 bitmap, 2 array), its cardinality (i32) and its payload),
//!   then the stored container count (i64) and the indices of the last slot
//!   used (two i32).
//!
//! So the bytes depend on the accumulator's history, not only on the set:
//! the union keeps the accumulator's tree and slots (with their spare
//! capacity, empty slots and stale key bytes), inserts each high part the
//! input adds the way Java's ART does (splitting prefixes, growing Node4 →
//! Node16 → Node48 → Node256) and stores its container in the next slot.
//! This module replays exactly that.
//!
//! Container kinds follow `bitmap.rs`'s rules with one difference:
//! `Roaring64Bitmap.runOptimize` keeps a run container as it is (it only
//! replaces a container by a run container), so a container on one side only
//! that is a run container stays one even when an array would be smaller.
//! A container on both sides is the OR's result (`ior`), whose kind follows
//! the same rules as in the 32-bit bitmap.
//!
//! Values Java would never write (keys out of order, a tree whose paths
//! disagree with its leaves, a container whose bytes contradict its
//! cardinality, leaves pointing at empty or shared slots) are refused with
//! an error rather than reproducing whatever Java would do with them.

use super::bitmap::{add, count, encode, ContainerRef, Kind, Rule, BITMAP_BYTES, BITMAP_WORDS};

/// Bytes of a high part (a leaf's key).
const KEY_BYTES: usize = 6;
/// Java's `Containers.MAX_JVM_ARRAY_OFFSET`: past this slot a new array starts.
const MAX_JVM_ARRAY_OFFSET: i32 = i32::MAX - 9;
/// The trim byte Java writes before each slot array (`NOT_TRIMMED_MARK`).
const NOT_TRIMMED_MARK: u8 = 0xFE;
/// A Node48 child-index byte with no child.
const NODE48_EMPTY: u8 = 0xFF;

/// What a node is, with the raw bytes Java keeps for it.
#[derive(Clone, Debug)]
enum Body {
    /// A leaf: the 48-bit high part (big-endian) and its container index.
    Leaf {
        key: [u8; KEY_BYTES],
        container: i64,
    },
    /// Key bytes by position; positions past the child count keep whatever
    /// Java left there (it writes them too).
    Node4 {
        keys: [u8; 4],
    },
    Node16 {
        keys: [u8; 16],
    },
    /// Per key byte, the slot of its child, or 0xFF.
    Node48 {
        index: Box<[u8; 256]>,
    },
    /// Bit `k` set when key byte `k` has a child.
    Node256 {
        mask: [u64; 4],
    },
}

impl Body {
    fn ordinal(&self) -> u8 {
        match self {
            Body::Node4 { .. } => 0,
            Body::Node16 { .. } => 1,
            Body::Node48 { .. } => 2,
            Body::Node256 { .. } => 3,
            Body::Leaf { .. } => 4,
        }
    }
}

#[derive(Clone, Debug)]
struct Node {
    body: Body,
    /// The header's child count, as written (a leaf keeps what it read).
    count: i16,
    /// The compressed path (for a leaf: bytes Java keeps but never reads).
    prefix: Vec<u8>,
    /// Children by ascending key byte (empty for a leaf).
    children: Vec<(u8, usize)>,
}

impl Node {
    fn leaf(key: [u8; KEY_BYTES], container: i64) -> Self {
        Node {
            body: Body::Leaf { key, container },
            count: 0,
            prefix: Vec::new(),
            children: Vec::new(),
        }
    }
}

/// One slot of the container store.
#[derive(Clone, Debug)]
enum Slot {
    Empty,
    /// An accumulator container the input does not touch.
    Acc(ContainerRef),
    /// A container the input adds (Java stores a clone).
    Input(ContainerRef),
    /// An accumulator container ORed with the input's for the same key.
    Both(ContainerRef, ContainerRef),
}

/// A deserialized `Roaring64Bitmap`: its ART and its container store.
#[derive(Debug, Default)]
struct Bitmap64 {
    /// Whether the value was the one-byte empty bitmap.
    empty: bool,
    key_size: i64,
    nodes: Vec<Node>,
    root: Option<usize>,
    arrays: Vec<Vec<Slot>>,
    container_size: i64,
    first_level: i32,
    second_level: i32,
}

/// Buffers reused across unions.
#[derive(Debug, Default)]
pub(crate) struct Bitmap64Scratch {
    words: Vec<u64>,
    acc: Bitmap64,
    input: Bitmap64,
    /// The input's leaves in key order: high part and container.
    leaves: Vec<([u8; KEY_BYTES], ContainerRef)>,
}

/// Writes into `out` the serialized union of the serialized
/// `Roaring64Bitmap`s `acc` and `input`, byte for byte as Fluss would store
/// it. Fails on bytes that are not a bitmap Java could have written.
pub(crate) fn union64(
    acc: &[u8],
    input: &[u8],
    scratch: &mut Bitmap64Scratch,
    out: &mut Vec<u8>,
) -> Result<(), &'static str> {
    let Bitmap64Scratch {
        words,
        acc: left,
        input: right,
        leaves,
    } = scratch;
    parse(acc, left, Slot::Acc)?;
    parse(input, right, Slot::Input)?;
    right.leaves(leaves)?;
    for (key, container) in leaves.drain(..) {
        match left.find(&key) {
            Some(index) => {
                let slot = left.slot_mut(index)?;
                match std::mem::replace(slot, Slot::Empty) {
                    Slot::Acc(mine) => *slot = Slot::Both(mine, container),
                    Slot::Empty => return Err("a leaf points to an empty container slot"),
                    _ => return Err("two leaves share a container slot"),
                }
            }
            None => {
                let index = left.add_container(Slot::Input(container))?;
                let root = left.root;
                let root = left.insert(root, &key, 0, index)?;
                left.root = Some(root);
                left.key_size = left.key_size.wrapping_add(1);
            }
        }
    }
    words.resize(BITMAP_WORDS, 0);
    left.write(acc, input, words, out);
    Ok(())
}

/// Little-endian reads over a value, failing past its end.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        let end = self.pos.checked_add(n).ok_or("the value is truncated")?;
        let bytes = self
            .bytes
            .get(self.pos..end)
            .ok_or("the value is truncated")?;
        self.pos = end;
        Ok(bytes)
    }

    fn u8(&mut self) -> Result<u8, &'static str> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, &'static str> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Result<i32, &'static str> {
        let mut b = [0u8; 4];
        b.copy_from_slice(self.take(4)?);
        Ok(i32::from_le_bytes(b))
    }

    fn i64(&mut self) -> Result<i64, &'static str> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(i64::from_le_bytes(b))
    }

    fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }
}

/// Deserializes `bytes` into `into` (Java's `HighLowContainer.deserialize`),
/// wrapping each container in a slot with `slot`. Like Java, it ignores
/// trailing bytes.
fn parse(
    bytes: &[u8],
    into: &mut Bitmap64,
    slot: fn(ContainerRef) -> Slot,
) -> Result<(), &'static str> {
    into.nodes.clear();
    into.arrays.clear();
    into.root = None;
    into.key_size = 0;
    into.container_size = 0;
    into.first_level = -1;
    into.second_level = 0;
    let mut r = Reader { bytes, pos: 0 };
    into.empty = r.u8()? == 0;
    if into.empty {
        return Ok(());
    }
    into.key_size = r.i64()?;
    let mut path = [0u8; KEY_BYTES];
    into.root = Some(parse_node(&mut r, into, 0, &mut path)?);
    let arrays = r.i32()?;
    if arrays < 0 {
        return Err("the container store has a negative size");
    }
    for _ in 0..arrays {
        // The trim byte: Java reads and ignores it.
        r.u8()?;
        let len = r.i32()?;
        // Every slot takes at least a byte: a longer array is truncated.
        if len < 0 || len as usize > r.remaining() {
            return Err("the value is truncated");
        }
        let mut slots = Vec::with_capacity(len as usize);
        for _ in 0..len {
            slots.push(match r.u8()? {
                0 => Slot::Empty,
                1 => slot(parse_container(&mut r)?),
                _ => return Err("a container slot has an unknown null mark"),
            });
        }
        into.arrays.push(slots);
    }
    into.container_size = r.i64()?;
    into.first_level = r.i32()?;
    into.second_level = r.i32()?;
    Ok(())
}

/// Reads one node and its subtree; `path` holds the key bytes above
/// `depth`, which every leaf below must carry.
fn parse_node(
    r: &mut Reader<'_>,
    tree: &mut Bitmap64,
    depth: usize,
    path: &mut [u8; KEY_BYTES],
) -> Result<usize, &'static str> {
    let ordinal = r.u8()?;
    let count = r.u16()? as i16;
    let prefix_len = r.u8()? as i8;
    if prefix_len < 0 {
        return Err("an ART node has a negative prefix length");
    }
    let prefix = r.take(prefix_len as usize)?.to_vec();
    if ordinal == 4 {
        let mut key = [0u8; KEY_BYTES];
        key.copy_from_slice(r.take(KEY_BYTES)?);
        let container = r.i64()?;
        if key[..depth] != path[..depth] {
            return Err("an ART leaf is not where its key belongs");
        }
        tree.nodes.push(Node {
            body: Body::Leaf { key, container },
            count,
            prefix,
            children: Vec::new(),
        });
        return Ok(tree.nodes.len() - 1);
    }
    let below = depth + prefix.len();
    if below >= KEY_BYTES {
        return Err("an ART node's prefix runs past the 48-bit key");
    }
    path[depth..below].copy_from_slice(&prefix);
    let (body, keys, capacity) = match ordinal {
        0 => {
            let b = r.take(4)?;
            let keys = [b[3], b[2], b[1], b[0]];
            (Body::Node4 { keys }, positions(&keys, count)?, 4)
        }
        1 => {
            let b = r.take(16)?;
            let mut keys = [0u8; 16];
            for m in 0..8 {
                keys[7 - m] = b[m];
                keys[15 - m] = b[8 + m];
            }
            (Body::Node16 { keys }, positions(&keys, count)?, 16)
        }
        2 => {
            let b = r.take(256)?;
            let mut index = [0u8; 256];
            for (word, chunk) in b.chunks_exact(8).enumerate() {
                for m in 0..8 {
                    index[8 * word + 7 - m] = chunk[m];
                }
            }
            let mut keys = Vec::new();
            let mut used = 0u64;
            for (k, &slot) in index.iter().enumerate() {
                if slot != NODE48_EMPTY {
                    if slot >= 48 || used & (1 << slot) != 0 {
                        return Err("an ART Node48 has a bad child index");
                    }
                    used |= 1 << slot;
                    keys.push(k as u8);
                }
            }
            (
                Body::Node48 {
                    index: Box::new(index),
                },
                keys,
                48,
            )
        }
        3 => {
            let b = r.take(32)?;
            let mut mask = [0u64; 4];
            let mut keys = Vec::new();
            for (i, chunk) in b.chunks_exact(8).enumerate() {
                let mut w = [0u8; 8];
                w.copy_from_slice(chunk);
                mask[i] = u64::from_le_bytes(w);
                let mut bits = mask[i];
                while bits != 0 {
                    keys.push((i * 64) as u8 + bits.trailing_zeros() as u8);
                    bits &= bits - 1;
                }
            }
            (Body::Node256 { mask }, keys, 256)
        }
        _ => return Err("an ART node has an unknown type"),
    };
    if count < 0 || count as usize != keys.len() || keys.len() > capacity {
        return Err("an ART node's child count disagrees with its keys");
    }
    let mut children = Vec::with_capacity(keys.len());
    for k in keys {
        path[below] = k;
        let child = parse_node(r, tree, below + 1, path)?;
        children.push((k, child));
    }
    tree.nodes.push(Node {
        body,
        count,
        prefix,
        children,
    });
    Ok(tree.nodes.len() - 1)
}

/// The first `count` key bytes of a Node4/Node16, which must increase.
fn positions(raw: &[u8], count: i16) -> Result<Vec<u8>, &'static str> {
    let n = usize::try_from(count).map_err(|_| "an ART node has a negative child count")?;
    let keys = raw
        .get(..n)
        .ok_or("an ART node has more children than it holds")?;
    if keys.windows(2).any(|w| w[0] >= w[1]) {
        return Err("an ART node's keys are not increasing");
    }
    Ok(keys.to_vec())
}

/// Reads one container (after its null mark), checking it is one Java
/// writes: array values increasing, runs ordered and apart, a bitmap's
/// cardinality its number of bits.
fn parse_container(r: &mut Reader<'_>) -> Result<ContainerRef, &'static str> {
    let kind = r.u8()?;
    let cardinality = r.i32()?;
    let start = r.pos;
    match kind {
        0 => {
            // Java recomputes a run container's cardinality: the stored one is unused.
            let runs = usize::from(r.u16()?);
            let data = r.take(4 * runs)?;
            let mut next = 0u32;
            for run in data.chunks_exact(4) {
                let value = u32::from(u16::from_le_bytes([run[0], run[1]]));
                let length = u32::from(u16::from_le_bytes([run[2], run[3]]));
                if value < next || value + length > 65535 {
                    return Err("a run container's runs overlap or overflow");
                }
                next = value + length + 2;
            }
            Ok(ContainerRef {
                key: 0,
                kind: Kind::Run,
                data: start..r.pos,
            })
        }
        1 => {
            let data = r.take(BITMAP_BYTES)?;
            let ones: u32 = data.iter().map(|b| b.count_ones()).sum();
            if i64::from(ones) != i64::from(cardinality) {
                return Err("a bitmap container's cardinality is wrong");
            }
            Ok(ContainerRef {
                key: 0,
                kind: Kind::Bitmap,
                data: start..r.pos,
            })
        }
        2 => {
            if !(0..=65536).contains(&cardinality) {
                return Err("an array container's cardinality is out of range");
            }
            let data = r.take(2 * cardinality as usize)?;
            let mut previous = None;
            for pair in data.chunks_exact(2) {
                let v = u16::from_le_bytes([pair[0], pair[1]]);
                if previous.is_some_and(|p| p >= v) {
                    return Err("an array container's values are not increasing");
                }
                previous = Some(v);
            }
            Ok(ContainerRef {
                key: 0,
                kind: Kind::Array,
                data: start..r.pos,
            })
        }
        _ => Err("a container has an unknown type"),
    }
}

/// How Java's `Roaring64Bitmap.runOptimize` leaves a result container.
fn final_kind(slot: &Slot, cardinality: u32, runs: u32) -> Kind {
    match slot {
        Slot::Both(a, b) => Rule::Both(a.kind, b.kind).after_run_optimize(cardinality, runs),
        // A run container is never replaced by a non-run one.
        Slot::Acc(c) | Slot::Input(c) if c.kind == Kind::Run => Kind::Run,
        Slot::Acc(c) | Slot::Input(c) => Rule::One(c.kind).after_run_optimize(cardinality, runs),
        Slot::Empty => unreachable!("empty slots have no container"),
    }
}

impl Bitmap64 {
    /// The container index `key` maps to (Java's `Art.findByKey`).
    fn find(&self, key: &[u8; KEY_BYTES]) -> Option<i64> {
        let mut id = self.root?;
        let mut depth = 0;
        loop {
            let node = &self.nodes[id];
            if let Body::Leaf {
                key: leaf,
                container,
            } = &node.body
            {
                return (leaf[depth..] == key[depth..]).then_some(*container);
            }
            let below = depth + node.prefix.len();
            if key[depth..below] != node.prefix[..] {
                return None;
            }
            let k = key[below];
            id = node
                .children
                .binary_search_by_key(&k, |c| c.0)
                .ok()
                .map(|at| node.children[at].1)?;
            depth = below + 1;
        }
    }

    /// The input's leaves in key order, each with its container (Java's
    /// key iterator; a leaf without a container fails there too).
    fn leaves(&self, out: &mut Vec<([u8; KEY_BYTES], ContainerRef)>) -> Result<(), &'static str> {
        out.clear();
        let Some(root) = self.root else {
            return Ok(());
        };
        let mut stack = vec![root];
        while let Some(id) = stack.pop() {
            let node = &self.nodes[id];
            match &node.body {
                Body::Leaf { key, container } => {
                    let container = match self.slot(*container)? {
                        Slot::Input(c) | Slot::Acc(c) => c.clone(),
                        _ => return Err("a leaf points to an empty container slot"),
                    };
                    out.push((*key, container));
                }
                _ => stack.extend(node.children.iter().rev().map(|c| c.1)),
            }
        }
        Ok(())
    }

    fn slot(&self, index: i64) -> Result<&Slot, &'static str> {
        let (first, second) = ((index >> 32) as i32, index as i32);
        usize::try_from(first)
            .ok()
            .and_then(|f| self.arrays.get(f))
            .and_then(|a| usize::try_from(second).ok().and_then(|s| a.get(s)))
            .ok_or("a leaf points past the container store")
    }

    fn slot_mut(&mut self, index: i64) -> Result<&mut Slot, &'static str> {
        let (first, second) = ((index >> 32) as i32, index as i32);
        usize::try_from(first)
            .ok()
            .and_then(|f| self.arrays.get_mut(f))
            .and_then(|a| usize::try_from(second).ok().and_then(|s| a.get_mut(s)))
            .ok_or("a leaf points past the container store")
    }

    /// Stores a container in the next slot (Java's `Containers.addContainer`,
    /// with its growth by half) and returns its index.
    fn add_container(&mut self, slot: Slot) -> Result<i64, &'static str> {
        let broken = "the container store's last-slot indices are inconsistent";
        if self.first_level == -1 || self.second_level.wrapping_add(1) == MAX_JVM_ARRAY_OFFSET {
            // Java appends an array and moves to the next one: only the
            // same array when the indices were at the last array.
            if i64::from(self.first_level) + 1 != self.arrays.len() as i64 {
                return Err(broken);
            }
            self.arrays.push(vec![Slot::Empty]);
            self.first_level += 1;
            self.second_level = 0;
        } else {
            self.second_level = self.second_level.checked_add(1).ok_or(broken)?;
        }
        let array = usize::try_from(self.first_level)
            .ok()
            .and_then(|f| self.arrays.get_mut(f))
            .ok_or(broken)?;
        let at = usize::try_from(self.second_level).map_err(|_| broken)?;
        if at > array.len() {
            // Java never leaves the last-slot index past the array's end.
            return Err(broken);
        }
        if at == array.len() {
            let old = array.len();
            let grown = (old + (old >> 1)).max(at + 1);
            array.resize(grown, Slot::Empty);
        }
        if !matches!(array[at], Slot::Empty) {
            return Err(broken);
        }
        array[at] = slot;
        self.container_size = self.container_size.wrapping_add(1);
        Ok((i64::from(self.first_level) << 32) | i64::from(self.second_level))
    }

    /// Inserts `key` below `node` at `depth` (Java's `Art.insert`); returns
    /// the node now standing where `node` was.
    fn insert(
        &mut self,
        node: Option<usize>,
        key: &[u8; KEY_BYTES],
        depth: usize,
        container: i64,
    ) -> Result<usize, &'static str> {
        let Some(id) = node else {
            self.nodes.push(Node::leaf(*key, container));
            return Ok(self.nodes.len() - 1);
        };
        if let Body::Leaf { key: leaf, .. } = self.nodes[id].body {
            let common = (depth..KEY_BYTES)
                .find(|&i| leaf[i] != key[i])
                .ok_or("a high part is in the tree twice")?
                - depth;
            self.nodes[id].prefix.clear();
            let split = self.new_node4(&key[depth..depth + common]);
            self.add_child(split, leaf[depth + common], id);
            let fresh = self.push_leaf(key, container);
            self.add_child(split, key[depth + common], fresh);
            return Ok(split);
        }
        let prefix_len = self.nodes[id].prefix.len();
        let mismatch = (0..prefix_len).find(|&i| self.nodes[id].prefix[i] != key[depth + i]);
        if let Some(at) = mismatch {
            let prefix = std::mem::take(&mut self.nodes[id].prefix);
            let split = self.new_node4(&prefix[..at]);
            self.nodes[id].prefix = prefix[at + 1..].to_vec();
            self.add_child(split, prefix[at], id);
            let fresh = self.push_leaf(key, container);
            self.add_child(split, key[depth + at], fresh);
            return Ok(split);
        }
        let depth = depth + prefix_len;
        let k = key[depth];
        let node = &self.nodes[id];
        match node.children.binary_search_by_key(&k, |c| c.0) {
            Ok(at) => {
                let child = node.children[at].1;
                let fresh = self.insert(Some(child), key, depth + 1, container)?;
                self.nodes[id].children[at].1 = fresh;
            }
            Err(_) => {
                let fresh = self.push_leaf(key, container);
                self.add_child(id, k, fresh);
            }
        }
        Ok(id)
    }

    fn push_leaf(&mut self, key: &[u8; KEY_BYTES], container: i64) -> usize {
        self.nodes.push(Node::leaf(*key, container));
        self.nodes.len() - 1
    }

    fn new_node4(&mut self, prefix: &[u8]) -> usize {
        self.nodes.push(Node {
            body: Body::Node4 { keys: [0; 4] },
            count: 0,
            prefix: prefix.to_vec(),
            children: Vec::new(),
        });
        self.nodes.len() - 1
    }

    /// Adds a child under key byte `k` to an inner node, growing it to the
    /// next node type when full (Java's `NodeN.insert`); the node keeps its
    /// id, as its parent would point at the grown node.
    fn add_child(&mut self, id: usize, k: u8, child: usize) {
        let node = &mut self.nodes[id];
        let n = node.children.len();
        // Growth: the new node starts from the old one's keys; a Node4's
        // four key bytes become a Node16's first four, the rest zero.
        match &node.body {
            Body::Node4 { keys } if n == 4 => {
                let mut wide = [0u8; 16];
                wide[..4].copy_from_slice(keys);
                node.body = Body::Node16 { keys: wide };
            }
            Body::Node16 { .. } if n == 16 => {
                let mut index = [NODE48_EMPTY; 256];
                for (slot, &(key, _)) in node.children.iter().enumerate() {
                    index[usize::from(key)] = slot as u8;
                }
                node.body = Body::Node48 {
                    index: Box::new(index),
                };
            }
            Body::Node48 { .. } if n == 48 => {
                let mut mask = [0u64; 4];
                for &(key, _) in &node.children {
                    mask[usize::from(key) / 64] |= 1 << (key % 64);
                }
                node.body = Body::Node256 { mask };
            }
            _ => {}
        }
        let at = node.children.partition_point(|c| c.0 < k);
        match &mut node.body {
            Body::Node4 { keys: raw } => {
                node.children.insert(at, (k, child));
                for (i, c) in node.children.iter().enumerate() {
                    raw[i] = c.0;
                }
            }
            Body::Node16 { keys: raw } => {
                node.children.insert(at, (k, child));
                for (i, c) in node.children.iter().enumerate() {
                    raw[i] = c.0;
                }
            }
            Body::Node48 { index } => {
                // Java takes the slot numbered by the child count, or the
                // first free one if that is taken.
                let mut used = 0u64;
                for &(key, _) in &node.children {
                    used |= 1 << index[usize::from(key)];
                }
                let slot = if used & (1 << n) == 0 {
                    n
                } else {
                    (!used).trailing_zeros() as usize
                };
                index[usize::from(k)] = slot as u8;
                node.children.insert(at, (k, child));
            }
            Body::Node256 { mask } => {
                mask[usize::from(k) / 64] |= 1 << (k % 64);
                node.children.insert(at, (k, child));
            }
            Body::Leaf { .. } => unreachable!("leaves have no children"),
        }
        node.count = node.count.wrapping_add(1);
    }

    /// Serializes (Java's `HighLowContainer.serialize(DataOutput)` after
    /// `runOptimize`); container payloads come from `acc` and `input`.
    fn write(&self, acc: &[u8], input: &[u8], words: &mut [u64], out: &mut Vec<u8>) {
        out.clear();
        let Some(root) = self.root else {
            out.push(0);
            return;
        };
        out.push(1);
        out.extend_from_slice(&self.key_size.to_le_bytes());
        self.write_node(root, out);
        out.extend_from_slice(&(self.arrays.len() as i32).to_le_bytes());
        for array in &self.arrays {
            out.push(NOT_TRIMMED_MARK);
            out.extend_from_slice(&(array.len() as i32).to_le_bytes());
            for slot in array {
                words.fill(0);
                match slot {
                    Slot::Empty => {
                        out.push(0);
                        continue;
                    }
                    Slot::Acc(c) => add(acc, c, words),
                    Slot::Input(c) => add(input, c, words),
                    Slot::Both(a, b) => {
                        add(acc, a, words);
                        add(input, b, words);
                    }
                }
                let (cardinality, runs) = count(words);
                let kind = final_kind(slot, cardinality, runs);
                out.push(1);
                out.push(match kind {
                    Kind::Run => 0,
                    Kind::Bitmap => 1,
                    Kind::Array => 2,
                });
                out.extend_from_slice(&cardinality.to_le_bytes());
                encode(words, kind, runs, out);
            }
        }
        out.extend_from_slice(&self.container_size.to_le_bytes());
        out.extend_from_slice(&self.first_level.to_le_bytes());
        out.extend_from_slice(&self.second_level.to_le_bytes());
    }

    fn write_node(&self, id: usize, out: &mut Vec<u8>) {
        let node = &self.nodes[id];
        out.push(node.body.ordinal());
        out.extend_from_slice(&node.count.to_le_bytes());
        out.push(node.prefix.len() as u8);
        out.extend_from_slice(&node.prefix);
        match &node.body {
            Body::Leaf { key, container } => {
                out.extend_from_slice(key);
                out.extend_from_slice(&container.to_le_bytes());
            }
            Body::Node4 { keys } => out.extend(keys.iter().rev()),
            Body::Node16 { keys } => {
                out.extend(keys[..8].iter().rev());
                out.extend(keys[8..].iter().rev());
            }
            Body::Node48 { index } => {
                for chunk in index.chunks_exact(8) {
                    out.extend(chunk.iter().rev());
                }
            }
            Body::Node256 { mask } => {
                for word in mask {
                    out.extend_from_slice(&word.to_le_bytes());
                }
            }
        }
        for &(_, child) in &node.children {
            self.write_node(child, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn union(a: &[u8], b: &[u8]) -> Result<Vec<u8>, &'static str> {
        let mut scratch = Bitmap64Scratch::default();
        let mut out = Vec::new();
        union64(a, b, &mut scratch, &mut out)?;
        Ok(out)
    }

    /// The set a serialized value holds.
    pub(super) fn values(bytes: &[u8]) -> BTreeSet<u64> {
        let mut bitmap = Bitmap64::default();
        parse(bytes, &mut bitmap, Slot::Acc).unwrap();
        let mut leaves = Vec::new();
        bitmap.leaves(&mut leaves).unwrap();
        let mut out = BTreeSet::new();
        let mut words = vec![0u64; BITMAP_WORDS];
        for (key, container) in leaves {
            let mut high = [0u8; 8];
            high[..KEY_BYTES].copy_from_slice(&key);
            let high = u64::from_be_bytes(high);
            words.fill(0);
            add(bytes, &container, &mut words);
            for (i, &w) in words.iter().enumerate() {
                let mut w = w;
                while w != 0 {
                    out.insert(high | (i as u64 * 64 + u64::from(w.trailing_zeros())));
                    w &= w - 1;
                }
            }
        }
        out
    }

    /// A value built by unions of single-element bitmaps, the way Java
    /// would build it by adding values one high part at a time.
    pub(super) fn build(values: &[u64]) -> Vec<u8> {
        let mut acc = vec![0];
        for &v in values {
            let mut one = vec![1];
            one.extend_from_slice(&1i64.to_le_bytes());
            // A root leaf with container 0.
            one.extend_from_slice(&[4, 0, 0, 0]);
            one.extend_from_slice(&v.to_be_bytes()[..KEY_BYTES]);
            one.extend_from_slice(&0i64.to_le_bytes());
            // One array of one slot holding an array container of one value.
            one.extend_from_slice(&1i32.to_le_bytes());
            one.extend_from_slice(&[NOT_TRIMMED_MARK, 1, 0, 0, 0, 1, 2, 1, 0, 0, 0]);
            one.extend_from_slice(&(v as u16).to_le_bytes());
            one.extend_from_slice(&1i64.to_le_bytes());
            one.extend_from_slice(&0i32.to_le_bytes());
            one.extend_from_slice(&0i32.to_le_bytes());
            acc = union(&acc, &one).unwrap();
        }
        acc
    }

    #[test]
    fn empty_bitmaps_union_to_the_one_byte_empty_bitmap() {
        assert_eq!(union(&[0], &[0]).unwrap(), [0]);
        let one = build(&[7]);
        assert_eq!(union(&[0], &one).unwrap(), one);
        assert_eq!(union(&one, &[0]).unwrap(), one);
    }

    #[test]
    fn union_holds_the_values_of_both_sides() {
        let a = build(&[1, 5, 1 << 32, u64::MAX]);
        let b = build(&[2, 5, (1 << 32) - 1, 1 << 40]);
        let u = union(&a, &b).unwrap();
        let expected: BTreeSet<u64> = [1, 2, 5, (1 << 32) - 1, 1 << 32, 1 << 40, u64::MAX]
            .into_iter()
            .collect();
        assert_eq!(values(&u), expected);
    }

    #[test]
    fn growing_nodes_keep_every_key() {
        // 300 high parts under one parent: Node4 → 16 → 48 → 256.
        let highs: Vec<u64> = (0..300u64).map(|i| i << 16 | i).collect();
        let u = build(&highs);
        assert_eq!(values(&u), highs.iter().copied().collect());
        // The root is a Node4 over byte 4 (0 and 1), its first child a Node256.
        assert_eq!(u[9], 0);
    }

    #[test]
    fn garbage_is_refused() {
        let good = build(&[1, 1 << 20]);
        assert!(union(&[], &good).is_err());
        assert!(union(&good, &good[..good.len() - 1]).is_err());
        let mut bad = good.clone();
        bad[9] = 9; // unknown node type
        assert!(union(&bad, &good).is_err());
        assert!(union(&[1, 0, 0], &good).is_err());
    }
}

/// Properties over generated bitmaps: a union holds exactly both sets, and
/// damaged bytes are refused or merged, never a panic.
#[cfg(test)]
mod properties {
    use super::tests::{build, values};
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    /// Values whose high parts often share ART prefixes (a few high parts
    /// near 0 and near 2^32) and sometimes lie anywhere.
    fn value() -> impl Strategy<Value = u64> {
        prop_oneof![
            (0u64..4, any::<u16>()).prop_map(|(h, l)| h << 16 | u64::from(l)),
            (0u64..600, 0u64..3).prop_map(|(h, l)| h << 16 | l),
            ((1u64 << 32) - 200_000..(1u64 << 32) + 200_000),
            any::<u64>(),
        ]
    }

    fn union(a: &[u8], b: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        union64(a, b, &mut Bitmap64Scratch::default(), &mut out).unwrap();
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn union_is_the_set_union(
            a in prop::collection::vec(value(), 0..80),
            b in prop::collection::vec(value(), 0..80),
            c in prop::collection::vec(value(), 0..80),
        ) {
            let (x, y, z) = (build(&a), build(&b), build(&c));
            let set = |v: &[u64]| v.iter().copied().collect::<BTreeSet<u64>>();
            prop_assert_eq!(values(&x), set(&a));
            let xy = union(&x, &y);
            let all: BTreeSet<u64> = set(&a).union(&set(&b)).copied().collect();
            prop_assert_eq!(values(&xy), all.clone());
            let xyz = union(&xy, &z);
            let all: BTreeSet<u64> = all.union(&set(&c)).copied().collect();
            prop_assert_eq!(values(&xyz), all);
            // Merging a value into itself changes nothing but the bytes Java
            // rewrites (run optimization), so a second time is a fixed point.
            let again = union(&xyz, &xyz);
            prop_assert_eq!(union(&again, &again), again);
        }

        #[test]
        fn damaged_values_never_panic(
            a in prop::collection::vec(value(), 0..40),
            b in prop::collection::vec(value(), 0..40),
            damage in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
            cut in any::<prop::sample::Index>(),
        ) {
            let (mut x, y) = (build(&a), build(&b));
            for (at, byte) in damage {
                let at = at.index(x.len());
                x[at] = byte;
            }
            let mut scratch = Bitmap64Scratch::default();
            let mut out = Vec::new();
            let _ = union64(&x, &y, &mut scratch, &mut out);
            let _ = union64(&y, &x, &mut scratch, &mut out);
            let short = &y[..cut.index(y.len())];
            // A cut value is always short of its trailing store indices.
            prop_assert!(union64(&x, short, &mut scratch, &mut out).is_err());
        }
    }
}

/// Differential check against Java: `rbm64_java_1_3_0.txt` holds lines
/// `acc input union` (hex) written by RoaringBitmap 1.3.0 (Fluss's
/// version) doing what `FieldRoaringBitmap64Agg` does: deserialize both
/// (`ByteBuffer`), `acc.or(input)`, `runOptimize()`, serialize
/// (`DataOutput`). Inputs have many shapes (empty, one or many high parts
/// with shared prefixes, nodes of every size, values around 2^32 and at the
/// extremes, sparse, dense and run-heavy containers, with and without
/// `runOptimize`, with values removed so slots are empty and nodes shrunk),
/// and a quarter of the accumulators are the previous line's union.
#[cfg(test)]
mod java_vectors {
    use super::tests::values;
    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn check(vectors: &str) -> usize {
        let mut scratch = Bitmap64Scratch::default();
        let mut out = Vec::new();
        let mut count = 0;
        for (line_no, line) in vectors.lines().enumerate() {
            let mut parts = line.split(' ').map(unhex);
            let (acc, input, expected) = (
                parts.next().unwrap(),
                parts.next().unwrap(),
                parts.next().unwrap(),
            );
            union64(&acc, &input, &mut scratch, &mut out).unwrap();
            assert_eq!(out, expected, "line {}", line_no + 1);
            let both: std::collections::BTreeSet<u64> =
                values(&acc).union(&values(&input)).copied().collect();
            assert_eq!(values(&out), both, "line {}", line_no + 1);
            count += 1;
        }
        count
    }

    #[test]
    fn unions_match_java_roaring64_bitmap_byte_for_byte() {
        assert!(check(include_str!("rbm64_java_1_3_0.txt")) >= 200);
    }

    #[test]
    #[ignore = "needs a vector file: RBM64_VECTORS=path (see the module doc)"]
    fn unions_match_a_larger_java_vector_file() {
        let path = std::env::var("RBM64_VECTORS").expect("RBM64_VECTORS");
        let vectors = std::fs::read_to_string(path).unwrap();
        assert!(check(&vectors) > 0);
    }
}
