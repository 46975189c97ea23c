//! Segment rewrites (`LogTablet::begin_rewrite`): a run of sealed segments
//! replaced by one segment holding a subset of their batches at their
//! original offsets, so the log has gaps between batches. What this proves:
//! - reads from every offset (in a gap or not), offset-for-timestamp, the
//!   log start and end, retention, truncation into a gap, appends after it,
//!   clean and unclean reopens all handle gaps, and a rewritten segment can
//!   itself be rewritten again;
//! - a power cut after every sync of a commit (and again inside the
//!   recovery that finishes it) leaves the old segments or the new one,
//!   whole, never a mix, and no leftover file;
//! - an idempotent writer whose batches were rewritten (writer id dropped)
//!   keeps its sequence state across an unclean restart;
//! - every refusal leaves the log as it was.

mod support;

use std::collections::BTreeMap;
use std::path::Path;

use fjord_format::log_batch::{
    write_batch, BatchHeader, LogBatch, LogBatches, NO_BATCH_SEQUENCE, NO_WRITER_ID,
};
use fjord_storage::fs::sim::SimFs;
use fjord_storage::fs::Fs;
use fjord_storage::{LogConfig, LogTablet, RewriteOutcome, SegmentInfo, StorageError};
use support::*;

/// A stored batch: base offset, last offset, commit timestamp, records
/// (0 for an end marker) and its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Stored {
    base: i64,
    last: i64,
    ts: i64,
    records: i32,
    bytes: Vec<u8>,
}

fn stored(bytes: &[u8]) -> Stored {
    let b = LogBatch::validate(bytes).expect("valid batch");
    Stored {
        base: b.base_offset(),
        last: b.last_offset(),
        ts: b.commit_timestamp(),
        records: b.record_count(),
        bytes: bytes.to_vec(),
    }
}

/// Every visible batch from the log start, read as a consumer does: each
/// read from the offset after the last batch returned.
fn read_log(t: &LogTablet) -> Vec<Stored> {
    let mut out = Vec::new();
    let mut next = t.log_start_offset();
    loop {
        let r = t.read(next, 700).expect("read");
        if r.records.is_empty() {
            assert!(
                next >= r.high_watermark,
                "empty read at {next} below the hw"
            );
            return out;
        }
        let mut it = LogBatches::new(&r.records);
        for b in it.by_ref() {
            let b = b.expect("reads return valid batches");
            assert!(
                b.last_offset() >= next,
                "a read returned a batch before {next}"
            );
            out.push(stored(b.as_bytes()));
            next = b.next_offset();
        }
        assert!(it.remaining().is_empty());
    }
}

/// A log of `n` batches (each 1..=4 records, distinct bodies), one
/// millisecond apart, over small segments; returns the tablet and the
/// batches as stored.
fn build_log(fs: &SimFs, n: u64) -> (LogTablet, Vec<Stored>) {
    let t = open_sim(fs, small_config(), 0);
    for i in 0..n {
        let records = 1 + (i % 4) as i32;
        let body: Vec<u8> = (0..(40 + (i * 37) % 200)).map(|j| (i + j) as u8).collect();
        append_durable(&t, &batch(records, &body), 1_000 + i as i64);
    }
    let all = read_log(&t);
    assert_eq!(all.len() as u64, n);
    (t, all)
}

/// Batches of `log` in `[from, to)` that `keep` keeps, byte for byte.
fn survivors(log: &[Stored], from: i64, to: i64, keep: impl Fn(&Stored) -> bool) -> Vec<Stored> {
    log.iter()
        .filter(|b| b.base >= from && b.last < to && keep(b))
        .cloned()
        .collect()
}

/// Rewrites sealed segments `[base, end)` to `kept` (appended a few at a
/// time) and commits.
fn rewrite(t: &LogTablet, base: i64, end: i64, kept: &[Stored]) -> RewriteOutcome {
    let mut r = t.begin_rewrite(base).expect("begin");
    for chunk in kept.chunks(3) {
        let bytes: Vec<u8> = chunk.iter().flat_map(|b| b.bytes.clone()).collect();
        r.append(&bytes).expect("append");
    }
    r.commit(end, 10_000).expect("commit")
}

/// What the log must read as after rewriting `[base, end)` to `kept`: the
/// kept batches, the end marker unless a kept batch ends at `end - 1`, and
/// everything outside the range unchanged.
fn expected_after(log: &[Stored], base: i64, end: i64, kept: &[Stored]) -> Vec<(i64, i64, i32)> {
    let mut out: Vec<(i64, i64, i32)> = log
        .iter()
        .filter(|b| b.base < base)
        .map(|b| (b.base, b.last, b.records))
        .collect();
    out.extend(kept.iter().map(|b| (b.base, b.last, b.records)));
    if kept.last().is_none_or(|b| b.last != end - 1) {
        out.push((end - 1, end - 1, 0));
    }
    out.extend(
        log.iter()
            .filter(|b| b.base >= end)
            .map(|b| (b.base, b.last, b.records)),
    );
    out
}

fn shape(log: &[Stored]) -> Vec<(i64, i64, i32)> {
    log.iter().map(|b| (b.base, b.last, b.records)).collect()
}

/// The first batch a read from `offset` must return in `log`.
fn first_at(log: &[(i64, i64, i32)], offset: i64) -> Option<(i64, i64, i32)> {
    log.iter().copied().find(|b| b.1 >= offset)
}

fn check_reads_from_every_offset(t: &LogTablet, log: &[(i64, i64, i32)]) {
    for offset in t.log_start_offset()..t.high_watermark() {
        let r = t.read(offset, 1).expect("read");
        let b = LogBatch::validate(&r.records).expect("one whole batch");
        assert_eq!(
            Some((b.base_offset(), b.last_offset(), b.record_count())),
            first_at(log, offset),
            "read from {offset}"
        );
    }
}

fn sealed(t: &LogTablet) -> Vec<SegmentInfo> {
    t.sealed_segments()
}

fn dir_names(fs: &SimFs) -> Vec<String> {
    fs.list(Path::new("/t")).expect("list")
}

#[test]
fn a_rewrite_keeps_offsets_and_every_read_and_lookup_skips_its_gaps() {
    let fs = SimFs::new();
    let (t, log) = build_log(&fs, 120);
    let segs = sealed(&t);
    assert!(segs.len() >= 5, "{} sealed segments", segs.len());
    let (base, end) = (segs[0].base_offset, segs[3].end_offset);
    // Gaps at the start (the first batch goes), inside, across the segment
    // boundaries and at the end (the last batch goes: an end marker).
    let kept = survivors(&log, base, end, |b| b.base % 3 == 1 && b.last != end - 1);
    assert_ne!(kept[0].base, base);
    let (start, log_end, hw) = (t.log_start_offset(), t.log_end_offset(), t.high_watermark());
    let outcome = rewrite(&t, base, end, &kept);
    assert_eq!(outcome.segments_replaced, 4);
    assert!(outcome.bytes_after < outcome.bytes_before);
    assert_eq!(
        (t.log_start_offset(), t.log_end_offset(), t.high_watermark()),
        (start, log_end, hw),
        "offsets do not move"
    );
    assert_eq!(t.rewritten_end(), end);
    let want = expected_after(&log, base, end, &kept);
    assert_eq!(shape(&read_log(&t)), want);
    check_reads_from_every_offset(&t, &want);
    // Byte for byte, the kept batches are what was given.
    let now = read_log(&t);
    for b in &kept {
        assert!(now.contains(b), "batch at {} changed", b.base);
    }
    assert_eq!(sealed(&t)[0].end_offset, end, "segments stay contiguous");

    // Offset for timestamp: the first batch (kept, marker or later)
    // committed at or after the target.
    let all = read_log(&t);
    for ts in 990..1_130 {
        let want = all.iter().find(|b| b.ts >= ts).map(|b| b.base);
        assert_eq!(t.offset_for_timestamp(ts).expect("lookup"), want, "ts {ts}");
    }

    // Unclean and clean reopen: recovery scans and indexes the gaps.
    drop(t);
    fs.crash(7);
    let t = open_sim(&fs, small_config(), 20_000);
    assert_eq!(shape(&read_log(&t)), want);
    check_reads_from_every_offset(&t, &want);
    assert_eq!(t.rewritten_end(), end);
    t.close(20_000).expect("close");
    let t = open_sim(&fs, small_config(), 20_000);
    assert_eq!(shape(&read_log(&t)), want);
    check_reads_from_every_offset(&t, &want);

    // Appends go on at the log end.
    assert_eq!(
        append_durable(&t, &batch(2, b"new"), 30_000),
        (log_end, log_end + 1)
    );
}

#[test]
fn a_rewritten_segment_can_be_rewritten_again_down_to_nothing_but_its_marker() {
    let fs = SimFs::new();
    let (t, log) = build_log(&fs, 120);
    let segs = sealed(&t);
    let (base, end1) = (segs[0].base_offset, segs[1].end_offset);
    let kept1 = survivors(&log, base, end1, |b| b.base % 2 == 0);
    rewrite(&t, base, end1, &kept1);
    let after1 = read_log(&t);
    // Again, now over the rewritten segment and two more.
    let segs = sealed(&t);
    assert_eq!(segs[0].end_offset, end1);
    let end2 = segs[2].end_offset;
    let kept2 = survivors(&after1, base, end2, |b| b.records > 0 && b.base % 4 == 0);
    let outcome = rewrite(&t, base, end2, &kept2);
    assert_eq!(outcome.segments_replaced, 3);
    let want = expected_after(&after1, base, end2, &kept2);
    assert_eq!(shape(&read_log(&t)), want);
    check_reads_from_every_offset(&t, &want);
    assert_eq!(t.rewritten_end(), end2);
    // Nothing survives: the segment is just its end marker.
    let end3 = sealed(&t)[1].end_offset;
    rewrite(&t, base, end3, &[]);
    let after3 = read_log(&t);
    assert_eq!(
        after3[0].base,
        end3 - 1,
        "the marker is the first batch, at the end of the range"
    );
    assert_eq!(after3[0].records, 0);
    assert_eq!(t.log_start_offset(), base, "the log start stays");
    assert_eq!(
        t.read(base, 1).expect("read").records.len(),
        after3[0].bytes.len()
    );
    drop(t);
    fs.crash(3);
    let t = open_sim(&fs, small_config(), 20_000);
    assert_eq!(read_log(&t), after3);
}

#[test]
fn retention_and_truncation_handle_rewritten_segments() {
    let fs = SimFs::new();
    let (t, log) = build_log(&fs, 120);
    let segs = sealed(&t);
    let (base, end) = (segs[0].base_offset, segs[2].end_offset);
    let kept = survivors(&log, base, end, |b| b.base % 5 == 0);
    rewrite(&t, base, end, &kept);
    let want = expected_after(&log, base, end, &kept);

    // Truncation to an offset inside a gap: the log ends there.
    let gap = (kept[1].last + 1..kept[2].base)
        .next()
        .expect("a gap between two kept batches");
    let t2_fs = fs.clone();
    let new_end = t.truncate_to(gap).expect("truncate");
    assert_eq!(new_end, gap);
    assert_eq!(t.log_end_offset(), gap);
    let kept_before: Vec<_> = want.iter().copied().filter(|b| b.1 < gap).collect();
    assert_eq!(shape(&read_log(&t)), kept_before);
    assert_eq!(append_durable(&t, &batch(1, b"after"), 50_000), (gap, gap));
    drop(t);
    t2_fs.crash(11);
    let t = open_sim(&t2_fs, small_config(), 60_000);
    let got = shape(&read_log(&t));
    assert_eq!(&got[..kept_before.len()], &kept_before[..]);
    assert_eq!(got[kept_before.len()], (gap, gap, 1));
    assert!(t.rewritten_end() <= gap);

    // Retention deletes the rewritten segment whole.
    let fs = SimFs::new();
    let (t, log) = build_log(&fs, 120);
    let segs = sealed(&t);
    let (base, end) = (segs[0].base_offset, segs[2].end_offset);
    rewrite(
        &t,
        base,
        end,
        &survivors(&log, base, end, |b| b.base % 5 == 0),
    );
    let config = LogConfig {
        retention_ms: Some(1),
        ..small_config()
    };
    drop(t);
    let t = open_sim(&fs, config, 0);
    let outcome = t.enforce_retention(1_000 + 120 + 2).expect("retention");
    assert!(outcome.segments_deleted >= 1);
    assert!(t.log_start_offset() >= end);
    read_log(&t);
}

#[test]
fn refused_rewrites_leave_the_log_as_it_was() {
    let fs = SimFs::new();
    let (t, log) = build_log(&fs, 80);
    let segs = sealed(&t);
    let (base, end) = (segs[0].base_offset, segs[1].end_offset);
    let before = read_log(&t);
    let refused = |e: StorageError| matches!(e, StorageError::RewriteRefused(_));

    // One at a time.
    let r = t.begin_rewrite(base).expect("begin");
    assert!(refused(t.begin_rewrite(base).expect_err("second")));
    drop(r);
    // Not a segment's base; not a sealed segment.
    assert!(refused(t.begin_rewrite(base + 1).expect_err("mid-segment")));
    let active_base = segs.last().expect("sealed").end_offset;
    assert!(refused(t.begin_rewrite(active_base).expect_err("active")));
    // Overlapping, backwards or beyond the end.
    let kept = survivors(&log, base, end, |b| b.base % 2 == 0);
    let mut r = t.begin_rewrite(base).expect("begin");
    r.append(&kept[1].bytes).expect("append");
    assert!(refused(r.append(&kept[0].bytes).expect_err("backwards")));
    assert!(refused(r.append(&kept[1].bytes).expect_err("overlap")));
    drop(r);
    let mut r = t.begin_rewrite(base).expect("begin");
    r.append(&kept[0].bytes).expect("append");
    assert!(refused(
        r.commit(kept[0].base + 1, 0)
            .expect_err("end not a segment end")
    ));
    let mut r = t.begin_rewrite(base).expect("begin");
    let beyond = log.iter().find(|b| b.base >= end).expect("later batch");
    r.append(&beyond.bytes).expect("append");
    assert!(refused(r.commit(end, 0).expect_err("batch beyond the end")));
    // A batch newer than anything it replaces.
    let mut newer = Vec::new();
    let header = BatchHeader {
        base_offset: base,
        commit_timestamp: 999_999,
        writer_id: NO_WRITER_ID,
        batch_sequence: NO_BATCH_SEQUENCE,
        ..BatchHeader::append_only(1, 1)
    };
    write_batch(&mut newer, &header, &[], b"x").expect("batch");
    let mut r = t.begin_rewrite(base).expect("begin");
    r.append(&newer).expect("append");
    assert!(refused(r.commit(end, 0).expect_err("newer")));
    // Corrupt bytes.
    let mut r = t.begin_rewrite(base).expect("begin");
    let mut bad = kept[0].bytes.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    assert!(matches!(
        r.append(&bad),
        Err(StorageError::CorruptBatch { .. })
    ));
    drop(r);
    assert_eq!(read_log(&t), before);
    // The run changed meanwhile (retention took its first segment).
    drop(t);
    let t = open_sim(
        &fs,
        LogConfig {
            retention_ms: Some(1),
            ..small_config()
        },
        0,
    );
    let mut r = t.begin_rewrite(base).expect("begin");
    r.append(&kept[0].bytes).expect("append");
    t.enforce_retention(1_000_000).expect("retention");
    assert!(refused(r.commit(end, 0).expect_err("changed")));
    let after = read_log(&t);
    assert!(before.ends_with(&after), "nothing but retention changed");
    // The log was truncated meanwhile (even above the run).
    let fs = SimFs::new();
    let (t, log) = build_log(&fs, 80);
    let segs = sealed(&t);
    let (base, end) = (segs[0].base_offset, segs[1].end_offset);
    let mut r = t.begin_rewrite(base).expect("begin");
    r.append(&log[0].bytes).expect("append");
    t.truncate_to(t.log_end_offset() - 1).expect("truncate");
    assert!(refused(r.commit(end, 0).expect_err("truncated")));
    assert_eq!(read_log(&t), log[..log.len() - 1]);
    assert!(
        dir_names(&fs)
            .iter()
            .all(|n| !n.ends_with(".tmp") && !n.ends_with(".swap")),
        "{:?}",
        dir_names(&fs)
    );
}

/// The state a crashed commit may leave, as the log reads afterwards.
fn old_or_new(got: &[(i64, i64, i32)], old: &[(i64, i64, i32)], new: &[(i64, i64, i32)]) -> bool {
    got == old || got == new
}

#[test]
fn a_power_cut_after_any_sync_of_a_commit_leaves_the_old_segments_or_the_new_one() {
    let mut saw_old = 0;
    let mut saw_new = 0;
    let mut saw_swap = 0;
    for n in 0.. {
        for seed in 0..3u64 {
            let fs = SimFs::new();
            let (t, log) = build_log(&fs, 90);
            let segs = sealed(&t);
            let (base, end) = (segs[0].base_offset, segs[2].end_offset);
            let kept = survivors(&log, base, end, |b| b.base % 3 != 0);
            let old = shape(&log);
            let new = expected_after(&log, base, end, &kept);
            let mut r = t.begin_rewrite(base).expect("begin");
            let bytes: Vec<u8> = kept.iter().flat_map(|b| b.bytes.clone()).collect();
            r.append(&bytes).expect("append");
            fs.cut_power_after_syncs(n);
            let committed = r.commit(end, 10_000).is_ok();
            let cut = fs.power_is_cut();
            drop(t);
            fs.crash(seed ^ n);
            if committed && !cut {
                // Every sync of the commit succeeded.
                let t = open_sim(&fs, small_config(), 20_000);
                assert_eq!(shape(&read_log(&t)), new);
                assert!(n > 6, "a commit takes several syncs, not {n}");
                assert!(saw_old > 0 && saw_new > 0 && saw_swap > 0);
                return;
            }
            let swap_left = dir_names(&fs).iter().any(|n| n.ends_with(".swap"));
            saw_swap += usize::from(swap_left);
            // A second power cut inside the recovery that finishes a swap.
            if swap_left {
                for m in 0..3 {
                    let copy = SimFs::new();
                    copy_tree(&fs, &copy);
                    copy.cut_power_after_syncs(m);
                    let reopened = LogTablet::open(
                        std::sync::Arc::new(copy.clone()),
                        Path::new("/t"),
                        small_config(),
                        20_000,
                    );
                    drop(reopened);
                    copy.crash(seed + m);
                    let t = open_sim(&copy, small_config(), 20_000);
                    assert_eq!(shape(&read_log(&t)), new, "cut {n}, recovery cut {m}");
                }
            }
            let t = open_sim(&fs, small_config(), 20_000);
            let got = shape(&read_log(&t));
            assert!(
                old_or_new(&got, &old, &new),
                "cut after {n} syncs (seed {seed}): {got:?}"
            );
            if got == old {
                saw_old += 1;
            } else {
                saw_new += 1;
            }
            check_reads_from_every_offset(&t, &got);
            let names = dir_names(&fs);
            assert!(
                names
                    .iter()
                    .all(|n| !n.ends_with(".tmp") && !n.ends_with(".swap")),
                "leftovers after recovery: {names:?}"
            );
            // The log goes on.
            let end_before = t.log_end_offset();
            assert_eq!(append_durable(&t, &batch(1, b"z"), 30_000).0, end_before);
        }
    }
}

/// Copies every file of `from` into `to` as durable (a snapshot of the
/// disk after a crash).
fn copy_tree(from: &SimFs, to: &SimFs) {
    for name in from.list(Path::new("/t")).expect("list") {
        let path = Path::new("/t").join(&name);
        to.put_durable(&path, &from.read(&path).expect("file"));
    }
}

#[test]
fn an_idempotent_writer_keeps_its_sequence_after_its_batches_are_rewritten() {
    let fs = SimFs::new();
    let t = open_sim(&fs, small_config(), 0);
    let body = [7u8; 150];
    let mut seq = 0;
    let mut offsets = BTreeMap::new();
    while t.sealed_segments().len() < 2 {
        let (first, _) = append_durable(
            &t,
            &idempotent_batch(2, 42, seq, &body),
            1_000 + i64::from(seq),
        );
        offsets.insert(seq, first);
        seq += 1;
    }
    // Other writers' batches until the writer's are all sealed.
    let sealed_before = t.sealed_segments().len();
    while t.sealed_segments().len() == sealed_before {
        append_durable(&t, &batch(1, &body), 2_000);
    }
    let segs = sealed(&t);
    let (base, end) = (segs[0].base_offset, segs.last().expect("sealed").end_offset);
    assert!(offsets.values().all(|&o| o < end));
    // Everything of the writer in the run is dropped.
    rewrite(&t, base, end, &[]);
    drop(t);
    fs.crash(5);
    let t = open_sim(&fs, small_config(), 50_000);
    // The last sequence is known: a retry is a duplicate, the next one
    // appends, a gap is refused.
    let last = seq - 1;
    let retry = t
        .append(&idempotent_batch(2, 42, last, &body), 50_000)
        .expect("retry");
    assert!(retry.duplicate);
    assert_eq!(retry.first_offset, offsets[&last]);
    assert!(matches!(
        t.append(&idempotent_batch(2, 42, seq + 1, &body), 50_000),
        Err(StorageError::OutOfOrderSequence { .. })
    ));
    let next = t
        .append(&idempotent_batch(2, 42, seq, &body), 50_000)
        .expect("next");
    assert!(!next.duplicate);
}
