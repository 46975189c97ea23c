//! The error type of the metadata half of the crate: data types, schemas,
//! table and database descriptors, and their Fluss JSON forms.
//!
//! Every variant names what was wrong and where, because these errors reach
//! users (a CreateTable with a bad schema is answered with this message).

use thiserror::Error;

/// What was wrong with a type, schema, descriptor or its JSON.
#[derive(Debug, Error)]
pub enum SchemaError {
    /// The bytes are not JSON at all.
    #[error("malformed JSON in {what}: {source}")]
    Syntax {
        /// Which document was being parsed ("table descriptor", ...).
        what: &'static str,
        /// The parser's error (line/column).
        source: serde_json::Error,
    },
    /// A required key is absent.
    #[error("missing required field `{field}` in {context}")]
    MissingField {
        /// The JSON key.
        field: &'static str,
        /// The object it belongs to.
        context: String,
    },
    /// A key is present with a value of the wrong JSON type or range.
    #[error("field `{field}` in {context} must be {expected}")]
    WrongField {
        /// The JSON key.
        field: &'static str,
        /// The object it belongs to.
        context: String,
        /// What the value must be.
        expected: &'static str,
    },
    /// A `type` value that is not one of Fluss's data type roots.
    #[error("unknown data type `{0}`: expected one of BOOLEAN, TINYINT, SMALLINT, INTEGER, BIGINT, FLOAT, DOUBLE, CHAR, STRING, DECIMAL, DATE, TIME_WITHOUT_TIME_ZONE, TIMESTAMP_WITHOUT_TIME_ZONE, TIMESTAMP_WITH_LOCAL_TIME_ZONE, BYTES, BINARY, ARRAY, MAP, ROW")]
    UnknownType(String),
    /// A data type's parameters are outside Fluss's ranges.
    #[error("invalid {type_name} type: {reason}")]
    InvalidType {
        /// The SQL name of the type.
        type_name: &'static str,
        /// What is out of range.
        reason: String,
    },
    /// A schema that Fluss would refuse (duplicate names or ids, bad primary key, ...).
    #[error("invalid schema: {0}")]
    InvalidSchema(String),
    /// A table descriptor Fluss would refuse (bad bucket key, partition key, ...).
    #[error("invalid table: {0}")]
    InvalidTable(String),
}
