//! Fluss API keys: the closed set of request kinds a Fluss frame header can
//! name, and the version range Fjord serves for each.
//!
//! The ids come from Fluss's `ApiKeys.java`; they are permanent on the wire.
//! Keys 0..=999 are reserved by Fluss for Kafka compatibility and are not
//! Fluss APIs.

use std::fmt;

use crate::messages::PbApiVersion;

/// An inclusive range of API versions, `min..=max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VersionRange {
    /// Lowest version, inclusive.
    pub min: i16,
    /// Highest version, inclusive.
    pub max: i16,
}

impl VersionRange {
    /// Builds `min..=max`; a range with `min > max` is a programming error
    /// and fails to compile when built in a constant.
    pub const fn new(min: i16, max: i16) -> Self {
        assert!(min <= max, "empty version range");
        Self { min, max }
    }

    /// Whether `version` lies in this range.
    pub const fn contains(self, version: i16) -> bool {
        self.min <= version && version <= self.max
    }
}

impl fmt::Display for VersionRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..={}", self.min, self.max)
    }
}

/// Every API key Fluss defines. The discriminant is the wire id, so
/// `key as i16` is the value written in a request header.
///
/// Closed on purpose: an id not listed here is answered with
/// [`crate::ErrorCode::UnsupportedVersion`] before its body is looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(i16)]
pub enum ApiKey {
    /// `API_VERSIONS` (1000), public.
    ApiVersions = 1000,
    /// `CREATE_DATABASE` (1001), public.
    CreateDatabase = 1001,
    /// `DROP_DATABASE` (1002), public.
    DropDatabase = 1002,
    /// `LIST_DATABASES` (1003), public.
    ListDatabases = 1003,
    /// `DATABASE_EXISTS` (1004), public.
    DatabaseExists = 1004,
    /// `CREATE_TABLE` (1005), public.
    CreateTable = 1005,
    /// `DROP_TABLE` (1006), public.
    DropTable = 1006,
    /// `GET_TABLE_INFO` (1007), public.
    GetTableInfo = 1007,
    /// `LIST_TABLES` (1008), public.
    ListTables = 1008,
    /// `LIST_PARTITION_INFOS` (1009), public.
    ListPartitionInfos = 1009,
    /// `TABLE_EXISTS` (1010), public.
    TableExists = 1010,
    /// `GET_TABLE_SCHEMA` (1011), public.
    GetTableSchema = 1011,
    /// `GET_METADATA` (1012), public.
    MetaData = 1012,
    /// `UPDATE_METADATA` (1013), private.
    UpdateMetadata = 1013,
    /// `PRODUCE_LOG` (1014), public.
    ProduceLog = 1014,
    /// `FETCH_LOG` (1015), public.
    FetchLog = 1015,
    /// `PUT_KV` (1016), public.
    PutKv = 1016,
    /// `LOOKUP` (1017), public.
    Lookup = 1017,
    /// `NOTIFY_LEADER_AND_ISR` (1018), private.
    NotifyLeaderAndIsr = 1018,
    /// `STOP_REPLICA` (1019), private.
    StopReplica = 1019,
    /// `ADJUST_ISR` (1020), private.
    AdjustIsr = 1020,
    /// `LIST_OFFSETS` (1021), public.
    ListOffsets = 1021,
    /// `COMMIT_KV_SNAPSHOT` (1022), private.
    CommitKvSnapshot = 1022,
    /// `GET_LATEST_KV_SNAPSHOTS` (1023), public.
    GetLatestKvSnapshots = 1023,
    /// `GET_KV_SNAPSHOT_METADATA` (1024), public.
    GetKvSnapshotMetadata = 1024,
    /// `GET_FILESYSTEM_SECURITY_TOKEN` (1025), public.
    GetFileSystemSecurityToken = 1025,
    /// `INIT_WRITER` (1026), public.
    InitWriter = 1026,
    /// `COMMIT_REMOTE_LOG_MANIFEST` (1027), private.
    CommitRemoteLogManifest = 1027,
    /// `NOTIFY_REMOTE_LOG_OFFSETS` (1028), private.
    NotifyRemoteLogOffsets = 1028,
    /// `NOTIFY_KV_SNAPSHOT_OFFSET` (1029), private.
    NotifyKvSnapshotOffset = 1029,
    /// `COMMIT_LAKE_TABLE_SNAPSHOT` (1030), private.
    CommitLakeTableSnapshot = 1030,
    /// `NOTIFY_LAKE_TABLE_OFFSET` (1031), private.
    NotifyLakeTableOffset = 1031,
    /// `GET_LAKE_SNAPSHOT` (1032), public.
    GetLakeSnapshot = 1032,
    /// `LIMIT_SCAN` (1033), public.
    LimitScan = 1033,
    /// `PREFIX_LOOKUP` (1034), public.
    PrefixLookup = 1034,
    /// `GET_DATABASE_INFO` (1035), public.
    GetDatabaseInfo = 1035,
    /// `CREATE_PARTITION` (1036), public.
    CreatePartition = 1036,
    /// `DROP_PARTITION` (1037), public.
    DropPartition = 1037,
    /// `AUTHENTICATE` (1038), public.
    Authenticate = 1038,
    /// `CREATE_ACLS` (1039), public.
    CreateAcls = 1039,
    /// `LIST_ACLS` (1040), public.
    ListAcls = 1040,
    /// `DROP_ACLS` (1041), public.
    DropAcls = 1041,
    /// `LAKE_TIERING_HEARTBEAT` (1042), private.
    LakeTieringHeartbeat = 1042,
    /// `CONTROLLED_SHUTDOWN` (1043), private.
    ControlledShutdown = 1043,
    /// `ALTER_TABLE` (1044), public.
    AlterTable = 1044,
    /// `DESCRIBE_CLUSTER_CONFIGS` (1045), public.
    DescribeClusterConfigs = 1045,
    /// `ALTER_CLUSTER_CONFIGS` (1046), public.
    AlterClusterConfigs = 1046,
    /// `ADD_SERVER_TAG` (1047), public.
    AddServerTag = 1047,
    /// `REMOVE_SERVER_TAG` (1048), public.
    RemoveServerTag = 1048,
    /// `REBALANCE` (1049), public.
    Rebalance = 1049,
    /// `LIST_REBALANCE_PROGRESS` (1050), public.
    ListRebalanceProgress = 1050,
    /// `CANCEL_REBALANCE` (1051), public.
    CancelRebalance = 1051,
    /// `PREPARE_LAKE_TABLE_SNAPSHOT` (1052), private.
    PrepareLakeTableSnapshot = 1052,
    /// `REGISTER_PRODUCER_OFFSETS` (1053), public.
    RegisterProducerOffsets = 1053,
    /// `GET_PRODUCER_OFFSETS` (1054), public.
    GetProducerOffsets = 1054,
    /// `DELETE_PRODUCER_OFFSETS` (1055), public.
    DeleteProducerOffsets = 1055,
    /// `ACQUIRE_KV_SNAPSHOT_LEASE` (1056), public.
    AcquireKvSnapshotLease = 1056,
    /// `RELEASE_KV_SNAPSHOT_LEASE` (1057), public.
    ReleaseKvSnapshotLease = 1057,
    /// `DROP_KV_SNAPSHOT_LEASE` (1058), public.
    DropKvSnapshotLease = 1058,
    /// `GET_TABLE_STATS` (1059), public.
    GetTableStats = 1059,
    /// `ALTER_DATABASE` (1060), public.
    AlterDatabase = 1060,
    /// `SCAN_KV` (1061), public.
    ScanKv = 1061,
    /// `GET_CLUSTER_HEALTH` (1062), public.
    GetClusterHealth = 1062,
    /// `LIST_REMOTE_LOG_MANIFESTS` (1063), public.
    ListRemoteLogManifests = 1063,
    /// `LIST_KV_SNAPSHOTS` (1064), public.
    ListKvSnapshots = 1064,
}

impl ApiKey {
    /// All 65 keys, in id order.
    pub const ALL: [ApiKey; 65] = [
        ApiKey::ApiVersions,
        ApiKey::CreateDatabase,
        ApiKey::DropDatabase,
        ApiKey::ListDatabases,
        ApiKey::DatabaseExists,
        ApiKey::CreateTable,
        ApiKey::DropTable,
        ApiKey::GetTableInfo,
        ApiKey::ListTables,
        ApiKey::ListPartitionInfos,
        ApiKey::TableExists,
        ApiKey::GetTableSchema,
        ApiKey::MetaData,
        ApiKey::UpdateMetadata,
        ApiKey::ProduceLog,
        ApiKey::FetchLog,
        ApiKey::PutKv,
        ApiKey::Lookup,
        ApiKey::NotifyLeaderAndIsr,
        ApiKey::StopReplica,
        ApiKey::AdjustIsr,
        ApiKey::ListOffsets,
        ApiKey::CommitKvSnapshot,
        ApiKey::GetLatestKvSnapshots,
        ApiKey::GetKvSnapshotMetadata,
        ApiKey::GetFileSystemSecurityToken,
        ApiKey::InitWriter,
        ApiKey::CommitRemoteLogManifest,
        ApiKey::NotifyRemoteLogOffsets,
        ApiKey::NotifyKvSnapshotOffset,
        ApiKey::CommitLakeTableSnapshot,
        ApiKey::NotifyLakeTableOffset,
        ApiKey::GetLakeSnapshot,
        ApiKey::LimitScan,
        ApiKey::PrefixLookup,
        ApiKey::GetDatabaseInfo,
        ApiKey::CreatePartition,
        ApiKey::DropPartition,
        ApiKey::Authenticate,
        ApiKey::CreateAcls,
        ApiKey::ListAcls,
        ApiKey::DropAcls,
        ApiKey::LakeTieringHeartbeat,
        ApiKey::ControlledShutdown,
        ApiKey::AlterTable,
        ApiKey::DescribeClusterConfigs,
        ApiKey::AlterClusterConfigs,
        ApiKey::AddServerTag,
        ApiKey::RemoveServerTag,
        ApiKey::Rebalance,
        ApiKey::ListRebalanceProgress,
        ApiKey::CancelRebalance,
        ApiKey::PrepareLakeTableSnapshot,
        ApiKey::RegisterProducerOffsets,
        ApiKey::GetProducerOffsets,
        ApiKey::DeleteProducerOffsets,
        ApiKey::AcquireKvSnapshotLease,
        ApiKey::ReleaseKvSnapshotLease,
        ApiKey::DropKvSnapshotLease,
        ApiKey::GetTableStats,
        ApiKey::AlterDatabase,
        ApiKey::ScanKv,
        ApiKey::GetClusterHealth,
        ApiKey::ListRemoteLogManifests,
        ApiKey::ListKvSnapshots,
    ];

    /// The key with wire id `id`, or `None` if Fluss defines no such API.
    pub const fn from_id(id: i16) -> Option<ApiKey> {
        Some(match id {
            1000 => ApiKey::ApiVersions,
            1001 => ApiKey::CreateDatabase,
            1002 => ApiKey::DropDatabase,
            1003 => ApiKey::ListDatabases,
            1004 => ApiKey::DatabaseExists,
            1005 => ApiKey::CreateTable,
            1006 => ApiKey::DropTable,
            1007 => ApiKey::GetTableInfo,
            1008 => ApiKey::ListTables,
            1009 => ApiKey::ListPartitionInfos,
            1010 => ApiKey::TableExists,
            1011 => ApiKey::GetTableSchema,
            1012 => ApiKey::MetaData,
            1013 => ApiKey::UpdateMetadata,
            1014 => ApiKey::ProduceLog,
            1015 => ApiKey::FetchLog,
            1016 => ApiKey::PutKv,
            1017 => ApiKey::Lookup,
            1018 => ApiKey::NotifyLeaderAndIsr,
            1019 => ApiKey::StopReplica,
            1020 => ApiKey::AdjustIsr,
            1021 => ApiKey::ListOffsets,
            1022 => ApiKey::CommitKvSnapshot,
            1023 => ApiKey::GetLatestKvSnapshots,
            1024 => ApiKey::GetKvSnapshotMetadata,
            1025 => ApiKey::GetFileSystemSecurityToken,
            1026 => ApiKey::InitWriter,
            1027 => ApiKey::CommitRemoteLogManifest,
            1028 => ApiKey::NotifyRemoteLogOffsets,
            1029 => ApiKey::NotifyKvSnapshotOffset,
            1030 => ApiKey::CommitLakeTableSnapshot,
            1031 => ApiKey::NotifyLakeTableOffset,
            1032 => ApiKey::GetLakeSnapshot,
            1033 => ApiKey::LimitScan,
            1034 => ApiKey::PrefixLookup,
            1035 => ApiKey::GetDatabaseInfo,
            1036 => ApiKey::CreatePartition,
            1037 => ApiKey::DropPartition,
            1038 => ApiKey::Authenticate,
            1039 => ApiKey::CreateAcls,
            1040 => ApiKey::ListAcls,
            1041 => ApiKey::DropAcls,
            1042 => ApiKey::LakeTieringHeartbeat,
            1043 => ApiKey::ControlledShutdown,
            1044 => ApiKey::AlterTable,
            1045 => ApiKey::DescribeClusterConfigs,
            1046 => ApiKey::AlterClusterConfigs,
            1047 => ApiKey::AddServerTag,
            1048 => ApiKey::RemoveServerTag,
            1049 => ApiKey::Rebalance,
            1050 => ApiKey::ListRebalanceProgress,
            1051 => ApiKey::CancelRebalance,
            1052 => ApiKey::PrepareLakeTableSnapshot,
            1053 => ApiKey::RegisterProducerOffsets,
            1054 => ApiKey::GetProducerOffsets,
            1055 => ApiKey::DeleteProducerOffsets,
            1056 => ApiKey::AcquireKvSnapshotLease,
            1057 => ApiKey::ReleaseKvSnapshotLease,
            1058 => ApiKey::DropKvSnapshotLease,
            1059 => ApiKey::GetTableStats,
            1060 => ApiKey::AlterDatabase,
            1061 => ApiKey::ScanKv,
            1062 => ApiKey::GetClusterHealth,
            1063 => ApiKey::ListRemoteLogManifests,
            1064 => ApiKey::ListKvSnapshots,
            _ => return None,
        })
    }

    /// The wire id written in a request header.
    pub const fn id(self) -> i16 {
        self as i16
    }

    /// The name Fluss uses for this key (`ApiKeys.java`), for logs and errors.
    pub const fn name(self) -> &'static str {
        match self {
            ApiKey::ApiVersions => "API_VERSIONS",
            ApiKey::CreateDatabase => "CREATE_DATABASE",
            ApiKey::DropDatabase => "DROP_DATABASE",
            ApiKey::ListDatabases => "LIST_DATABASES",
            ApiKey::DatabaseExists => "DATABASE_EXISTS",
            ApiKey::CreateTable => "CREATE_TABLE",
            ApiKey::DropTable => "DROP_TABLE",
            ApiKey::GetTableInfo => "GET_TABLE_INFO",
            ApiKey::ListTables => "LIST_TABLES",
            ApiKey::ListPartitionInfos => "LIST_PARTITION_INFOS",
            ApiKey::TableExists => "TABLE_EXISTS",
            ApiKey::GetTableSchema => "GET_TABLE_SCHEMA",
            ApiKey::MetaData => "GET_METADATA",
            ApiKey::UpdateMetadata => "UPDATE_METADATA",
            ApiKey::ProduceLog => "PRODUCE_LOG",
            ApiKey::FetchLog => "FETCH_LOG",
            ApiKey::PutKv => "PUT_KV",
            ApiKey::Lookup => "LOOKUP",
            ApiKey::NotifyLeaderAndIsr => "NOTIFY_LEADER_AND_ISR",
            ApiKey::StopReplica => "STOP_REPLICA",
            ApiKey::AdjustIsr => "ADJUST_ISR",
            ApiKey::ListOffsets => "LIST_OFFSETS",
            ApiKey::CommitKvSnapshot => "COMMIT_KV_SNAPSHOT",
            ApiKey::GetLatestKvSnapshots => "GET_LATEST_KV_SNAPSHOTS",
            ApiKey::GetKvSnapshotMetadata => "GET_KV_SNAPSHOT_METADATA",
            ApiKey::GetFileSystemSecurityToken => "GET_FILESYSTEM_SECURITY_TOKEN",
            ApiKey::InitWriter => "INIT_WRITER",
            ApiKey::CommitRemoteLogManifest => "COMMIT_REMOTE_LOG_MANIFEST",
            ApiKey::NotifyRemoteLogOffsets => "NOTIFY_REMOTE_LOG_OFFSETS",
            ApiKey::NotifyKvSnapshotOffset => "NOTIFY_KV_SNAPSHOT_OFFSET",
            ApiKey::CommitLakeTableSnapshot => "COMMIT_LAKE_TABLE_SNAPSHOT",
            ApiKey::NotifyLakeTableOffset => "NOTIFY_LAKE_TABLE_OFFSET",
            ApiKey::GetLakeSnapshot => "GET_LAKE_SNAPSHOT",
            ApiKey::LimitScan => "LIMIT_SCAN",
            ApiKey::PrefixLookup => "PREFIX_LOOKUP",
            ApiKey::GetDatabaseInfo => "GET_DATABASE_INFO",
            ApiKey::CreatePartition => "CREATE_PARTITION",
            ApiKey::DropPartition => "DROP_PARTITION",
            ApiKey::Authenticate => "AUTHENTICATE",
            ApiKey::CreateAcls => "CREATE_ACLS",
            ApiKey::ListAcls => "LIST_ACLS",
            ApiKey::DropAcls => "DROP_ACLS",
            ApiKey::LakeTieringHeartbeat => "LAKE_TIERING_HEARTBEAT",
            ApiKey::ControlledShutdown => "CONTROLLED_SHUTDOWN",
            ApiKey::AlterTable => "ALTER_TABLE",
            ApiKey::DescribeClusterConfigs => "DESCRIBE_CLUSTER_CONFIGS",
            ApiKey::AlterClusterConfigs => "ALTER_CLUSTER_CONFIGS",
            ApiKey::AddServerTag => "ADD_SERVER_TAG",
            ApiKey::RemoveServerTag => "REMOVE_SERVER_TAG",
            ApiKey::Rebalance => "REBALANCE",
            ApiKey::ListRebalanceProgress => "LIST_REBALANCE_PROGRESS",
            ApiKey::CancelRebalance => "CANCEL_REBALANCE",
            ApiKey::PrepareLakeTableSnapshot => "PREPARE_LAKE_TABLE_SNAPSHOT",
            ApiKey::RegisterProducerOffsets => "REGISTER_PRODUCER_OFFSETS",
            ApiKey::GetProducerOffsets => "GET_PRODUCER_OFFSETS",
            ApiKey::DeleteProducerOffsets => "DELETE_PRODUCER_OFFSETS",
            ApiKey::AcquireKvSnapshotLease => "ACQUIRE_KV_SNAPSHOT_LEASE",
            ApiKey::ReleaseKvSnapshotLease => "RELEASE_KV_SNAPSHOT_LEASE",
            ApiKey::DropKvSnapshotLease => "DROP_KV_SNAPSHOT_LEASE",
            ApiKey::GetTableStats => "GET_TABLE_STATS",
            ApiKey::AlterDatabase => "ALTER_DATABASE",
            ApiKey::ScanKv => "SCAN_KV",
            ApiKey::GetClusterHealth => "GET_CLUSTER_HEALTH",
            ApiKey::ListRemoteLogManifests => "LIST_REMOTE_LOG_MANIFESTS",
            ApiKey::ListKvSnapshots => "LIST_KV_SNAPSHOTS",
        }
    }

    /// The versions of this API that Fjord serves, or `None` when Fjord does
    /// not serve it at all. This is exactly what the ApiVersions response
    /// advertises, and what [`crate::decode_request`] accepts.
    pub const fn served_versions(self) -> Option<VersionRange> {
        match self {
            ApiKey::ApiVersions => Some(VersionRange::new(0, 0)),
            ApiKey::CreateDatabase => Some(VersionRange::new(0, 0)),
            ApiKey::DropDatabase => Some(VersionRange::new(0, 0)),
            ApiKey::ListDatabases => Some(VersionRange::new(0, 0)),
            ApiKey::DatabaseExists => Some(VersionRange::new(0, 0)),
            ApiKey::CreateTable => Some(VersionRange::new(0, 0)),
            ApiKey::DropTable => Some(VersionRange::new(0, 0)),
            ApiKey::GetTableInfo => Some(VersionRange::new(0, 0)),
            ApiKey::ListTables => Some(VersionRange::new(0, 0)),
            ApiKey::ListPartitionInfos => Some(VersionRange::new(0, 0)),
            ApiKey::TableExists => Some(VersionRange::new(0, 0)),
            ApiKey::GetTableSchema => Some(VersionRange::new(0, 0)),
            ApiKey::MetaData => Some(VersionRange::new(0, 0)),
            ApiKey::ProduceLog => Some(VersionRange::new(0, 0)),
            ApiKey::FetchLog => Some(VersionRange::new(0, 0)),
            ApiKey::ListOffsets => Some(VersionRange::new(0, 0)),
            ApiKey::GetFileSystemSecurityToken => Some(VersionRange::new(0, 0)),
            ApiKey::InitWriter => Some(VersionRange::new(0, 0)),
            ApiKey::GetDatabaseInfo => Some(VersionRange::new(0, 0)),
            ApiKey::CreatePartition => Some(VersionRange::new(0, 0)),
            ApiKey::DropPartition => Some(VersionRange::new(0, 0)),
            // Fluss 0.9.1 and fluss-rs 1.0.0 both know only v0.
            ApiKey::AlterTable => Some(VersionRange::new(0, 0)),
            // v1 differs from v0 only for lake tables (their key encoding);
            // v2 lets the client understand STORAGE_BACKPRESSURE; v3 adds
            // the historical-partition fields (optional, refused when set).
            ApiKey::PutKv => Some(VersionRange::new(0, 3)),
            ApiKey::Lookup => Some(VersionRange::new(0, 1)),
            ApiKey::PrefixLookup => Some(VersionRange::new(0, 1)),
            ApiKey::LimitScan => Some(VersionRange::new(0, 0)),
            ApiKey::ScanKv => Some(VersionRange::new(0, 0)),
            ApiKey::GetLatestKvSnapshots => Some(VersionRange::new(0, 0)),
            ApiKey::GetTableStats => Some(VersionRange::new(0, 0)),
            _ => None,
        }
    }

    /// Iterates the keys Fjord serves, in id order, with their versions.
    pub fn served() -> impl Iterator<Item = (ApiKey, VersionRange)> {
        Self::ALL
            .into_iter()
            .filter_map(|key| key.served_versions().map(|range| (key, range)))
    }

    /// The `api_versions` list of an ApiVersions response: exactly the keys
    /// and versions Fjord serves. Build it once per server, not per request.
    pub fn served_api_versions() -> Vec<PbApiVersion> {
        Self::served()
            .map(|(key, range)| PbApiVersion {
                api_key: key.id().into(),
                min_version: range.min.into(),
                max_version: range.max.into(),
            })
            .collect()
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.name(), self.id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_are_unique_and_sorted() {
        for pair in ApiKey::ALL.windows(2) {
            assert!(
                pair[0].id() < pair[1].id(),
                "{} before {}",
                pair[0],
                pair[1]
            );
        }
        for key in ApiKey::ALL {
            assert_eq!(ApiKey::from_id(key.id()), Some(key));
        }
    }

    #[test]
    fn ids_outside_fluss_range_are_unknown() {
        for id in [i16::MIN, -1, 0, 999, 1065, i16::MAX] {
            assert_eq!(ApiKey::from_id(id), None, "id {id}");
        }
    }

    #[test]
    fn ids_named_in_product_doc_match() {
        let expected = [
            (ApiKey::ApiVersions, 1000),
            (ApiKey::CreateDatabase, 1001),
            (ApiKey::MetaData, 1012),
            (ApiKey::ProduceLog, 1014),
            (ApiKey::FetchLog, 1015),
            (ApiKey::PutKv, 1016),
            (ApiKey::Lookup, 1017),
            (ApiKey::ListOffsets, 1021),
            (ApiKey::InitWriter, 1026),
            (ApiKey::PrefixLookup, 1034),
            (ApiKey::CreatePartition, 1036),
        ];
        for (key, id) in expected {
            assert_eq!(key.id(), id, "{key:?}");
        }
    }

    #[test]
    fn served_keys_are_the_log_and_primary_key_table_surface() {
        let served: Vec<i16> = ApiKey::served().map(|(key, _)| key.id()).collect();
        assert_eq!(
            served,
            [
                1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008, 1009, 1010, 1011, 1012, 1014,
                1015, 1016, 1017, 1021, 1023, 1025, 1026, 1033, 1034, 1035, 1036, 1037, 1044, 1059,
                1061
            ]
        );
        assert_eq!(
            ApiKey::ProduceLog.served_versions(),
            Some(VersionRange::new(0, 0))
        );
    }

    #[test]
    fn advertisement_lists_every_served_key_with_its_versions() {
        let advertised = ApiKey::served_api_versions();
        assert_eq!(advertised.len(), ApiKey::served().count());
        assert!(advertised.iter().all(|v| v.min_version == 0));
        let max = |key: i32| {
            advertised
                .iter()
                .find(|v| v.api_key == key)
                .map(|v| v.max_version)
        };
        // What the official clients negotiate: fluss-rs 1.0.0 asks for up
        // to PutKv v3, Lookup and PrefixLookup v1.
        assert_eq!(max(1016), Some(3));
        assert_eq!(max(1017), Some(1));
        assert_eq!(max(1034), Some(1));
        assert_eq!(max(1014), Some(0));
        assert_eq!(max(1044), Some(0));
        assert_eq!(max(1025), Some(0));
    }
}
