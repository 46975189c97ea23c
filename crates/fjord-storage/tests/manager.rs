//! The log manager: tablets by table bucket under `<data dir>/log`.

mod support;

use std::sync::Arc;

use fjord_storage::{LogConfig, LogManager, OsFs, TableBucket};
use support::{append_durable, batch, read_all};

fn tb(table_id: i64, partition_id: Option<i64>, bucket: i32) -> TableBucket {
    TableBucket {
        table_id,
        partition_id,
        bucket,
    }
}

#[test]
fn tablets_are_created_found_again_after_restart_and_deleted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = tb(7, None, 0);
    let b = tb(7, Some(3), 1);
    {
        let m = LogManager::new(Arc::new(OsFs), dir.path()).expect("manager");
        let ta = m.open_tablet(a, LogConfig::default(), 0).expect("open a");
        append_durable(&ta, &batch(2, b"aa"), 0);
        let tb_ = m.open_tablet(b, LogConfig::default(), 0).expect("open b");
        append_durable(&tb_, &batch(1, b"b"), 0);
        assert!(Arc::ptr_eq(
            &ta,
            &m.open_tablet(a, LogConfig::default(), 0).expect("again")
        ));
        assert!(dir.path().join("log/7/log-0").is_dir());
        assert!(dir.path().join("log/7/p3/log-1").is_dir());
        drop((ta, tb_));
        m.close_all(0).expect("close");
    }
    let m = LogManager::new(Arc::new(OsFs), dir.path()).expect("manager");
    assert_eq!(m.discover().expect("discover"), vec![a, b]);
    let ta = m.open_tablet(a, LogConfig::default(), 0).expect("reopen a");
    assert_eq!(read_all(&ta, 0), vec![(0, 1, b"aa".to_vec())]);
    m.delete_tablet(b).expect("delete b");
    assert!(m.get(b).is_none());
    assert!(!dir.path().join("log/7/p3/log-1").exists());
    assert_eq!(m.discover().expect("discover"), vec![a]);
}
