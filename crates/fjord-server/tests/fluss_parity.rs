//! Answers where Fjord differed from the real Fluss 0.9.1 server until
//! interop/diff (the differential test against it) found the difference;
//! each test pins Fluss's answer at the server level.

mod support;

use fjord_proto::messages as pb;
use fjord_proto::{ErrorCode, Request};
use support::*;

fn table_json(properties: &str, custom: &str) -> Vec<u8> {
    format!(
        r#"{{"version":1,"schema":{{"version":1,"columns":[{{"name":"id","data_type":{{"type":"INTEGER"}}}}]}},"partition_key":[],"bucket_key":[],"bucket_count":1,"properties":{{{properties}}},"custom_properties":{{{custom}}}}}"#
    )
    .into_bytes()
}

async fn create(c: &mut Client, table: &str, json: Vec<u8>) -> Result<(), (ErrorCode, String)> {
    c.call(Request::CreateTable(pb::CreateTableRequest {
        table_path: table_path("db", table),
        table_json: json.into(),
        ignore_if_exists: false,
    }))
    .await
    .map(|_| ())
    .map_err(|e| (e.code(), e.message().to_owned()))
}

/// Fluss's `TableDescriptorValidation`: `properties` may only hold the
/// table options the server knows (INVALID_CONFIG_EXCEPTION otherwise),
/// whatever the key looks like; anything goes in `custom_properties`.
#[tokio::test]
async fn unknown_table_properties_are_refused_as_fluss_refuses_them() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    c.call(Request::CreateDatabase(pb::CreateDatabaseRequest {
        database_name: "db".into(),
        ignore_if_exists: false,
        database_json: None,
    }))
    .await
    .unwrap();

    let (code, message) = create(&mut c, "a", table_json(r#""table.no-such-option":"1""#, ""))
        .await
        .unwrap_err();
    assert_eq!(code, ErrorCode::InvalidConfigException);
    assert!(
        message.contains("'table.no-such-option' is not a recognized Fluss table property"),
        "{message}"
    );

    let (code, message) = create(&mut c, "b", table_json(r#""owner":"me""#, ""))
        .await
        .unwrap_err();
    assert_eq!(code, ErrorCode::InvalidConfigException);
    assert!(
        message.contains("'owner' is not a Fluss table property"),
        "{message}"
    );

    // Known options, and any key among the custom properties, are accepted.
    create(
        &mut c,
        "c",
        table_json(
            r#""table.log.ttl":"2d","table.log.arrow.compression.type":"LZ4_FRAME""#,
            r#""owner":"me","table.anything":"x""#,
        ),
    )
    .await
    .unwrap();
    server.stop().await;
}

/// Fluss answers GetTableSchema of a missing table with SCHEMA_NOT_EXIST (9),
/// not TABLE_NOT_EXIST: the Java client raises SchemaNotExistException.
#[tokio::test]
async fn table_schema_of_a_missing_table_is_schema_not_exist() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    let err = c
        .call(Request::GetTableSchema(pb::GetTableSchemaRequest {
            table_path: table_path("fluss", "nope"),
            schema_id: None,
        }))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::SchemaNotExist);
    assert_eq!(
        err.message(),
        "Schema for table fluss.nope with schema id 0 does not exist."
    );
    server.stop().await;
}

/// Asked for summaries, Fluss answers the summaries alone (database_name
/// stays empty); Fjord used to fill both lists.
#[tokio::test]
async fn database_summaries_come_without_the_name_list() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path()).await;
    let mut c = server.client().await;
    let fjord_proto::Response::ListDatabases(plain) = c
        .call(Request::ListDatabases(pb::ListDatabasesRequest {
            include_summary: None,
        }))
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(plain.database_name, vec!["fluss"]);
    assert!(plain.database_summary.is_empty());
    let fjord_proto::Response::ListDatabases(summary) = c
        .call(Request::ListDatabases(pb::ListDatabasesRequest {
            include_summary: Some(true),
        }))
        .await
        .unwrap()
    else {
        panic!()
    };
    assert!(summary.database_name.is_empty(), "{summary:?}");
    assert_eq!(summary.database_summary.len(), 1);
    assert_eq!(summary.database_summary[0].database_name, "fluss");
    server.stop().await;
}
