//! The server's error type: every failure a client can cause carries the
//! Fluss error code a Fluss server would answer with and a message saying
//! what was wrong. Messages are built only when the error happens.

use crate::meta::store::MetaError;

/// Fluss protocol error codes the server answers with (numbers as in Fluss's
/// `Errors` enum; the wire mapping lives in fjord-proto, these are the same
/// numbers so the server's own logic need not depend on protobuf types).
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum Code {
    UnknownServerError = -1,
    NetworkException = 1,
    UnsupportedVersion = 2,
    CorruptMessage = 3,
    DatabaseNotExist = 4,
    DatabaseNotEmpty = 5,
    DatabaseAlreadyExist = 6,
    TableNotExist = 7,
    TableAlreadyExist = 8,
    SchemaNotExist = 9,
    LogStorageException = 10,
    NotLeaderOrFollower = 12,
    RecordTooLarge = 13,
    CorruptRecord = 14,
    InvalidTable = 15,
    InvalidDatabase = 16,
    InvalidReplicationFactor = 17,
    InvalidRequiredAcks = 18,
    LogOffsetOutOfRange = 19,
    UnknownTableOrBucket = 21,
    RequestTimeOut = 25,
    StorageException = 26,
    OutOfOrderSequence = 31,
    DuplicateSequence = 32,
    UnknownWriterId = 33,
    InvalidColumnProjection = 34,
    PartitionNotExists = 36,
    TableNotPartitioned = 37,
    InvalidTimestamp = 38,
    InvalidConfig = 39,
    BucketMaxNum = 49,
}

/// A failure to report to the client: a Fluss error code and a message.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message} (Fluss error code {})", *code as i32)]
pub struct ApiError {
    /// The Fluss error code.
    pub code: Code,
    /// What was wrong and, where useful, what to do.
    pub message: String,
}

impl ApiError {
    /// An error with `code` and `message`.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

impl From<MetaError> for ApiError {
    fn from(e: MetaError) -> Self {
        // Metadata-store failures that reach a client are server-side
        // problems (I/O, corruption, a lost race we did not retry).
        ApiError::new(Code::UnknownServerError, e.to_string())
    }
}
