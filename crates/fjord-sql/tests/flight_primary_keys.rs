//! Flight SQL's `CommandGetPrimaryKeys` as arrow-rs's own Flight SQL client
//! (`FlightSqlServiceClient`, what Rust tools and the Java JDBC driver's
//! `DatabaseMetaData.getPrimaryKeys` send) asks it: a primary-key table
//! answers its key columns in key order with their sequence, a composite
//! key all of them, a log table and an unknown table nothing; and
//! `CommandGetTables` lists the tables it describes.

mod support;

use arrow_array::{Array, Int32Array, RecordBatch, StringArray};
use arrow_flight::sql::client::FlightSqlServiceClient;
use arrow_flight::sql::{CommandGetPrimaryKeys, CommandGetTables};
use arrow_flight::FlightInfo;
use fjord_sql::flight;
use fjord_sql::pg::Users;
use futures::TryStreamExt;
use support::{query, TestServer};
use tonic::transport::Channel;

/// Every batch of every endpoint of `info`, fetched with `client`.
async fn fetch(client: &mut FlightSqlServiceClient<Channel>, info: FlightInfo) -> Vec<RecordBatch> {
    let mut out = Vec::new();
    for endpoint in info.endpoint {
        let ticket = endpoint.ticket.expect("an endpoint carries its ticket");
        let stream = client.do_get(ticket).await.expect("do_get");
        out.extend(
            stream
                .try_collect::<Vec<_>>()
                .await
                .expect("the stream reads"),
        );
    }
    out
}

/// `(schema, table, column, key_sequence)` of the primary-key answer.
fn key_rows(batches: &[RecordBatch]) -> Vec<(String, String, String, i32)> {
    let mut rows = Vec::new();
    for b in batches {
        let text = |name: &str| {
            b.column_by_name(name)
                .and_then(|c| c.as_any().downcast_ref::<StringArray>())
                .unwrap_or_else(|| panic!("column {name} of {:?}", b.schema()))
                .clone()
        };
        let (schemas, tables, columns) = (
            text("db_schema_name"),
            text("table_name"),
            text("column_name"),
        );
        let sequence = b
            .column_by_name("key_sequence")
            .and_then(|c| c.as_any().downcast_ref::<Int32Array>())
            .expect("key_sequence is Int32")
            .clone();
        for i in 0..b.num_rows() {
            assert!(!columns.is_null(i), "a key column without a name");
            rows.push((
                schemas.value(i).to_string(),
                tables.value(i).to_string(),
                columns.value(i).to_string(),
                sequence.value(i),
            ));
        }
    }
    rows
}

fn keys_of(schema: &str, table: &str) -> CommandGetPrimaryKeys {
    CommandGetPrimaryKeys {
        catalog: None,
        db_schema: Some(schema.to_string()),
        table: table.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn primary_keys_answer_each_key_column_in_order() {
    let server = TestServer::start().await;
    let engine = server.engine().await;
    let mut s = engine.session();
    query(&mut s, "CREATE DATABASE IF NOT EXISTS fkeys").await;
    query(
        &mut s,
        "CREATE TABLE fkeys.orders (region STRING, id BIGINT, amount INT, \
         PRIMARY KEY (region, id) NOT ENFORCED) WITH ('bucket.num' = '2')",
    )
    .await;
    query(
        &mut s,
        "CREATE TABLE fkeys.users (id BIGINT, name STRING, PRIMARY KEY (id) NOT ENFORCED)",
    )
    .await;
    query(&mut s, "CREATE TABLE fkeys.events (id BIGINT, what STRING)").await;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(flight::serve(engine.clone(), listener, Users::default()));
    let channel = Channel::from_shared(format!("http://{addr}"))
        .expect("uri")
        .connect()
        .await
        .expect("connects");
    let mut client = FlightSqlServiceClient::new(channel);

    let info = client
        .get_primary_keys(keys_of("fkeys", "orders"))
        .await
        .expect("get_primary_keys");
    let rows = key_rows(&fetch(&mut client, info).await);
    let expected =
        |t: &str, c: &str, n: i32| ("fkeys".to_string(), t.to_string(), c.to_string(), n);
    assert_eq!(
        rows,
        vec![expected("orders", "region", 1), expected("orders", "id", 2)]
    );

    let info = client
        .get_primary_keys(keys_of("fkeys", "users"))
        .await
        .expect("get_primary_keys");
    assert_eq!(
        key_rows(&fetch(&mut client, info).await),
        vec![expected("users", "id", 1)]
    );

    // No key: no rows (a log table, a table that does not exist).
    for table in ["events", "nowhere"] {
        let info = client
            .get_primary_keys(keys_of("fkeys", table))
            .await
            .expect("get_primary_keys");
        assert_eq!(key_rows(&fetch(&mut client, info).await), vec![], "{table}");
    }

    // The tables the keys describe are listed.
    let info = client
        .get_tables(CommandGetTables {
            catalog: None,
            db_schema_filter_pattern: Some("fkeys".to_string()),
            table_name_filter_pattern: None,
            table_types: vec![],
            include_schema: false,
        })
        .await
        .expect("get_tables");
    let mut names = Vec::new();
    for b in fetch(&mut client, info).await {
        let column = b
            .column_by_name("table_name")
            .and_then(|c| c.as_any().downcast_ref::<StringArray>())
            .expect("table_name")
            .clone();
        names.extend((0..b.num_rows()).map(|i| column.value(i).to_string()));
    }
    names.sort();
    assert_eq!(names, ["events", "orders", "users"]);
}
