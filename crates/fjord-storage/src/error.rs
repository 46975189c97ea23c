//! The typed errors of the storage engine. Each variant says what was wrong;
//! the server maps them to Fluss error codes (noted per variant).

use std::io;
use std::path::PathBuf;

use fjord_format::log_batch::LogBatchError;

/// Everything a log tablet or the log manager can refuse or fail with.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// A batch in an append failed validation (Fluss `CORRUPT_MESSAGE`, code 3).
    #[error("corrupt log batch at byte {position} of the append: {source}")]
    CorruptBatch {
        /// Byte position of the bad batch within the appended buffer.
        position: usize,
        /// What is wrong with it.
        #[source]
        source: LogBatchError,
    },
    /// An append held no batch at all (Fluss `CORRUPT_MESSAGE`, code 3).
    #[error("append of {len} bytes holds no complete log batch")]
    EmptyAppend {
        /// Size of the appended buffer.
        len: usize,
    },
    /// A batch exceeds the configured maximum (Fluss `RECORD_TOO_LARGE_EXCEPTION`, code 13).
    #[error("log batch of {size} bytes exceeds the {max}-byte limit (log.batch.max-size)")]
    BatchTooLarge {
        /// Size of the batch.
        size: usize,
        /// The configured limit.
        max: usize,
    },
    /// A read or truncation names an offset outside the log
    /// (Fluss `LOG_OFFSET_OUT_OF_RANGE_EXCEPTION`, code 19).
    #[error("offset {offset} is out of range: the log holds [{log_start}, {log_end})")]
    OffsetOutOfRange {
        /// Requested offset.
        offset: i64,
        /// First offset held.
        log_start: i64,
        /// Offset after the last one held.
        log_end: i64,
    },
    /// An idempotent writer's batch sequence does not follow its last one
    /// (Fluss `OUT_OF_ORDER_SEQUENCE_EXCEPTION`, code 31).
    #[error(
        "out of order batch sequence for writer {writer_id}: got {batch_sequence}, last appended {last_sequence}"
    )]
    OutOfOrderSequence {
        /// The writer.
        writer_id: i64,
        /// Sequence of the rejected batch.
        batch_sequence: i32,
        /// Last sequence appended for this writer (-1 if none is known).
        last_sequence: i32,
    },
    /// The KV engine of primary-key tables failed (Fluss
    /// `KV_STORAGE_EXCEPTION`, code 11, which clients retry).
    #[error("{what} ({path}): {message}")]
    Kv {
        /// What was being done.
        what: &'static str,
        /// The engine's directory.
        path: PathBuf,
        /// The engine's error.
        message: String,
    },
    /// The disk is full (Fluss `LOG_STORAGE_EXCEPTION`, code 10); the append
    /// was not applied.
    #[error("storage full while {context} {path}")]
    StorageFull {
        /// What was being done.
        context: &'static str,
        /// The file involved.
        path: PathBuf,
    },
    /// An I/O error (Fluss `LOG_STORAGE_EXCEPTION`, code 10).
    #[error("I/O error while {context} {path}: {source}")]
    Io {
        /// What was being done.
        context: &'static str,
        /// The file or directory involved.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The tablet went offline after an fsync failure; it is never retried
    /// because the kernel may have dropped the dirty pages
    /// (Fluss `LOG_STORAGE_EXCEPTION`, code 10; the bucket needs a restart).
    #[error("log tablet {dir} is offline after an fsync failure; restart to recover")]
    Offline {
        /// The tablet directory.
        dir: PathBuf,
    },
    /// A read touched a range that failed validation below the recovery
    /// point; it is refused rather than truncated (Fluss
    /// `CORRUPT_RECORD_EXCEPTION`, code 14).
    #[error(
        "offsets [{from_offset}, {to_offset}) of segment {segment} are damaged (corrupt below the recovery point) and are not served"
    )]
    Damaged {
        /// The segment file.
        segment: PathBuf,
        /// First damaged offset.
        from_offset: i64,
        /// Offset after the damaged range.
        to_offset: i64,
    },
    /// A metadata file (checkpoint, writer snapshot) is unreadable: bad magic,
    /// unknown version, bad checksum or bad size. Never misparsed.
    #[error("{path} is not a valid {kind} file: {reason}")]
    BadFile {
        /// The file.
        path: PathBuf,
        /// Which kind of file it should be.
        kind: &'static str,
        /// What is wrong.
        reason: &'static str,
    },
    /// A segment rewrite (the compaction of a primary-key changelog) was
    /// refused: what it was given or the log it would change does not allow
    /// it; nothing was changed (Fluss `LOG_STORAGE_EXCEPTION`, code 10).
    #[error("segment rewrite refused: {0}")]
    RewriteRefused(&'static str),
    /// A configuration value is out of its allowed range.
    #[error("invalid log configuration: {0}")]
    Config(&'static str),
}

impl StorageError {
    /// Wraps an I/O error, turning "no space left" into [`StorageError::StorageFull`].
    pub(crate) fn io(context: &'static str, path: &std::path::Path, source: io::Error) -> Self {
        if source.raw_os_error() == Some(28) {
            // ENOSPC
            return StorageError::StorageFull {
                context,
                path: path.to_path_buf(),
            };
        }
        StorageError::Io {
            context,
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Result alias for the storage crate.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;
