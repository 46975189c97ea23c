//! Values with a fixed meaning on the wire that the `.proto` file cannot
//! express: sentinels, enumerations carried as plain integers.
//! Each was checked against Fluss 0.9.1 and fluss-rs 1.0.0.

/// `PbFetchLogReqForBucket.fetch_offset` meaning "from the log start
/// offset": what a scanner subscribed from the beginning sends until its
/// first fetch returns (Fluss `FetchParams.FETCH_FROM_EARLIEST_OFFSET`).
pub const FETCH_FROM_EARLIEST_OFFSET: i64 = -2;

/// `follower_server_id` of FetchLog and ListOffsets requests sent by a
/// client rather than by a follower replica.
pub const CLIENT_FOLLOWER_SERVER_ID: i32 = -1;

/// `ListOffsetsRequest.offset_type`: the log start offset.
pub const LIST_OFFSETS_EARLIEST: i32 = 0;
/// `ListOffsetsRequest.offset_type`: the high watermark (next offset to be written).
pub const LIST_OFFSETS_LATEST: i32 = 1;
/// `ListOffsetsRequest.offset_type`: the first offset whose batch timestamp is
/// at or after `startTimestamp`.
pub const LIST_OFFSETS_FROM_TIMESTAMP: i32 = 2;

/// `ApiVersionsResponse.server_type` of a coordinator. A client checks it
/// against the role it expected at that address; leaving the field unset
/// skips the check, which is what a process serving both roles on one
/// endpoint needs.
pub const SERVER_TYPE_COORDINATOR: i32 = 1;
/// `ApiVersionsResponse.server_type` of a tablet server.
pub const SERVER_TYPE_TABLET_SERVER: i32 = 2;

/// `ProduceLogRequest.acks`: answer without waiting for the append. Unlike
/// Kafka, Fluss still sends a response for every ProduceLog request, and the
/// clients wait for it. Any acks value other than these three is answered
/// with `INVALID_REQUIRED_ACKS`.
pub const ACKS_NONE: i32 = 0;
/// `ProduceLogRequest.acks`: acknowledge once the leader appended.
pub const ACKS_LEADER: i32 = 1;
/// `ProduceLogRequest.acks`: acknowledge once all in-sync replicas have the
/// batch (fluss-rs's default, and required for idempotent writers).
pub const ACKS_ALL: i32 = -1;
