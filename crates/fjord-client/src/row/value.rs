//! Rows as the values of a primary-key table: a whole row written field by
//! field, through the row API the append writer uses
//! ([`InternalRow::write_fields`], so a row type with typed fields takes
//! its fast path here too), into the table's `table.kv.format` — a
//! COMPACTED row (Fluss's default) or an INDEXED one — in a caller-owned
//! buffer.
//!
//! The row codec (`fjord_format::row`) writes the bytes; this module only
//! feeds it from rows and names the column a refused value was meant for.
//! Built once per table by the upsert writer; nothing here allocates per
//! row once the caller's buffer has grown.

use fjord_format::row::compacted::CompactedRowWriter;
use fjord_format::row::indexed::{IndexedRowDecoder, IndexedRowWriter};
use fjord_format::row::{FieldType, RowFormat};
use fjord_format::schema::Schema;

use super::batch_builder::{Refusal, RowTarget, WrittenFields};
use super::{FieldWriter, InternalRow};
use crate::error::{ClientError, Result};

/// Encodes whole rows of one table as primary-key values.
///
/// Guarantees: [`ValueEncoder::encode`] appends exactly one row that the
/// table's row codec (`fjord_format::row::RowCodec` of the same format and
/// schema) decodes back to the row's values, or appends nothing and names
/// the refused column.
#[derive(Debug)]
pub(crate) struct ValueEncoder {
    fields: Box<[FieldType]>,
    /// The INDEXED layout; `None` for COMPACTED rows.
    indexed: Option<IndexedRowDecoder>,
    names: Box<[Box<str>]>,
}

impl ValueEncoder {
    /// The encoder of `schema`'s rows in `format`. Fails for a column of a
    /// nested type (ARRAY, MAP, ROW), which primary-key rows cannot hold yet.
    pub(crate) fn new(schema: &Schema, format: RowFormat) -> Result<Self> {
        let types: Vec<_> = schema
            .columns()
            .iter()
            .map(|c| c.data_type.clone())
            .collect();
        let fields = types
            .iter()
            .zip(schema.columns())
            .map(|(t, c)| {
                FieldType::of(t).ok_or_else(|| {
                    ClientError::Invalid(format!(
                        "column `{}` has type {t}, which primary-key rows cannot hold yet",
                        c.name
                    ))
                })
            })
            .collect::<Result<Box<[FieldType]>>>()?;
        let indexed = match format {
            RowFormat::Compacted => None,
            RowFormat::Indexed => Some(
                IndexedRowDecoder::new(&types).map_err(|e| ClientError::Invalid(e.to_string()))?,
            ),
        };
        Ok(Self {
            fields,
            indexed,
            names: schema
                .columns()
                .iter()
                .map(|c| c.name.as_str().into())
                .collect(),
        })
    }

    /// Columns of the rows.
    pub(crate) fn arity(&self) -> usize {
        self.fields.len()
    }

    /// Appends the value of `row` (every column of the table, in order) to
    /// `out`. Fails, leaving `out` as it was, for a row of another width or
    /// a value its column cannot take (NULL into NOT NULL, another type, a
    /// value out of range), naming the column.
    #[inline(always)]
    pub(crate) fn encode<R: InternalRow + ?Sized>(&self, row: &R, out: &mut Vec<u8>) -> Result<()> {
        let arity = self.fields.len();
        if row.field_count() != arity {
            return Err(self.width_error(row.field_count()));
        }
        let start = out.len();
        let written = {
            let target = match &self.indexed {
                None => RowTarget::Compacted {
                    writer: CompactedRowWriter::new(out, arity),
                    fields: &self.fields,
                },
                Some(layout) => RowTarget::Indexed(IndexedRowWriter::new(layout, out)),
            };
            let mut fields = FieldWriter::for_row(target);
            row.write_fields(&mut fields);
            fields.finish()
        };
        if written.refused.is_some() || written.count != arity {
            out.truncate(start);
            return Err(self.refused(row, written));
        }
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn width_error(&self, given: usize) -> ClientError {
        ClientError::Invalid(format!(
            "row has {given} fields but the table has {} columns",
            self.fields.len()
        ))
    }

    #[cold]
    #[inline(never)]
    fn refused<R: InternalRow + ?Sized>(&self, row: &R, written: WrittenFields) -> ClientError {
        let Some((pos, refusal)) = written.refused.filter(|_| written.count == self.arity()) else {
            return ClientError::Invalid(format!(
                "row wrote {} fields but the table has {} columns",
                written.count,
                self.fields.len()
            ));
        };
        let (name, kind) = (&self.names[pos], self.fields[pos].kind);
        let datum = row.datum(pos);
        ClientError::Invalid(match refusal {
            Refusal::Null => format!("column `{name}` ({kind}) is NOT NULL but the row has NULL"),
            Refusal::OutOfRange(why) => format!(
                "column `{name}` ({kind}): value {datum} does not fit: {}",
                why.reason()
            ),
            Refusal::Mismatch | Refusal::OverBudget => format!(
                "column `{name}` ({kind}) cannot take a {} value",
                datum.type_name()
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use fjord_format::datum::{Datum, Timestamp};
    use fjord_format::row::RowCodec;
    use fjord_format::types::DataType;

    use super::*;
    use crate::row::GenericRow;

    fn schema() -> Schema {
        Schema::builder()
            .column("id", DataType::bigint().with_nullable(false))
            .column("name", DataType::string())
            .column("price", DataType::decimal(20, 2).unwrap())
            .column("ts", DataType::timestamp(6).unwrap())
            .column("code", DataType::char(4).unwrap())
            .build()
            .unwrap()
    }

    /// A row type of the caller's own, writing typed fields.
    struct Typed<'a>(i64, &'a str);

    impl InternalRow for Typed<'_> {
        fn field_count(&self) -> usize {
            5
        }
        fn datum(&self, pos: usize) -> Datum<'_> {
            match pos {
                0 => Datum::BigInt(self.0),
                1 => Datum::String(self.1),
                _ => Datum::Null,
            }
        }
        fn write_fields(&self, fields: &mut FieldWriter<'_>) {
            fields.bigint(self.0);
            fields.string(self.1);
            fields.null();
            fields.null();
            fields.null();
        }
    }

    /// Data-driven: `row` encodes in `format` to bytes the format's codec
    /// decodes back to `expected`.
    fn check(format: RowFormat, row: &dyn InternalRow, expected: &[Datum<'_>]) {
        let schema = schema();
        let encoder = ValueEncoder::new(&schema, format).unwrap();
        let mut out = vec![0xee];
        encoder.encode(row, &mut out).unwrap();
        let types: Vec<DataType> = schema
            .columns()
            .iter()
            .map(|c| c.data_type.clone())
            .collect();
        let codec = RowCodec::new(format, &types).unwrap();
        let mut datums = Vec::new();
        codec.decode(&out[1..], &mut datums).unwrap();
        assert_eq!(datums, expected, "{format}");
    }

    #[test]
    fn rows_of_every_kind_encode_to_what_the_codec_decodes() {
        let ts = Timestamp::new(1_700_000_000_123, 456_000).unwrap();
        let full = [
            Datum::BigInt(-7),
            Datum::String("pv"),
            Datum::Decimal(-12_345_678_901_234_567_890),
            Datum::Timestamp(ts),
            Datum::String("ab"),
        ];
        for format in [RowFormat::Compacted, RowFormat::Indexed] {
            check(format, &full, &full);
            check(format, &GenericRow::from_values(full.to_vec()), &full);
            let nulls = [
                Datum::BigInt(1),
                Datum::Null,
                Datum::Null,
                Datum::Null,
                Datum::Null,
            ];
            check(
                format,
                &Typed(1, "x"),
                &[
                    Datum::BigInt(1),
                    Datum::String("x"),
                    Datum::Null,
                    Datum::Null,
                    Datum::Null,
                ],
            );
            check(format, &nulls, &nulls);
        }
    }

    #[test]
    fn refusals_name_the_column_and_leave_the_buffer_as_it_was() {
        for format in [RowFormat::Compacted, RowFormat::Indexed] {
            let encoder = ValueEncoder::new(&schema(), format).unwrap();
            let mut out = vec![1, 2, 3];
            let cases: [(&[Datum<'_>], &str); 4] = [
                (
                    &[
                        Datum::Null,
                        Datum::Null,
                        Datum::Null,
                        Datum::Null,
                        Datum::Null,
                    ],
                    "`id`",
                ),
                (
                    &[
                        Datum::BigInt(1),
                        Datum::Int(3),
                        Datum::Null,
                        Datum::Null,
                        Datum::Null,
                    ],
                    "`name`",
                ),
                (
                    &[
                        Datum::BigInt(1),
                        Datum::Null,
                        Datum::Decimal(10i128.pow(30)),
                        Datum::Null,
                        Datum::Null,
                    ],
                    "`price`",
                ),
                (&[Datum::BigInt(1)], "5 columns"),
            ];
            for (row, names) in cases {
                let e = encoder.encode(row, &mut out).unwrap_err().to_string();
                assert!(e.contains(names), "{format}: {e}");
                assert_eq!(out, [1, 2, 3], "{format}: {e}");
            }
        }
    }
}
