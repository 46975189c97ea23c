//! Database and table APIs over the wire: create, list, get, drop, and the
//! error codes a Fluss server answers with.

mod support;

use fjord_proto::messages as pb;
use fjord_proto::{ErrorCode, Request, Response};
use support::*;

#[tokio::test]
async fn create_database_and_log_table_then_read_them_back() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    let info = create_db_and_table(&mut c, "db1", "t1").await;
    assert_eq!(info.schema_id, 1);
    let json: serde_json::Value = serde_json::from_slice(&info.table_json).unwrap();
    assert_eq!(json["bucket_count"], 3);

    let Response::ListTables(tables) = c
        .call(Request::ListTables(pb::ListTablesRequest {
            database_name: "db1".into(),
        }))
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(tables.table_name, vec!["t1"]);

    let Response::MetaData(md) = c
        .call(Request::MetaData(pb::MetadataRequest {
            table_path: vec![table_path("db1", "t1")],
            ..Default::default()
        }))
        .await
        .unwrap()
    else {
        panic!()
    };
    let coordinator = md.coordinator_server.expect("coordinator announced");
    assert_eq!(coordinator.port, i32::from(server.addr.port()));
    assert_eq!(md.tablet_servers.len(), 1);
    let buckets = &md.table_metadata[0].bucket_metadata;
    assert_eq!(buckets.len(), 3);
    assert!(buckets
        .iter()
        .all(|b| b.leader_id == Some(md.tablet_servers[0].node_id)));
    server.stop().await;
}

#[tokio::test]
async fn duplicate_and_missing_objects_get_fluss_error_codes() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    create_db_and_table(&mut c, "db", "t").await;
    let err = c
        .call(Request::CreateDatabase(pb::CreateDatabaseRequest {
            database_name: "db".into(),
            ignore_if_exists: false,
            database_json: None,
        }))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::DatabaseAlreadyExist);
    let err = c
        .call(Request::GetTableInfo(pb::GetTableInfoRequest {
            table_path: table_path("db", "nope"),
        }))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::TableNotExist);
    assert!(err.message().contains("db.nope"), "{err}");
    let err = c
        .call(Request::DropDatabase(pb::DropDatabaseRequest {
            database_name: "db".into(),
            ignore_if_not_exists: false,
            cascade: false,
        }))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::DatabaseNotEmpty);
    c.call(Request::DropDatabase(pb::DropDatabaseRequest {
        database_name: "db".into(),
        ignore_if_not_exists: false,
        cascade: true,
    }))
    .await
    .unwrap();
    let Response::DatabaseExists(e) = c
        .call(Request::DatabaseExists(pb::DatabaseExistsRequest {
            database_name: "db".into(),
        }))
        .await
        .unwrap()
    else {
        panic!()
    };
    assert!(!e.exists);
    server.stop().await;
}

#[tokio::test]
async fn primary_key_tables_are_created_and_nested_keys_refused_with_invalid_table() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    create_db_and_table(&mut c, "db", "t").await;
    let pk_json = LOG_TABLE_JSON.replace(r#""columns""#, r#""primary_key":["id"],"columns""#);
    c.call(Request::CreateTable(pb::CreateTableRequest {
        table_path: table_path("db", "pk"),
        table_json: pk_json.into_bytes().into(),
        ignore_if_exists: false,
    }))
    .await
    .expect("a primary-key table is created");
    let nested = LOG_TABLE_JSON
        .replace(
            r#"{"name":"name","data_type":{"type":"STRING"}}"#,
            r#"{"name":"name","data_type":{"type":"ARRAY","element_type":{"type":"STRING"}}}"#,
        )
        .replace(r#""columns""#, r#""primary_key":["name"],"columns""#);
    let err = c
        .call(Request::CreateTable(pb::CreateTableRequest {
            table_path: table_path("db", "nested"),
            table_json: nested.into_bytes().into(),
            ignore_if_exists: false,
        }))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidTableException);
    assert!(err.message().contains("ARRAY"), "{err}");
    server.stop().await;
}

#[tokio::test]
async fn writer_ids_are_unique_across_restart() {
    let dir = tempfile::tempdir().unwrap();
    let init = Request::InitWriter(pb::InitWriterRequest { table_path: vec![] });
    let first = {
        let server = TestServer::start(dir.path()).await;
        let mut c = server.client().await;
        let Response::InitWriter(w) = c.call(init.clone()).await.unwrap() else {
            panic!()
        };
        server.stop().await;
        w.writer_id
    };
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    let Response::InitWriter(w) = c.call(init).await.unwrap() else {
        panic!()
    };
    assert!(w.writer_id > first);
    server.stop().await;
}

#[tokio::test]
async fn restart_keeps_databases_and_tables() {
    let dir = tempfile::tempdir().unwrap();
    let before = {
        let server = TestServer::start(dir.path()).await;
        let mut c = server.client().await;
        let info = create_db_and_table(&mut c, "db", "t").await;
        server.stop().await;
        info
    };
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    let Response::GetTableInfo(after) = c
        .call(Request::GetTableInfo(pb::GetTableInfoRequest {
            table_path: table_path("db", "t"),
        }))
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(after.table_id, before.table_id);
    assert_eq!(after.table_json, before.table_json);
    server.stop().await;
}

#[tokio::test]
async fn data_of_a_table_dropped_before_a_crash_is_deleted_at_start() {
    let dir = tempfile::tempdir().unwrap();
    // A tablet directory whose table is not in the catalog, as a crash
    // between the catalog drop and the data delete leaves it.
    let orphan = dir.path().join("log").join("999").join("log-0");
    std::fs::create_dir_all(&orphan).unwrap();
    let server = TestServer::start(dir.path()).await;
    assert!(!orphan.exists());
    let mut c = server.client().await;
    let info = create_db_and_table(&mut c, "db", "t").await;
    server.stop().await;
    let server = TestServer::start(dir.path()).await;
    let live = dir
        .path()
        .join("log")
        .join(info.table_id.to_string())
        .join("log-0");
    assert!(live.exists(), "live tables keep their data");
    server.stop().await;
}

/// A fresh server has the database `fluss`, as a Fluss coordinator creates
/// it on its first start when no database exists (the Flink catalog checks
/// for it); a server that has databases creates none.
#[tokio::test]
async fn a_fresh_server_has_the_default_database_fluss() {
    let dir = tempfile::tempdir().unwrap();
    let list = Request::ListDatabases(pb::ListDatabasesRequest {
        include_summary: None,
    });
    {
        let server = TestServer::start(dir.path()).await;
        let mut c = server.client().await;
        let Response::ListDatabases(dbs) = c.call(list.clone()).await.unwrap() else {
            panic!()
        };
        assert_eq!(dbs.database_name, vec!["fluss"]);
        c.call(Request::CreateDatabase(pb::CreateDatabaseRequest {
            database_name: "mine".into(),
            ignore_if_exists: false,
            database_json: None,
        }))
        .await
        .unwrap();
        c.call(Request::DropDatabase(pb::DropDatabaseRequest {
            database_name: "fluss".into(),
            ignore_if_not_exists: false,
            cascade: true,
        }))
        .await
        .unwrap();
        server.stop().await;
    }
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    let Response::ListDatabases(dbs) = c.call(list).await.unwrap() else {
        panic!()
    };
    assert_eq!(
        dbs.database_name,
        vec!["mine"],
        "not recreated while a database exists"
    );
    server.stop().await;
}
