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
}

impl ClientError {
    /// The Fluss error code when the server sent one.
    pub fn error_code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Server { error, .. } => Some(error.code()),
            _ => None,
        }
    }

    pub(crate) fn server(api: ApiKey, error: ApiError) -> Self {
        ClientError::Server {
            api: api.name(),
            error,
        }
    }
}

/// The client's result type.
pub type Result<T> = std::result::Result<T, ClientError>;
