//! Small metadata files of a tablet, written atomically (temp file, fsync,
//! rename, directory fsync): the recovery-point checkpoint, the
//! rewritten-end checkpoint and the clean-shutdown marker. Layouts are in
//! `docs/FORMAT.md`.
//!
//! ```text
//! recovery-point.checkpoint / rewritten-end.checkpoint (24 bytes, little-endian)
//!  0 magic          [u8; 4] = "FJRP" / "FJRW"
//!  4 version        u16     = 1
//!  6 reserved       u16     = 0
//!  8 offset         i64     recovery point / rewritten end
//! 16 reserved       u32     = 0
//! 20 crc32c         u32     over bytes 0..20
//! ```

use std::path::Path;

use crate::error::{Result, StorageError};
use crate::fs::Fs;

/// File name of the recovery-point checkpoint inside a tablet directory.
pub const CHECKPOINT_FILE: &str = "recovery-point.checkpoint";
/// File name of the clean-shutdown marker inside a tablet directory.
pub const CLEAN_SHUTDOWN_FILE: &str = ".clean-shutdown";
/// Suffix of temporary files that become metadata files by rename.
pub const TMP_SUFFIX: &str = ".tmp";

/// File name of the rewritten-end checkpoint inside a tablet directory.
pub const REWRITTEN_END_FILE: &str = "rewritten-end.checkpoint";

const CHECKPOINT_MAGIC: [u8; 4] = *b"FJRP";
const REWRITTEN_END_MAGIC: [u8; 4] = *b"FJRW";
const CHECKPOINT_VERSION: u16 = 1;
/// Exact size of a version-1 checkpoint file (either kind); larger files
/// are refused before they are read.
pub const CHECKPOINT_BYTES: usize = 24;

/// Writes `bytes` to `dir/name` atomically: a crash leaves either the old
/// file or the new one, never a mix.
pub fn write_atomic(fs: &dyn Fs, dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}{TMP_SUFFIX}"));
    let file = fs
        .open(&tmp, true)
        .map_err(|e| StorageError::io("creating", &tmp, e))?;
    file.set_len(0)
        .and_then(|()| file.write_all_at(bytes, 0))
        .and_then(|()| file.sync_data())
        .map_err(|e| StorageError::io("writing", &tmp, e))?;
    drop(file);
    fs.rename(&tmp, &path)
        .map_err(|e| StorageError::io("renaming", &tmp, e))?;
    fs.sync_dir(dir)
        .map_err(|e| StorageError::io("syncing directory", dir, e))
}

/// Reads a whole (small) file, refusing one above `max_bytes` before
/// allocating. `Ok(None)` if it does not exist.
pub fn read_small(fs: &dyn Fs, path: &Path, max_bytes: u64) -> Result<Option<Vec<u8>>> {
    if !fs.exists(path) {
        return Ok(None);
    }
    let file = fs
        .open(path, false)
        .map_err(|e| StorageError::io("opening", path, e))?;
    let len = file
        .len()
        .map_err(|e| StorageError::io("reading", path, e))?;
    if len > max_bytes {
        return Err(StorageError::BadFile {
            path: path.to_path_buf(),
            kind: "metadata",
            reason: "file is larger than its format allows",
        });
    }
    let mut buf = vec![0u8; len as usize];
    file.read_exact_at(&mut buf, 0)
        .map_err(|e| StorageError::io("reading", path, e))?;
    Ok(Some(buf))
}

/// Encodes the recovery-point checkpoint.
pub fn encode_checkpoint(recovery_point: i64) -> [u8; CHECKPOINT_BYTES] {
    encode_offset_file(CHECKPOINT_MAGIC, recovery_point)
}

/// Decodes a recovery-point checkpoint, rejecting anything that is not
/// exactly a version-1 checkpoint with a good checksum.
pub fn decode_checkpoint(bytes: &[u8]) -> Result<i64, &'static str> {
    decode_offset_file(CHECKPOINT_MAGIC, bytes)
}

/// Encodes the rewritten-end checkpoint.
pub fn encode_rewritten_end(offset: i64) -> [u8; CHECKPOINT_BYTES] {
    encode_offset_file(REWRITTEN_END_MAGIC, offset)
}

/// Decodes a rewritten-end checkpoint, rejecting anything that is not
/// exactly a version-1 file of that kind with a good checksum.
pub fn decode_rewritten_end(bytes: &[u8]) -> Result<i64, &'static str> {
    decode_offset_file(REWRITTEN_END_MAGIC, bytes)
}

fn encode_offset_file(magic: [u8; 4], offset: i64) -> [u8; CHECKPOINT_BYTES] {
    let mut b = [0u8; CHECKPOINT_BYTES];
    b[0..4].copy_from_slice(&magic);
    b[4..6].copy_from_slice(&CHECKPOINT_VERSION.to_le_bytes());
    b[8..16].copy_from_slice(&offset.to_le_bytes());
    let crc = crc32c::crc32c(&b[..20]);
    b[20..24].copy_from_slice(&crc.to_le_bytes());
    b
}

fn decode_offset_file(magic: [u8; 4], bytes: &[u8]) -> Result<i64, &'static str> {
    if bytes.len() != CHECKPOINT_BYTES {
        return Err("wrong size");
    }
    if bytes[0..4] != magic {
        return Err("bad magic");
    }
    let stored = u32::from_le_bytes([bytes[20], bytes[21], bytes[22], bytes[23]]);
    if stored != crc32c::crc32c(&bytes[..20]) {
        return Err("checksum mismatch");
    }
    if u16::from_le_bytes([bytes[4], bytes[5]]) != CHECKPOINT_VERSION {
        return Err("unknown version");
    }
    let mut rp = [0u8; 8];
    rp.copy_from_slice(&bytes[8..16]);
    let rp = i64::from_le_bytes(rp);
    if rp < 0 {
        return Err("negative offset");
    }
    Ok(rp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_round_trips_and_rejects_damage() {
        let b = encode_checkpoint(12345);
        assert_eq!(decode_checkpoint(&b), Ok(12345));
        for i in 0..b.len() {
            let mut d = b;
            d[i] ^= 0x10;
            assert!(decode_checkpoint(&d).is_err(), "flip at {i} accepted");
        }
        assert_eq!(decode_checkpoint(&b[..20]), Err("wrong size"));
    }

    #[test]
    fn the_two_offset_files_do_not_read_as_each_other() {
        assert_eq!(decode_rewritten_end(&encode_rewritten_end(77)), Ok(77));
        assert_eq!(
            decode_rewritten_end(&encode_checkpoint(77)),
            Err("bad magic")
        );
        assert_eq!(
            decode_checkpoint(&encode_rewritten_end(77)),
            Err("bad magic")
        );
    }
}
