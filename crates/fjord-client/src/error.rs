//! The client's error type: what went wrong talking to a Fluss-protocol
//! server, with the server's error code and message when it sent one.

use fjord_proto::{ApiError, ApiKey, ErrorCode};

/// An error from the native client.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The socket failed (connect, read or write).
    #[error("connection to {addr} failed: {source}")]
    Io {
        /// The server address.
        addr: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The connection closed before the response arrived.
    #[error("connection to {addr} closed before the {api} response arrived")]
    ConnectionClosed {
        /// The server address.
        addr: String,
        /// The API whose response was lost.
        api: &'static str,
    },
    /// None of several servers answered (e.g. every leader of a table asked
    /// for fresh leaders). Retriable: the servers may come back.
    #[error("{what}: none of the {tried} {servers} tried answered; the last error: {last}")]
    Unreachable {
        /// What was being done.
        what: String,
        /// How many servers were tried.
        tried: usize,
        /// What the servers were (e.g. "distinct leaders").
        servers: &'static str,
        /// The last server's error.
        #[source]
        last: Box<ClientError>,
    },
    /// The server answered with a Fluss error.
    #[error("{api} failed: {} ({}): {}", .error.code().name(), .error.code().code(), .error.message())]
    Server {
        /// The API that failed.
        api: &'static str,
        /// The server's error code and message.
        error: ApiError,
    },
    /// The server's bytes did not decode as the protocol says they must.
    #[error("malformed {api} response: {message}")]
    Protocol {
        /// The API whose response was malformed.
        api: &'static str,
        /// What was wrong.
        message: String,
    },
    /// The table, bucket or data did not match what the client expected.
    #[error("{0}")]
    Invalid(String),
    /// Encoding or decoding a log batch failed.
    #[error("log batch: {0}")]
    Format(String),
    /// A client option had a value the client cannot use.
    #[error("invalid value {value:?} for option {key}: expected {expected}")]
    Config {
        /// The option's name (Fluss's, e.g. `client.writer.batch-size`).
        key: &'static str,
        /// The value given.
        value: String,
        /// What the option accepts.
        expected: &'static str,
    },
    /// The writer was closed, or its background tasks stopped, before the
    /// operation could complete.
    #[error("writer closed: {0}")]
    WriterClosed(&'static str),
}

impl ClientError {
    /// The Fluss error code when the server sent one.
    pub fn error_code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Server { error, .. } => Some(error.code()),
            _ => None,
        }
    }

    /// Whether retrying the same request may succeed (Fluss's
    /// `RetriableException` family: network and metadata errors, storage
    /// and replica pressure, timeouts).
    pub fn is_retriable(&self) -> bool {
        match self {
            ClientError::Io { .. }
            | ClientError::ConnectionClosed { .. }
            | ClientError::Unreachable { .. } => true,
            ClientError::Server { error, .. } => is_retriable_code(error.code()),
            _ => false,
        }
    }

    /// Whether the error says the client's view of the cluster (leaders,
    /// connections) is stale and metadata must be refreshed before a retry.
    pub fn needs_metadata_refresh(&self) -> bool {
        match self {
            ClientError::Io { .. }
            | ClientError::ConnectionClosed { .. }
            | ClientError::Unreachable { .. } => true,
            ClientError::Server { error, .. } => needs_refresh_code(error.code()),
            _ => false,
        }
    }

    /// A copy of this error for a second receiver (the first failure of a
    /// writer is reported both to the batch's completion and to `flush`).
    /// Built only when an error happens.
    pub fn duplicate(&self) -> ClientError {
        match self {
            ClientError::Io { addr, source } => ClientError::Io {
                addr: addr.clone(),
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
            ClientError::ConnectionClosed { addr, api } => ClientError::ConnectionClosed {
                addr: addr.clone(),
                api,
            },
            ClientError::Unreachable {
                what,
                tried,
                servers,
                last,
            } => ClientError::Unreachable {
                what: what.clone(),
                tried: *tried,
                servers,
                last: Box::new(last.duplicate()),
            },
            ClientError::Server { api, error } => ClientError::Server {
                api,
                error: error.clone(),
            },
            ClientError::Protocol { api, message } => ClientError::Protocol {
                api,
                message: message.clone(),
            },
            ClientError::Invalid(m) => ClientError::Invalid(m.clone()),
            ClientError::Format(m) => ClientError::Format(m.clone()),
            ClientError::Config {
                key,
                value,
                expected,
            } => ClientError::Config {
                key,
                value: value.clone(),
                expected,
            },
            ClientError::WriterClosed(why) => ClientError::WriterClosed(why),
        }
    }

    pub(crate) fn server(api: ApiKey, error: ApiError) -> Self {
        ClientError::Server {
            api: api.name(),
            error,
        }
    }
}

/// Fluss error codes whose exception extends `RetriableException`.
fn is_retriable_code(code: ErrorCode) -> bool {
    needs_refresh_code(code)
        || matches!(
            code,
            ErrorCode::CorruptMessage
                | ErrorCode::CorruptRecordException
                | ErrorCode::DiskWriteLocked
                | ErrorCode::HistoricalPartitionThrottled
                | ErrorCode::KvStorageException
                | ErrorCode::NotEnoughReplicasAfterAppendException
                | ErrorCode::NotEnoughReplicasException
                | ErrorCode::SchemaNotExist
                | ErrorCode::StorageBackpressureException
                | ErrorCode::StorageException
                | ErrorCode::RequestTimeOut
        )
}

/// Fluss error codes whose exception extends `InvalidMetadataException`.
fn needs_refresh_code(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::NetworkException
            | ErrorCode::NotLeaderOrFollower
            | ErrorCode::UnknownTableOrBucketException
            | ErrorCode::LeaderNotAvailableException
    )
}

/// The client's result type.
pub type Result<T> = std::result::Result<T, ClientError>;
