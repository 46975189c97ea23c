//! The file-system seam: every byte the storage engine reads or writes goes
//! through [`Fs`] and [`FsFile`], so tests can run a tablet over
//! [`sim::SimFs`], which keeps written bytes apart from durable bytes and
//! tears unsynced data at a simulated power cut.

pub mod sim;

use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

/// A directory tree of files. Creating, renaming or removing an entry is
/// durable only after [`Fs::sync_dir`] on its parent.
pub trait Fs: Send + Sync + Debug + 'static {
    /// Creates `dir` and its parents.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Names of the entries of `dir` (files and directories).
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Opens `path` for reading and writing, creating it (empty) if `create`.
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn FsFile>>;
    /// Atomically replaces `to` with `from`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Removes a directory and everything in it.
    fn remove_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Makes the entries of `dir` durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Whether `path` exists.
    fn exists(&self, path: &Path) -> bool;
}

/// An open file. Positional reads and writes, so readers never share a cursor.
pub trait FsFile: Send + Sync + Debug {
    /// Current length.
    fn len(&self) -> io::Result<u64>;
    /// Whether the file is empty.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Fills `buf` from `pos`; fails if the file is shorter.
    fn read_exact_at(&self, buf: &mut [u8], pos: u64) -> io::Result<()>;
    /// Writes all of `data` at `pos`.
    fn write_all_at(&self, data: &[u8], pos: u64) -> io::Result<()>;
    /// Truncates or extends the file.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Makes the file's data (and length) durable.
    fn sync_data(&self) -> io::Result<()>;
}

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsFs;

#[derive(Debug)]
struct OsFile(File);

impl FsFile for OsFile {
    fn len(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }
    fn read_exact_at(&self, buf: &mut [u8], pos: u64) -> io::Result<()> {
        FileExt::read_exact_at(&self.0, buf, pos)
    }
    fn write_all_at(&self, data: &[u8], pos: u64) -> io::Result<()> {
        FileExt::write_all_at(&self.0, data, pos)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }
}

impl Fs for OsFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            if let Ok(name) = entry?.file_name().into_string() {
                names.push(name);
            }
        }
        Ok(names)
    }
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn FsFile>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .open(path)?;
        Ok(Arc::new(OsFile(file)))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }
    fn remove_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::remove_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }
}
