//! ARROW log batches end to end: encode → decode round trips for every
//! compression, magic and change-type mode; batches written the fluss-rs way
//! (arrow-rs StreamWriter, 64-byte alignment, schema message stripped) decode
//! too; and projection pushdown equals projecting the decoded batch, for
//! nulls, strings, nested types and every compression, with proptest.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::builder::{Int32Builder, ListBuilder, MapBuilder, MapFieldNames, StringBuilder};
use arrow_array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, FixedSizeBinaryArray,
    Float64Array, Int32Array, Int64Array, RecordBatch, StringArray, StructArray,
    Time32MillisecondArray, TimestampMicrosecondArray, TimestampMillisecondArray,
};
use arrow_buffer::Buffer;
use arrow_schema::{DataType as ArrowType, Field};
use fjord_format::arrow_log::{decode_log_batch, ArrowCompression, ArrowLogEncoder, ArrowLogError};
use fjord_format::arrow_schema::{to_arrow_schema, to_projected_arrow_schema};
use fjord_format::log_batch::{
    self, BatchHeader, LogBatch, LOG_MAGIC_V0, LOG_MAGIC_V1, LOG_MAGIC_V2,
};
use fjord_format::projection::{Projected, ProjectionError, ProjectionPlan};
use fjord_format::{DataField, DataType, Schema};
use proptest::prelude::*;

const COMPRESSIONS: [ArrowCompression; 3] = [
    ArrowCompression::None,
    ArrowCompression::Lz4Frame,
    ArrowCompression::Zstd { level: 3 },
];

fn wide_schema() -> Schema {
    Schema::builder()
        .column("id", DataType::int().not_null())
        .column("big", DataType::bigint())
        .column("name", DataType::string())
        .column("flag", DataType::boolean())
        .column("price", DataType::decimal(10, 2).unwrap())
        .column("day", DataType::date())
        .column("at", DataType::time(3).unwrap())
        .column("ts", DataType::timestamp(6).unwrap())
        .column("ltz", DataType::timestamp_ltz(3).unwrap())
        .column("raw", DataType::bytes())
        .column("fixed", DataType::binary(2).unwrap())
        .column("score", DataType::double())
        .column("tags", DataType::array(DataType::int()))
        .column("attrs", DataType::map(DataType::string(), DataType::int()))
        .column(
            "pt",
            DataType::row(vec![
                DataField::new("x", DataType::double()),
                DataField::new("label", DataType::string()),
            ]),
        )
        .build()
        .unwrap()
}

/// `rows` rows of the wide schema; every nullable column has nulls.
fn wide_batch(schema: &Schema, rows: usize) -> RecordBatch {
    let arrow = to_arrow_schema(schema);
    let n = rows as i32;
    let null_every = |k: i32| move |i: i32| i % k == 0;
    let mut tags = ListBuilder::new(Int32Builder::new());
    let mut attrs = MapBuilder::new(
        Some(MapFieldNames {
            entry: "entries".into(),
            key: "key".into(),
            value: "value".into(),
        }),
        StringBuilder::new(),
        Int32Builder::new(),
    );
    for i in 0..n {
        if i % 4 == 0 {
            tags.append_null();
        } else {
            for j in 0..(i % 3) {
                tags.values().append_value(i * 10 + j);
            }
            tags.append(true);
        }
        if i % 5 == 0 {
            attrs.append(false).unwrap();
        } else {
            attrs.keys().append_value(format!("k{i}"));
            attrs.values().append_option((i % 2 == 0).then_some(i));
            attrs.append(true).unwrap();
        }
    }
    let tags = tags.finish();
    let tags = tags
        .into_data()
        .into_builder()
        .data_type(arrow.field(12).data_type().clone())
        .build()
        .unwrap();
    let attrs = attrs.finish();
    let attrs = attrs
        .into_data()
        .into_builder()
        .data_type(arrow.field(13).data_type().clone())
        .build()
        .unwrap();
    let ArrowType::Struct(pt_fields) = arrow.field(14).data_type().clone() else {
        unreachable!()
    };
    let pt = StructArray::new(
        pt_fields,
        vec![
            Arc::new(Float64Array::from_iter(
                (0..n).map(|i| (i % 3 != 0).then_some(i as f64 / 2.0)),
            )) as ArrayRef,
            Arc::new(StringArray::from_iter(
                (0..n).map(|i| (i % 2 == 0).then(|| format!("p{i}"))),
            )),
        ],
        Some((0..n).map(|i| i % 7 != 0).collect()),
    );
    let opt = |k: i32, i: i32| !null_every(k)(i);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from_iter_values(0..n)),
        Arc::new(Int64Array::from_iter(
            (0..n).map(|i| opt(3, i).then_some(i as i64 * 1_000_000_007)),
        )),
        Arc::new(StringArray::from_iter(
            (0..n).map(|i| opt(4, i).then(|| "x".repeat(i as usize % 9))),
        )),
        Arc::new(BooleanArray::from_iter(
            (0..n).map(|i| opt(5, i).then_some(i % 2 == 0)),
        )),
        Arc::new(
            Decimal128Array::from_iter((0..n).map(|i| opt(6, i).then_some(i as i128 * 12_345)))
                .with_precision_and_scale(10, 2)
                .unwrap(),
        ),
        Arc::new(Date32Array::from_iter(
            (0..n).map(|i| opt(3, i).then_some(19_000 + i)),
        )),
        Arc::new(Time32MillisecondArray::from_iter(
            (0..n).map(|i| opt(4, i).then_some(i * 1000)),
        )),
        Arc::new(TimestampMicrosecondArray::from_iter(
            (0..n).map(|i| opt(5, i).then_some(i as i64 * 7)),
        )),
        Arc::new(
            TimestampMillisecondArray::from_iter((0..n).map(|i| opt(6, i).then_some(i as i64)))
                .with_timezone("UTC"),
        ),
        Arc::new(BinaryArray::from_iter(
            (0..n).map(|i| opt(3, i).then(|| vec![i as u8; i as usize % 5])),
        )),
        Arc::new(
            FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                (0..n).map(|i| opt(4, i).then_some([i as u8, 1])),
                2,
            )
            .unwrap(),
        ),
        Arc::new(Float64Array::from_iter(
            (0..n).map(|i| opt(2, i).then_some(i as f64)),
        )),
        arrow_array::make_array(tags),
        arrow_array::make_array(attrs),
        Arc::new(pt),
    ];
    RecordBatch::try_new(arrow, columns).unwrap()
}

fn header(magic: u8, schema_id: i16) -> BatchHeader {
    BatchHeader {
        magic,
        ..BatchHeader::append_only(schema_id, 0)
    }
}

fn encode(
    schema: &Schema,
    batch: &RecordBatch,
    compression: ArrowCompression,
    magic: u8,
    change_types: Option<&[u8]>,
) -> Vec<u8> {
    let mut encoder = ArrowLogEncoder::new(to_arrow_schema(schema), compression).unwrap();
    let mut out = vec![0xAB; 3]; // something already in the caller's buffer
    let range = encoder
        .encode(batch, &header(magic, 7), change_types, &mut out)
        .unwrap();
    assert_eq!(range.start, 3);
    assert_eq!(
        &out[..3],
        &[0xAB; 3],
        "bytes before the batch are untouched"
    );
    out.drain(..3);
    out
}

#[test]
fn every_compression_magic_and_change_type_mode_round_trips() {
    let schema = wide_schema();
    let batch = wide_batch(&schema, 97);
    let change_types: Vec<u8> = (0..97).map(|i| (i % 5) as u8).collect();
    for compression in COMPRESSIONS {
        for magic in [LOG_MAGIC_V0, LOG_MAGIC_V1, LOG_MAGIC_V2] {
            for ct in [None, Some(change_types.as_slice())] {
                let bytes = encode(&schema, &batch, compression, magic, ct);
                let view = LogBatch::validate(&bytes).expect("encoded batch validates");
                assert_eq!(view.magic(), magic);
                assert_eq!(view.schema_id(), 7);
                assert_eq!(view.record_count(), 97);
                assert_eq!(view.last_offset_delta(), 96);
                assert_eq!(view.is_append_only(), ct.is_none());
                let decoded =
                    decode_log_batch(&Buffer::from(bytes), to_arrow_schema(&schema)).unwrap();
                assert_eq!(decoded.records, batch, "{compression:?} V{magic}");
                assert_eq!(decoded.change_types.as_ref().map(|b| b.as_slice()), ct);
            }
        }
    }
}

#[test]
fn compression_shrinks_a_repetitive_batch() {
    let schema = wide_schema();
    let batch = wide_batch(&schema, 2000);
    let none = encode(&schema, &batch, ArrowCompression::None, LOG_MAGIC_V0, None).len();
    let zstd = encode(
        &schema,
        &batch,
        ArrowCompression::default(),
        LOG_MAGIC_V0,
        None,
    )
    .len();
    let lz4 = encode(
        &schema,
        &batch,
        ArrowCompression::Lz4Frame,
        LOG_MAGIC_V0,
        None,
    )
    .len();
    assert!(
        zstd < none && lz4 < none,
        "none {none}, zstd {zstd}, lz4 {lz4}"
    );
}

#[test]
fn encoder_refuses_wrong_change_types_empty_batches_and_foreign_schemas() {
    let schema = wide_schema();
    let batch = wide_batch(&schema, 4);
    let mut encoder =
        ArrowLogEncoder::new(to_arrow_schema(&schema), ArrowCompression::None).unwrap();
    let mut out = Vec::new();
    let h = header(LOG_MAGIC_V0, 1);
    assert!(matches!(
        encoder.encode(&batch, &h, Some(&[0, 1]), &mut out),
        Err(ArrowLogError::ChangeTypeCount {
            change_types: 2,
            records: 4
        })
    ));
    assert!(matches!(
        encoder.encode(&batch, &h, Some(&[0, 1, 9, 0]), &mut out),
        Err(ArrowLogError::BadChangeType { index: 2, byte: 9 })
    ));
    assert!(matches!(
        encoder.encode(&batch.slice(0, 0), &h, None, &mut out),
        Err(ArrowLogError::Empty)
    ));
    let other =
        RecordBatch::try_from_iter([("z", Arc::new(Int32Array::from(vec![1])) as ArrayRef)])
            .unwrap();
    assert!(matches!(
        encoder.encode(&other, &h, None, &mut out),
        Err(ArrowLogError::SchemaMismatch)
    ));
    assert!(out.is_empty(), "failed encodes leave the buffer as it was");
}

#[test]
fn compression_option_parsing_follows_fluss_names() {
    let props = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let parse = |pairs: &[(&str, &str)]| ArrowCompression::from_table_properties(&props(pairs));
    assert_eq!(parse(&[]).unwrap(), ArrowCompression::Zstd { level: 3 });
    assert_eq!(
        parse(&[("table.log.arrow.compression.type", "NONE")]).unwrap(),
        ArrowCompression::None
    );
    assert_eq!(
        parse(&[("table.log.arrow.compression.type", "lz4_frame")]).unwrap(),
        ArrowCompression::Lz4Frame
    );
    assert_eq!(
        parse(&[("table.log.arrow.compression.zstd.level", "9")]).unwrap(),
        ArrowCompression::Zstd { level: 9 }
    );
    let err = parse(&[("table.log.arrow.compression.type", "GZIP")]).unwrap_err();
    assert!(err.to_string().contains("GZIP"), "{err}");
    assert!(parse(&[("table.log.arrow.compression.zstd.level", "23")]).is_err());
}

/// The records section fluss-rs writes: arrow-rs StreamWriter with default
/// (64-byte) alignment, schema message bytes stripped.
fn fluss_rs_records(batch: &RecordBatch, compression: ArrowCompression) -> Vec<u8> {
    use arrow_ipc::writer::{IpcWriteOptions, StreamWriter};
    let codec = match compression {
        ArrowCompression::None => None,
        ArrowCompression::Lz4Frame => Some(arrow_ipc::CompressionType::LZ4_FRAME),
        ArrowCompression::Zstd { .. } => Some(arrow_ipc::CompressionType::ZSTD),
    };
    let options = IpcWriteOptions::default()
        .try_with_compression(codec)
        .unwrap();
    let mut bytes = Vec::new();
    let mut writer =
        StreamWriter::try_new_with_options(&mut bytes, batch.schema_ref(), options).unwrap();
    let schema_len = writer.get_ref().len();
    writer.write(batch).unwrap();
    drop(writer);
    bytes.split_off(schema_len)
}

fn fluss_rs_batch(
    batch: &RecordBatch,
    compression: ArrowCompression,
    statistics: &[u8],
) -> Vec<u8> {
    let records = fluss_rs_records(batch, compression);
    let mut out = Vec::new();
    let magic = if statistics.is_empty() {
        LOG_MAGIC_V0
    } else {
        LOG_MAGIC_V1
    };
    let h = BatchHeader {
        magic,
        ..BatchHeader::append_only(7, batch.num_rows() as i32)
    };
    log_batch::write_batch(&mut out, &h, statistics, &records).unwrap();
    out
}

#[test]
fn batches_written_the_fluss_rs_way_decode() {
    let schema = wide_schema();
    let batch = wide_batch(&schema, 33);
    for compression in COMPRESSIONS {
        let bytes = fluss_rs_batch(&batch, compression, &[]);
        let decoded = decode_log_batch(&Buffer::from(bytes), to_arrow_schema(&schema)).unwrap();
        assert_eq!(decoded.records, batch);
    }
}

/// Projects `bytes` and checks the result against projecting the decoded batch.
fn check_projection(
    schema: &Schema,
    bytes: &[u8],
    original: &RecordBatch,
    columns: &[usize],
) -> Vec<u8> {
    let plan = ProjectionPlan::new(schema, 7, columns).unwrap();
    let mut out = vec![1, 2];
    let Projected::Written(range) = plan.project(bytes, &mut out, usize::MAX).unwrap() else {
        panic!("no limit was set")
    };
    assert_eq!(range.start, 2);
    let projected = out.split_off(2);
    let view = LogBatch::validate(&projected).expect("projected batch has a valid CRC");
    assert_eq!(view.statistics_length(), 0, "statistics are dropped");
    assert_eq!(view.record_count(), original.num_rows() as i32);
    let decoded = decode_log_batch(
        &Buffer::from(projected.clone()),
        to_projected_arrow_schema(schema, columns).unwrap(),
    )
    .unwrap();
    assert_eq!(
        decoded.records,
        original.project(columns).unwrap(),
        "projection {columns:?}"
    );
    projected
}

const PROJECTIONS: &[&[usize]] = &[
    &[0],
    &[2],
    &[1, 2],
    &[12],
    &[13],
    &[14],
    &[0, 12, 13, 14],
    &[3, 4, 5, 6, 7, 8, 9, 10, 11],
    &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14],
];

#[test]
fn projection_equals_projecting_the_decoded_batch() {
    let schema = wide_schema();
    let batch = wide_batch(&schema, 61);
    let change_types: Vec<u8> = (0..61).map(|i| (i % 4 + 1) as u8).collect();
    for compression in COMPRESSIONS {
        for ct in [None, Some(change_types.as_slice())] {
            for magic in [LOG_MAGIC_V0, LOG_MAGIC_V2] {
                let bytes = encode(&schema, &batch, compression, magic, ct);
                for columns in PROJECTIONS {
                    let projected = check_projection(&schema, &bytes, &batch, columns);
                    let decoded = decode_log_batch(
                        &Buffer::from(projected),
                        to_projected_arrow_schema(&schema, columns).unwrap(),
                    )
                    .unwrap();
                    assert_eq!(decoded.change_types.as_ref().map(|b| b.as_slice()), ct);
                }
            }
        }
    }
}

#[test]
fn projection_of_fluss_rs_batches_with_statistics_drops_the_statistics() {
    let schema = wide_schema();
    let batch = wide_batch(&schema, 40);
    for compression in COMPRESSIONS {
        let bytes = fluss_rs_batch(&batch, compression, b"0123456789abc");
        assert_eq!(LogBatch::validate(&bytes).unwrap().statistics_length(), 13);
        for columns in PROJECTIONS {
            let projected = check_projection(&schema, &bytes, &batch, columns);
            assert!(projected.len() < bytes.len() || columns.len() == 15);
        }
    }
}

#[test]
fn projection_keeps_only_the_selected_buffers() {
    let schema = wide_schema();
    let batch = wide_batch(&schema, 500);
    let bytes = encode(&schema, &batch, ArrowCompression::None, LOG_MAGIC_V0, None);
    let projected = check_projection(&schema, &bytes, &batch, &[0]);
    // 500 i32 values plus an empty validity buffer, header and metadata.
    assert!(projected.len() < 500 * 4 + 400, "{} bytes", projected.len());
}

#[test]
fn projection_respects_the_byte_limit() {
    let schema = wide_schema();
    let batch = wide_batch(&schema, 50);
    let bytes = encode(&schema, &batch, ArrowCompression::None, LOG_MAGIC_V0, None);
    let plan = ProjectionPlan::new(&schema, 7, &[2]).unwrap();
    let mut out = Vec::new();
    let Projected::Written(range) = plan.project(&bytes, &mut out, usize::MAX).unwrap() else {
        panic!()
    };
    let size = range.len();
    let mut limited = Vec::new();
    assert_eq!(
        plan.project(&bytes, &mut limited, size - 1).unwrap(),
        Projected::ExceedsLimit { size }
    );
    assert!(limited.is_empty());
    assert!(matches!(
        plan.project(&bytes, &mut limited, size).unwrap(),
        Projected::Written(_)
    ));
}

#[test]
fn header_only_batches_pass_through_unchanged() {
    let schema = wide_schema();
    let mut bytes = Vec::new();
    log_batch::write_batch(&mut bytes, &BatchHeader::append_only(3, 0), &[], &[]).unwrap();
    let plan = ProjectionPlan::new(&schema, 7, &[1]).unwrap();
    let mut out = Vec::new();
    plan.project(&bytes, &mut out, usize::MAX).unwrap();
    assert_eq!(out, bytes);
}

#[test]
fn invalid_projections_are_refused_like_fluss() {
    let schema = wide_schema();
    for (columns, needle) in [
        (&[][..], "empty projection"),
        (&[2, 1][..], "field order"),
        (&[1, 1][..], "duplicate"),
        (&[15][..], "out of bounds"),
    ] {
        let err = ProjectionPlan::new(&schema, 0, columns).unwrap_err();
        assert!(matches!(err, ProjectionError::InvalidProjection(_)));
        assert!(err.to_string().contains(needle), "{err}");
    }
}

#[test]
fn projection_refuses_batches_of_another_schema() {
    let schema = wide_schema();
    let batch = wide_batch(&schema, 5);
    let bytes = encode(&schema, &batch, ArrowCompression::None, LOG_MAGIC_V0, None);
    let plan = ProjectionPlan::new(&schema, 8, &[1]).unwrap();
    assert!(matches!(
        plan.project(&bytes, &mut Vec::new(), usize::MAX),
        Err(ProjectionError::SchemaIdMismatch { batch: 7, plan: 8 })
    ));
    let narrow = Schema::builder()
        .column("a", DataType::int())
        .build()
        .unwrap();
    let plan = ProjectionPlan::new(&narrow, 7, &[0]).unwrap();
    assert!(matches!(
        plan.project(&bytes, &mut Vec::new(), usize::MAX),
        Err(ProjectionError::LayoutMismatch {
            expected_nodes: 1,
            ..
        })
    ));
}

#[test]
fn corrupt_batches_are_errors_not_panics() {
    let schema = wide_schema();
    let batch = wide_batch(&schema, 20);
    let bytes = encode(
        &schema,
        &batch,
        ArrowCompression::Lz4Frame,
        LOG_MAGIC_V1,
        None,
    );
    let plan = ProjectionPlan::new(&schema, 7, &[0, 2, 14]).unwrap();
    // Every truncation and every single-byte flip in the first 400 bytes.
    for cut in 0..bytes.len() {
        let _ = plan.project(&bytes[..cut], &mut Vec::new(), usize::MAX);
    }
    for at in 0..bytes.len().min(400) {
        let mut bad = bytes.clone();
        bad[at] ^= 0x5A;
        let _ = plan.project(&bad, &mut Vec::new(), usize::MAX);
        let _ = decode_log_batch(&Buffer::from(bad), to_arrow_schema(&schema));
    }
}

fn small_schema() -> Schema {
    Schema::builder()
        .column("a", DataType::bigint())
        .column("s", DataType::string())
        .column("l", DataType::array(DataType::string()))
        .column(
            "r",
            DataType::row(vec![DataField::new("x", DataType::int())]),
        )
        .build()
        .unwrap()
}

/// One row of the small schema: a, s, l, r.x.
type SmallRow = (
    Option<i64>,
    Option<String>,
    Option<Vec<Option<String>>>,
    Option<i32>,
);

fn small_batch(rows: &[SmallRow]) -> RecordBatch {
    let arrow = to_arrow_schema(&small_schema());
    let mut lists = ListBuilder::new(StringBuilder::new())
        .with_field(Arc::new(Field::new_list_field(ArrowType::Utf8, true)));
    for (_, _, l, _) in rows {
        match l {
            None => lists.append_null(),
            Some(items) => {
                for item in items {
                    lists.values().append_option(item.as_deref());
                }
                lists.append(true);
            }
        }
    }
    let ArrowType::Struct(r_fields) = arrow.field(3).data_type().clone() else {
        unreachable!()
    };
    let r = StructArray::new(
        r_fields,
        vec![Arc::new(Int32Array::from_iter(rows.iter().map(|r| r.3))) as ArrayRef],
        None,
    );
    RecordBatch::try_new(
        arrow,
        vec![
            Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.0))),
            Arc::new(StringArray::from_iter(rows.iter().map(|r| r.1.clone()))),
            Arc::new(lists.finish()),
            Arc::new(r),
        ],
    )
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn random_batches_project_like_their_decoded_form(
        rows in prop::collection::vec(
            (
                any::<Option<i64>>(),
                prop::option::of("[a-z]{0,12}"),
                prop::option::of(prop::collection::vec(prop::option::of("[a-z]{0,4}"), 0..4)),
                any::<Option<i32>>(),
            ),
            1..40,
        ),
        compression in prop::sample::select(COMPRESSIONS.to_vec()),
        mask in 1u8..16,
        append_only in any::<bool>(),
    ) {
        let schema = small_schema();
        let batch = small_batch(&rows);
        let ct: Vec<u8> = (0..rows.len()).map(|i| (i % 5) as u8).collect();
        let bytes = encode(&schema, &batch, compression, LOG_MAGIC_V1, (!append_only).then_some(ct.as_slice()));
        let decoded = decode_log_batch(&Buffer::from(bytes.clone()), to_arrow_schema(&schema)).unwrap();
        prop_assert_eq!(&decoded.records, &batch);
        let columns: Vec<usize> = (0..4).filter(|i| mask & (1 << i) != 0).collect();
        check_projection(&schema, &bytes, &batch, &columns);
    }
}

#[test]
fn runs_of_batches_project_until_the_budget_and_skip_partial_tails() {
    use fjord_format::projection::project_batches;
    let schema = wide_schema();
    let plan = Arc::new(ProjectionPlan::new(&schema, 7, &[0, 2]).unwrap());
    let mut log = Vec::new();
    let mut sizes = Vec::new();
    for rows in [10, 20, 30] {
        let batch = wide_batch(&schema, rows);
        let bytes = encode(
            &schema,
            &batch,
            ArrowCompression::Lz4Frame,
            LOG_MAGIC_V0,
            None,
        );
        sizes.push(bytes.len());
        log.extend_from_slice(&bytes);
    }
    let mut lookups = 0;
    let mut plan_for = |id: i16| {
        lookups += 1;
        assert_eq!(id, 7);
        Ok(plan.clone())
    };
    // Whole log plus a partial batch: the partial tail is left for the next read.
    let mut with_tail = log.clone();
    with_tail.extend_from_slice(&log[..sizes[0] - 1]);
    let mut out = Vec::new();
    let run = project_batches(&with_tail, &mut plan_for, &mut out, usize::MAX, false).unwrap();
    assert_eq!(
        (run.batches, run.source_bytes, run.output_bytes),
        (3, log.len(), out.len())
    );
    let mut offset = 0;
    for rows in [10, 20, 30] {
        let size = fjord_format::log_batch::peek_size_and_magic(&out[offset..])
            .unwrap()
            .unwrap()
            .0;
        let decoded = decode_log_batch(
            &Buffer::from(out[offset..offset + size].to_vec()),
            to_projected_arrow_schema(&schema, &[0, 2]).unwrap(),
        )
        .unwrap();
        assert_eq!(
            decoded.records,
            wide_batch(&schema, rows).project(&[0, 2]).unwrap()
        );
        offset += size;
    }
    // A budget that fits only the first projected batch.
    let first = run.output_bytes - {
        let mut o = Vec::new();
        project_batches(&log[sizes[0]..], &mut plan_for, &mut o, usize::MAX, false)
            .unwrap()
            .output_bytes
    };
    let mut out = Vec::new();
    let run = project_batches(&log, &mut plan_for, &mut out, first, false).unwrap();
    assert_eq!((run.batches, run.source_bytes), (1, sizes[0]));
    // A budget too small for anything: nothing, unless min_one.
    let run = project_batches(&log, &mut plan_for, &mut Vec::new(), 10, false).unwrap();
    assert_eq!(run.batches, 0);
    let run = project_batches(&log, &mut plan_for, &mut Vec::new(), 10, true).unwrap();
    assert_eq!(run.batches, 1);
    assert_eq!(lookups, 5, "one plan lookup per run, not per batch");
}

#[test]
fn stale_crc_from_a_fluss_server_projection_decodes_only_without_crc_check() {
    use fjord_format::arrow_log::{decode_log_batch_with, DecodeOptions};
    let schema = wide_schema();
    let batch = wide_batch(&schema, 12);
    let bytes = encode(
        &schema,
        &batch,
        ArrowCompression::Zstd { level: 3 },
        LOG_MAGIC_V1,
        None,
    );
    let plan = ProjectionPlan::new(&schema, 7, &[1, 14]).unwrap();
    let mut projected = Vec::new();
    plan.project(&bytes, &mut projected, usize::MAX).unwrap();
    // A Fluss server leaves the source batch's CRC in place.
    let crc_at = log_batch::layout(LOG_MAGIC_V1).unwrap().crc;
    projected[crc_at..crc_at + 4].copy_from_slice(&bytes[crc_at..crc_at + 4]);
    let projected = Buffer::from(projected);
    let arrow = to_projected_arrow_schema(&schema, &[1, 14]).unwrap();
    let err = decode_log_batch(&projected, arrow.clone()).unwrap_err();
    assert!(err.to_string().contains("CRC"), "{err}");
    let lenient = DecodeOptions { verify_crc: false };
    let decoded = decode_log_batch_with(&projected, arrow, lenient).unwrap();
    assert_eq!(decoded.records, batch.project(&[1, 14]).unwrap());
}

/// Regression (found by the `arrow_projection` fuzz target): a corrupted
/// field node copied by projection (whose CRC is then valid again) must be
/// a decode error, not a panic inside arrow-rs. Sweeps byte flips over the
/// header and IPC metadata of every compression, projects, decodes.
#[test]
fn corrupted_metadata_survives_projection_and_decoding_without_panic() {
    use fjord_format::fixtures::{nested_batch, nested_schema};
    let schema = nested_schema();
    let batch = nested_batch(13);
    let plans: Vec<_> = [&[0usize][..], &[1, 3], &[4], &[2, 3, 4], &[0, 1, 2, 3, 4]]
        .iter()
        .map(|c| ProjectionPlan::new(&schema, 7, c).unwrap())
        .collect();
    for compression in COMPRESSIONS {
        let bytes = encode(&schema, &batch, compression, LOG_MAGIC_V0, None);
        for at in 0..bytes.len().min(700) {
            for xor in [0x01u8, 0xCD, 0xFF] {
                let mut bad = bytes.clone();
                bad[at] ^= xor;
                for plan in &plans {
                    let mut out = Vec::new();
                    if let Ok(Projected::Written(range)) = plan.project(&bad, &mut out, usize::MAX)
                    {
                        let projected = to_projected_arrow_schema(&schema, plan.columns()).unwrap();
                        let _ = decode_log_batch(&Buffer::from(out[range].to_vec()), projected);
                    }
                }
            }
        }
    }
}
