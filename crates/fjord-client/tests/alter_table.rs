//! `FlussClient::alter_table` / `Admin::alter_table` against an in-process server: an added column gives
//! the table a new schema id; rows written before read it as NULL through
//! the lookuper, rows written by a writer opened after carry it, and a
//! writer opened before the change keeps writing; options are set and
//! reset; a mix of option and column changes and a missing table are
//! refused with Fluss's codes, and `ignore_if_not_exists` makes the latter
//! no error. A log table's batches of the old and the new schema id are both
//! read by one scanner, in every compression.

mod support;

use fjord_client::row::Datum;
use fjord_client::{LookupConfig, TableChange, TablePath, WriterConfig};
use fjord_format::schema::Schema;
use fjord_format::types::DataType;
use fjord_proto::ErrorCode;
use support::{create_pk_table, TestServer};

fn schema() -> Schema {
    Schema::builder()
        .column("id", DataType::int().with_nullable(false))
        .column("name", DataType::string())
        .primary_key(["id"])
        .build()
        .unwrap()
}

fn strings(row: Option<fjord_client::KvRow>) -> Option<Vec<String>> {
    row.map(|r| r.values().iter().map(|d| d.to_string()).collect())
}

#[tokio::test]
async fn an_added_column_is_null_in_old_rows_and_written_by_new_writers() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let admin = client.admin();
    let path = TablePath::new("alter", "users");
    let before = create_pk_table(&client, &path, schema(), 1, &[], &[], &[]).await;

    let mut old_writer = client
        .upsert_writer(&path, WriterConfig::default())
        .await
        .unwrap();
    old_writer
        .upsert(&[Datum::Int(1), Datum::String("one")])
        .await
        .unwrap();
    old_writer.flush().await.unwrap();

    client
        .alter_table(
            &path,
            &[TableChange::AddColumnLast {
                name: "score".into(),
                data_type: DataType::bigint(),
                comment: Some("added later".into()),
            }],
            false,
        )
        .await
        .unwrap();
    let after = admin.table_info(&path).await.unwrap();
    assert!(after.schema_id > before.schema_id, "{after:?}");
    let names: Vec<&str> = after
        .descriptor
        .schema()
        .columns()
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["id", "name", "score"]);

    // The writer opened before the change still writes rows of the old schema.
    old_writer
        .upsert(&[Datum::Int(2), Datum::String("two")])
        .await
        .unwrap();
    old_writer.flush().await.unwrap();
    let mut new_writer = client
        .upsert_writer(&path, WriterConfig::default())
        .await
        .unwrap();
    new_writer
        .upsert(&[Datum::Int(3), Datum::String("three"), Datum::BigInt(30)])
        .await
        .unwrap();
    new_writer.flush().await.unwrap();

    let lookuper = client
        .lookuper(&path, LookupConfig::default())
        .await
        .unwrap();
    let get = |id: i32| {
        let lookuper = lookuper.clone();
        async move { strings(lookuper.lookup(&[Datum::Int(id)]).await.unwrap()) }
    };
    assert_eq!(get(1).await.unwrap(), ["1", "\"one\"", "NULL"]);
    assert_eq!(get(2).await.unwrap(), ["2", "\"two\"", "NULL"]);
    assert_eq!(get(3).await.unwrap(), ["3", "\"three\"", "30"]);
    server.stop().await;
}

#[tokio::test]
async fn options_are_set_and_reset_and_refusals_carry_fluss_codes() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let admin = client.admin();
    let path = TablePath::new("alter", "options");
    create_pk_table(&client, &path, schema(), 1, &[], &[], &[]).await;
    // One of the three options Fluss 0.9.1 lets ALTER TABLE change.
    let key = "table.datalake.freshness";

    admin
        .alter_table(
            &path,
            &[TableChange::SetOption {
                key: key.into(),
                value: "5 min".into(),
            }],
            false,
        )
        .await
        .unwrap();
    let info = admin.table_info(&path).await.unwrap();
    assert_eq!(
        info.descriptor.properties().get(key).map(String::as_str),
        Some("5 min")
    );
    admin
        .alter_table(
            &path,
            &[TableChange::ResetOption { key: key.into() }],
            false,
        )
        .await
        .unwrap();
    let info = admin.table_info(&path).await.unwrap();
    assert_eq!(info.descriptor.properties().get(key), None);

    let mixed = admin
        .alter_table(
            &path,
            &[
                TableChange::SetOption {
                    key: key.into(),
                    value: "true".into(),
                },
                TableChange::AddColumnLast {
                    name: "x".into(),
                    data_type: DataType::int(),
                    comment: None,
                },
            ],
            false,
        )
        .await
        .unwrap_err();
    assert_eq!(
        mixed.error_code(),
        Some(ErrorCode::InvalidAlterTableException),
        "{mixed}"
    );

    let missing = TablePath::new("alter", "missing");
    let add = [TableChange::AddColumnLast {
        name: "x".into(),
        data_type: DataType::int(),
        comment: None,
    }];
    let err = admin.alter_table(&missing, &add, false).await.unwrap_err();
    assert_eq!(err.error_code(), Some(ErrorCode::TableNotExist), "{err}");
    admin.alter_table(&missing, &add, true).await.unwrap();
    server.stop().await;
}

/// A log table altered between two writes: a scanner built on the new
/// table info reads the rows of both schema ids, the old ones with NULL in
/// the added column, whatever the table's compression.
#[tokio::test]
async fn a_log_table_reads_rows_of_both_schema_ids_after_an_added_column() {
    for compression in ["NONE", "ZSTD", "LZ4_FRAME"] {
        let server = TestServer::start().await;
        let client = server.client().await;
        let path = TablePath::new("alter", format!("log_{}", compression.to_lowercase()));
        let log_schema = Schema::builder()
            .column("id", DataType::int())
            .column("name", DataType::string())
            .build()
            .unwrap();
        support::create_log_table(&client, &path, log_schema, 2, compression).await;
        let mut old_writer = client
            .append_writer(&path, WriterConfig::default())
            .await
            .unwrap();
        for id in 0..10 {
            old_writer
                .append(&[Datum::Int(id), Datum::String("old")])
                .await
                .unwrap();
        }
        old_writer.flush().await.unwrap();
        client
            .alter_table(
                &path,
                &[TableChange::AddColumnLast {
                    name: "score".into(),
                    data_type: DataType::bigint(),
                    comment: None,
                }],
                false,
            )
            .await
            .unwrap();
        let mut new_writer = client
            .append_writer(&path, WriterConfig::default())
            .await
            .unwrap();
        for id in 10..20 {
            new_writer
                .append(&[
                    Datum::Int(id),
                    Datum::String("new"),
                    Datum::BigInt(i64::from(id)),
                ])
                .await
                .unwrap();
        }
        new_writer.flush().await.unwrap();

        let table = client.table_info(&path).await.unwrap();
        assert_eq!(table.earlier_schemas.len(), 1, "{compression}");
        let batches = support::read_all(&client, &table, 20).await;
        let mut rows: Vec<(i32, String, Option<i64>)> = Vec::new();
        for batch in &batches {
            assert_eq!(batch.num_columns(), 3, "{compression}");
            let ids = batch
                .column(0)
                .as_any()
                .downcast_ref::<arrow_array::Int32Array>()
                .unwrap();
            let names = batch
                .column(1)
                .as_any()
                .downcast_ref::<arrow_array::StringArray>()
                .unwrap();
            let scores = batch
                .column(2)
                .as_any()
                .downcast_ref::<arrow_array::Int64Array>()
                .unwrap();
            for i in 0..batch.num_rows() {
                use arrow_array::Array;
                let score = (!scores.is_null(i)).then(|| scores.value(i));
                rows.push((ids.value(i), names.value(i).to_owned(), score));
            }
        }
        rows.sort();
        let expected: Vec<(i32, String, Option<i64>)> = (0..20)
            .map(|id| {
                if id < 10 {
                    (id, "old".to_owned(), None)
                } else {
                    (id, "new".to_owned(), Some(i64::from(id)))
                }
            })
            .collect();
        assert_eq!(rows, expected, "{compression}");
        server.stop().await;
    }
}
