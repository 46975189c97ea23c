//! ARRAY, MAP and ROW values in COMPACTED rows: bytes worked out by hand
//! from Fluss's `BinaryArrayWriter` / `AbstractBinaryWriter` /
//! `BinaryMap.valueOf`, round trips, and malformed nested bytes refused
//! without a panic.

use proptest::prelude::*;

use super::nested::{write_array, write_map, BinaryArray, BinaryMap, NestedField};
use super::*;
use crate::datum::Timestamp;
use crate::types::DataField;

fn field(t: DataType) -> NestedField {
    NestedField::of(&t).expect("nested field")
}

fn array_bytes(element: DataType, values: &[Datum<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    write_array(&field(element), values, &mut out).expect("written");
    out
}

#[test]
fn an_int_array_with_a_null_is_header_bitset_and_padded_slots() {
    let bytes = array_bytes(
        DataType::int(),
        &[Datum::Int(1), Datum::Null, Datum::Int(3)],
    );
    // count 3; null word with bit 1; three 4-byte slots; padding to 24.
    let expected: [u8; 24] = [
        3, 0, 0, 0, 0b010, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0,
    ];
    assert_eq!(bytes, expected);
    let element = field(DataType::int());
    let array = BinaryArray::parse(&bytes, &element).unwrap();
    let got: Vec<_> = (0..array.len())
        .map(|i| array.get(i, &element).unwrap())
        .collect();
    assert_eq!(got, [Datum::Int(1), Datum::Null, Datum::Int(3)]);
}

#[test]
fn short_strings_are_inline_and_long_ones_in_the_padded_var_part() {
    let bytes = array_bytes(
        DataType::string(),
        &[Datum::String("ab"), Datum::String("hello world!")],
    );
    let mut expected = vec![2, 0, 0, 0, 0, 0, 0, 0];
    expected.extend_from_slice(&[b'a', b'b', 0, 0, 0, 0, 0, 0x82]);
    // offset 24 in the high half, size 12 in the low half, little-endian.
    expected.extend_from_slice(&[12, 0, 0, 0, 24, 0, 0, 0]);
    expected.extend_from_slice(b"hello world!");
    expected.extend_from_slice(&[0; 4]);
    assert_eq!(bytes, expected);
}

#[test]
fn wide_decimals_and_precise_timestamps_use_fixed_var_regions() {
    let decimal = array_bytes(DataType::decimal(20, 2).unwrap(), &[Datum::Decimal(-129)]);
    let mut expected = vec![1, 0, 0, 0, 0, 0, 0, 0];
    expected.extend_from_slice(&[2, 0, 0, 0, 16, 0, 0, 0]);
    expected.extend_from_slice(&[0xff, 0x7f]);
    expected.extend_from_slice(&[0; 14]);
    assert_eq!(decimal, expected);

    let t = Timestamp::new(1_700_000_000_123, 456_789).unwrap();
    let ts = array_bytes(DataType::timestamp(6).unwrap(), &[Datum::Timestamp(t)]);
    let mut expected = vec![1, 0, 0, 0, 0, 0, 0, 0];
    expected.extend_from_slice(&((16u64 << 32) | 456_789).to_le_bytes());
    expected.extend_from_slice(&1_700_000_000_123i64.to_le_bytes());
    assert_eq!(ts, expected);
    let element = field(DataType::timestamp(6).unwrap());
    let array = BinaryArray::parse(&ts, &element).unwrap();
    assert_eq!(array.get(0, &element).unwrap(), Datum::Timestamp(t));
}

#[test]
fn a_map_is_its_key_array_size_then_both_arrays() {
    let (k, v) = (field(DataType::string()), field(DataType::int()));
    let mut bytes = Vec::new();
    write_map(&k, &v, &[Datum::String("k")], &[Datum::Int(7)], &mut bytes).unwrap();
    let mut expected = vec![16, 0, 0, 0];
    expected.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0, b'k', 0, 0, 0, 0, 0, 0, 0x81]);
    expected.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(bytes, expected);
    let map = BinaryMap::parse(&bytes, &k, &v).unwrap();
    assert_eq!(map.len(), 1);
    assert_eq!(map.keys().get(0, &k).unwrap(), Datum::String("k"));
    assert_eq!(map.values().get(0, &v).unwrap(), Datum::Int(7));
}

fn nested_row_type() -> Vec<DataType> {
    vec![
        DataType::int().not_null(),
        DataType::array(DataType::int()),
        DataType::map(DataType::string().not_null(), DataType::bigint()),
        DataType::row(vec![
            DataField::new("a", DataType::int()),
            DataField::new("b", DataType::string()),
        ]),
        DataType::array(DataType::array(DataType::string())),
        DataType::array(DataType::row(vec![DataField::new("x", DataType::double())])),
    ]
}

#[test]
fn a_compacted_row_embeds_nested_values_behind_a_varint_length() {
    let types = nested_row_type();
    let codec = RowCodec::new(RowFormat::Compacted, &types).unwrap();
    let array = array_bytes(
        DataType::int(),
        &[Datum::Int(1), Datum::Null, Datum::Int(3)],
    );
    let inner =
        RowCodec::new(RowFormat::Compacted, &[DataType::int(), DataType::string()]).unwrap();
    let mut row = Vec::new();
    inner
        .encode(&[Datum::Int(1), Datum::String("x")], &mut row)
        .unwrap();
    assert_eq!(row, [0x00, 0x01, 0x01, b'x']);
    let datums = [
        Datum::Int(5),
        Datum::Array(&array),
        Datum::Null,
        Datum::Row(&row),
        Datum::Null,
        Datum::Null,
    ];
    let mut bytes = Vec::new();
    codec.encode(&datums, &mut bytes).unwrap();
    let mut expected = vec![0b0011_0100, 0x05, 24];
    expected.extend_from_slice(&array);
    expected.extend_from_slice(&[4, 0x00, 0x01, 0x01, b'x']);
    assert_eq!(bytes, expected);
    let mut out = Vec::new();
    codec.decode(&bytes, &mut out).unwrap();
    assert_eq!(out, datums);
}

#[test]
fn malformed_nested_bytes_are_refused_on_decode_and_encode() {
    let types = [DataType::int(), DataType::array(DataType::string())];
    let codec = RowCodec::new(RowFormat::Compacted, &types).unwrap();
    let good = array_bytes(DataType::string(), &[Datum::String("hello world!")]);
    // The slot points past the array.
    let mut bad = good.clone();
    bad[12] = 200;
    let mut out = Vec::new();
    let error = codec
        .encode(&[Datum::Int(1), Datum::Array(&bad)], &mut out)
        .expect_err("refused");
    assert!(
        matches!(error, RowError::InvalidValue { column: 1, .. }),
        "{error}"
    );
    assert!(out.is_empty());
    // The same bytes inside a row refuse to decode.
    let mut row = vec![0, 1, bad.len() as u8];
    row.extend_from_slice(&bad);
    assert!(codec.validate(&row).is_err());
    // A negative count, a too-short header, text that is not UTF-8.
    for array in [vec![0xff, 0xff, 0xff, 0xff], vec![1, 0, 0], {
        let mut a = array_bytes(DataType::string(), &[Datum::String("ab")]);
        a[8] = 0xff;
        a
    }] {
        let mut row = vec![0, 1, array.len() as u8];
        row.extend_from_slice(&array);
        assert!(codec.validate(&row).is_err(), "{array:?}");
    }
    // A datum of the wrong nested family.
    assert!(codec
        .encode(&[Datum::Int(1), Datum::Map(&good)], &mut out)
        .is_err());
}

fn arb_strings() -> impl Strategy<Value = Vec<Option<String>>> {
    prop::collection::vec(prop::option::of("[a-zé]{0,12}"), 0..40)
}

proptest! {
    #[test]
    fn arrays_maps_and_rows_round_trip_through_compacted_rows(
        strings in arb_strings(),
        longs in prop::collection::vec(prop::option::of(any::<i64>()), 0..70),
        outer in prop::collection::vec(prop::option::of(arb_strings()), 0..6),
        a in prop::option::of(any::<i32>()),
        b in prop::option::of("[a-z]{0,20}"),
    ) {
        let types = nested_row_type();
        let codec = RowCodec::new(RowFormat::Compacted, &types).unwrap();
        let ints: Vec<Datum<'_>> = longs.iter().map(|v| v.map(|v| v as i32).into()).collect();
        let array = array_bytes(DataType::int(), &ints);
        let keys: Vec<Datum<'_>> = strings.iter().flatten().map(|s| Datum::String(s)).collect();
        let values: Vec<Datum<'_>> = (0..keys.len()).map(|i| longs.get(i).copied().flatten().into()).collect();
        let mut map = Vec::new();
        write_map(&field(DataType::string().not_null()), &field(DataType::bigint()), &keys, &values, &mut map).unwrap();
        let inner = RowCodec::new(RowFormat::Compacted, &[DataType::int(), DataType::string()]).unwrap();
        let mut row = Vec::new();
        inner.encode(&[a.into(), b.as_deref().into()], &mut row).unwrap();
        let inners: Vec<Vec<u8>> = outer.iter().map(|o| {
            let items: Vec<Datum<'_>> = o.iter().flatten().map(|s| s.as_deref().into()).collect();
            array_bytes(DataType::string(), &items)
        }).collect();
        let outer_datums: Vec<Datum<'_>> = outer.iter().zip(&inners)
            .map(|(o, bytes)| if o.is_some() { Datum::Array(bytes) } else { Datum::Null })
            .collect();
        let nested = array_bytes(DataType::array(DataType::string()), &outer_datums);
        let doubles = RowCodec::new(RowFormat::Compacted, &[DataType::double()]).unwrap();
        let mut x_rows: Vec<Vec<u8>> = Vec::new();
        for v in longs.iter().take(5) {
            let mut r = Vec::new();
            doubles.encode(&[v.map(|v| v as f64).into()], &mut r).unwrap();
            x_rows.push(r);
        }
        let row_items: Vec<Datum<'_>> = x_rows.iter().map(|r| Datum::Row(r)).collect();
        let rows = array_bytes(DataType::row(vec![DataField::new("x", DataType::double())]), &row_items);

        let datums = [Datum::Int(9), Datum::Array(&array), Datum::Map(&map), Datum::Row(&row),
            Datum::Array(&nested), Datum::Array(&rows)];
        let mut bytes = Vec::new();
        codec.encode(&datums, &mut bytes).unwrap();
        let mut out = Vec::new();
        codec.decode(&bytes, &mut out).unwrap();
        prop_assert_eq!(&out[..], &datums[..]);

        // Every element reads back as written.
        let element = field(DataType::int());
        let parsed = BinaryArray::parse(&array, &element).unwrap();
        prop_assert_eq!(parsed.len(), ints.len());
        for (i, d) in ints.iter().enumerate() {
            prop_assert_eq!(parsed.get(i, &element).unwrap(), *d);
        }
        let string = field(DataType::array(DataType::string()));
        let parsed = BinaryArray::parse(&nested, &string).unwrap();
        for (i, d) in outer_datums.iter().enumerate() {
            prop_assert_eq!(parsed.get(i, &string).unwrap(), *d);
        }
        let NestedField { ty: nested::NestedType::Map { key, value }, .. } =
            field(DataType::map(DataType::string().not_null(), DataType::bigint())) else { unreachable!() };
        let parsed = BinaryMap::parse(&map, &key, &value).unwrap();
        for (i, (k, v)) in keys.iter().zip(&values).enumerate() {
            prop_assert_eq!(parsed.keys().get(i, &key).unwrap(), *k);
            prop_assert_eq!(parsed.values().get(i, &value).unwrap(), *v);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_a_nested_decoder(bytes in prop::collection::vec(any::<u8>(), 0..120)) {
        let codec = RowCodec::new(RowFormat::Compacted, &nested_row_type()).unwrap();
        let mut out = Vec::new();
        if codec.decode(&bytes, &mut out).is_ok() {
            let mut again = Vec::new();
            codec.encode(&out, &mut again).unwrap();
            prop_assert_eq!(again, bytes);
        }
    }
}

#[test]
fn the_nested_fuzz_seeds_are_rows_the_target_accepts() {
    for seed in [
        &include_bytes!("../../../../fuzz/corpus/compacted_row_decode/seed-nested-array")[..],
        &include_bytes!("../../../../fuzz/corpus/compacted_row_decode/seed-nested-row-map")[..],
    ] {
        // The target's own checks, then proof the seed is not refused early.
        crate::fuzzing::compacted_row_decode(seed);
        let (flat, rest) = crate::fuzzing::derive_row_type(seed);
        let nested: Vec<DataType> = flat
            .iter()
            .zip(seed[1..].iter().step_by(2))
            .map(|(t, s)| match s >> 5 {
                0 => t.clone(),
                1 => DataType::array(t.clone()),
                2 => DataType::row(vec![DataField::new("f", t.clone())]),
                _ => DataType::map(DataType::int().not_null(), t.clone()),
            })
            .collect();
        let codec = RowCodec::new(RowFormat::Compacted, &nested).unwrap();
        codec.validate(rest).expect("the seed's row is accepted");
    }
}
