//! The offset store: the source position a pipeline resumes from, kept
//! durably in `pipeline.state-dir`.
//!
//! File `position` in the state directory:
//!
//! ```text
//! fjord-cdc-position 2          magic and format version (1 and 2 are read)
//! source=<source type>          the source kind that wrote it (a mismatch is refused)
//! <SourcePosition text form>    key=value lines, see crate::position;
//!   or position=none            (version 2) nothing delivered yet: start per the startup mode
//! sink-state=<text>             (version 2, optional) the sink's state at this position
//! crc32c=<8 hex digits>         CRC-32C of every byte before this line
//! ```
//!
//! The sink state is what a sink needs to resume exactly at the position
//! (the `fluss` sink: where its log tables ended when the position was
//! committed, see `sink::fluss::recovery`); it is committed in the same
//! file, so position and state are always from the same moment.
//!
//! Commit protocol: write `position.tmp`, fsync it, rename it over
//! `position`, fsync the directory. A crash at any point leaves either the
//! previous complete file or the new one; a stray `position.tmp` is ignored
//! (and overwritten by the next commit). A file that fails its checksum or
//! does not parse is an error, never silently treated as "no position", since
//! starting over would re-deliver or skip data.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::position::{PositionError, SourcePosition};

/// First line of a position file.
const MAGIC: &str = "fjord-cdc-position";
/// Format version written.
const FORMAT_VERSION: u32 = 2;
/// Oldest format version read (version 1 has no sink state and always a position).
const FORMAT_VERSION_MIN: u32 = 1;
/// Largest position file written or read back. A position is a few lines,
/// but a MySQL source's carries the DDL of every captured table (hex), a
/// few KiB per wide table: hundreds of tables must fit. Anything bigger is
/// not ours and is not read into memory whole; a commit past it is refused
/// rather than written unreadable.
pub const POSITION_FILE_BYTES_MAX: u64 = 16 * 1024 * 1024;

const FILE_NAME: &str = "position";
const TMP_NAME: &str = "position.tmp";

/// Why the offset store failed.
#[derive(Debug, thiserror::Error)]
pub enum OffsetError {
    /// File system error.
    #[error("offset store {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// The stored file is damaged or foreign.
    #[error("offset store {path}: {message}; move the state directory away to start over")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The stored position belongs to another source type.
    #[error("offset store {path} holds a position of a `{stored}` source, but the pipeline's source is `{expected}`; use another state-dir")]
    WrongSource {
        /// The file.
        path: PathBuf,
        /// Source type in the file.
        stored: String,
        /// Source type of the pipeline.
        expected: String,
    },
    /// A position could not be encoded.
    #[error(transparent)]
    Position(#[from] PositionError),
}

/// What a commit stored: the source position (none before the first
/// delivered batch) and the sink's state at it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Committed {
    /// Where the source resumes; `None`: from its startup mode.
    pub position: Option<SourcePosition>,
    /// The sink's state at that position.
    pub sink_state: Option<String>,
}

/// Durable storage of one pipeline's source position.
#[derive(Debug)]
pub struct OffsetStore {
    dir: PathBuf,
    source_type: String,
    /// What this process last loaded or committed (kept for
    /// [`OffsetStore::commit_sink_state`]).
    last: std::sync::Mutex<Committed>,
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> OffsetError + '_ {
    move |source| OffsetError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl OffsetStore {
    /// Opens (creating if needed) the state directory for a pipeline whose
    /// source is of `source_type`.
    pub fn open(dir: &Path, source_type: &str) -> Result<OffsetStore, OffsetError> {
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        Ok(OffsetStore {
            dir: dir.to_path_buf(),
            source_type: source_type.to_string(),
            last: std::sync::Mutex::new(Committed::default()),
        })
    }

    /// The committed position file's path.
    pub fn path(&self) -> PathBuf {
        self.dir.join(FILE_NAME)
    }

    /// The last committed position, or `None` if nothing was ever committed.
    pub fn load(&self) -> Result<Option<SourcePosition>, OffsetError> {
        Ok(self.load_committed()?.and_then(|c| c.position))
    }

    /// The last commit (position and sink state), or `None` if nothing was
    /// ever committed.
    pub fn load_committed(&self) -> Result<Option<Committed>, OffsetError> {
        let committed = self.read()?;
        if let Some(c) = &committed {
            *self.last.lock().unwrap_or_else(|e| e.into_inner()) = c.clone();
        }
        Ok(committed)
    }

    fn read(&self) -> Result<Option<Committed>, OffsetError> {
        let path = self.path();
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(&path)(e)),
        };
        let len = file.metadata().map_err(io_err(&path))?.len();
        let corrupt = |message: String| OffsetError::Corrupt {
            path: path.clone(),
            message,
        };
        if len > POSITION_FILE_BYTES_MAX {
            return Err(corrupt(format!(
                "file is {len} bytes, more than {POSITION_FILE_BYTES_MAX}"
            )));
        }
        let bytes = fs::read(&path).map_err(io_err(&path))?;
        let text =
            std::str::from_utf8(&bytes).map_err(|_| corrupt("file is not UTF-8".to_string()))?;
        let body_end = text
            .trim_end_matches('\n')
            .rfind('\n')
            .map(|i| i + 1)
            .ok_or_else(|| corrupt("file is truncated".to_string()))?;
        let (body, crc_line) = text.split_at(body_end);
        let stored_crc = crc_line
            .trim_end()
            .strip_prefix("crc32c=")
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .ok_or_else(|| corrupt("last line is not crc32c=<hex>".to_string()))?;
        let actual_crc = crc32c::crc32c(body.as_bytes());
        if stored_crc != actual_crc {
            return Err(corrupt(format!(
                "checksum mismatch (stored {stored_crc:08x}, computed {actual_crc:08x})"
            )));
        }
        let mut lines = body.lines();
        let header = lines.next().unwrap_or("");
        match header.split_once(' ') {
            Some((MAGIC, version))
                if version
                    .parse::<u32>()
                    .is_ok_and(|v| (FORMAT_VERSION_MIN..=FORMAT_VERSION).contains(&v)) => {}
            Some((MAGIC, version)) => {
                return Err(corrupt(format!(
                    "format version {version} is not supported (this build reads {FORMAT_VERSION_MIN} to {FORMAT_VERSION})"
                )))
            }
            _ => return Err(corrupt("not a Fjord position file".to_string())),
        }
        let source_line = lines.next().unwrap_or("");
        let stored = source_line
            .strip_prefix("source=")
            .ok_or_else(|| corrupt("missing source= line".to_string()))?;
        if stored != self.source_type {
            return Err(OffsetError::WrongSource {
                path,
                stored: stored.to_string(),
                expected: self.source_type.clone(),
            });
        }
        let mut rest = String::new();
        let mut sink_state = None;
        let mut no_position = false;
        for line in lines {
            if let Some(state) = line.strip_prefix("sink-state=") {
                sink_state = Some(state.to_string());
            } else if line == "position=none" {
                no_position = true;
            } else {
                rest.push_str(line);
                rest.push('\n');
            }
        }
        let position = if no_position {
            None
        } else {
            Some(SourcePosition::decode(&rest).map_err(|e| corrupt(e.to_string()))?)
        };
        Ok(Some(Committed {
            position,
            sink_state,
        }))
    }

    /// Durably replaces the stored position, keeping no sink state (temp
    /// file, fsync, rename, directory fsync).
    pub fn commit(&self, position: &SourcePosition) -> Result<(), OffsetError> {
        self.commit_all(&Committed {
            position: Some(position.clone()),
            sink_state: None,
        })
    }

    /// Durably replaces the position, keeping the sink state last committed
    /// (or loaded) by this process: for a position committed before the
    /// sink wrote anything since that state.
    pub fn commit_position(&self, position: &SourcePosition) -> Result<(), OffsetError> {
        let mut committed = self.last.lock().unwrap_or_else(|e| e.into_inner()).clone();
        committed.position = Some(position.clone());
        self.commit_all(&committed)
    }

    /// Durably replaces the sink state, keeping the position last committed
    /// (or loaded) by this process: for a sink whose state changes between
    /// two positions (a table it starts writing).
    pub fn commit_sink_state(&self, sink_state: &str) -> Result<(), OffsetError> {
        let mut committed = self.last.lock().unwrap_or_else(|e| e.into_inner()).clone();
        committed.sink_state = Some(sink_state.to_string());
        self.commit_all(&committed)
    }

    /// Durably replaces position and sink state together.
    pub fn commit_all(&self, committed: &Committed) -> Result<(), OffsetError> {
        let mut body = format!("{MAGIC} {FORMAT_VERSION}\nsource={}\n", self.source_type);
        match &committed.position {
            Some(position) => body.push_str(&position.encode()?),
            None => body.push_str("position=none\n"),
        }
        if let Some(state) = &committed.sink_state {
            if state.contains(['\n', '\r']) {
                return Err(OffsetError::Position(PositionError(
                    "sink state contains a line break".to_string(),
                )));
            }
            body.push_str("sink-state=");
            body.push_str(state);
            body.push('\n');
        }
        let crc = crc32c::crc32c(body.as_bytes());
        body.push_str(&format!("crc32c={crc:08x}\n"));
        if body.len() as u64 > POSITION_FILE_BYTES_MAX {
            return Err(OffsetError::Position(PositionError(format!(
                "the position to commit is {} bytes, more than the {POSITION_FILE_BYTES_MAX} a restart \
                 reads back (too many captured tables' schemas?); the last committed position stays",
                body.len()
            ))));
        }

        let tmp = self.dir.join(TMP_NAME);
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(io_err(&tmp))?;
        file.write_all(body.as_bytes()).map_err(io_err(&tmp))?;
        file.sync_all().map_err(io_err(&tmp))?;
        drop(file);
        let path = self.path();
        fs::rename(&tmp, &path).map_err(io_err(&path))?;
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io_err(&self.dir))?;
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = committed.clone();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::position::BinlogPosition;

    fn binlog(pos: u64) -> SourcePosition {
        SourcePosition::Binlog(BinlogPosition {
            file: "mysql-bin.000001".into(),
            pos,
            gtids: None,
            skip_events: 0,
            skip_rows: 3,
        })
    }

    #[test]
    fn a_position_carrying_hundreds_of_schemas_round_trips_and_one_too_big_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = OffsetStore::open(dir.path(), "mysql").unwrap();
        // ~300 wide tables' DDL as hex: far past the 64 KiB this used to allow.
        let big = SourcePosition::Opaque {
            source: "mysql-binlog".into(),
            data: "ab".repeat(600 * 1024),
        };
        store.commit(&big).unwrap();
        let reopened = OffsetStore::open(dir.path(), "mysql").unwrap();
        assert_eq!(reopened.load().unwrap(), Some(big.clone()));
        let too_big = SourcePosition::Opaque {
            source: "mysql-binlog".into(),
            data: "c".repeat(POSITION_FILE_BYTES_MAX as usize),
        };
        let err = store.commit(&too_big).unwrap_err().to_string();
        assert!(err.contains("reads back"), "{err}");
        // Refused, not written: the last commit is what a restart reads.
        let reopened = OffsetStore::open(dir.path(), "mysql").unwrap();
        assert_eq!(reopened.load().unwrap(), Some(big));
    }

    #[test]
    fn empty_state_dir_has_no_position() {
        let dir = tempfile::tempdir().unwrap();
        let store = OffsetStore::open(&dir.path().join("state"), "mysql").unwrap();
        assert_eq!(store.load().unwrap(), None);
    }

    #[test]
    fn committed_position_survives_reopen_and_last_commit_wins() {
        let dir = tempfile::tempdir().unwrap();
        let store = OffsetStore::open(dir.path(), "mysql").unwrap();
        store.commit(&binlog(100)).unwrap();
        store.commit(&binlog(200)).unwrap();
        let reopened = OffsetStore::open(dir.path(), "mysql").unwrap();
        assert_eq!(reopened.load().unwrap(), Some(binlog(200)));
    }

    #[test]
    fn crash_before_rename_keeps_the_previous_position() {
        let dir = tempfile::tempdir().unwrap();
        let store = OffsetStore::open(dir.path(), "mysql").unwrap();
        store.commit(&binlog(100)).unwrap();
        // A crash mid-commit leaves a partial temp file behind.
        fs::write(
            dir.path().join(TMP_NAME),
            "fjord-cdc-position 1\nsource=mysql\nkind=bin",
        )
        .unwrap();
        assert_eq!(store.load().unwrap(), Some(binlog(100)));
        // The next commit overwrites the leftover.
        store.commit(&binlog(300)).unwrap();
        assert_eq!(store.load().unwrap(), Some(binlog(300)));
    }

    #[test]
    fn damaged_file_is_an_error_not_a_fresh_start() {
        let dir = tempfile::tempdir().unwrap();
        let store = OffsetStore::open(dir.path(), "mysql").unwrap();
        store.commit(&binlog(100)).unwrap();
        let text = fs::read_to_string(store.path()).unwrap();
        fs::write(store.path(), text.replace("pos=100", "pos=900")).unwrap();
        assert!(matches!(store.load(), Err(OffsetError::Corrupt { .. })));
        fs::write(store.path(), &text[..text.len() / 2]).unwrap();
        assert!(matches!(store.load(), Err(OffsetError::Corrupt { .. })));
        fs::write(store.path(), "").unwrap();
        assert!(matches!(store.load(), Err(OffsetError::Corrupt { .. })));
    }

    #[test]
    fn unknown_version_and_other_source_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = OffsetStore::open(dir.path(), "mysql").unwrap();
        store.commit(&binlog(100)).unwrap();
        let other = OffsetStore::open(dir.path(), "debezium-json").unwrap();
        assert!(matches!(other.load(), Err(OffsetError::WrongSource { .. })));

        let body = "fjord-cdc-position 3\nsource=mysql\nkind=input-offset\nbytes=1\n";
        let crc = crc32c::crc32c(body.as_bytes());
        fs::write(store.path(), format!("{body}crc32c={crc:08x}\n")).unwrap();
        let err = store.load().unwrap_err();
        assert!(err.to_string().contains("version 3"), "{err}");
    }

    #[test]
    fn version_1_files_are_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = OffsetStore::open(dir.path(), "mysql").unwrap();
        let body = "fjord-cdc-position 1\nsource=mysql\nkind=input-offset\nbytes=7\n";
        let crc = crc32c::crc32c(body.as_bytes());
        fs::write(store.path(), format!("{body}crc32c={crc:08x}\n")).unwrap();
        assert_eq!(
            store.load().unwrap(),
            Some(SourcePosition::InputOffset { bytes: 7 })
        );
    }

    #[test]
    fn sink_state_is_committed_with_the_position_and_alone() {
        let dir = tempfile::tempdir().unwrap();
        let store = OffsetStore::open(dir.path(), "mysql").unwrap();
        // Before any position: the state alone.
        store.commit_sink_state("a=1").unwrap();
        let c = OffsetStore::open(dir.path(), "mysql")
            .unwrap()
            .load_committed()
            .unwrap()
            .unwrap();
        assert_eq!(c.position, None);
        assert_eq!(c.sink_state.as_deref(), Some("a=1"));
        store
            .commit_all(&Committed {
                position: Some(binlog(5)),
                sink_state: Some("b=2".into()),
            })
            .unwrap();
        // A state change keeps the last position.
        store.commit_sink_state("c=3").unwrap();
        let reopened = OffsetStore::open(dir.path(), "mysql").unwrap();
        let c = reopened.load_committed().unwrap().unwrap();
        assert_eq!(c.position, Some(binlog(5)));
        assert_eq!(c.sink_state.as_deref(), Some("c=3"));
        assert!(store.commit_sink_state("x\ny").is_err());
    }
}
