//! Process-crash test: a child process (this test binary, re-executed with
//! `FJORD_CRASH_CHILD_DIR` set) appends batches in a loop with fsync
//! durability and prints `ACK <n> <first> <last>` after each acknowledged
//! one. The parent kills it with SIGKILL at a random moment, reopens the
//! tablet and checks that every acknowledged batch is present and intact
//! and every served batch is one the child appended; several rounds on the
//! same directory. Batch `n`'s body is derived from `n`, so the parent can
//! check contents without the child telling it.

mod support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fjord_format::log_batch::{write_batch, BatchHeader};
use fjord_storage::fs::sim::Rng;
use fjord_storage::{LogConfig, LogTablet, OsFs};
use support::read_all;

const CHILD_ENV: &str = "FJORD_CRASH_CHILD_DIR";
const START_ENV: &str = "FJORD_CRASH_CHILD_START";

fn body(n: u64) -> Vec<u8> {
    let mut rng = Rng::new(n);
    let len = 16 + rng.below(3000) as usize;
    let mut out = n.to_le_bytes().to_vec();
    out.extend((0..len).map(|_| rng.next_u64() as u8));
    out
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes_max: 64 << 10,
        batch_bytes_max: 16 << 10,
        ..LogConfig::default()
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The child's work; a no-op in a normal test run.
#[test]
fn crash_child_appends_until_killed() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut n: u64 = std::env::var(START_ENV)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let t = LogTablet::open(Arc::new(OsFs), Path::new(&dir), config(), now_ms()).expect("open");
    loop {
        let mut bytes = Vec::new();
        let header = BatchHeader::append_only(1, 1 + (n % 7) as i32);
        write_batch(&mut bytes, &header, &[], &body(n)).expect("valid");
        let info = t.append(&bytes, now_ms()).expect("append");
        t.wait_durable(info.last_offset).expect("durable");
        println!("ACK {n} {} {}", info.first_offset, info.last_offset);
        n += 1;
    }
}

#[test]
fn acknowledged_batches_survive_sigkill() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = std::env::current_exe().expect("test binary");
    let mut rng = Rng::new(now_ms() as u64);
    // offset -> (last offset, n) of acknowledged batches
    let mut acked: BTreeMap<i64, (i64, u64)> = BTreeMap::new();
    let mut next_n = 0u64;
    for round in 0..5 {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "crash_child_appends_until_killed",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, dir.path())
            .env(START_ENV, next_n.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn child");
        let stdout = child.stdout.take().expect("piped stdout");
        let reader = std::thread::spawn(move || {
            let mut lines = Vec::new();
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let mut parts = line.split_whitespace();
                if parts.next() != Some("ACK") {
                    continue;
                }
                let nums: Vec<i64> = parts.filter_map(|p| p.parse().ok()).collect();
                if let [n, first, last] = nums[..] {
                    lines.push((n as u64, first, last));
                }
            }
            lines
        });
        // A random moment: not a timing assertion, only where the kill lands.
        std::thread::sleep(Duration::from_millis(150 + rng.below(500)));
        child.kill().expect("SIGKILL");
        child.wait().expect("reap");
        let lines = reader.join().expect("reader");
        for (n, first, last) in &lines {
            acked.insert(*first, (*last, *n));
            next_n = next_n.max(n + 1);
        }
        // The child may have appended (unacknowledged) batches after its last
        // ACK: their n values follow. Skip past them for the next round.
        next_n += 1000;

        let t = LogTablet::open(Arc::new(OsFs), dir.path(), config(), now_ms()).expect("reopen");
        let all = read_all(&t, 0);
        let mut expect = 0;
        for (base, last, got) in &all {
            assert_eq!(*base, expect, "round {round}: contiguous offsets");
            let n = u64::from_le_bytes(got[..8].try_into().expect("n prefix"));
            assert_eq!(got, &body(n), "round {round}: batch at {base} is intact");
            expect = last + 1;
        }
        for (first, (last, n)) in &acked {
            let found = all.iter().find(|(b, _, _)| b == first);
            assert_eq!(
                found.map(|(_, l, b)| (*l, b.clone())),
                Some((*last, body(*n))),
                "round {round}: acknowledged batch {n} at {first} lost"
            );
        }
        eprintln!(
            "round {round}: {} acknowledged this round, {} batches in the log",
            lines.len(),
            all.len()
        );
        assert!(
            !lines.is_empty() || round > 0,
            "the child acknowledged something"
        );
        t.close(now_ms()).expect("close");
    }
}
