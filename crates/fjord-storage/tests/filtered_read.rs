//! `LogTablet::read_filtered`, the read behind filtered FetchLogs: a
//! consumer that reads on from where each read ended gets exactly the
//! batches the judge keeps, byte for byte and in order, across segments;
//! the judge sees each batch's header (never its records); the bytes left
//! out per read stay within the bound asked; and reads of batches all left
//! out still move the end offset forward.

mod support;

use fjord_format::log_batch::{LogBatches, BASE_OFFSET_OFFSET};
use fjord_storage::fs::sim::SimFs;
use support::*;

/// The base offset in a batch's header bytes.
fn base_of(prefix: &[u8]) -> i64 {
    i64::from_le_bytes(
        prefix[BASE_OFFSET_OFFSET..BASE_OFFSET_OFFSET + 8]
            .try_into()
            .expect("8 bytes"),
    )
}

#[test]
fn a_consumer_gets_exactly_the_kept_batches_and_the_judge_sees_headers_only() {
    let fs = SimFs::new();
    let t = open_sim(&fs, small_config(), 0);
    let mut sizes = Vec::new();
    for i in 0..60u64 {
        let records = 1 + (i % 3) as i32;
        let body: Vec<u8> = (0..(60 + (i * 29) % 150))
            .map(|j| (i * 7 + j) as u8)
            .collect();
        let bytes = batch(records, &body);
        sizes.push(bytes.len());
        append_durable(&t, &bytes, 1_000 + i as i64);
    }
    let everything = read_all(&t, 0);
    // Keep the batches whose base offset is a multiple of 3.
    let keep = |base: i64| base % 3 == 0;
    let expected: Vec<(i64, i64, Vec<u8>)> = everything
        .iter()
        .filter(|(base, _, _)| keep(*base))
        .cloned()
        .collect();

    let mut got = Vec::new();
    let mut next = 0i64;
    let mut largest_prefix = 0usize;
    loop {
        let r = t
            .read_filtered(next, 700, usize::MAX, &mut |_, prefix| {
                largest_prefix = largest_prefix.max(prefix.len());
                !keep(base_of(prefix))
            })
            .expect("filtered read");
        let mut after_kept = next;
        let mut it = LogBatches::new(&r.records);
        for b in it.by_ref() {
            let b = b.expect("whole, valid batches");
            assert!(
                keep(b.base_offset()),
                "batch {} was to be left out",
                b.base_offset()
            );
            got.push((b.base_offset(), b.last_offset(), b.records().to_vec()));
            after_kept = b.next_offset();
        }
        assert!(it.remaining().is_empty());
        let end = r.end_offset.unwrap_or(after_kept).max(after_kept);
        if end == next {
            assert!(
                next >= r.high_watermark,
                "no progress at {next} below the hw"
            );
            break;
        }
        next = end;
    }
    assert_eq!(got, expected);
    let smallest = sizes.iter().min().copied().unwrap_or(0);
    assert!(
        largest_prefix < smallest,
        "the judge saw {largest_prefix} bytes of a batch; the smallest batch is {smallest}"
    );
}

#[test]
fn batches_all_left_out_stop_at_the_bound_and_still_move_the_end_offset() {
    let fs = SimFs::new();
    let t = open_sim(&fs, small_config(), 0);
    for i in 0..30u64 {
        append_durable(&t, &batch(1, &[i as u8; 100]), 1_000 + i as i64);
    }
    let r = t
        .read_filtered(0, 1 << 20, 300, &mut |_, _| true)
        .expect("filtered read");
    assert!(r.records.is_empty());
    // Stops at the first batch that reaches the bound.
    assert!(r.left_out_bytes >= 300, "{}", r.left_out_bytes);
    let end = r.end_offset.expect("batches were judged");
    assert!(end > 0 && end < 30, "{end}");
    let again = t
        .read_filtered(end, 1 << 20, 300, &mut |_, _| true)
        .expect("filtered read");
    assert!(again.end_offset.expect("judged") > end);
    // At the high watermark: nothing judged.
    let at_end = t
        .read_filtered(30, 1 << 20, 300, &mut |_, _| true)
        .expect("filtered read");
    assert_eq!(at_end.end_offset, None);
    assert_eq!(at_end.left_out_bytes, 0);
}
