//! Tests of [`RowBatchBuilder::append_rows`]: a run of rows builds exactly
//! the batch its rows appended one at a time build, and a refused run
//! leaves nothing behind.

use arrow_array::cast::AsArray;
use fjord_format::types::DataType;

use super::tests::{all_types, builder};
use super::*;

const TEXT: &str = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ";

/// Row `k` of [`all_types`]' table: values change with `k`, strings of
/// every length from 0 to 40 bytes, and column `c` is NULL when
/// `k % 7 == c % 7`. Columns the run path takes value by value (BOOLEAN,
/// CHAR, BINARY(n), DECIMAL, TIME, coarser or finer timestamps) are here
/// as well as the fast ones.
fn row(k: usize) -> Vec<Datum<'static>> {
    let n = k as i64;
    let ts = Timestamp::new(1_700_000_000_000 + n, (k as i32 * 7919) % 1_000_000).unwrap();
    let len = k % 41;
    let time = Datum::Time((k as i32 * 1_001) % 86_400_000);
    let values = vec![
        Datum::Boolean(k.is_multiple_of(3)),
        Datum::TinyInt(k as i8),
        Datum::SmallInt(-(k as i16)),
        Datum::Int(k as i32 * 3),
        Datum::BigInt(n * 1_000_003),
        Datum::Float(k as f32 / 4.0),
        Datum::Double(-(k as f64) / 8.0),
        Datum::String(&TEXT[k % 10..k % 10 + 2]),
        Datum::String(&TEXT[..len]),
        Datum::Binary(&TEXT.as_bytes()[TEXT.len() - len..]),
        Datum::Binary(&TEXT.as_bytes()[k % 10..k % 10 + 3]),
        Datum::Decimal(i128::from(n * 101 - 5_000)),
        Datum::Date(19_000 + k as i32),
        time,
        time,
        time,
        time,
        Datum::Timestamp(ts),
        Datum::Timestamp(ts),
        Datum::Timestamp(ts),
        Datum::Timestamp(ts),
        Datum::TimestampLtz(ts),
        Datum::TimestampLtz(ts),
    ];
    assert_eq!(values.len(), all_types().len());
    values
        .into_iter()
        .enumerate()
        .map(|(c, v)| if k % 7 == c % 7 { Datum::Null } else { v })
        .collect()
}

#[test]
fn runs_of_every_type_build_the_same_batch_as_rows_appended_one_by_one() {
    let rows: Vec<Vec<Datum<'static>>> = (0..400).map(row).collect();
    let mut single = builder(&all_types());
    for r in &rows {
        single.append(r).unwrap();
    }
    let mut runs = builder(&all_types());
    let mut rest = &rows[..];
    // Runs of irregular lengths, a run of one and an empty run among them.
    for len in [0, 1, 2, 17, 64, 3, 100].into_iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (run, after) = rest.split_at(len.min(rest.len()));
        runs.append_rows(run).unwrap();
        rest = after;
    }
    assert_eq!(runs.len(), rows.len());
    assert_eq!(runs.estimated_bytes(), single.estimated_bytes());
    assert_eq!(runs.finish().unwrap(), single.finish().unwrap());
}

#[test]
fn a_refused_run_appends_none_of_its_rows_and_names_the_refused_row() {
    let mut b = builder(&all_types());
    let rows: Vec<Vec<Datum<'static>>> = (0..10).map(row).collect();
    b.append_rows(&rows[..4]).unwrap();
    let bytes_before = b.estimated_bytes();

    // Row 5 of the next run carries an INT where the BIGINT column is: the
    // columns before it (and the BIGINT column's rows before row 5) were
    // already written when the refusal is found.
    let mut bad: Vec<Vec<Datum<'static>>> = (4..10).map(row).collect();
    bad[5][4] = Datum::Int(1);
    let message = b.append_rows(&bad).unwrap_err().to_string();
    assert!(message.contains("row 5 of the run"), "{message}");
    assert!(message.contains("`i64`"), "{message}");
    assert_eq!(b.len(), 4);
    assert_eq!(b.estimated_bytes(), bytes_before);

    // The refusal left no values behind: the good rows go in after it and
    // the batch equals one built from the good rows alone.
    b.append_rows(&rows[4..]).unwrap();
    let mut expected = builder(&all_types());
    expected.append_rows(&rows).unwrap();
    assert_eq!(b.finish().unwrap(), expected.finish().unwrap());
}

#[test]
fn a_run_refuses_null_in_a_not_null_column_and_wrong_widths() {
    let mut b = builder(&[
        ("id", DataType::bigint().not_null()),
        ("name", DataType::string().not_null()),
    ]);
    let ok = [Datum::BigInt(1), Datum::String("a")];
    let null_name = [Datum::BigInt(2), Datum::Null];
    let message = b.append_rows(&[ok, null_name]).unwrap_err().to_string();
    assert!(message.contains("row 1 of the run"), "{message}");
    assert!(message.contains("`name`"), "{message}");
    assert!(message.contains("NOT NULL"), "{message}");
    assert!(b.is_empty());

    let short: Vec<Datum<'_>> = vec![Datum::BigInt(3)];
    let message = b
        .append_rows(&[ok.to_vec(), short])
        .unwrap_err()
        .to_string();
    assert!(message.contains("row 1 of the run"), "{message}");
    assert!(message.contains("1 fields"), "{message}");
    assert!(b.is_empty());

    b.append_rows(&[ok]).unwrap();
    let batch = b.finish().unwrap();
    assert_eq!(batch.num_rows(), 1);
    assert_eq!(batch.column(1).as_string::<i32>().value(0), "a");
}

#[test]
fn copy_short_copies_every_length_exactly() {
    let src: Vec<u8> = (0..=255).collect();
    for len in 0..=40 {
        for start in [0, 1, 7, 200] {
            let from = &src[start..start + len];
            let mut to = vec![0xEEu8; len];
            // SAFETY: `to` holds `len` bytes, apart from `from`.
            unsafe { copy_short(to.as_mut_ptr(), from) };
            assert_eq!(to, from, "length {len} from {start}");
        }
    }
}

#[test]
fn extend_short_appends_every_length_after_what_the_buffer_holds() {
    let src: Vec<u8> = (0..=255).collect();
    for len in 0..=40 {
        let value = &src[3..3 + len];
        let mut buffer = MutableBuffer::new(0);
        buffer.extend_from_slice(b"before");
        extend_short(&mut buffer, value);
        extend_short(&mut buffer, b"after");
        let expected = [&b"before"[..], value, b"after"].concat();
        assert_eq!(buffer.as_slice(), &expected[..], "length {len}");
    }
}

#[test]
fn run_length_takes_the_rows_a_row_by_row_writer_would_put_in_the_batch() {
    let mut b = builder(&[("id", DataType::bigint()), ("s", DataType::string())]);
    let small = "ab";
    let big = "z".repeat(1_000);
    // 12 fixed bytes (BIGINT + offset) a row, plus the text, plus 2 bitmap
    // bits a row (both columns nullable).
    let rows: Vec<[Datum<'_>; 2]> = (0..10)
        .map(|i| {
            let text = if i < 4 { small } else { big.as_str() };
            [Datum::BigInt(i), Datum::String(text)]
        })
        .collect();
    // Four small rows (14 bytes each), then the first big row reaches 1 000.
    let length = b.run_length(&rows, 1_000, usize::MAX);
    assert_eq!(
        (length.rows, length.seal, length.too_large),
        (5, false, None)
    );
    // Appending exactly those rows one by one fills the batch just past the
    // threshold, and the rows before the last left it below.
    for row in &rows[..4] {
        b.append(row).unwrap();
    }
    assert!(b.estimated_bytes() < 1_000);
    b.append(&rows[4]).unwrap();
    assert!(b.estimated_bytes() >= 1_000);

    // Past a hard limit: the batch is sealed before the row that would
    // cross it, or, empty, refuses that row for good.
    let length = b.run_length(&rows[5..], usize::MAX, 1_500);
    assert_eq!(
        (length.rows, length.seal, length.too_large),
        (0, true, None)
    );
    let empty = builder(&[("id", DataType::bigint()), ("s", DataType::string())]);
    let length = empty.run_length(&rows[5..], usize::MAX, 500);
    assert_eq!(length.rows, 0);
    assert!(!length.seal);
    assert_eq!(length.too_large, Some(12 + 1_000 + 1));
}

#[test]
fn truncate_rows_leaves_the_batch_of_the_rows_kept() {
    let rows: Vec<Vec<Datum<'static>>> = (0..50).map(row).collect();
    let mut b = builder(&all_types());
    b.append_rows(&rows).unwrap();
    b.truncate_rows(20);
    let mut expected = builder(&all_types());
    expected.append_rows(&rows[..20]).unwrap();
    assert_eq!(b.len(), 20);
    assert_eq!(b.estimated_bytes(), expected.estimated_bytes());
    assert_eq!(b.finish().unwrap(), expected.finish().unwrap());
}

#[test]
fn a_refused_run_names_a_refused_row_and_appends_none() {
    let mut b = builder(&[("a", DataType::bigint()), ("b", DataType::bigint())]);
    // Row 0 is refused in column `b`, row 1 in column `a`: the columns are
    // checked in order, so column `a` finds row 1 first (the writer's
    // `append_rows` retries the shorter prefix to name row 0).
    let rows = [
        [Datum::BigInt(1), Datum::Int(1)],
        [Datum::Int(2), Datum::BigInt(2)],
    ];
    let message = b.append_rows(&rows).unwrap_err().to_string();
    assert!(message.contains("row 1 of the run"), "{message}");
    assert!(message.contains("`a`"), "{message}");
    assert!(b.is_empty());
}

/// A row whose STRING value grows each time it is read (an `InternalRow`
/// over interior state; the trait does not promise repeatable reads).
struct GrowingRow {
    reads: std::cell::Cell<usize>,
}

impl InternalRow for GrowingRow {
    fn field_count(&self) -> usize {
        1
    }

    fn datum(&self, _pos: usize) -> Datum<'_> {
        let n = self.reads.get();
        self.reads.set(n + 1);
        Datum::String(&TEXT[..(n * 5).min(TEXT.len())])
    }
}

#[test]
fn a_row_whose_value_changes_between_reads_does_not_panic_the_builder() {
    let mut b = builder(&[("s", DataType::string())]);
    let rows = [GrowingRow {
        reads: std::cell::Cell::new(0),
    }];
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = b.append_rows(&rows);
    }));
    assert!(outcome.is_ok(), "append_rows panicked");
}
