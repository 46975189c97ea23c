//! The file-system seam: every byte the storage engine reads or writes goes
//! through [`Fs`] and [`FsFile`], so tests can run a tablet over
//! [`sim::SimFs`], which keeps written bytes apart from durable bytes and
//! tears unsynced data at a simulated power cut.

pub mod sim;

use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::{self, IoSlice};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt};
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
    /// Writes `parts` back to back from `pos`, as if they were one buffer
    /// (the append path writes stamped batch prefixes and the received
    /// bodies this way instead of copying them together). The default
    /// writes them one by one; [`OsFs`]'s files use `pwritev`, one system
    /// call for up to [`IOV_PARTS_MAX`] parts. `parts` is consumed: its
    /// slices may be advanced past what was written (the caller builds it
    /// once per write, so no copy of the list is needed).
    fn write_all_vectored_at(&self, parts: &mut [IoSlice<'_>], pos: u64) -> io::Result<()> {
        let mut at = pos;
        for part in parts.iter() {
            self.write_all_at(part, at)?;
            at += part.len() as u64;
        }
        Ok(())
    }
    /// Truncates or extends the file.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Makes the file's data (and length) durable.
    fn sync_data(&self) -> io::Result<()>;
    /// An id the files of one file system share (its device), so that a
    /// caller can tell which files one [`FsFile::sync_file_system`]
    /// covers; `None` when unknown.
    fn file_system_id(&self) -> Option<u64> {
        None
    }
    /// Makes everything written so far to the file system holding this
    /// file durable: every file's data and length and every directory
    /// entry (Linux's `syncfs`). One call costs about what one
    /// [`FsFile::sync_data`] does, so it is the cheaper way to sync several
    /// files at once. `Ok(false)`: this file system cannot, sync file by
    /// file.
    fn sync_file_system(&self) -> io::Result<bool> {
        Ok(false)
    }
}

/// Most parts handed to one `pwritev` (Linux's `IOV_MAX` is 1024); more
/// parts take more calls.
pub const IOV_PARTS_MAX: usize = 1024;

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
    fn write_all_vectored_at(&self, parts: &mut [IoSlice<'_>], pos: u64) -> io::Result<()> {
        let mut rest = parts;
        let mut at = pos;
        loop {
            // Leading empty parts are skipped, so a call never covers only
            // empty parts (its 0 would read as a failed write).
            let skip = rest.iter().take_while(|p| p.is_empty()).count();
            rest = &mut std::mem::take(&mut rest)[skip..];
            if rest.is_empty() {
                return Ok(());
            }
            let count = rest.len().min(IOV_PARTS_MAX);
            let offset = libc::off_t::try_from(at).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidInput, "file position beyond off_t")
            })?;
            // SAFETY: `IoSlice` is ABI-compatible with `struct iovec` on Unix
            // (std guarantees it), the `count` slices are alive and
            // initialised for the call, and the descriptor is open while
            // `self` is.
            let written = unsafe {
                libc::pwritev(
                    self.0.as_raw_fd(),
                    rest.as_ptr().cast::<libc::iovec>(),
                    count as libc::c_int,
                    offset,
                )
            };
            if written < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if written == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            at += written as u64;
            IoSlice::advance_slices(&mut rest, written as usize);
        }
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn file_system_id(&self) -> Option<u64> {
        self.0.metadata().ok().map(|m| m.dev())
    }
    fn sync_file_system(&self) -> io::Result<bool> {
        // SAFETY: the descriptor is open while `self` is; syncfs reads
        // nothing from user memory.
        if unsafe { libc::syncfs(self.0.as_raw_fd()) } == 0 {
            Ok(true)
        } else {
            Err(io::Error::last_os_error())
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectored_writes_land_back_to_back_even_past_one_call_worth_of_parts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = OsFs.open(&dir.path().join("f"), true).expect("open");
        file.write_all_at(b"head", 0).expect("write");
        // More parts than one pwritev takes, some empty, of varied sizes.
        let owned: Vec<Vec<u8>> = (0..IOV_PARTS_MAX + 300)
            .map(|i| vec![(i % 251) as u8; i % 7])
            .collect();
        let mut parts: Vec<IoSlice<'_>> = owned.iter().map(|p| IoSlice::new(p)).collect();
        file.write_all_vectored_at(&mut parts, 4)
            .expect("vectored write");
        let expected: Vec<u8> = b"head".iter().copied().chain(owned.concat()).collect();
        let mut read = vec![0u8; expected.len()];
        file.read_exact_at(&mut read, 0).expect("read");
        assert_eq!(read, expected);
        assert_eq!(file.len().expect("len"), expected.len() as u64);

        // More empty parts than one call takes, then data: still written.
        let mut parts = vec![IoSlice::new(&[]); IOV_PARTS_MAX + 1];
        parts.push(IoSlice::new(b"tail"));
        let end = expected.len() as u64;
        file.write_all_vectored_at(&mut parts, end)
            .expect("vectored write after empty parts");
        let mut tail = [0u8; 4];
        file.read_exact_at(&mut tail, end).expect("read");
        assert_eq!(&tail, b"tail");
        // Nothing but empty parts writes nothing and succeeds.
        file.write_all_vectored_at(&mut [IoSlice::new(&[])], 0)
            .expect("empty write");
        assert_eq!(file.len().expect("len"), end + 4);
    }
}
