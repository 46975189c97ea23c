//! Fluss error codes and the error a request can be answered with.
//!
//! The numbers come from Fluss's `Errors.java` and are permanent on the wire;
//! clients map them to their own exception types, decide on retries by them,
//! and show the message Fjord puts next to them.

use std::borrow::Cow;
use std::fmt;

use crate::messages::ErrorResponse;

/// Every error code Fluss defines. The discriminant is the wire value, so
/// `code as i32` is what goes into an `error_code` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(i32)]
pub enum ErrorCode {
    /// `UNKNOWN_SERVER_ERROR` (-1).
    UnknownServerError = -1,
    /// `NONE` (0).
    None = 0,
    /// `NETWORK_EXCEPTION` (1).
    NetworkException = 1,
    /// `UNSUPPORTED_VERSION` (2).
    UnsupportedVersion = 2,
    /// `CORRUPT_MESSAGE` (3).
    CorruptMessage = 3,
    /// `DATABASE_NOT_EXIST` (4).
    DatabaseNotExist = 4,
    /// `DATABASE_NOT_EMPTY` (5).
    DatabaseNotEmpty = 5,
    /// `DATABASE_ALREADY_EXIST` (6).
    DatabaseAlreadyExist = 6,
    /// `TABLE_NOT_EXIST` (7).
    TableNotExist = 7,
    /// `TABLE_ALREADY_EXIST` (8).
    TableAlreadyExist = 8,
    /// `SCHEMA_NOT_EXIST` (9).
    SchemaNotExist = 9,
    /// `LOG_STORAGE_EXCEPTION` (10).
    LogStorageException = 10,
    /// `KV_STORAGE_EXCEPTION` (11).
    KvStorageException = 11,
    /// `NOT_LEADER_OR_FOLLOWER` (12).
    NotLeaderOrFollower = 12,
    /// `RECORD_TOO_LARGE_EXCEPTION` (13).
    RecordTooLargeException = 13,
    /// `CORRUPT_RECORD_EXCEPTION` (14).
    CorruptRecordException = 14,
    /// `INVALID_TABLE_EXCEPTION` (15).
    InvalidTableException = 15,
    /// `INVALID_DATABASE_EXCEPTION` (16).
    InvalidDatabaseException = 16,
    /// `INVALID_REPLICATION_FACTOR` (17).
    InvalidReplicationFactor = 17,
    /// `INVALID_REQUIRED_ACKS` (18).
    InvalidRequiredAcks = 18,
    /// `LOG_OFFSET_OUT_OF_RANGE_EXCEPTION` (19).
    LogOffsetOutOfRangeException = 19,
    /// `NON_PRIMARY_KEY_TABLE_EXCEPTION` (20).
    NonPrimaryKeyTableException = 20,
    /// `UNKNOWN_TABLE_OR_BUCKET_EXCEPTION` (21).
    UnknownTableOrBucketException = 21,
    /// `INVALID_UPDATE_VERSION_EXCEPTION` (22).
    InvalidUpdateVersionException = 22,
    /// `INVALID_COORDINATOR_EXCEPTION` (23).
    InvalidCoordinatorException = 23,
    /// `FENCED_LEADER_EPOCH_EXCEPTION` (24).
    FencedLeaderEpochException = 24,
    /// `REQUEST_TIME_OUT` (25).
    RequestTimeOut = 25,
    /// `STORAGE_EXCEPTION` (26).
    StorageException = 26,
    /// `OPERATION_NOT_ATTEMPTED_EXCEPTION` (27).
    OperationNotAttemptedException = 27,
    /// `NOT_ENOUGH_REPLICAS_AFTER_APPEND_EXCEPTION` (28).
    NotEnoughReplicasAfterAppendException = 28,
    /// `NOT_ENOUGH_REPLICAS_EXCEPTION` (29).
    NotEnoughReplicasException = 29,
    /// `SECURITY_TOKEN_EXCEPTION` (30).
    SecurityTokenException = 30,
    /// `OUT_OF_ORDER_SEQUENCE_EXCEPTION` (31).
    OutOfOrderSequenceException = 31,
    /// `DUPLICATE_SEQUENCE_EXCEPTION` (32).
    DuplicateSequenceException = 32,
    /// `UNKNOWN_WRITER_ID_EXCEPTION` (33).
    UnknownWriterIdException = 33,
    /// `INVALID_COLUMN_PROJECTION` (34).
    InvalidColumnProjection = 34,
    /// `INVALID_TARGET_COLUMN` (35).
    InvalidTargetColumn = 35,
    /// `PARTITION_NOT_EXISTS` (36).
    PartitionNotExists = 36,
    /// `TABLE_NOT_PARTITIONED_EXCEPTION` (37).
    TableNotPartitionedException = 37,
    /// `INVALID_TIMESTAMP_EXCEPTION` (38).
    InvalidTimestampException = 38,
    /// `INVALID_CONFIG_EXCEPTION` (39).
    InvalidConfigException = 39,
    /// `LAKE_STORAGE_NOT_CONFIGURED_EXCEPTION` (40).
    LakeStorageNotConfiguredException = 40,
    /// `KV_SNAPSHOT_NOT_EXIST` (41).
    KvSnapshotNotExist = 41,
    /// `PARTITION_ALREADY_EXISTS` (42).
    PartitionAlreadyExists = 42,
    /// `PARTITION_SPEC_INVALID_EXCEPTION` (43).
    PartitionSpecInvalidException = 43,
    /// `LEADER_NOT_AVAILABLE_EXCEPTION` (44).
    LeaderNotAvailableException = 44,
    /// `PARTITION_MAX_NUM_EXCEPTION` (45).
    PartitionMaxNumException = 45,
    /// `AUTHENTICATE_EXCEPTION` (46).
    AuthenticateException = 46,
    /// `SECURITY_DISABLED_EXCEPTION` (47).
    SecurityDisabledException = 47,
    /// `AUTHORIZATION_EXCEPTION` (48).
    AuthorizationException = 48,
    /// `BUCKET_MAX_NUM_EXCEPTION` (49).
    BucketMaxNumException = 49,
    /// `FENCED_TIERING_EPOCH_EXCEPTION` (50).
    FencedTieringEpochException = 50,
    /// `RETRIABLE_AUTHENTICATE_EXCEPTION` (51).
    RetriableAuthenticateException = 51,
    /// `INVALID_SERVER_RACK_INFO_EXCEPTION` (52).
    InvalidServerRackInfoException = 52,
    /// `LAKE_SNAPSHOT_NOT_EXIST` (53).
    LakeSnapshotNotExist = 53,
    /// `LAKE_TABLE_ALREADY_EXIST` (54).
    LakeTableAlreadyExist = 54,
    /// `INELIGIBLE_REPLICA_EXCEPTION` (55).
    IneligibleReplicaException = 55,
    /// `INVALID_ALTER_TABLE_EXCEPTION` (56).
    InvalidAlterTableException = 56,
    /// `DELETION_DISABLED_EXCEPTION` (57).
    DeletionDisabledException = 57,
    /// `SERVER_NOT_EXIST_EXCEPTION` (58).
    ServerNotExistException = 58,
    /// `SEVER_TAG_ALREADY_EXIST_EXCEPTION` (59).
    ServerTagAlreadyExistException = 59,
    /// `SEVER_TAG_NOT_EXIST_EXCEPTION` (60).
    ServerTagNotExistException = 60,
    /// `REBALANCE_FAILURE_EXCEPTION` (61).
    RebalanceFailureException = 61,
    /// `NO_REBALANCE_IN_PROGRESS_EXCEPTION` (62).
    NoRebalanceInProgressException = 62,
    /// `INVALID_PRODUCER_ID_EXCEPTION` (63).
    InvalidProducerIdException = 63,
    /// `CONFIG_EXCEPTION` (64).
    ConfigException = 64,
    /// `NOT_COORDINATOR_LEADER_EXCEPTION` (65).
    NotCoordinatorLeaderException = 65,
    /// `SCANNER_EXPIRED` (66).
    ScannerExpired = 66,
    /// `UNKNOWN_SCANNER_ID` (67).
    UnknownScannerId = 67,
    /// `INVALID_SCAN_REQUEST` (68).
    InvalidScanRequest = 68,
    /// `TOO_MANY_SCANNERS` (69).
    TooManyScanners = 69,
    /// `DISK_WRITE_LOCKED` (70).
    DiskWriteLocked = 70,
    /// `INSUFFICIENT_KV_LEADER_REPLICA_CAPACITY` (71).
    InsufficientKvLeaderReplicaCapacity = 71,
    /// `STORAGE_BACKPRESSURE_EXCEPTION` (72).
    StorageBackpressureException = 72,
    /// `HISTORICAL_PARTITION_THROTTLED` (73).
    HistoricalPartitionThrottled = 73,
}

impl ErrorCode {
    /// All 75 codes, in numeric order.
    pub const ALL: [ErrorCode; 75] = [
        ErrorCode::UnknownServerError,
        ErrorCode::None,
        ErrorCode::NetworkException,
        ErrorCode::UnsupportedVersion,
        ErrorCode::CorruptMessage,
        ErrorCode::DatabaseNotExist,
        ErrorCode::DatabaseNotEmpty,
        ErrorCode::DatabaseAlreadyExist,
        ErrorCode::TableNotExist,
        ErrorCode::TableAlreadyExist,
        ErrorCode::SchemaNotExist,
        ErrorCode::LogStorageException,
        ErrorCode::KvStorageException,
        ErrorCode::NotLeaderOrFollower,
        ErrorCode::RecordTooLargeException,
        ErrorCode::CorruptRecordException,
        ErrorCode::InvalidTableException,
        ErrorCode::InvalidDatabaseException,
        ErrorCode::InvalidReplicationFactor,
        ErrorCode::InvalidRequiredAcks,
        ErrorCode::LogOffsetOutOfRangeException,
        ErrorCode::NonPrimaryKeyTableException,
        ErrorCode::UnknownTableOrBucketException,
        ErrorCode::InvalidUpdateVersionException,
        ErrorCode::InvalidCoordinatorException,
        ErrorCode::FencedLeaderEpochException,
        ErrorCode::RequestTimeOut,
        ErrorCode::StorageException,
        ErrorCode::OperationNotAttemptedException,
        ErrorCode::NotEnoughReplicasAfterAppendException,
        ErrorCode::NotEnoughReplicasException,
        ErrorCode::SecurityTokenException,
        ErrorCode::OutOfOrderSequenceException,
        ErrorCode::DuplicateSequenceException,
        ErrorCode::UnknownWriterIdException,
        ErrorCode::InvalidColumnProjection,
        ErrorCode::InvalidTargetColumn,
        ErrorCode::PartitionNotExists,
        ErrorCode::TableNotPartitionedException,
        ErrorCode::InvalidTimestampException,
        ErrorCode::InvalidConfigException,
        ErrorCode::LakeStorageNotConfiguredException,
        ErrorCode::KvSnapshotNotExist,
        ErrorCode::PartitionAlreadyExists,
        ErrorCode::PartitionSpecInvalidException,
        ErrorCode::LeaderNotAvailableException,
        ErrorCode::PartitionMaxNumException,
        ErrorCode::AuthenticateException,
        ErrorCode::SecurityDisabledException,
        ErrorCode::AuthorizationException,
        ErrorCode::BucketMaxNumException,
        ErrorCode::FencedTieringEpochException,
        ErrorCode::RetriableAuthenticateException,
        ErrorCode::InvalidServerRackInfoException,
        ErrorCode::LakeSnapshotNotExist,
        ErrorCode::LakeTableAlreadyExist,
        ErrorCode::IneligibleReplicaException,
        ErrorCode::InvalidAlterTableException,
        ErrorCode::DeletionDisabledException,
        ErrorCode::ServerNotExistException,
        ErrorCode::ServerTagAlreadyExistException,
        ErrorCode::ServerTagNotExistException,
        ErrorCode::RebalanceFailureException,
        ErrorCode::NoRebalanceInProgressException,
        ErrorCode::InvalidProducerIdException,
        ErrorCode::ConfigException,
        ErrorCode::NotCoordinatorLeaderException,
        ErrorCode::ScannerExpired,
        ErrorCode::UnknownScannerId,
        ErrorCode::InvalidScanRequest,
        ErrorCode::TooManyScanners,
        ErrorCode::DiskWriteLocked,
        ErrorCode::InsufficientKvLeaderReplicaCapacity,
        ErrorCode::StorageBackpressureException,
        ErrorCode::HistoricalPartitionThrottled,
    ];

    /// The code with wire value `code`, or `None` for a value Fluss does not
    /// define (a client seeing one treats it as an unknown server error).
    pub const fn from_code(code: i32) -> Option<ErrorCode> {
        Some(match code {
            -1 => ErrorCode::UnknownServerError,
            0 => ErrorCode::None,
            1 => ErrorCode::NetworkException,
            2 => ErrorCode::UnsupportedVersion,
            3 => ErrorCode::CorruptMessage,
            4 => ErrorCode::DatabaseNotExist,
            5 => ErrorCode::DatabaseNotEmpty,
            6 => ErrorCode::DatabaseAlreadyExist,
            7 => ErrorCode::TableNotExist,
            8 => ErrorCode::TableAlreadyExist,
            9 => ErrorCode::SchemaNotExist,
            10 => ErrorCode::LogStorageException,
            11 => ErrorCode::KvStorageException,
            12 => ErrorCode::NotLeaderOrFollower,
            13 => ErrorCode::RecordTooLargeException,
            14 => ErrorCode::CorruptRecordException,
            15 => ErrorCode::InvalidTableException,
            16 => ErrorCode::InvalidDatabaseException,
            17 => ErrorCode::InvalidReplicationFactor,
            18 => ErrorCode::InvalidRequiredAcks,
            19 => ErrorCode::LogOffsetOutOfRangeException,
            20 => ErrorCode::NonPrimaryKeyTableException,
            21 => ErrorCode::UnknownTableOrBucketException,
            22 => ErrorCode::InvalidUpdateVersionException,
            23 => ErrorCode::InvalidCoordinatorException,
            24 => ErrorCode::FencedLeaderEpochException,
            25 => ErrorCode::RequestTimeOut,
            26 => ErrorCode::StorageException,
            27 => ErrorCode::OperationNotAttemptedException,
            28 => ErrorCode::NotEnoughReplicasAfterAppendException,
            29 => ErrorCode::NotEnoughReplicasException,
            30 => ErrorCode::SecurityTokenException,
            31 => ErrorCode::OutOfOrderSequenceException,
            32 => ErrorCode::DuplicateSequenceException,
            33 => ErrorCode::UnknownWriterIdException,
            34 => ErrorCode::InvalidColumnProjection,
            35 => ErrorCode::InvalidTargetColumn,
            36 => ErrorCode::PartitionNotExists,
            37 => ErrorCode::TableNotPartitionedException,
            38 => ErrorCode::InvalidTimestampException,
            39 => ErrorCode::InvalidConfigException,
            40 => ErrorCode::LakeStorageNotConfiguredException,
            41 => ErrorCode::KvSnapshotNotExist,
            42 => ErrorCode::PartitionAlreadyExists,
            43 => ErrorCode::PartitionSpecInvalidException,
            44 => ErrorCode::LeaderNotAvailableException,
            45 => ErrorCode::PartitionMaxNumException,
            46 => ErrorCode::AuthenticateException,
            47 => ErrorCode::SecurityDisabledException,
            48 => ErrorCode::AuthorizationException,
            49 => ErrorCode::BucketMaxNumException,
            50 => ErrorCode::FencedTieringEpochException,
            51 => ErrorCode::RetriableAuthenticateException,
            52 => ErrorCode::InvalidServerRackInfoException,
            53 => ErrorCode::LakeSnapshotNotExist,
            54 => ErrorCode::LakeTableAlreadyExist,
            55 => ErrorCode::IneligibleReplicaException,
            56 => ErrorCode::InvalidAlterTableException,
            57 => ErrorCode::DeletionDisabledException,
            58 => ErrorCode::ServerNotExistException,
            59 => ErrorCode::ServerTagAlreadyExistException,
            60 => ErrorCode::ServerTagNotExistException,
            61 => ErrorCode::RebalanceFailureException,
            62 => ErrorCode::NoRebalanceInProgressException,
            63 => ErrorCode::InvalidProducerIdException,
            64 => ErrorCode::ConfigException,
            65 => ErrorCode::NotCoordinatorLeaderException,
            66 => ErrorCode::ScannerExpired,
            67 => ErrorCode::UnknownScannerId,
            68 => ErrorCode::InvalidScanRequest,
            69 => ErrorCode::TooManyScanners,
            70 => ErrorCode::DiskWriteLocked,
            71 => ErrorCode::InsufficientKvLeaderReplicaCapacity,
            72 => ErrorCode::StorageBackpressureException,
            73 => ErrorCode::HistoricalPartitionThrottled,
            _ => return None,
        })
    }

    /// The wire value.
    pub const fn code(self) -> i32 {
        self as i32
    }

    /// The name Fluss gives this code (`Errors.java`), for logs.
    pub const fn name(self) -> &'static str {
        match self {
            ErrorCode::UnknownServerError => "UNKNOWN_SERVER_ERROR",
            ErrorCode::None => "NONE",
            ErrorCode::NetworkException => "NETWORK_EXCEPTION",
            ErrorCode::UnsupportedVersion => "UNSUPPORTED_VERSION",
            ErrorCode::CorruptMessage => "CORRUPT_MESSAGE",
            ErrorCode::DatabaseNotExist => "DATABASE_NOT_EXIST",
            ErrorCode::DatabaseNotEmpty => "DATABASE_NOT_EMPTY",
            ErrorCode::DatabaseAlreadyExist => "DATABASE_ALREADY_EXIST",
            ErrorCode::TableNotExist => "TABLE_NOT_EXIST",
            ErrorCode::TableAlreadyExist => "TABLE_ALREADY_EXIST",
            ErrorCode::SchemaNotExist => "SCHEMA_NOT_EXIST",
            ErrorCode::LogStorageException => "LOG_STORAGE_EXCEPTION",
            ErrorCode::KvStorageException => "KV_STORAGE_EXCEPTION",
            ErrorCode::NotLeaderOrFollower => "NOT_LEADER_OR_FOLLOWER",
            ErrorCode::RecordTooLargeException => "RECORD_TOO_LARGE_EXCEPTION",
            ErrorCode::CorruptRecordException => "CORRUPT_RECORD_EXCEPTION",
            ErrorCode::InvalidTableException => "INVALID_TABLE_EXCEPTION",
            ErrorCode::InvalidDatabaseException => "INVALID_DATABASE_EXCEPTION",
            ErrorCode::InvalidReplicationFactor => "INVALID_REPLICATION_FACTOR",
            ErrorCode::InvalidRequiredAcks => "INVALID_REQUIRED_ACKS",
            ErrorCode::LogOffsetOutOfRangeException => "LOG_OFFSET_OUT_OF_RANGE_EXCEPTION",
            ErrorCode::NonPrimaryKeyTableException => "NON_PRIMARY_KEY_TABLE_EXCEPTION",
            ErrorCode::UnknownTableOrBucketException => "UNKNOWN_TABLE_OR_BUCKET_EXCEPTION",
            ErrorCode::InvalidUpdateVersionException => "INVALID_UPDATE_VERSION_EXCEPTION",
            ErrorCode::InvalidCoordinatorException => "INVALID_COORDINATOR_EXCEPTION",
            ErrorCode::FencedLeaderEpochException => "FENCED_LEADER_EPOCH_EXCEPTION",
            ErrorCode::RequestTimeOut => "REQUEST_TIME_OUT",
            ErrorCode::StorageException => "STORAGE_EXCEPTION",
            ErrorCode::OperationNotAttemptedException => "OPERATION_NOT_ATTEMPTED_EXCEPTION",
            ErrorCode::NotEnoughReplicasAfterAppendException => {
                "NOT_ENOUGH_REPLICAS_AFTER_APPEND_EXCEPTION"
            }
            ErrorCode::NotEnoughReplicasException => "NOT_ENOUGH_REPLICAS_EXCEPTION",
            ErrorCode::SecurityTokenException => "SECURITY_TOKEN_EXCEPTION",
            ErrorCode::OutOfOrderSequenceException => "OUT_OF_ORDER_SEQUENCE_EXCEPTION",
            ErrorCode::DuplicateSequenceException => "DUPLICATE_SEQUENCE_EXCEPTION",
            ErrorCode::UnknownWriterIdException => "UNKNOWN_WRITER_ID_EXCEPTION",
            ErrorCode::InvalidColumnProjection => "INVALID_COLUMN_PROJECTION",
            ErrorCode::InvalidTargetColumn => "INVALID_TARGET_COLUMN",
            ErrorCode::PartitionNotExists => "PARTITION_NOT_EXISTS",
            ErrorCode::TableNotPartitionedException => "TABLE_NOT_PARTITIONED_EXCEPTION",
            ErrorCode::InvalidTimestampException => "INVALID_TIMESTAMP_EXCEPTION",
            ErrorCode::InvalidConfigException => "INVALID_CONFIG_EXCEPTION",
            ErrorCode::LakeStorageNotConfiguredException => "LAKE_STORAGE_NOT_CONFIGURED_EXCEPTION",
            ErrorCode::KvSnapshotNotExist => "KV_SNAPSHOT_NOT_EXIST",
            ErrorCode::PartitionAlreadyExists => "PARTITION_ALREADY_EXISTS",
            ErrorCode::PartitionSpecInvalidException => "PARTITION_SPEC_INVALID_EXCEPTION",
            ErrorCode::LeaderNotAvailableException => "LEADER_NOT_AVAILABLE_EXCEPTION",
            ErrorCode::PartitionMaxNumException => "PARTITION_MAX_NUM_EXCEPTION",
            ErrorCode::AuthenticateException => "AUTHENTICATE_EXCEPTION",
            ErrorCode::SecurityDisabledException => "SECURITY_DISABLED_EXCEPTION",
            ErrorCode::AuthorizationException => "AUTHORIZATION_EXCEPTION",
            ErrorCode::BucketMaxNumException => "BUCKET_MAX_NUM_EXCEPTION",
            ErrorCode::FencedTieringEpochException => "FENCED_TIERING_EPOCH_EXCEPTION",
            ErrorCode::RetriableAuthenticateException => "RETRIABLE_AUTHENTICATE_EXCEPTION",
            ErrorCode::InvalidServerRackInfoException => "INVALID_SERVER_RACK_INFO_EXCEPTION",
            ErrorCode::LakeSnapshotNotExist => "LAKE_SNAPSHOT_NOT_EXIST",
            ErrorCode::LakeTableAlreadyExist => "LAKE_TABLE_ALREADY_EXIST",
            ErrorCode::IneligibleReplicaException => "INELIGIBLE_REPLICA_EXCEPTION",
            ErrorCode::InvalidAlterTableException => "INVALID_ALTER_TABLE_EXCEPTION",
            ErrorCode::DeletionDisabledException => "DELETION_DISABLED_EXCEPTION",
            ErrorCode::ServerNotExistException => "SERVER_NOT_EXIST_EXCEPTION",
            ErrorCode::ServerTagAlreadyExistException => "SEVER_TAG_ALREADY_EXIST_EXCEPTION",
            ErrorCode::ServerTagNotExistException => "SEVER_TAG_NOT_EXIST_EXCEPTION",
            ErrorCode::RebalanceFailureException => "REBALANCE_FAILURE_EXCEPTION",
            ErrorCode::NoRebalanceInProgressException => "NO_REBALANCE_IN_PROGRESS_EXCEPTION",
            ErrorCode::InvalidProducerIdException => "INVALID_PRODUCER_ID_EXCEPTION",
            ErrorCode::ConfigException => "CONFIG_EXCEPTION",
            ErrorCode::NotCoordinatorLeaderException => "NOT_COORDINATOR_LEADER_EXCEPTION",
            ErrorCode::ScannerExpired => "SCANNER_EXPIRED",
            ErrorCode::UnknownScannerId => "UNKNOWN_SCANNER_ID",
            ErrorCode::InvalidScanRequest => "INVALID_SCAN_REQUEST",
            ErrorCode::TooManyScanners => "TOO_MANY_SCANNERS",
            ErrorCode::DiskWriteLocked => "DISK_WRITE_LOCKED",
            ErrorCode::InsufficientKvLeaderReplicaCapacity => {
                "INSUFFICIENT_KV_LEADER_REPLICA_CAPACITY"
            }
            ErrorCode::StorageBackpressureException => "STORAGE_BACKPRESSURE_EXCEPTION",
            ErrorCode::HistoricalPartitionThrottled => "HISTORICAL_PARTITION_THROTTLED",
        }
    }

    /// Builds an [`ApiError`] with this code and `message`.
    pub fn with_message(self, message: impl Into<Cow<'static, str>>) -> ApiError {
        ApiError::new(self, message)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.name(), self.code())
    }
}

/// An error to send to a client: a Fluss error code and a message that says
/// what was wrong. Built only when the error happens, so the message may be
/// formatted freely.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ApiError {
    code: ErrorCode,
    message: Cow<'static, str>,
}

impl ApiError {
    /// An error with `code` and `message`.
    pub fn new(code: ErrorCode, message: impl Into<Cow<'static, str>>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// The error code.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The protobuf body of an error response frame.
    pub fn to_response(&self) -> ErrorResponse {
        ErrorResponse {
            error_code: self.code.code(),
            error_message: Some(self.message.clone().into_owned()),
        }
    }

    /// Reads an error response body a server sent. An error code Fluss does
    /// not define becomes [`ErrorCode::UnknownServerError`], with the raw
    /// value kept in the message, as the official clients do.
    pub fn from_response(response: ErrorResponse) -> Self {
        let message = response.error_message.unwrap_or_default();
        match ErrorCode::from_code(response.error_code) {
            Some(code) => Self::new(code, message),
            None => Self::new(
                ErrorCode::UnknownServerError,
                format!("unknown error code {}: {message}", response.error_code),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_are_dense_from_minus_one() {
        for (index, code) in ErrorCode::ALL.into_iter().enumerate() {
            assert_eq!(code.code(), index as i32 - 1, "{code}");
            assert_eq!(ErrorCode::from_code(code.code()), Some(code));
        }
        assert_eq!(ErrorCode::from_code(-2), None);
        assert_eq!(ErrorCode::from_code(74), None);
    }

    #[test]
    fn codes_clients_branch_on_have_fluss_values() {
        let expected = [
            (ErrorCode::UnknownServerError, -1),
            (ErrorCode::None, 0),
            (ErrorCode::UnsupportedVersion, 2),
            (ErrorCode::CorruptMessage, 3),
            (ErrorCode::DatabaseNotExist, 4),
            (ErrorCode::TableNotExist, 7),
            (ErrorCode::NotLeaderOrFollower, 12),
            (ErrorCode::LogOffsetOutOfRangeException, 19),
            (ErrorCode::UnknownTableOrBucketException, 21),
            (ErrorCode::OutOfOrderSequenceException, 31),
            (ErrorCode::DuplicateSequenceException, 32),
            (ErrorCode::UnknownWriterIdException, 33),
            (ErrorCode::TableNotPartitionedException, 37),
            (ErrorCode::StorageBackpressureException, 72),
        ];
        for (code, value) in expected {
            assert_eq!(code.code(), value, "{code:?}");
        }
    }

    #[test]
    fn unknown_code_in_response_becomes_unknown_server_error() {
        let error = ApiError::from_response(ErrorResponse {
            error_code: 9999,
            error_message: Some("boom".into()),
        });
        assert_eq!(error.code(), ErrorCode::UnknownServerError);
        assert!(error.message().contains("9999") && error.message().contains("boom"));
    }

    #[test]
    fn error_response_round_trips() {
        let error = ErrorCode::TableNotExist.with_message("table db.t does not exist");
        assert_eq!(ApiError::from_response(error.to_response()), error);
    }
}
