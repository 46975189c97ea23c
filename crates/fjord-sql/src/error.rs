//! The error of a SQL statement: what was wrong and, where it helps, what
//! to do. Front ends turn it into their own error (a Postgres SQLSTATE, a
//! gRPC status, a line on stderr); nothing is built on the success path.

use datafusion::error::DataFusionError;
use fjord_client::ClientError;

/// A failed statement.
#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    /// The statement (or a part of it) is valid SQL that Fjord does not run.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// The statement does not parse or names something that does not exist.
    #[error("{0}")]
    Invalid(String),
    /// A query limit was reached (memory, time, concurrency).
    #[error("query limit: {0}")]
    Limit(String),
    /// The Fjord server answered with an error, or could not be reached.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The query engine failed (planning or execution).
    #[error("{}", datafusion_message(.0))]
    Engine(#[from] DataFusionError),
}

/// The message of an engine error, without DataFusion's wrapping of errors
/// that came from Fjord (an external error holding a [`SqlError`]).
fn datafusion_message(e: &DataFusionError) -> String {
    match e.find_root() {
        DataFusionError::External(inner) => match inner.downcast_ref::<SqlError>() {
            Some(sql) => sql.to_string(),
            None => inner.to_string(),
        },
        DataFusionError::ResourcesExhausted(why) => format!(
            "query limit: the query needs more memory than sql.query.memory-max allows ({why})"
        ),
        root => root.to_string(),
    }
}

impl SqlError {
    /// This error as DataFusion's, to cross its traits (table providers,
    /// streams); [`SqlError::from`] unwraps it again.
    pub fn into_datafusion(self) -> DataFusionError {
        match self {
            SqlError::Engine(e) => e,
            other => DataFusionError::External(Box::new(other)),
        }
    }

    /// Whether the statement was refused as unsupported.
    pub fn is_unsupported(&self) -> bool {
        match self {
            SqlError::Unsupported(_) => true,
            SqlError::Engine(e) => {
                matches!(e.find_root(), DataFusionError::NotImplemented(_))
                    || matches!(e.find_root(), DataFusionError::External(inner)
                if inner.downcast_ref::<SqlError>().is_some_and(SqlError::is_unsupported))
            }
            _ => false,
        }
    }
}

/// A client error as DataFusion's.
pub(crate) fn client_err(e: ClientError) -> DataFusionError {
    SqlError::Client(e).into_datafusion()
}

/// Results of this crate.
pub type Result<T, E = SqlError> = std::result::Result<T, E>;
