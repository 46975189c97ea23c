//! [`ArrowColumn`]: one column of a received or caller-built Arrow batch,
//! downcast once, read one row at a time as a [`Datum`]. Shared by the
//! scanner's rows ([`crate::scanner::ScanRows`]) and the bucket assigner's
//! batch keys, so both read a value the same way.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type,
    Int8Type, Time32MillisecondType, Time32SecondType, Time64MicrosecondType, Time64NanosecondType,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType,
};
use arrow_array::{
    Array, BinaryArray, BooleanArray, FixedSizeBinaryArray, PrimitiveArray, StringArray,
};
use arrow_buffer::NullBuffer;
use arrow_schema::{DataType, TimeUnit};

use super::{Datum, Timestamp};

/// Milliseconds in a second, for TIME(0) and TIMESTAMP(0) columns.
const MILLIS_PER_SECOND: i64 = 1_000;

/// One column of a batch, downcast to its concrete array type once, so
/// reading a value is a typed index with no dynamic dispatch or allocation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ArrowColumn<'a> {
    nulls: Option<&'a NullBuffer>,
    values: Values<'a>,
}

/// The typed values of a column; timestamps carry whether they are LTZ.
#[derive(Debug, Clone, Copy)]
enum Values<'a> {
    Boolean(&'a BooleanArray),
    Int8(&'a PrimitiveArray<Int8Type>),
    Int16(&'a PrimitiveArray<Int16Type>),
    Int32(&'a PrimitiveArray<Int32Type>),
    Int64(&'a PrimitiveArray<Int64Type>),
    Float32(&'a PrimitiveArray<Float32Type>),
    Float64(&'a PrimitiveArray<Float64Type>),
    Utf8(&'a StringArray),
    Binary(&'a BinaryArray),
    FixedBinary(&'a FixedSizeBinaryArray),
    Decimal(&'a PrimitiveArray<Decimal128Type>),
    Date32(&'a PrimitiveArray<Date32Type>),
    Time32Second(&'a PrimitiveArray<Time32SecondType>),
    Time32Milli(&'a PrimitiveArray<Time32MillisecondType>),
    Time64Micro(&'a PrimitiveArray<Time64MicrosecondType>),
    Time64Nano(&'a PrimitiveArray<Time64NanosecondType>),
    TimestampSecond(&'a PrimitiveArray<TimestampSecondType>, bool),
    TimestampMilli(&'a PrimitiveArray<TimestampMillisecondType>, bool),
    TimestampMicro(&'a PrimitiveArray<TimestampMicrosecondType>, bool),
    TimestampNano(&'a PrimitiveArray<TimestampNanosecondType>, bool),
}

impl<'a> ArrowColumn<'a> {
    /// The reader of `array`; `None` for a type rows cannot carry
    /// (ARRAY, MAP, ROW and Arrow types Fluss does not use).
    pub(crate) fn of(array: &'a dyn Array) -> Option<Self> {
        use Values as V;
        let values = match array.data_type() {
            DataType::Boolean => V::Boolean(array.as_boolean()),
            DataType::Int8 => V::Int8(array.as_primitive()),
            DataType::Int16 => V::Int16(array.as_primitive()),
            DataType::Int32 => V::Int32(array.as_primitive()),
            DataType::Int64 => V::Int64(array.as_primitive()),
            DataType::Float32 => V::Float32(array.as_primitive()),
            DataType::Float64 => V::Float64(array.as_primitive()),
            DataType::Utf8 => V::Utf8(array.as_string()),
            DataType::Binary => V::Binary(array.as_binary()),
            DataType::FixedSizeBinary(_) => V::FixedBinary(array.as_fixed_size_binary()),
            DataType::Decimal128(_, _) => V::Decimal(array.as_primitive()),
            DataType::Date32 => V::Date32(array.as_primitive()),
            DataType::Time32(TimeUnit::Second) => V::Time32Second(array.as_primitive()),
            DataType::Time32(TimeUnit::Millisecond) => V::Time32Milli(array.as_primitive()),
            DataType::Time64(TimeUnit::Microsecond) => V::Time64Micro(array.as_primitive()),
            DataType::Time64(TimeUnit::Nanosecond) => V::Time64Nano(array.as_primitive()),
            DataType::Timestamp(unit, zone) => {
                let ltz = zone.is_some();
                match unit {
                    TimeUnit::Second => V::TimestampSecond(array.as_primitive(), ltz),
                    TimeUnit::Millisecond => V::TimestampMilli(array.as_primitive(), ltz),
                    TimeUnit::Microsecond => V::TimestampMicro(array.as_primitive(), ltz),
                    TimeUnit::Nanosecond => V::TimestampNano(array.as_primitive(), ltz),
                }
            }
            _ => return None,
        };
        Some(Self {
            nulls: array.nulls(),
            values,
        })
    }

    /// Whether the value at `row` is NULL.
    #[inline]
    pub(crate) fn is_null(&self, row: usize) -> bool {
        self.nulls.is_some_and(|nulls| nulls.is_null(row))
    }

    /// The value at `row` as the datum a row of the table carries: TIME in
    /// milliseconds of the day (finer precisions truncated to the
    /// millisecond), timestamps as millis + nanos of the milli.
    #[inline]
    pub(crate) fn datum(&self, row: usize) -> Datum<'a> {
        if self.is_null(row) {
            return Datum::Null;
        }
        let stamp = |t: Timestamp, ltz: bool| {
            if ltz {
                Datum::TimestampLtz(t)
            } else {
                Datum::Timestamp(t)
            }
        };
        match self.values {
            Values::Boolean(a) => Datum::Boolean(a.value(row)),
            Values::Int8(a) => Datum::TinyInt(a.value(row)),
            Values::Int16(a) => Datum::SmallInt(a.value(row)),
            Values::Int32(a) => Datum::Int(a.value(row)),
            Values::Int64(a) => Datum::BigInt(a.value(row)),
            Values::Float32(a) => Datum::Float(a.value(row)),
            Values::Float64(a) => Datum::Double(a.value(row)),
            Values::Utf8(a) => Datum::String(a.value(row)),
            Values::Binary(a) => Datum::Binary(a.value(row)),
            Values::FixedBinary(a) => Datum::Binary(a.value(row)),
            Values::Decimal(a) => Datum::Decimal(a.value(row)),
            Values::Date32(a) => Datum::Date(a.value(row)),
            Values::Time32Second(a) => Datum::Time(a.value(row).saturating_mul(1_000)),
            Values::Time32Milli(a) => Datum::Time(a.value(row)),
            Values::Time64Micro(a) => Datum::Time((a.value(row) / 1_000) as i32),
            Values::Time64Nano(a) => Datum::Time((a.value(row) / 1_000_000) as i32),
            Values::TimestampSecond(a, ltz) => stamp(
                Timestamp::from_millis(a.value(row).saturating_mul(MILLIS_PER_SECOND)),
                ltz,
            ),
            Values::TimestampMilli(a, ltz) => stamp(Timestamp::from_millis(a.value(row)), ltz),
            Values::TimestampMicro(a, ltz) => stamp(Timestamp::from_micros(a.value(row)), ltz),
            Values::TimestampNano(a, ltz) => stamp(Timestamp::from_nanos(a.value(row)), ltz),
        }
    }
}

#[cfg(test)]
mod tests {
    use arrow_array::{
        Int32Array, ListArray, Time32SecondArray, Time64NanosecondArray, TimestampSecondArray,
    };

    use super::*;

    #[test]
    fn null_slots_read_as_null_and_others_as_values() {
        let array = Int32Array::from(vec![Some(7), None]);
        let column = ArrowColumn::of(&array).expect("INT is readable");
        assert!(!column.is_null(0));
        assert!(column.is_null(1));
        assert!(matches!(column.datum(0), Datum::Int(7)));
        assert!(matches!(column.datum(1), Datum::Null));
    }

    #[test]
    fn time_columns_read_as_milliseconds_of_the_day() {
        let seconds = Time32SecondArray::from(vec![3_661, i32::MAX]);
        let column = ArrowColumn::of(&seconds).expect("TIME(0)");
        assert!(matches!(column.datum(0), Datum::Time(3_661_000)));
        // Out of a day's range: saturates instead of wrapping to a wrong time.
        assert!(matches!(column.datum(1), Datum::Time(i32::MAX)));
        let nanos = Time64NanosecondArray::from(vec![1_234_999_999]);
        let column = ArrowColumn::of(&nanos).expect("TIME(9)");
        assert!(matches!(column.datum(0), Datum::Time(1_234)));
    }

    #[test]
    fn a_zoned_timestamp_reads_as_ltz_and_a_plain_one_does_not() {
        let plain = TimestampSecondArray::from(vec![2]);
        let zoned = TimestampSecondArray::from(vec![2]).with_timezone("UTC");
        let plain = ArrowColumn::of(&plain).expect("TIMESTAMP(0)");
        let zoned = ArrowColumn::of(&zoned).expect("TIMESTAMP_LTZ(0)");
        assert!(
            matches!(plain.datum(0), Datum::Timestamp(t) if t == Timestamp::from_millis(2_000))
        );
        assert!(
            matches!(zoned.datum(0), Datum::TimestampLtz(t) if t == Timestamp::from_millis(2_000))
        );
    }

    #[test]
    fn nested_types_have_no_reader() {
        let list = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![Some(vec![Some(1)])]);
        assert!(ArrowColumn::of(&list).is_none());
    }
}
