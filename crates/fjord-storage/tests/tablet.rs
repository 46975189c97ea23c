//! Behaviour of one log tablet: append, read, durability, idempotent
//! writers, retention, truncation, offset-for-timestamp, recovery.

mod support;

use std::path::Path;
use std::sync::Arc;

use fjord_format::log_batch::{
    write_batch, BatchHeader, LogBatch, LogBatchError, LogBatches, LOG_MAGIC_V0, LOG_MAGIC_V1,
    LOG_MAGIC_V2,
};
use fjord_storage::fs::sim::SimFs;
use fjord_storage::fs::Fs;
use fjord_storage::{Durability, LogConfig, LogTablet, StorageError};
use support::*;

#[test]
fn appends_get_contiguous_offsets_and_read_back_byte_for_byte() {
    let fs = SimFs::new();
    let t = open_sim(&fs, LogConfig::default(), 1000);
    assert_eq!(append_durable(&t, &batch(3, b"aaa"), 1000), (0, 2));
    assert_eq!(append_durable(&t, &batch(1, b"b"), 1001), (3, 3));
    assert_eq!(append_durable(&t, &batch(5, b"ccccc"), 1002), (4, 8));
    assert_eq!(t.log_end_offset(), 9);
    assert_eq!(t.high_watermark(), 9);
    let all = read_all(&t, 0);
    assert_eq!(
        all,
        vec![
            (0, 2, b"aaa".to_vec()),
            (3, 3, b"b".to_vec()),
            (4, 8, b"ccccc".to_vec())
        ]
    );
}

#[test]
fn stored_batches_carry_stamped_offset_and_commit_timestamp_with_a_valid_crc() {
    let fs = SimFs::new();
    let t = open_sim(&fs, LogConfig::default(), 0);
    append_durable(&t, &batch(2, b"xy"), 5000);
    append_durable(&t, &batch(2, b"zw"), 4000); // clock went backwards
    let r = t.read(0, 1 << 20).expect("read");
    let first = LogBatch::validate(&r.records[..50]).expect("valid");
    assert_eq!((first.base_offset(), first.commit_timestamp()), (0, 5000));
    let second = LogBatch::validate(&r.records[50..]).expect("valid");
    assert_eq!(second.base_offset(), 2);
    assert_eq!(
        second.commit_timestamp(),
        5000,
        "commit timestamps never decrease"
    );
}

#[test]
fn a_read_returns_the_batch_containing_the_offset_and_at_least_one_whole_batch() {
    let fs = SimFs::new();
    let t = open_sim(&fs, LogConfig::default(), 0);
    append_durable(&t, &batch(10, &[1; 300]), 0);
    append_durable(&t, &batch(10, &[2; 300]), 0);
    let r = t.read(15, 10).expect("read");
    let b = LogBatch::validate(&r.records).expect("exactly one whole batch");
    assert_eq!(b.base_offset(), 10);
    let r = t.read(0, 400).expect("read");
    assert_eq!(r.records.len(), 348, "max_bytes cuts at a batch boundary");
}

#[test]
fn reads_outside_the_log_are_out_of_range_and_at_the_end_are_empty() {
    let fs = SimFs::new();
    let t = open_sim(&fs, LogConfig::default(), 0);
    append_durable(&t, &batch(2, b"ab"), 0);
    assert!(t.read(2, 100).expect("read at end").records.is_empty());
    assert!(matches!(
        t.read(3, 100),
        Err(StorageError::OffsetOutOfRange { offset: 3, .. })
    ));
    assert!(matches!(
        t.read(-1, 100),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
}

#[test]
fn in_fsync_mode_a_batch_is_invisible_until_durable() {
    let fs = SimFs::new();
    let t = open_sim(&fs, LogConfig::default(), 0);
    let b = batch(1, b"x");
    let info = t.append(&b, 0).expect("append");
    assert_eq!(t.high_watermark(), 0);
    assert!(t.read(0, 100).expect("read").records.is_empty());
    t.wait_durable(info.last_offset).expect("durable");
    assert_eq!(t.high_watermark(), 1);
    assert_eq!(t.durable_offset(), 1);
}

#[test]
fn in_interval_mode_a_batch_is_visible_at_once_and_flushed_every_n_batches() {
    let fs = SimFs::new();
    let config = LogConfig {
        durability: Durability::Interval {
            messages: 3,
            interval_ms: 1_000_000,
        },
        ..LogConfig::default()
    };
    let t = open_sim(&fs, config, 0);
    for i in 0..2 {
        t.append(&batch(1, b"x"), i).expect("append");
    }
    assert_eq!(t.high_watermark(), 2);
    assert_eq!(t.durable_offset(), 0, "not flushed before 3 batches");
    t.append(&batch(1, b"x"), 3).expect("append");
    assert_eq!(t.durable_offset(), 3);
    t.append(&batch(1, b"x"), 4).expect("append");
    t.flush_if_due(10).expect("not due yet");
    assert_eq!(t.durable_offset(), 3);
    t.flush_if_due(2_000_000).expect("due");
    assert_eq!(t.durable_offset(), 4);
}

#[test]
fn concurrent_appenders_all_become_durable_through_shared_fsyncs() {
    let fs = SimFs::new();
    let t = Arc::new(open_sim(&fs, LogConfig::default(), 0));
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let t = t.clone();
            std::thread::spawn(move || {
                for _ in 0..25 {
                    let b = batch(2, &[i as u8; 40]);
                    let info = t.append(&b, 0).expect("append");
                    t.wait_durable(info.last_offset).expect("durable");
                    assert!(t.durable_offset() > info.last_offset);
                }
            })
        })
        .collect();
    for th in threads {
        th.join().expect("no panic");
    }
    assert_eq!(read_all(&t, 0).len(), 100);
    assert_eq!(t.high_watermark(), 200);
}

#[test]
fn a_corrupt_or_partial_batch_rejects_the_whole_append() {
    let fs = SimFs::new();
    let t = open_sim(&fs, LogConfig::default(), 0);
    let mut two = batch(1, b"good");
    let mut bad = batch(1, b"bad!");
    let last = bad.len() - 1;
    bad[last] ^= 1;
    two.extend_from_slice(&bad);
    match t.append(&two, 0) {
        Err(StorageError::CorruptBatch {
            position: 52,
            source: LogBatchError::CrcMismatch { .. },
        }) => {}
        other => panic!("expected a CRC error at byte 52, got {other:?}"),
    }
    let mut partial = batch(1, b"good");
    partial.extend_from_slice(&batch(1, b"cut")[..30]);
    assert!(matches!(
        t.append(&partial, 0),
        Err(StorageError::CorruptBatch {
            source: LogBatchError::Truncated { .. },
            ..
        })
    ));
    assert!(matches!(
        t.append(&[], 0),
        Err(StorageError::EmptyAppend { len: 0 })
    ));
    assert_eq!(t.log_end_offset(), 0, "nothing appended");
}

#[test]
fn a_batch_above_the_size_limit_is_refused() {
    let fs = SimFs::new();
    let config = LogConfig {
        batch_bytes_max: 100,
        ..LogConfig::default()
    };
    let t = open_sim(&fs, config, 0);
    assert!(matches!(
        t.append(&batch(1, &[0; 60]), 0),
        Err(StorageError::BatchTooLarge {
            size: 108,
            max: 100
        })
    ));
}

#[test]
fn segments_roll_at_the_size_limit_and_reads_cross_them() {
    let fs = SimFs::new();
    let t = open_sim(&fs, small_config(), 0);
    for i in 0..40 {
        append_durable(&t, &batch(2, &[i as u8; 300]), 0);
    }
    let logs = fs.list(Path::new("/t")).expect("list");
    let segments = logs.iter().filter(|n| n.ends_with(".log")).count();
    assert!(segments >= 3, "expected several segments, got {logs:?}");
    assert!(logs.contains(&"00000000000000000000.log".to_string()));
    let all = read_all(&t, 0);
    assert_eq!(all.len(), 40);
    for (i, (base, last, body)) in all.iter().enumerate() {
        assert_eq!((*base, *last), (2 * i as i64, 2 * i as i64 + 1));
        assert_eq!(body, &vec![i as u8; 300]);
    }
    // Reads from every offset start at the containing batch.
    for off in 0..80 {
        let r = t.read(off, 1).expect("read");
        let b = LogBatch::validate(&r.records).expect("one batch");
        assert_eq!(b.base_offset(), off - off % 2);
    }
}

#[test]
fn a_retried_batch_returns_the_original_offsets_without_appending() {
    let fs = SimFs::new();
    let t = open_sim(&fs, LogConfig::default(), 0);
    append_durable(&t, &batch(3, b"other"), 0);
    let b0 = idempotent_batch(2, 42, 0, b"w0");
    let first = t.append(&b0, 0).expect("append");
    assert!(!first.duplicate);
    assert_eq!((first.first_offset, first.last_offset), (3, 4));
    let retry = t.append(&b0, 0).expect("retry");
    assert!(retry.duplicate);
    assert_eq!((retry.first_offset, retry.last_offset), (3, 4));
    assert_eq!(t.log_end_offset(), 5);
}

#[test]
fn out_of_order_sequences_are_refused_and_a_new_writer_starts_at_zero() {
    let fs = SimFs::new();
    let t = open_sim(&fs, LogConfig::default(), 0);
    assert!(matches!(
        t.append(&idempotent_batch(1, 7, 3, b"x"), 0),
        Err(StorageError::OutOfOrderSequence {
            writer_id: 7,
            batch_sequence: 3,
            last_sequence: -1
        })
    ));
    t.append(&idempotent_batch(1, 7, 0, b"x"), 0)
        .expect("seq 0");
    t.append(&idempotent_batch(1, 7, 1, b"x"), 0)
        .expect("seq 1");
    assert!(matches!(
        t.append(&idempotent_batch(1, 7, 3, b"x"), 0),
        Err(StorageError::OutOfOrderSequence {
            last_sequence: 1,
            ..
        })
    ));
    // Two batches of the same writer in one append must be in sequence too.
    let mut two = idempotent_batch(1, 7, 2, b"x");
    two.extend(idempotent_batch(1, 7, 3, b"y"));
    let info = t.append(&two, 0).expect("in-sequence pair");
    assert_eq!((info.first_offset, info.last_offset), (2, 3));
}

#[test]
fn writer_state_survives_clean_and_unclean_restarts() {
    for clean in [true, false] {
        let fs = SimFs::new();
        let t = open_sim(&fs, small_config(), 0);
        for seq in 0..12 {
            append_durable(&t, &idempotent_batch(1, 5, seq, &[0; 200]), 0);
        }
        if clean {
            t.close(0).expect("close");
        } else {
            drop(t);
            fs.crash(7);
        }
        let t = open_sim(&fs, small_config(), 0);
        let retry = t
            .append(&idempotent_batch(1, 5, 11, &[0; 200]), 0)
            .expect("retry");
        assert!(retry.duplicate, "clean={clean}");
        assert_eq!(retry.first_offset, 11);
        assert!(t.append(&idempotent_batch(1, 5, 13, b""), 0).is_err());
        t.append(&idempotent_batch(1, 5, 12, b""), 0)
            .expect("next sequence");
    }
}

#[test]
fn offset_for_timestamp_finds_the_first_batch_committed_at_or_after() {
    let fs = SimFs::new();
    let t = open_sim(&fs, small_config(), 0);
    for i in 0..30 {
        append_durable(&t, &batch(1, &[0; 200]), 1000 + i * 10);
    }
    assert_eq!(t.offset_for_timestamp(0).expect("lookup"), Some(0));
    assert_eq!(t.offset_for_timestamp(1000).expect("lookup"), Some(0));
    assert_eq!(t.offset_for_timestamp(1001).expect("lookup"), Some(1));
    assert_eq!(t.offset_for_timestamp(1155).expect("lookup"), Some(16));
    assert_eq!(t.offset_for_timestamp(1290).expect("lookup"), Some(29));
    assert_eq!(t.offset_for_timestamp(1291).expect("lookup"), None);
}

#[test]
fn retention_deletes_old_sealed_segments_and_advances_the_log_start() {
    let fs = SimFs::new();
    let config = LogConfig {
        retention_ms: Some(1000),
        ..small_config()
    };
    let t = open_sim(&fs, config, 0);
    for i in 0..30 {
        append_durable(&t, &batch(1, &[0; 300]), i * 100);
    }
    let out = t.enforce_retention(2500).expect("retention");
    assert!(out.segments_deleted > 0);
    let start = t.log_start_offset();
    assert_eq!(out.log_start_offset, start);
    assert!(start > 0 && start <= 15, "start {start}");
    assert!(matches!(
        t.read(0, 100),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
    assert_eq!(read_all(&t, start).len() as i64, 30 - start);
    // Nothing newer than the TTL was deleted; the active segment never is.
    let out = t.enforce_retention(1_000_000).expect("retention");
    assert_eq!(t.log_end_offset(), 30);
    assert!(!read_all(&t, out.log_start_offset).is_empty());
    drop(t);
    let t = open_sim(&fs, small_config(), 0);
    assert_eq!(
        t.log_start_offset(),
        out.log_start_offset,
        "survives reopen"
    );
}

#[test]
fn retention_by_size_keeps_the_newest_segments_under_the_cap() {
    let fs = SimFs::new();
    let config = LogConfig {
        retention_ms: None,
        retention_bytes: Some(5000),
        ..small_config()
    };
    let t = open_sim(&fs, config, 0);
    for _ in 0..40 {
        append_durable(&t, &batch(1, &[0; 300]), 0);
    }
    t.enforce_retention(0).expect("retention");
    let total: usize = fs
        .list(Path::new("/t"))
        .expect("list")
        .iter()
        .filter(|n| n.ends_with(".log"))
        .map(|n| fs.read(&Path::new("/t").join(n)).expect("file").len())
        .sum();
    assert!(total <= 5000, "total {total}");
    assert_eq!(t.log_end_offset(), 40);
}

#[test]
fn truncate_to_removes_the_batch_containing_the_offset_and_everything_after() {
    let fs = SimFs::new();
    let t = open_sim(&fs, small_config(), 0);
    for seq in 0..20 {
        append_durable(&t, &idempotent_batch(2, 9, seq, &[seq as u8; 300]), 0);
    }
    assert_eq!(t.truncate_to(13).expect("truncate"), 12);
    assert_eq!(t.log_end_offset(), 12);
    assert_eq!(read_all(&t, 0).len(), 6);
    // Writer state follows the truncation: sequence 6 is next.
    append_durable(&t, &idempotent_batch(2, 9, 6, b"again"), 0);
    assert_eq!(read_all(&t, 12), vec![(12, 13, b"again".to_vec())]);
    drop(t);
    fs.crash(3);
    let t = open_sim(&fs, small_config(), 0);
    assert_eq!(t.log_end_offset(), 14);
}

#[test]
fn an_fsync_failure_takes_the_tablet_offline_for_good() {
    let fs = SimFs::new();
    let t = open_sim(&fs, LogConfig::default(), 0);
    append_durable(&t, &batch(1, b"ok"), 0);
    fs.fail_syncs(true);
    let info = t.append(&batch(1, b"lost"), 0).expect("write succeeds");
    assert!(matches!(
        t.wait_durable(info.last_offset),
        Err(StorageError::Offline { .. })
    ));
    fs.fail_syncs(false);
    assert!(t.is_offline());
    assert!(matches!(
        t.wait_durable(info.last_offset),
        Err(StorageError::Offline { .. })
    ));
    assert!(matches!(
        t.append(&batch(1, b"x"), 0),
        Err(StorageError::Offline { .. })
    ));
    assert!(matches!(t.read(0, 10), Err(StorageError::Offline { .. })));
    assert_eq!(
        t.high_watermark(),
        1,
        "the unsynced batch was never published"
    );
}

#[test]
fn one_append_of_batches_of_every_magic_stamps_each_and_keeps_every_body_on_disk() {
    // The append writes each batch's stamped prefix and its received body
    // with one vectored write; the prefix length differs per magic, so a
    // mix in one append checks that every part lands where it belongs.
    let dir = tempfile::tempdir().expect("tempdir");
    let fs: Arc<dyn Fs> = Arc::new(fjord_storage::OsFs);
    let config = LogConfig {
        leader_epoch: 7,
        ..LogConfig::default()
    };
    let t = LogTablet::open(fs, dir.path(), config, 0).expect("open");
    let mut records = Vec::new();
    let magics = [LOG_MAGIC_V0, LOG_MAGIC_V1, LOG_MAGIC_V2];
    for (i, magic) in (0u8..).zip(magics) {
        let header = BatchHeader {
            magic,
            ..BatchHeader::append_only(1, i32::from(i) + 2)
        };
        write_batch(&mut records, &header, &[], &[i + 1; 300]).expect("batch");
    }
    let info = t.append(&records, 9000).expect("append");
    assert_eq!((info.first_offset, info.last_offset), (0, 8));
    t.wait_durable(info.last_offset).expect("durable");
    let r = t.read(0, 1 << 20).expect("read");
    assert_eq!(r.records.len(), records.len());
    let stored: Vec<LogBatch<'_>> = LogBatches::new(&r.records)
        .map(|b| b.expect("valid CRC after stamping"))
        .collect();
    assert_eq!(stored.len(), 3);
    let mut base = 0;
    for ((i, magic), b) in (0u8..).zip(magics).zip(&stored) {
        assert_eq!(b.magic(), magic);
        assert_eq!((b.base_offset(), b.commit_timestamp()), (base, 9000));
        assert_eq!(b.records(), &[i + 1; 300][..], "magic {magic}");
        if magic == LOG_MAGIC_V2 {
            assert_eq!(b.leader_epoch(), 7);
        }
        base += i64::from(i) + 2;
    }
}

#[test]
fn one_append_of_more_batches_than_a_write_group_lands_each_batch_in_order() {
    // The append writes its batches a group at a time (32 a vectored
    // write); 100 batches of varying magic and size cross several group
    // boundaries, including a partial last group.
    let dir = tempfile::tempdir().expect("tempdir");
    let fs: Arc<dyn Fs> = Arc::new(fjord_storage::OsFs);
    let t = LogTablet::open(fs, dir.path(), LogConfig::default(), 0).expect("open");
    let magics = [LOG_MAGIC_V0, LOG_MAGIC_V1, LOG_MAGIC_V2];
    let mut records = Vec::new();
    for i in 0..100u8 {
        let header = BatchHeader {
            magic: magics[usize::from(i) % 3],
            ..BatchHeader::append_only(1, i32::from(i % 4) + 1)
        };
        write_batch(&mut records, &header, &[], &vec![i; usize::from(i) + 1]).expect("batch");
    }
    let info = t.append(&records, 500).expect("append");
    t.wait_durable(info.last_offset).expect("durable");
    let r = t.read(0, 1 << 20).expect("read");
    assert_eq!(r.records.len(), records.len());
    let mut base = 0;
    let mut count = 0u8;
    for (i, b) in (0u8..).zip(LogBatches::new(&r.records)) {
        let b = b.expect("valid CRC after stamping");
        assert_eq!(b.magic(), magics[usize::from(i) % 3]);
        assert_eq!((b.base_offset(), b.commit_timestamp()), (base, 500));
        assert_eq!(b.records(), &vec![i; usize::from(i) + 1][..], "batch {i}");
        base += i64::from(i % 4) + 1;
        count += 1;
    }
    assert_eq!(count, 100);
    assert_eq!((info.first_offset, info.last_offset), (0, base - 1));
}

#[test]
fn garbage_after_the_last_batch_is_truncated_on_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs: Arc<dyn Fs> = Arc::new(fjord_storage::OsFs);
    let t = LogTablet::open(fs.clone(), dir.path(), LogConfig::default(), 0).expect("open");
    for i in 0..5 {
        let b = batch(1, &[i; 100]);
        let info = t.append(&b, 0).expect("append");
        t.wait_durable(info.last_offset).expect("durable");
    }
    drop(t); // no clean shutdown
    let seg = dir.path().join("00000000000000000000.log");
    let good_len = std::fs::metadata(&seg).expect("segment").len();
    let mut half = batch(1, &[9; 100]);
    half.truncate(70);
    let mut tail = half;
    tail.extend_from_slice(&[0xAB; 333]);
    let f = std::fs::OpenOptions::new()
        .append(true)
        .open(&seg)
        .expect("open");
    std::io::Write::write_all(&mut &f, &tail).expect("write garbage");
    drop(f);
    let t = LogTablet::open(fs, dir.path(), LogConfig::default(), 0).expect("reopen");
    assert_eq!(t.log_end_offset(), 5);
    assert_eq!(std::fs::metadata(&seg).expect("segment").len(), good_len);
    assert_eq!(read_all(&t, 0).len(), 5);
    append_durable(&t, &batch(1, b"after"), 0);
    assert_eq!(read_all(&t, 5), vec![(5, 5, b"after".to_vec())]);
}

#[test]
fn corruption_below_the_recovery_point_is_refused_not_truncated() {
    let fs = SimFs::new();
    let t = open_sim(&fs, LogConfig::default(), 0);
    for i in 0..6 {
        append_durable(&t, &batch(1, &[i; 100]), 0);
    }
    t.checkpoint(0).expect("checkpoint at 6");
    drop(t); // unclean: the segment holding the recovery point is rescanned
    let seg = Path::new("/t/00000000000000000000.log");
    let before = fs.read(seg).expect("segment");
    let f = fs.open(seg, false).expect("open");
    f.write_all_at(&[0xFF], 3 * 148 + 100).expect("flip a byte");
    f.sync_data().expect("sync");
    drop(f);
    let t = open_sim(&fs, LogConfig::default(), 0);
    assert_eq!(
        fs.read(seg).expect("segment").len(),
        before.len(),
        "not truncated"
    );
    let r = t.read(0, 1 << 20).expect("read before the damage");
    assert_eq!(
        r.records.len(),
        3 * 148,
        "batches before the damage are served"
    );
    assert!(matches!(
        t.read(3, 100),
        Err(StorageError::Damaged {
            from_offset: 3,
            to_offset: 6,
            ..
        })
    ));
    // The log continues after the damaged range.
    assert_eq!(t.log_end_offset(), 6);
    append_durable(&t, &batch(1, b"new"), 0);
    assert_eq!(read_all(&t, 6), vec![(6, 6, b"new".to_vec())]);
}

#[test]
fn a_damaged_checkpoint_stops_open_instead_of_misreading_it() {
    let fs = SimFs::new();
    let t = open_sim(&fs, LogConfig::default(), 0);
    append_durable(&t, &batch(1, b"x"), 0);
    t.close(0).expect("close");
    let cp = Path::new("/t/recovery-point.checkpoint");
    let mut bytes = fs.read(cp).expect("checkpoint");
    bytes[4] = 9; // unknown version
    fs.put_durable(cp, &bytes);
    let r = LogTablet::open(Arc::new(fs.clone()), "/t", LogConfig::default(), 0);
    assert!(matches!(r, Err(StorageError::BadFile { .. })));
}

#[test]
fn clean_close_and_reopen_keeps_everything() {
    let fs = SimFs::new();
    let t = open_sim(&fs, small_config(), 0);
    for i in 0..25 {
        append_durable(&t, &batch(1, &[i; 250]), i as i64);
    }
    let before = read_all(&t, 0);
    t.close(100).expect("close");
    assert!(fs.exists(Path::new("/t/.clean-shutdown")));
    fs.crash(11); // a power cut after a clean close loses nothing
    let t = open_sim(&fs, small_config(), 200);
    assert!(!fs.exists(Path::new("/t/.clean-shutdown")));
    assert_eq!(read_all(&t, 0), before);
    assert_eq!(t.offset_for_timestamp(20).expect("lookup"), Some(20));
}

#[test]
fn segments_roll_when_the_offset_index_is_full() {
    let fs = SimFs::new();
    let config = LogConfig {
        index_interval_bytes: 1,
        index_entries_max: 3,
        ..LogConfig::default()
    };
    let t = open_sim(&fs, config.clone(), 0);
    for _ in 0..7 {
        append_durable(&t, &batch(1, b"x"), 0);
    }
    let mut logs: Vec<String> = fs
        .list(Path::new("/t"))
        .expect("list")
        .into_iter()
        .filter(|n| n.ends_with(".log"))
        .collect();
    logs.sort();
    assert_eq!(
        logs,
        vec![
            "00000000000000000000.log",
            "00000000000000000003.log",
            "00000000000000000006.log"
        ]
    );
    drop(t);
    fs.crash(5);
    let t = open_sim(&fs, config, 0);
    assert_eq!(read_all(&t, 0).len(), 7);
}

#[test]
fn readers_racing_appends_and_rolls_see_only_whole_published_batches() {
    for durability in [
        Durability::Fsync,
        Durability::Interval {
            messages: 3,
            interval_ms: 1_000_000,
        },
    ] {
        let fs = SimFs::new();
        let config = LogConfig {
            durability,
            ..small_config()
        };
        let t = Arc::new(open_sim(&fs, config, 0));
        let writer = {
            let t = t.clone();
            std::thread::spawn(move || {
                for i in 0..300u32 {
                    let b = batch(1, &[(i % 251) as u8; 100]);
                    let info = t.append(&b, 0).expect("append");
                    t.wait_durable(info.last_offset).expect("durable");
                }
            })
        };
        let mut seen = 0i64;
        while seen < 300 {
            let hw = t.high_watermark();
            let r = t.read(seen, 700).expect("read below the log end");
            let mut it = fjord_format::log_batch::LogBatches::new(&r.records);
            for b in it.by_ref() {
                let b = b.expect("only whole valid batches");
                assert_eq!(b.base_offset(), seen, "contiguous");
                assert!(b.base_offset() < r.high_watermark.max(hw));
                assert_eq!(b.records(), &[(seen % 251) as u8; 100][..]);
                seen += 1;
            }
            assert!(it.remaining().is_empty());
        }
        writer.join().expect("writer");
    }
}
