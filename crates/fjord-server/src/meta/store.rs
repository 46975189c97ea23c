//! The metadata store seam: a small tree of versioned nodes with
//! ZooKeeper-like semantics, and its embedded crash-safe implementation.
//!
//! Everything the coordinator knows (databases, tables, id counters, bucket
//! leaders) lives in this tree. Handlers talk to the [`MetaStore`] trait only,
//! so the cluster milestone can put the same tree on an existing coordination
//! service without touching them.
//!
//! # Semantics
//! - A node has a path (`/a/b/c`, absolute, no trailing slash, no empty
//!   segment), bytes of data and a version that starts at 0 on create and
//!   grows by one on every set.
//! - `create` fails if the node exists or its parent does not (the root `/`
//!   always exists); `set` and `delete` take an expected version (`None` =
//!   any) and fail on mismatch; `delete` fails if the node has children;
//!   `delete_recursive` removes a node and its whole subtree in one step.
//! - `watch` returns a receiver that is notified when the node or any node
//!   below it changes.
//!
//! # On-disk format of [`FileMetaStore`] (`<data dir>/meta/metadata.bin`)
//! ```text
//! magic  "FJMETA\0\0"            8 bytes
//! format_version u32 LE          = 1; any other value is refused
//! node_count     u32 LE
//! node_count times:
//!     path_len u32 LE | path (UTF-8) | version i32 LE | data_len u32 LE | data
//! crc32c u32 LE                  over everything before it
//! ```
//! Every mutation writes the whole tree to `metadata.bin.tmp`, fsyncs it,
//! renames it over `metadata.bin` and fsyncs the directory, so a crash leaves
//! either the old or the new tree, never a mix. The tree is small (databases,
//! tables, counters), and mutations are rare control-plane events.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tokio::sync::watch;

/// Magic bytes opening a metadata file.
const MAGIC: &[u8; 8] = b"FJMETA\0\0";
/// The only format version this build reads and writes.
pub const META_FORMAT_VERSION: u32 = 1;
/// Upper bound on a metadata file's size, checked before reading it: the tree
/// holds control-plane records only, so anything larger is corruption.
pub const META_FILE_BYTES_MAX: u64 = 256 * 1024 * 1024;
const FILE_NAME: &str = "metadata.bin";
const TMP_FILE_NAME: &str = "metadata.bin.tmp";

/// Errors of the metadata store.
#[derive(Debug, thiserror::Error)]
pub enum MetaError {
    /// The node addressed does not exist.
    #[error("metadata node {0} does not exist")]
    NoNode(String),
    /// `create` found the node already present.
    #[error("metadata node {0} already exists")]
    NodeExists(String),
    /// The expected version did not match the node's version.
    #[error("metadata node {path} has version {actual}, expected {expected}")]
    BadVersion {
        /// The node.
        path: String,
        /// The version the caller expected.
        expected: i32,
        /// The version found.
        actual: i32,
    },
    /// `delete` on a node with children.
    #[error("metadata node {0} has children")]
    NotEmpty(String),
    /// A path that is not absolute, has empty segments or a trailing slash.
    #[error("invalid metadata path {0:?}")]
    InvalidPath(String),
    /// The metadata file is damaged or from an unknown format version.
    #[error("metadata file {path}: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// An I/O failure reading or persisting the tree.
    #[error("metadata I/O on {path}: {source}")]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

/// A node's data with the version it was read at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versioned {
    /// The node's bytes.
    pub data: Vec<u8>,
    /// The node's version (0 after create, +1 per set).
    pub version: i32,
}

/// A tree of versioned nodes with ZooKeeper-like semantics (see the module
/// docs). Implementations are linearizable: each call sees the effects of
/// every call that returned before it started, and a call that returned `Ok`
/// is durable.
pub trait MetaStore: Send + Sync {
    /// Reads a node, or `None` if it does not exist.
    fn get(&self, path: &str) -> Result<Option<Versioned>, MetaError>;
    /// Creates a node; fails if it exists or its parent does not.
    fn create(&self, path: &str, data: &[u8]) -> Result<(), MetaError>;
    /// Replaces a node's data if its version equals `expected_version`
    /// (`None` = any version); returns the new version.
    fn set(&self, path: &str, data: &[u8], expected_version: Option<i32>)
        -> Result<i32, MetaError>;
    /// Deletes a node without children if its version matches.
    fn delete(&self, path: &str, expected_version: Option<i32>) -> Result<(), MetaError>;
    /// Deletes a node and every node below it as one atomic, durable step
    /// (ZooKeeper: one `multi` of deletes), whatever their versions.
    fn delete_recursive(&self, path: &str) -> Result<(), MetaError>;
    /// Names (last segment only) of a node's direct children, sorted.
    fn children(&self, path: &str) -> Result<Vec<String>, MetaError>;
    /// A receiver notified (its value increments) whenever the node or any
    /// node below it is created, changed or deleted.
    fn watch(&self, path: &str) -> Result<watch::Receiver<u64>, MetaError>;
}

/// Checks that `path` is `/` or `/seg(/seg)*` with non-empty segments.
fn check_path(path: &str) -> Result<(), MetaError> {
    let ok = path == "/"
        || (path.starts_with('/')
            && !path.ends_with('/')
            && !path[1..].split('/').any(str::is_empty));
    if ok {
        Ok(())
    } else {
        Err(MetaError::InvalidPath(path.to_owned()))
    }
}

/// The parent of a valid non-root path.
fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// Is `node` equal to `ancestor` or below it?
fn is_at_or_below(node: &str, ancestor: &str) -> bool {
    ancestor == "/"
        || node == ancestor
        || (node.starts_with(ancestor) && node.as_bytes().get(ancestor.len()) == Some(&b'/'))
}

struct Tree {
    nodes: BTreeMap<String, Versioned>,
    watchers: Vec<(String, watch::Sender<u64>)>,
}

impl Tree {
    fn notify(&mut self, changed: &str) {
        self.watchers.retain(|(_, tx)| !tx.is_closed());
        for (path, tx) in &self.watchers {
            if is_at_or_below(changed, path) {
                tx.send_modify(|n| *n = n.wrapping_add(1));
            }
        }
    }

    fn exists(&self, path: &str) -> bool {
        path == "/" || self.nodes.contains_key(path)
    }

    fn has_children(&self, path: &str) -> bool {
        let prefix = child_prefix(path);
        self.nodes
            .range(prefix.clone()..)
            .next()
            .is_some_and(|(k, _)| k.starts_with(&prefix))
    }
}

/// The prefix every child path of `path` starts with.
fn child_prefix(path: &str) -> String {
    if path == "/" {
        "/".to_owned()
    } else {
        format!("{path}/")
    }
}

/// The embedded, crash-safe [`MetaStore`]: the whole tree in memory, written
/// through to one file under the data dir on every mutation (see the module
/// docs for the format and the crash argument).
pub struct FileMetaStore {
    dir: PathBuf,
    tree: Mutex<Tree>,
}

impl FileMetaStore {
    /// Opens (or creates, empty) the store in `dir`, which is created if
    /// missing. Refuses a damaged file or an unknown format version.
    pub fn open(dir: &Path) -> Result<Self, MetaError> {
        fs::create_dir_all(dir).map_err(|source| MetaError::Io {
            path: dir.to_owned(),
            source,
        })?;
        let file = dir.join(FILE_NAME);
        let nodes = match fs::metadata(&file) {
            Ok(meta) if meta.len() > META_FILE_BYTES_MAX => {
                return Err(MetaError::Corrupt {
                    path: file,
                    reason: format!(
                        "{} bytes exceeds the {META_FILE_BYTES_MAX} byte limit",
                        meta.len()
                    ),
                })
            }
            Ok(_) => {
                let bytes = fs::read(&file).map_err(|source| MetaError::Io {
                    path: file.clone(),
                    source,
                })?;
                decode(&bytes).map_err(|reason| MetaError::Corrupt { path: file, reason })?
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(source) => return Err(MetaError::Io { path: file, source }),
        };
        Ok(Self {
            dir: dir.to_owned(),
            tree: Mutex::new(Tree {
                nodes,
                watchers: Vec::new(),
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Tree> {
        // A panic while holding the lock cannot leave the tree half-updated:
        // every mutation persists a clone first and only then updates memory.
        self.tree.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes `nodes` durably: temp file, fsync, rename, fsync directory.
    fn persist(&self, nodes: &BTreeMap<String, Versioned>) -> Result<(), MetaError> {
        let bytes = encode(nodes);
        let tmp = self.dir.join(TMP_FILE_NAME);
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| MetaError::Io { path, source }
        };
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(io(&tmp))?;
        f.write_all(&bytes).map_err(io(&tmp))?;
        f.sync_all().map_err(io(&tmp))?;
        drop(f);
        let dst = self.dir.join(FILE_NAME);
        fs::rename(&tmp, &dst).map_err(io(&dst))?;
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io(&self.dir))?;
        Ok(())
    }

    /// Applies `change` to a copy of the tree, persists the copy, then
    /// installs it: memory never runs ahead of the disk.
    fn mutate<T>(
        &self,
        path: &str,
        change: impl FnOnce(&mut BTreeMap<String, Versioned>) -> Result<T, MetaError>,
    ) -> Result<T, MetaError> {
        check_path(path)?;
        let mut tree = self.lock();
        let mut next = tree.nodes.clone();
        let out = change(&mut next)?;
        self.persist(&next)?;
        tree.nodes = next;
        tree.notify(path);
        Ok(out)
    }
}

fn check_version(path: &str, expected: Option<i32>, actual: i32) -> Result<(), MetaError> {
    match expected {
        Some(expected) if expected != actual => Err(MetaError::BadVersion {
            path: path.to_owned(),
            expected,
            actual,
        }),
        _ => Ok(()),
    }
}

impl MetaStore for FileMetaStore {
    fn get(&self, path: &str) -> Result<Option<Versioned>, MetaError> {
        check_path(path)?;
        Ok(self.lock().nodes.get(path).cloned())
    }

    fn create(&self, path: &str, data: &[u8]) -> Result<(), MetaError> {
        if path == "/" {
            return Err(MetaError::NodeExists(path.to_owned()));
        }
        {
            check_path(path)?;
            let tree = self.lock();
            if tree.exists(path) {
                return Err(MetaError::NodeExists(path.to_owned()));
            }
            if !tree.exists(parent_of(path)) {
                return Err(MetaError::NoNode(parent_of(path).to_owned()));
            }
        }
        self.mutate(path, |nodes| {
            // Re-checked under the same lock as the write (mutate holds it).
            if nodes.contains_key(path) {
                return Err(MetaError::NodeExists(path.to_owned()));
            }
            let parent = parent_of(path);
            if parent != "/" && !nodes.contains_key(parent) {
                return Err(MetaError::NoNode(parent.to_owned()));
            }
            nodes.insert(
                path.to_owned(),
                Versioned {
                    data: data.to_vec(),
                    version: 0,
                },
            );
            Ok(())
        })
    }

    fn set(
        &self,
        path: &str,
        data: &[u8],
        expected_version: Option<i32>,
    ) -> Result<i32, MetaError> {
        self.mutate(path, |nodes| {
            let node = nodes
                .get_mut(path)
                .ok_or_else(|| MetaError::NoNode(path.to_owned()))?;
            check_version(path, expected_version, node.version)?;
            node.version = node.version.wrapping_add(1);
            node.data = data.to_vec();
            Ok(node.version)
        })
    }

    fn delete(&self, path: &str, expected_version: Option<i32>) -> Result<(), MetaError> {
        if path == "/" {
            return Err(MetaError::InvalidPath(path.to_owned()));
        }
        {
            check_path(path)?;
            let tree = self.lock();
            if tree.has_children(path) {
                return Err(MetaError::NotEmpty(path.to_owned()));
            }
        }
        self.mutate(path, |nodes| {
            let node = nodes
                .get(path)
                .ok_or_else(|| MetaError::NoNode(path.to_owned()))?;
            check_version(path, expected_version, node.version)?;
            nodes.remove(path);
            Ok(())
        })
    }

    fn delete_recursive(&self, path: &str) -> Result<(), MetaError> {
        if path == "/" {
            return Err(MetaError::InvalidPath(path.to_owned()));
        }
        self.mutate(path, |nodes| {
            if nodes.remove(path).is_none() {
                return Err(MetaError::NoNode(path.to_owned()));
            }
            let prefix = child_prefix(path);
            let below: Vec<String> = nodes
                .range(prefix.clone()..)
                .take_while(|(k, _)| k.starts_with(&prefix))
                .map(|(k, _)| k.clone())
                .collect();
            for k in below {
                nodes.remove(&k);
            }
            Ok(())
        })
    }

    fn children(&self, path: &str) -> Result<Vec<String>, MetaError> {
        check_path(path)?;
        let tree = self.lock();
        if !tree.exists(path) {
            return Err(MetaError::NoNode(path.to_owned()));
        }
        let prefix = child_prefix(path);
        Ok(tree
            .nodes
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .filter_map(|(k, _)| {
                let rest = &k[prefix.len()..];
                (!rest.contains('/')).then(|| rest.to_owned())
            })
            .collect())
    }

    fn watch(&self, path: &str) -> Result<watch::Receiver<u64>, MetaError> {
        check_path(path)?;
        let (tx, rx) = watch::channel(0);
        self.lock().watchers.push((path.to_owned(), tx));
        Ok(rx)
    }
}

fn encode(nodes: &BTreeMap<String, Versioned>) -> Vec<u8> {
    let size: usize = nodes
        .iter()
        .map(|(k, v)| 12 + k.len() + v.data.len())
        .sum::<usize>()
        + 20;
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&META_FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(nodes.len() as u32).to_le_bytes());
    for (path, node) in nodes {
        out.extend_from_slice(&(path.len() as u32).to_le_bytes());
        out.extend_from_slice(path.as_bytes());
        out.extend_from_slice(&node.version.to_le_bytes());
        out.extend_from_slice(&(node.data.len() as u32).to_le_bytes());
        out.extend_from_slice(&node.data);
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Bounds-checked little-endian reader over the file bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or_else(|| format!("truncated at byte {}", self.pos))?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

fn decode(bytes: &[u8]) -> Result<BTreeMap<String, Versioned>, String> {
    if bytes.len() < MAGIC.len() + 12 {
        return Err(format!(
            "{} bytes is too short for a metadata file",
            bytes.len()
        ));
    }
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    let stored = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
    if &body[..MAGIC.len()] != MAGIC {
        return Err("bad magic (not a Fjord metadata file)".to_owned());
    }
    let mut r = Reader {
        bytes: body,
        pos: MAGIC.len(),
    };
    let version = r.u32()?;
    if version != META_FORMAT_VERSION {
        return Err(format!(
            "format version {version} is not supported (this build reads version {META_FORMAT_VERSION})"
        ));
    }
    let actual = crc32c::crc32c(body);
    if actual != stored {
        return Err(format!(
            "checksum mismatch (stored {stored:#010x}, computed {actual:#010x})"
        ));
    }
    let count = r.u32()?;
    let mut nodes = BTreeMap::new();
    for _ in 0..count {
        let len = r.u32()? as usize;
        let path = std::str::from_utf8(r.take(len)?)
            .map_err(|_| "node path is not UTF-8".to_owned())?
            .to_owned();
        check_path(&path).map_err(|e| e.to_string())?;
        let v = r.take(4)?;
        let node_version = i32::from_le_bytes([v[0], v[1], v[2], v[3]]);
        let len = r.u32()? as usize;
        let data = r.take(len)?.to_vec();
        nodes.insert(
            path,
            Versioned {
                data,
                version: node_version,
            },
        );
    }
    if r.pos != body.len() {
        return Err(format!("{} trailing bytes", body.len() - r.pos));
    }
    Ok(nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, FileMetaStore) {
        let dir = tempfile::tempdir().unwrap();
        let s = FileMetaStore::open(dir.path()).unwrap();
        (dir, s)
    }

    #[test]
    fn create_requires_parent_and_refuses_duplicates() {
        let (_d, s) = store();
        assert!(matches!(s.create("/a/b", b"x"), Err(MetaError::NoNode(_))));
        s.create("/a", b"1").unwrap();
        s.create("/a/b", b"2").unwrap();
        assert!(matches!(
            s.create("/a", b"1"),
            Err(MetaError::NodeExists(_))
        ));
        assert_eq!(s.children("/").unwrap(), vec!["a"]);
        assert_eq!(s.children("/a").unwrap(), vec!["b"]);
    }

    #[test]
    fn set_is_conditional_on_version() {
        let (_d, s) = store();
        s.create("/n", b"0").unwrap();
        assert_eq!(s.set("/n", b"1", Some(0)).unwrap(), 1);
        assert!(matches!(
            s.set("/n", b"2", Some(0)),
            Err(MetaError::BadVersion { actual: 1, .. })
        ));
        assert_eq!(
            s.get("/n").unwrap().unwrap(),
            Versioned {
                data: b"1".to_vec(),
                version: 1
            }
        );
    }

    #[test]
    fn delete_refuses_nodes_with_children() {
        let (_d, s) = store();
        s.create("/a", b"").unwrap();
        s.create("/a/b", b"").unwrap();
        assert!(matches!(s.delete("/a", None), Err(MetaError::NotEmpty(_))));
        s.delete("/a/b", None).unwrap();
        s.delete("/a", Some(0)).unwrap();
        assert_eq!(s.get("/a").unwrap(), None);
    }

    #[test]
    fn delete_recursive_removes_the_subtree_only() {
        let (dir, s) = store();
        for p in ["/a", "/a/b", "/a/b/c", "/a/d", "/ab"] {
            s.create(p, b"").unwrap();
        }
        s.delete_recursive("/a").unwrap();
        assert_eq!(s.children("/").unwrap(), vec!["ab"]);
        assert!(matches!(
            s.delete_recursive("/a"),
            Err(MetaError::NoNode(_))
        ));
        let reopened = FileMetaStore::open(dir.path()).unwrap();
        assert!(reopened.get("/a/b/c").unwrap().is_none());
        assert!(reopened.get("/ab").unwrap().is_some());
    }

    #[test]
    fn siblings_with_common_prefix_are_not_children() {
        let (_d, s) = store();
        s.create("/a", b"").unwrap();
        s.create("/ab", b"").unwrap();
        s.create("/ab/c", b"").unwrap();
        assert!(s.children("/a").unwrap().is_empty());
        s.delete("/a", None).unwrap();
    }

    #[test]
    fn invalid_paths_are_refused() {
        let (_d, s) = store();
        for p in ["", "a", "/a/", "//a", "/a//b"] {
            assert!(
                matches!(s.create(p, b""), Err(MetaError::InvalidPath(_))),
                "{p}"
            );
        }
    }

    #[test]
    fn reopen_restores_the_tree() {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = FileMetaStore::open(dir.path()).unwrap();
            s.create("/db", b"x").unwrap();
            s.set("/db", b"y", None).unwrap();
        }
        let s = FileMetaStore::open(dir.path()).unwrap();
        assert_eq!(
            s.get("/db").unwrap().unwrap(),
            Versioned {
                data: b"y".to_vec(),
                version: 1
            }
        );
    }

    #[test]
    fn unknown_format_version_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = encode(&BTreeMap::new());
        bytes[8..12].copy_from_slice(&2u32.to_le_bytes());
        fs::write(dir.path().join(FILE_NAME), &bytes).unwrap();
        let err = FileMetaStore::open(dir.path()).err().unwrap().to_string();
        assert!(err.contains("format version 2"), "{err}");
    }

    #[test]
    fn flipped_byte_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        let mut nodes = BTreeMap::new();
        nodes.insert(
            "/x".to_owned(),
            Versioned {
                data: b"abc".to_vec(),
                version: 3,
            },
        );
        let mut bytes = encode(&nodes);
        let i = bytes.len() - 6;
        bytes[i] ^= 1;
        fs::write(dir.path().join(FILE_NAME), &bytes).unwrap();
        let err = FileMetaStore::open(dir.path()).err().unwrap().to_string();
        assert!(err.contains("checksum"), "{err}");
    }

    #[test]
    fn truncated_file_is_refused_not_panicking() {
        let mut nodes = BTreeMap::new();
        nodes.insert(
            "/x".to_owned(),
            Versioned {
                data: b"abc".to_vec(),
                version: 3,
            },
        );
        let bytes = encode(&nodes);
        for n in 0..bytes.len() {
            assert!(decode(&bytes[..n]).is_err());
        }
        assert_eq!(decode(&bytes).unwrap(), nodes);
    }

    #[test]
    fn watch_fires_for_changes_below_the_path() {
        let (_d, s) = store();
        let mut rx = s.watch("/a").unwrap();
        s.create("/b", b"").unwrap();
        assert!(!rx.has_changed().unwrap());
        s.create("/a", b"").unwrap();
        s.create("/a/c", b"").unwrap();
        assert!(rx.has_changed().unwrap());
        assert_eq!(*rx.borrow_and_update(), 2);
    }
}
