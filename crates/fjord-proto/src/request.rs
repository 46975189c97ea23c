//! Typed requests and responses of the APIs Fjord serves, and the checks
//! that turn a frame's api key, version and body into one.
//!
//! [`decode_request`] refuses, before touching the body, an api key Fluss
//! does not define and a key or version Fjord does not serve; both come back
//! as a [`RequestError`] carrying the Fluss error code to answer with, so the
//! server replies with an error frame and the connection stays usable.

use bytes::{Bytes, BytesMut};
use prost::Message;

use crate::api_key::{ApiKey, VersionRange};
use crate::error::{ApiError, ErrorCode};
use crate::frame::{encode_request, encode_success_response, FrameError, RequestHeader};
use crate::messages as pb;

/// Why a request frame's body could not become a [`Request`]. Every variant
/// is answerable: see [`RequestError::to_api_error`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The api key is not one Fluss defines.
    #[error("unknown api key {api_key}")]
    UnknownApiKey {
        /// The raw id from the header.
        api_key: i16,
    },
    /// The api key is known but Fjord does not serve it, or not at this version.
    #[error("{api_key} version {api_version} is not supported{}", supported_suffix(*.supported))]
    UnsupportedVersion {
        /// The api key.
        api_key: ApiKey,
        /// The version asked for.
        api_version: i16,
        /// The versions served, `None` if the API is not served at all.
        supported: Option<VersionRange>,
    },
    /// The body is not a valid protobuf message of the api's request type.
    #[error("malformed {api_key} message body: {source}")]
    Malformed {
        /// The api key.
        api_key: ApiKey,
        /// What prost found wrong.
        source: prost::DecodeError,
    },
}

fn supported_suffix(supported: Option<VersionRange>) -> String {
    match supported {
        Some(range) => format!(" (Fjord serves versions {range})"),
        None => " (Fjord does not serve this API)".to_owned(),
    }
}

impl RequestError {
    /// The Fluss error code to answer with. For an api key it does not know,
    /// a Fluss server logs and sends nothing, leaving the client waiting;
    /// Fjord answers `UNSUPPORTED_VERSION`, which tells the client it is
    /// newer than the server. A body that does not parse is `CORRUPT_MESSAGE`
    /// (Fluss would send `UNKNOWN_SERVER_ERROR` with its parser's stack trace).
    pub fn error_code(&self) -> ErrorCode {
        match self {
            RequestError::UnknownApiKey { .. } | RequestError::UnsupportedVersion { .. } => {
                ErrorCode::UnsupportedVersion
            }
            RequestError::Malformed { .. } => ErrorCode::CorruptMessage,
        }
    }

    /// The error to answer the request with, message included.
    pub fn to_api_error(&self) -> ApiError {
        ApiError::new(self.error_code(), self.to_string())
    }
}

/// Declares, from one list, the request and response enums, their api keys
/// and their decoders, so a served API cannot be half added.
macro_rules! served_apis {
    ($($variant:ident => $key:ident, $request:ident, $response:ident;)*) => {
        /// A decoded request of an API Fjord serves. Closed: one variant per
        /// served api key.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Request {
            $(
                #[doc = concat!("`", stringify!($request), "`.")]
                $variant(pb::$request),
            )*
        }

        /// A response of an API Fjord serves, one variant per [`Request`] variant.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Response {
            $(
                #[doc = concat!("`", stringify!($response), "`.")]
                $variant(pb::$response),
            )*
        }

        impl Request {
            /// The api key of this request.
            pub fn api_key(&self) -> ApiKey {
                match self {
                    $(Request::$variant(_) => ApiKey::$key,)*
                }
            }

            /// Decodes `body` as the request type of `api_key`; `None` if the
            /// key is not one Fjord serves.
            fn decode_body(api_key: ApiKey, body: Bytes) -> Option<Result<Request, prost::DecodeError>> {
                Some(match api_key {
                    $(ApiKey::$key => pb::$request::decode(body).map(Request::$variant),)*
                    _ => return None,
                })
            }

            /// Client side: appends this request as a frame to `buf`.
            pub fn encode_frame(
                &self,
                buf: &mut BytesMut,
                api_version: i16,
                request_id: i32,
            ) -> Result<(), FrameError> {
                let header = RequestHeader {
                    api_key: self.api_key().id(),
                    api_version,
                    request_id,
                };
                match self {
                    $(Request::$variant(message) => encode_request(buf, header, message),)*
                }
            }
        }

        impl Response {
            /// The api key this response answers.
            pub fn api_key(&self) -> ApiKey {
                match self {
                    $(Response::$variant(_) => ApiKey::$key,)*
                }
            }

            /// Server side: appends this response as a success frame
            /// answering `request_id` to `buf`.
            pub fn encode_frame(&self, buf: &mut BytesMut, request_id: i32) -> Result<(), FrameError> {
                match self {
                    $(Response::$variant(message) => encode_success_response(buf, request_id, message),)*
                }
            }

            /// Decodes `body` as the response type of `api_key`; `None` if the
            /// key is not one Fjord serves.
            fn decode_body(api_key: ApiKey, body: Bytes) -> Option<Result<Response, prost::DecodeError>> {
                Some(match api_key {
                    $(ApiKey::$key => pb::$response::decode(body).map(Response::$variant),)*
                    _ => return None,
                })
            }
        }

        #[cfg(test)]
        const SERVED_BY_ENUM: &[ApiKey] = &[$(ApiKey::$key),*];
    };
}

served_apis! {
    ApiVersions => ApiVersions, ApiVersionsRequest, ApiVersionsResponse;
    CreateDatabase => CreateDatabase, CreateDatabaseRequest, CreateDatabaseResponse;
    DropDatabase => DropDatabase, DropDatabaseRequest, DropDatabaseResponse;
    ListDatabases => ListDatabases, ListDatabasesRequest, ListDatabasesResponse;
    DatabaseExists => DatabaseExists, DatabaseExistsRequest, DatabaseExistsResponse;
    CreateTable => CreateTable, CreateTableRequest, CreateTableResponse;
    DropTable => DropTable, DropTableRequest, DropTableResponse;
    GetTableInfo => GetTableInfo, GetTableInfoRequest, GetTableInfoResponse;
    ListTables => ListTables, ListTablesRequest, ListTablesResponse;
    ListPartitionInfos => ListPartitionInfos, ListPartitionInfosRequest, ListPartitionInfosResponse;
    TableExists => TableExists, TableExistsRequest, TableExistsResponse;
    GetTableSchema => GetTableSchema, GetTableSchemaRequest, GetTableSchemaResponse;
    MetaData => MetaData, MetadataRequest, MetadataResponse;
    ProduceLog => ProduceLog, ProduceLogRequest, ProduceLogResponse;
    FetchLog => FetchLog, FetchLogRequest, FetchLogResponse;
    ListOffsets => ListOffsets, ListOffsetsRequest, ListOffsetsResponse;
    GetFileSystemSecurityToken => GetFileSystemSecurityToken, GetFileSystemSecurityTokenRequest, GetFileSystemSecurityTokenResponse;
    InitWriter => InitWriter, InitWriterRequest, InitWriterResponse;
    GetDatabaseInfo => GetDatabaseInfo, GetDatabaseInfoRequest, GetDatabaseInfoResponse;
    CreatePartition => CreatePartition, CreatePartitionRequest, CreatePartitionResponse;
    DropPartition => DropPartition, DropPartitionRequest, DropPartitionResponse;
    PutKv => PutKv, PutKvRequest, PutKvResponse;
    Lookup => Lookup, LookupRequest, LookupResponse;
    PrefixLookup => PrefixLookup, PrefixLookupRequest, PrefixLookupResponse;
    LimitScan => LimitScan, LimitScanRequest, LimitScanResponse;
    ScanKv => ScanKv, ScanKvRequest, ScanKvResponse;
    GetLatestKvSnapshots => GetLatestKvSnapshots, GetLatestKvSnapshotsRequest, GetLatestKvSnapshotsResponse;
    GetTableStats => GetTableStats, GetTableStatsRequest, GetTableStatsResponse;
    AlterTable => AlterTable, AlterTableRequest, AlterTableResponse;
}

/// Checks `api_key` and `api_version` against what Fjord serves.
fn served_key(api_key: i16, api_version: i16) -> Result<ApiKey, RequestError> {
    let key = ApiKey::from_id(api_key).ok_or(RequestError::UnknownApiKey { api_key })?;
    let supported = key.served_versions();
    if supported.is_some_and(|range| range.contains(api_version)) {
        Ok(key)
    } else {
        Err(RequestError::UnsupportedVersion {
            api_key: key,
            api_version,
            supported,
        })
    }
}

/// The refusal for a served key that has no enum variant; cannot happen
/// while `served_versions` and the enums list the same keys (tested).
fn not_served(api_key: ApiKey, api_version: i16) -> RequestError {
    RequestError::UnsupportedVersion {
        api_key,
        api_version,
        supported: None,
    }
}

/// Server side: checks `api_key` and `api_version` against what Fjord
/// serves, then decodes `body` as that API's request. The body is sliced,
/// not copied: `bytes` fields of the result share `body`'s memory.
pub fn decode_request(
    api_key: i16,
    api_version: i16,
    body: Bytes,
) -> Result<Request, RequestError> {
    let key = served_key(api_key, api_version)?;
    match Request::decode_body(key, body) {
        Some(decoded) => decoded.map_err(|source| RequestError::Malformed {
            api_key: key,
            source,
        }),
        None => Err(not_served(key, api_version)),
    }
}

/// Client side: decodes the body of a success response to a request of
/// `api_key` at `api_version`, with the same checks as [`decode_request`].
pub fn decode_response(
    api_key: ApiKey,
    api_version: i16,
    body: Bytes,
) -> Result<Response, RequestError> {
    let key = served_key(api_key.id(), api_version)?;
    match Response::decode_body(key, body) {
        Some(decoded) => decoded.map_err(|source| RequestError::Malformed {
            api_key: key,
            source,
        }),
        None => Err(not_served(key, api_version)),
    }
}

#[cfg(test)]
mod tests;
