//! `sync_together` makes the batches written to several fsync-mode tablets
//! durable with one file system sync: after it, every tablet's batches are
//! durable and visible without a sync of its own, and survive a power cut
//! (the simulated disk allows exactly one sync, so one per tablet would
//! not have sufficed). Where it cannot (the sync fails, or a tablet is
//! alone on its file system) it changes nothing, and each tablet's own
//! `wait_durable` syncs (or fails) as without it; so too where the tablets'
//! configuration turns it off (`log.flush.sync-file-system`).

mod support;

use std::path::Path;
use std::sync::Arc;

use fjord_storage::fs::sim::SimFs;
use fjord_storage::{sync_together, Durability, LogConfig, LogTablet, OsFs};
use support::{batch, read_all};

fn fsync_config() -> LogConfig {
    LogConfig {
        durability: Durability::Fsync,
        ..LogConfig::default()
    }
}

fn open(fs: &SimFs, dir: &str) -> LogTablet {
    LogTablet::open(Arc::new(fs.clone()), Path::new(dir), fsync_config(), 0).expect("open")
}

/// Three tablets on one simulated disk, each with `batches` batches
/// appended (not yet durable); their bodies, per tablet.
fn three_written(fs: &SimFs, batches: u8) -> (Vec<LogTablet>, Vec<Vec<Vec<u8>>>) {
    let tablets: Vec<LogTablet> = ["/a", "/b", "/c"].iter().map(|d| open(fs, d)).collect();
    let mut bodies = Vec::new();
    for (i, t) in tablets.iter().enumerate() {
        let mut mine = Vec::new();
        for n in 0..batches {
            let body = vec![i as u8 * 16 + n; 40 + usize::from(n)];
            t.append(&batch(2, &body), 10).expect("append");
            mine.push(body);
        }
        bodies.push(mine);
    }
    (tablets, bodies)
}

#[test]
fn one_file_system_sync_makes_every_tablet_durable_and_visible() {
    let fs = SimFs::new();
    let (tablets, bodies) = three_written(&fs, 3);
    for t in &tablets {
        assert_eq!(t.durable_offset(), 0, "fsync mode: nothing durable yet");
        assert_eq!(t.high_watermark(), 0, "fsync mode: nothing visible yet");
    }
    // Exactly one sync may succeed from here: a sync per tablet would fail.
    fs.cut_power_after_syncs(1);
    let refs: Vec<&LogTablet> = tablets.iter().collect();
    assert_eq!(sync_together(&refs), 3);
    for (t, mine) in tablets.iter().zip(&bodies) {
        assert_eq!(t.durable_offset(), 6);
        assert_eq!(t.high_watermark(), 6);
        // Covered already: returns without a sync (none could succeed).
        t.wait_durable(5)
            .expect("durable without a sync of its own");
        let read: Vec<Vec<u8>> = read_all(t, 0).into_iter().map(|b| b.2).collect();
        assert_eq!(&read, mine);
    }
    drop(refs);
    drop(tablets);

    fs.crash(7);
    fs.fail_syncs(false);
    for (dir, mine) in ["/a", "/b", "/c"].iter().zip(&bodies) {
        let t = open(&fs, dir);
        let read: Vec<Vec<u8>> = read_all(&t, 0).into_iter().map(|b| b.2).collect();
        assert_eq!(&read, mine, "{dir} after the power cut");
    }
}

#[test]
fn a_failed_file_system_sync_changes_nothing_and_each_tablet_syncs_itself() {
    let fs = SimFs::new();
    let (tablets, _) = three_written(&fs, 2);
    let refs: Vec<&LogTablet> = tablets.iter().collect();

    fs.fail_syncs(true);
    assert_eq!(sync_together(&refs), 0);
    for t in &tablets {
        assert_eq!(t.durable_offset(), 0);
        assert_eq!(t.high_watermark(), 0);
    }
    // Each tablet's own sync reports the failure as it always has.
    assert!(tablets[0].wait_durable(3).is_err());
    assert!(tablets[0].is_offline());

    // The others sync themselves once the disk works again.
    fs.fail_syncs(false);
    for t in &tablets[1..] {
        t.wait_durable(3).expect("own sync");
        assert_eq!(t.durable_offset(), 4);
    }
}

#[test]
fn a_tablet_alone_or_with_nothing_new_is_left_to_its_own_sync() {
    let fs = SimFs::new();
    let (tablets, _) = three_written(&fs, 1);
    // Alone on its file system: one fdatasync is no dearer than a syncfs.
    assert_eq!(sync_together(&[&tablets[0]]), 0);
    assert_eq!(tablets[0].durable_offset(), 0);
    tablets[0].wait_durable(1).expect("own sync");

    // Durable already: nothing to do for it; the other two are synced.
    let refs: Vec<&LogTablet> = tablets.iter().collect();
    assert_eq!(sync_together(&refs), 2);
    for t in &tablets {
        assert_eq!(t.durable_offset(), 2);
    }
    assert_eq!(sync_together(&refs), 0, "nothing new anywhere");
}

#[test]
fn tablets_configured_without_it_are_left_to_their_own_syncs() {
    let fs = SimFs::new();
    let per_file = LogConfig {
        sync_file_system: false,
        ..fsync_config()
    };
    let tablets: Vec<LogTablet> = ["/a", "/b"]
        .iter()
        .map(|d| {
            LogTablet::open(Arc::new(fs.clone()), Path::new(d), per_file.clone(), 0).expect("open")
        })
        .collect();
    for t in &tablets {
        t.append(&batch(2, b"payload"), 10).expect("append");
    }
    let refs: Vec<&LogTablet> = tablets.iter().collect();
    assert_eq!(sync_together(&refs), 0);
    for t in &tablets {
        assert_eq!(t.durable_offset(), 0, "not synced by the file system sync");
        t.wait_durable(1).expect("own sync");
        assert_eq!(t.durable_offset(), 2);
    }
}

#[test]
fn on_the_real_file_system_syncfs_covers_tablets_in_different_directories() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tablets: Vec<LogTablet> = ["a", "b"]
        .iter()
        .map(|d| {
            LogTablet::open(Arc::new(OsFs), dir.path().join(d), fsync_config(), 0).expect("open")
        })
        .collect();
    for t in &tablets {
        t.append(&batch(3, b"payload"), 10).expect("append");
    }
    let refs: Vec<&LogTablet> = tablets.iter().collect();
    assert_eq!(sync_together(&refs), 2, "one syncfs for both");
    for t in &tablets {
        assert_eq!(t.durable_offset(), 3);
        assert_eq!(read_all(t, 0).len(), 1);
    }
}
