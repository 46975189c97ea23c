//! Rows of a caller's own type, written with `FieldWriter`'s typed methods
//! through `AppendWriter::append`: they go to the bucket their key hashes
//! to (read through `datum`, as for any row) and read back as written, and
//! a refused row is refused alone, with the rows around it delivered. A row
//! type that panics part way through its fields leaves no torn row: the
//! writer drops what the row wrote while the panic unwinds
//! (writer/mod.rs `RepairOnPanic`), and the caller that caught the panic
//! goes on with the same writer, each row before and after it whole.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::RecordBatch;
use fjord_client::row::{Datum, FieldWriter, InternalRow};
use fjord_client::{TablePath, WriterConfig};
use fjord_format::schema::Schema;
use fjord_format::types::DataType;
use support::{create_bucketed_table, flush_in_time, read_all_by_bucket, TestServer};

const NAMES: [&str; 4] = ["pv", "cart", "fav", "buy"];
const ROWS: i64 = 2_000;

/// One row of `id BIGINT, name STRING NOT NULL` as a type of its own.
/// `written` counts its `write_fields` calls: the writer must take the row
/// through them, not through `datum` (which reads the same values).
struct Event<'a> {
    id: i64,
    name: Option<&'a str>,
    written: &'a AtomicUsize,
}

impl InternalRow for Event<'_> {
    fn field_count(&self) -> usize {
        2
    }

    fn datum(&self, pos: usize) -> Datum<'_> {
        match (pos, self.name) {
            (0, _) => Datum::BigInt(self.id),
            (_, Some(name)) => Datum::String(name),
            (_, None) => Datum::Null,
        }
    }

    fn write_fields(&self, fields: &mut FieldWriter<'_>) {
        self.written.fetch_add(1, Ordering::Relaxed);
        fields.bigint(self.id);
        match self.name {
            Some(name) => fields.string(name),
            None => fields.null(),
        }
    }
}

fn schema() -> Schema {
    Schema::builder()
        .column("id", DataType::bigint())
        .column("name", DataType::string().not_null())
        .build()
        .expect("schema")
}

/// Per bucket, the sorted `(id, name)` pairs read back.
fn per_bucket(read: Vec<(i32, RecordBatch)>, buckets: usize) -> Vec<Vec<(i64, String)>> {
    let mut out = vec![Vec::new(); buckets];
    for (bucket, batch) in read {
        let ids = batch.column(0).as_primitive::<Int64Type>();
        let names = batch.column(1).as_string::<i32>();
        for i in 0..batch.num_rows() {
            out[bucket as usize].push((ids.value(i), names.value(i).to_owned()));
        }
    }
    for rows in &mut out {
        rows.sort_unstable();
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_rows_land_in_the_buckets_and_values_of_the_same_rows_as_datums() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let typed_path = TablePath::new("typed_rows", "typed");
    let datum_path = TablePath::new("typed_rows", "datums");
    let typed_table =
        create_bucketed_table(&client, &typed_path, schema(), 4, &["id"], "ZSTD").await;
    let datum_table =
        create_bucketed_table(&client, &datum_path, schema(), 4, &["id"], "ZSTD").await;

    let mut typed = client
        .append_writer(&typed_path, WriterConfig::default())
        .await
        .expect("writer");
    let written = AtomicUsize::new(0);
    let mut refusals = Vec::new();
    for id in 0..ROWS {
        let name = NAMES[id as usize % 4];
        typed
            .append(&Event {
                id,
                name: Some(name),
                written: &written,
            })
            .await
            .expect("append");
        if id % 500 == 7 {
            // NULL into the NOT NULL column: this row alone is refused.
            let refused = typed
                .append(&Event {
                    id: -id,
                    name: None,
                    written: &written,
                })
                .await;
            refusals.push(refused.expect_err("NULL into NOT NULL").to_string());
        }
    }
    flush_in_time(&mut typed).await;

    let mut datums = client
        .append_writer(&datum_path, WriterConfig::default())
        .await
        .expect("writer");
    for id in 0..ROWS {
        let name = NAMES[id as usize % 4];
        datums
            .append(&[Datum::BigInt(id), Datum::String(name)])
            .await
            .expect("append");
    }
    flush_in_time(&mut datums).await;

    assert_eq!(refusals.len(), 4);
    // Every typed row, refused ones included, went in through its own
    // `write_fields`, not datum by datum.
    assert_eq!(
        written.load(Ordering::Relaxed),
        ROWS as usize + refusals.len()
    );
    for message in &refusals {
        assert!(message.contains("column `name`"), "{message}");
        assert!(message.contains("NOT NULL"), "{message}");
    }
    let from_typed = per_bucket(
        read_all_by_bucket(&client, &typed_table, ROWS as usize).await,
        4,
    );
    let from_datums = per_bucket(
        read_all_by_bucket(&client, &datum_table, ROWS as usize).await,
        4,
    );
    assert_eq!(
        from_typed.iter().map(Vec::len).sum::<usize>(),
        ROWS as usize
    );
    assert!(
        from_typed.iter().all(|rows| !rows.is_empty()),
        "rows spread over every bucket"
    );
    assert_eq!(from_typed, from_datums);
    server.stop().await;
}

/// Writes its id, then panics: a row type's bug part way through a row.
struct PanicsAfterId;

impl InternalRow for PanicsAfterId {
    fn field_count(&self) -> usize {
        2
    }

    fn datum(&self, pos: usize) -> Datum<'_> {
        match pos {
            0 => Datum::BigInt(99),
            _ => panic!("a row type's bug"),
        }
    }

    fn write_fields(&self, fields: &mut FieldWriter<'_>) {
        fields.bigint(99);
        panic!("a row type's bug");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_type_that_panics_part_way_leaves_no_torn_row_in_the_batch() {
    use std::future::Future;
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::task::{Context, Waker};

    let server = TestServer::start().await;
    let client = server.client().await;
    let path = TablePath::new("typed_rows", "panics");
    let table = create_bucketed_table(&client, &path, schema(), 1, &[], "ZSTD").await;
    // No batch is sealed by age while the panic is printed: all three
    // rows meet in one open batch.
    let config = WriterConfig::from_options([("client.writer.batch-timeout", "10min")])
        .expect("valid options");
    let mut writer = client.append_writer(&path, config).await.expect("writer");
    let written = AtomicUsize::new(0);
    writer
        .append(&Event {
            id: 1,
            name: Some("pv"),
            written: &written,
        })
        .await
        .expect("append");
    // The row is appended on the future's first poll, which panics here;
    // the caller catches it and goes on with the same writer.
    let panicked = catch_unwind(AssertUnwindSafe(|| {
        let mut append = std::pin::pin!(writer.append(&PanicsAfterId));
        let _ = append
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()));
    }));
    assert!(panicked.is_err(), "the row type panicked");
    writer
        .append(&Event {
            id: 2,
            name: Some("buy"),
            written: &written,
        })
        .await
        .expect("append after the panic");
    flush_in_time(&mut writer).await;

    let rows = per_bucket(read_all_by_bucket(&client, &table, 2).await, 1);
    assert_eq!(
        rows[0],
        [(1, "pv".to_owned()), (2, "buy".to_owned())],
        "each id still next to its own name"
    );
    server.stop().await;
}
