//! A simulated disk for crash-consistency tests and fuzzing, in the style of
//! TigerBeetle's and redb's: every file keeps the bytes written apart from
//! the bytes made durable by `sync_data`, and every directory keeps its
//! written entries apart from the entries made durable by `sync_dir`.
//!
//! [`SimFs::crash`] models a power cut: directories fall back to their
//! durable entries, and each file keeps its durable bytes plus, per 512-byte
//! sector of unsynced data, either the new bytes or the old ones (zeros
//! where nothing was durable), chosen by a seeded generator, with the length
//! cut at a sector boundary.
//! [`SimFs::fail_syncs`] makes `sync_data` fail, to test fsync-failure
//! handling; [`SimFs::cut_power_after_syncs`] makes every sync after the next
//! `n` fail, which freezes the durable state at an arbitrary point inside an
//! operation (a roll, a checkpoint, a retention delete) — a power cut there.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{Fs, FsFile};

/// Sector size at which unsynced data tears.
pub const SECTOR_BYTES: usize = 512;

#[derive(Debug, Default)]
struct Contents {
    written: Vec<u8>,
    durable: Vec<u8>,
}

type Node = Arc<Mutex<Contents>>;

#[derive(Debug, Default)]
struct Tree {
    /// Entries as the running process sees them.
    written: BTreeMap<PathBuf, Node>,
    /// Entries that survive a crash.
    durable: BTreeMap<PathBuf, Node>,
}

/// An in-memory file system with a durable/written split. Cheap to clone
/// (shared state).
#[derive(Debug, Clone)]
pub struct SimFs {
    tree: Arc<Mutex<Tree>>,
    /// Syncs (file or directory) that may still succeed.
    syncs_left: Arc<AtomicU64>,
}

impl Default for SimFs {
    fn default() -> Self {
        Self {
            tree: Arc::default(),
            syncs_left: Arc::new(AtomicU64::new(u64::MAX)),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain data; keep going.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{} not found", path.display()),
    )
}

/// A small deterministic generator (xorshift64*), so crash patterns replay
/// from a seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value).
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// A value in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

impl SimFs {
    /// An empty simulated disk.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes every later sync fail (or succeed again).
    pub fn fail_syncs(&self, fail: bool) {
        let left = if fail { 0 } else { u64::MAX };
        self.syncs_left.store(left, Ordering::SeqCst);
    }

    /// Lets the next `n` syncs succeed and fails every one after: the
    /// durable state freezes there, as at a power cut.
    pub fn cut_power_after_syncs(&self, n: u64) {
        self.syncs_left.store(n, Ordering::SeqCst);
    }

    /// Whether a power cut set by [`SimFs::cut_power_after_syncs`] (or
    /// [`SimFs::fail_syncs`]) has been reached.
    pub fn power_is_cut(&self) -> bool {
        self.syncs_left.load(Ordering::SeqCst) == 0
    }
}

/// Takes one sync from the budget; `false` once it is exhausted.
fn take_sync(left: &AtomicU64) -> bool {
    left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| match n {
        0 => None,
        u64::MAX => Some(u64::MAX),
        n => Some(n - 1),
    })
    .is_ok()
}

fn sync_failed() -> io::Error {
    io::Error::other("simulated sync failure (power cut)")
}

impl SimFs {
    /// Simulates a power cut. Open handles must be dropped first (they keep
    /// pointing at the pre-crash contents).
    pub fn crash(&self, seed: u64) {
        let mut rng = Rng::new(seed);
        let mut tree = lock(&self.tree);
        let survivors = tree.durable.clone();
        // A file reachable from several names is torn once.
        let mut torn: Vec<*const Mutex<Contents>> = Vec::new();
        for node in survivors.values() {
            let ptr = Arc::as_ptr(node);
            if torn.contains(&ptr) {
                continue;
            }
            torn.push(ptr);
            let mut c = lock(node);
            let after = tear(&c.durable, &c.written, &mut rng);
            c.written = after.clone();
            c.durable = after;
        }
        tree.written = survivors;
        // Power is back.
        self.syncs_left.store(u64::MAX, Ordering::SeqCst);
    }

    /// Writes a whole file and makes it and its directory entry durable
    /// (test set-up helper).
    pub fn put_durable(&self, path: &Path, bytes: &[u8]) {
        let node: Node = Arc::new(Mutex::new(Contents {
            written: bytes.to_vec(),
            durable: bytes.to_vec(),
        }));
        let mut tree = lock(&self.tree);
        tree.written.insert(path.to_path_buf(), node.clone());
        tree.durable.insert(path.to_path_buf(), node);
    }

    /// The current (written) contents of a file, if it exists.
    pub fn read(&self, path: &Path) -> Option<Vec<u8>> {
        let tree = lock(&self.tree);
        tree.written.get(path).map(|n| lock(n).written.clone())
    }
}

/// The post-crash contents of a file whose durable bytes are `durable` and
/// whose process-visible bytes are `written`.
fn tear(durable: &[u8], written: &[u8], rng: &mut Rng) -> Vec<u8> {
    if durable == written {
        return durable.to_vec();
    }
    // The length lands on a sector boundary between the two lengths (or on
    // one of them exactly).
    let (lo, hi) = (
        durable.len().min(written.len()),
        durable.len().max(written.len()),
    );
    let mut candidates = vec![durable.len(), written.len()];
    let mut b = lo.div_ceil(SECTOR_BYTES) * SECTOR_BYTES;
    while b < hi {
        candidates.push(b);
        b += SECTOR_BYTES;
    }
    let len = candidates[rng.below(candidates.len() as u64) as usize];
    let mut out = vec![0u8; len];
    for start in (0..len).step_by(SECTOR_BYTES) {
        let end = (start + SECTOR_BYTES).min(len);
        let old = durable.get(start..end.min(durable.len())).unwrap_or(&[]);
        let new = written.get(start..end.min(written.len())).unwrap_or(&[]);
        if old == new {
            // Unchanged sector: nothing to tear.
            out[start..start + old.len()].copy_from_slice(old);
            continue;
        }
        // Sector writes are atomic (as TigerBeetle and redb assume): a
        // sector holds its old or its new contents, and a sector that held
        // nothing durable may come back as zeros (never written).
        let src = if rng.below(2) == 0 { new } else { old };
        out[start..start + src.len()].copy_from_slice(src);
    }
    out
}

#[derive(Debug)]
struct SimFile {
    node: Node,
    syncs_left: Arc<AtomicU64>,
    /// The whole file system, for `sync_file_system`.
    tree: Arc<Mutex<Tree>>,
}

impl FsFile for SimFile {
    fn len(&self) -> io::Result<u64> {
        Ok(lock(&self.node).written.len() as u64)
    }
    fn read_exact_at(&self, buf: &mut [u8], pos: u64) -> io::Result<()> {
        let c = lock(&self.node);
        let start = usize::try_from(pos).map_err(|_| io::ErrorKind::UnexpectedEof)?;
        let src = c
            .written
            .get(start..start.saturating_add(buf.len()))
            .ok_or(io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(src);
        Ok(())
    }
    fn write_all_at(&self, data: &[u8], pos: u64) -> io::Result<()> {
        let mut c = lock(&self.node);
        let start = pos as usize;
        let end = start + data.len();
        if c.written.len() < end {
            c.written.resize(end, 0);
        }
        c.written[start..end].copy_from_slice(data);
        Ok(())
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        lock(&self.node).written.resize(len as usize, 0);
        Ok(())
    }
    fn sync_data(&self) -> io::Result<()> {
        if !take_sync(&self.syncs_left) {
            return Err(sync_failed());
        }
        let mut c = lock(&self.node);
        c.durable = c.written.clone();
        Ok(())
    }
    fn file_system_id(&self) -> Option<u64> {
        Some(Arc::as_ptr(&self.tree) as u64)
    }
    fn sync_file_system(&self) -> io::Result<bool> {
        if !take_sync(&self.syncs_left) {
            return Err(sync_failed());
        }
        // Every file's contents and every directory entry, as syncfs.
        let mut tree = lock(&self.tree);
        for node in tree.written.values() {
            let mut c = lock(node);
            c.durable = c.written.clone();
        }
        tree.durable = tree.written.clone();
        Ok(true)
    }
}

impl Fs for SimFs {
    fn create_dir_all(&self, _dir: &Path) -> io::Result<()> {
        // Directories exist implicitly as path prefixes.
        Ok(())
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let tree = lock(&self.tree);
        let mut names: Vec<String> = Vec::new();
        for path in tree.written.keys() {
            if let Ok(rest) = path.strip_prefix(dir) {
                if let Some(first) = rest.components().next() {
                    let name = first.as_os_str().to_string_lossy().into_owned();
                    if names.last() != Some(&name) && !names.contains(&name) {
                        names.push(name);
                    }
                }
            }
        }
        Ok(names)
    }
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn FsFile>> {
        let mut tree = lock(&self.tree);
        let node = match tree.written.get(path) {
            Some(n) => n.clone(),
            None if create => {
                let n: Node = Arc::default();
                tree.written.insert(path.to_path_buf(), n.clone());
                n
            }
            None => return Err(not_found(path)),
        };
        Ok(Arc::new(SimFile {
            node,
            syncs_left: self.syncs_left.clone(),
            tree: self.tree.clone(),
        }))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut tree = lock(&self.tree);
        let node = tree.written.remove(from).ok_or_else(|| not_found(from))?;
        tree.written.insert(to.to_path_buf(), node);
        Ok(())
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        lock(&self.tree)
            .written
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| not_found(path))
    }
    fn remove_dir_all(&self, dir: &Path) -> io::Result<()> {
        lock(&self.tree).written.retain(|p, _| !p.starts_with(dir));
        Ok(())
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        if !take_sync(&self.syncs_left) {
            return Err(sync_failed());
        }
        let mut tree = lock(&self.tree);
        let Tree { written, durable } = &mut *tree;
        durable.retain(|p, _| p.parent() != Some(dir));
        for (p, n) in written.iter() {
            if p.parent() == Some(dir) {
                durable.insert(p.clone(), n.clone());
            }
        }
        Ok(())
    }
    fn exists(&self, path: &Path) -> bool {
        let tree = lock(&self.tree);
        tree.written.contains_key(path) || tree.written.keys().any(|p| p.starts_with(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsynced_file_vanishes_and_synced_bytes_survive_a_crash() {
        let fs = SimFs::new();
        let dir = Path::new("/d");
        let a = fs.open(&dir.join("a"), true).expect("create");
        a.write_all_at(b"durable", 0).expect("write");
        a.sync_data().expect("sync");
        fs.sync_dir(dir).expect("sync dir");
        a.write_all_at(&[7u8; 2000], 7).expect("write");
        let b = fs.open(&dir.join("b"), true).expect("create");
        b.write_all_at(b"lost", 0).expect("write");
        b.sync_data().expect("sync");
        drop((a, b));
        fs.crash(1);
        assert!(!fs.exists(&dir.join("b")), "entry never dir-synced");
        let a = fs.read(&dir.join("a")).expect("a survives");
        assert_eq!(&a[..7], b"durable");
        assert!(
            [7, 512, 1024, 1536, 2007].contains(&a.len()),
            "len {}",
            a.len()
        );
    }

    #[test]
    fn tearing_keeps_every_sector_old_new_or_zero() {
        let old = vec![1u8; 3000];
        let new = vec![2u8; 4000];
        for seed in 0..50 {
            let out = tear(&old, &new, &mut Rng::new(seed));
            assert!(out.len() >= 3000 && out.len() <= 4000);
            for (i, chunk) in out.chunks(SECTOR_BYTES).enumerate() {
                let at = i * SECTOR_BYTES;
                let ok = chunk.iter().all(|&b| b == 0)
                    || chunk == &new[at..at + chunk.len()]
                    || (at + chunk.len() <= 3000 && chunk == &old[at..at + chunk.len()])
                    || chunk.iter().all(|&b| b == 1 || b == 0);
                assert!(ok, "sector {i} mixes sources");
            }
        }
    }
}
