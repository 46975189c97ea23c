//! Errors a client sees: fjord-proto's [`ApiError`] (a Fluss error code and a
//! message saying what was wrong), plus the conversions from the server's
//! internal errors. Messages are built only when the error happens.

pub use fjord_proto::{ApiError, ErrorCode};

use crate::meta::store::MetaError;

impl From<MetaError> for ApiError {
    fn from(e: MetaError) -> Self {
        // Metadata-store failures that reach a client are server-side
        // problems (I/O, corruption, a lost race that was not retried).
        ApiError::new(ErrorCode::UnknownServerError, e.to_string())
    }
}
