//! Deterministic sample data for tests, benchmarks and fuzz targets of this
//! and other crates: the seed documents' `user_behavior` workload and a small
//! schema with nested columns. Not used on any production path.

use std::sync::Arc;

use arrow_array::builder::{Int32Builder, ListBuilder};
use arrow_array::{
    ArrayRef, Decimal128Array, Int32Array, Int64Array, RecordBatch, StringArray, StructArray,
    TimestampMillisecondArray,
};
use arrow_schema::{DataType as ArrowType, Field};

use crate::arrow_schema::to_arrow_schema;
use crate::schema::Schema;
use crate::types::{DataField, DataType};

/// The `user_behavior` table of the seed documents:
/// `user_id BIGINT, item_id BIGINT, category_id BIGINT, behavior STRING, ts TIMESTAMP(3)`.
pub fn user_behavior_schema() -> Schema {
    Schema::builder()
        .column("user_id", DataType::bigint())
        .column("item_id", DataType::bigint())
        .column("category_id", DataType::bigint())
        .column("behavior", DataType::string())
        .column(
            "ts",
            DataType::timestamp(3).expect("3 is a valid precision"),
        )
        .build()
        .expect("a fixed, valid schema")
}

/// A small xorshift generator: deterministic, dependency-free.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

/// `rows` rows of `user_behavior`, generated from `seed` with skew: a tenth
/// of the users and items make up most events; behaviour is pv 89%, cart 5.5%,
/// fav 3%, buy 2.5% (the shape of the public Taobao data set); timestamps rise.
pub fn user_behavior_batch(rows: usize, seed: u64) -> RecordBatch {
    // Spread the seed so that neighbouring seeds give unrelated streams.
    let mut rng = XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut user = Vec::with_capacity(rows);
    let mut item = Vec::with_capacity(rows);
    let mut category = Vec::with_capacity(rows);
    let mut behavior = Vec::with_capacity(rows);
    let mut ts = Vec::with_capacity(rows);
    let mut now_ms: i64 = 1_511_544_070_000;
    for _ in 0..rows {
        let r = rng.next();
        let hot = r % 10 < 8;
        let u = if hot { r % 1_000 } else { r % 1_000_000 };
        let i = if hot {
            (r >> 20) % 5_000
        } else {
            (r >> 20) % 4_000_000
        };
        user.push(u as i64);
        item.push(i as i64);
        category.push((i % 9_439) as i64);
        behavior.push(match (r >> 40) % 1000 {
            0..=889 => "pv",
            890..=944 => "cart",
            945..=974 => "fav",
            _ => "buy",
        });
        now_ms += ((r >> 50) % 3) as i64;
        ts.push(now_ms);
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(user)),
        Arc::new(Int64Array::from(item)),
        Arc::new(Int64Array::from(category)),
        Arc::new(StringArray::from(behavior)),
        Arc::new(TimestampMillisecondArray::from(ts)),
    ];
    RecordBatch::try_new(to_arrow_schema(&user_behavior_schema()), columns)
        .expect("columns match the schema")
}

/// A schema exercising strings, decimals, lists and structs with nulls:
/// `id BIGINT NOT NULL, name STRING, price DECIMAL(12, 3), tags ARRAY<INT>, pt ROW<x INT, s STRING>`.
pub fn nested_schema() -> Schema {
    Schema::builder()
        .column("id", DataType::bigint().not_null())
        .column("name", DataType::string())
        .column("price", DataType::decimal(12, 3).expect("valid"))
        .column("tags", DataType::array(DataType::int()))
        .column(
            "pt",
            DataType::row(vec![
                DataField::new("x", DataType::int()),
                DataField::new("s", DataType::string()),
            ]),
        )
        .build()
        .expect("a fixed, valid schema")
}

/// `rows` rows of [`nested_schema`], every nullable column with some nulls.
pub fn nested_batch(rows: usize) -> RecordBatch {
    let arrow = to_arrow_schema(&nested_schema());
    let n = rows as i64;
    let mut tags = ListBuilder::new(Int32Builder::new())
        .with_field(Arc::new(Field::new_list_field(ArrowType::Int32, true)));
    for i in 0..n {
        if i % 4 == 3 {
            tags.append_null();
        } else {
            for j in 0..(i % 3) {
                tags.values()
                    .append_option((j != 1).then_some((i * 3 + j) as i32));
            }
            tags.append(true);
        }
    }
    let ArrowType::Struct(pt_fields) = arrow.field(4).data_type().clone() else {
        unreachable!("pt is a ROW")
    };
    let pt = StructArray::new(
        pt_fields,
        vec![
            Arc::new(Int32Array::from_iter(
                (0..n).map(|i| (i % 5 != 0).then_some(i as i32)),
            )) as ArrayRef,
            Arc::new(StringArray::from_iter(
                (0..n).map(|i| (i % 2 == 0).then(|| format!("s{i}"))),
            )),
        ],
        Some((0..n).map(|i| i % 6 != 5).collect()),
    );
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(0..n)),
        Arc::new(StringArray::from_iter(
            (0..n).map(|i| (i % 3 != 0).then(|| format!("name-{i}"))),
        )),
        Arc::new(
            Decimal128Array::from_iter((0..n).map(|i| (i % 4 != 1).then_some(i as i128 * 1001)))
                .with_precision_and_scale(12, 3)
                .expect("valid precision"),
        ),
        Arc::new(tags.finish()),
        Arc::new(pt),
    ];
    RecordBatch::try_new(arrow, columns).expect("columns match the schema")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_behavior_is_deterministic_and_skewed() {
        let a = user_behavior_batch(10_000, 42);
        assert_eq!(a, user_behavior_batch(10_000, 42));
        assert_ne!(a, user_behavior_batch(10_000, 43));
        let behavior = a.column(3).as_any().downcast_ref::<StringArray>().unwrap();
        let pv = behavior.iter().filter(|b| *b == Some("pv")).count();
        assert!((8_500..9_300).contains(&pv), "pv share {pv}");
    }

    #[test]
    fn nested_batch_matches_its_schema() {
        assert_eq!(nested_batch(17).num_rows(), 17);
    }
}
