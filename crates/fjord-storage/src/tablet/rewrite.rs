//! Segment rewrites: a run of sealed segments is replaced, atomically and
//! crash-safely, by one new segment holding a subset of their batches at
//! their original offsets. This is how a primary-key changelog is compacted:
//! the server decides which rows survive and encodes them; this module
//! checks what it is given and makes the replacement atomic.
//!
//! ```text
//! begin_rewrite(base)   one rewrite per tablet at a time; temp file
//!                       <base>.rewrite.tmp
//! append(batches)       validated (CRC, size), offsets increasing from
//!                       base, gaps allowed, timestamps not decreasing;
//!                       written at the end of the temp file, indexed in
//!                       memory (no lock: appends and reads go on)
//! commit(end)           [end marker: a header-only batch at end - 1, unless
//!                        a batch already ends there]
//!                       fdatasync the temp file
//!                       -- maintenance lock --
//!                       writer snapshot covers `end` (else checkpoint)
//!                       the run [base, end) is still the planned segments
//!                       rename temp -> <base>-<end>.swap; fsync dir  <- COMMIT
//!                       delete the run's files (.log first); fsync dir
//!                       rename .swap -> <base>.log; fsync dir
//!                       write .index, .timeindex (fdatasync each); fsync dir
//!                       swap the segment list in memory; rewritten-end hint
//! open (recovery)       <base>.rewrite.tmp: deleted (*.tmp), the old
//!                       segments stand; <base>-<end>.swap: the rewrite
//!                       committed, so every segment file with a base in
//!                       [base, end) is deleted and the swap renamed to
//!                       <base>.log (roll forward), before segments are listed
//! ```
//!
//! The end marker keeps segments contiguous: a rewritten segment always
//! ends with a batch whose last offset is `end - 1`, so recovery still
//! detects a lost segment, and a read from an offset in the segment's
//! trailing gap still finds a batch. The marker is the header-only batch
//! (no records, writer id -1) that primary-key changelogs already carry when
//! a write changes nothing.
//!
//! Errors before the commit point leave the old segments in place and the
//! tablet online (the temp file is removed when the rewrite is dropped).
//! Any failure after it takes the tablet offline: the directory holds a
//! committed swap that only recovery finishes.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use fjord_format::log_batch::{
    write_batch, BatchHeader, LogBatches, NO_BATCH_SEQUENCE, NO_WRITER_ID,
};

use super::{lock, maybe_index, LogTablet};
use crate::config::SEGMENT_BYTES_LIMIT;
use crate::error::{Result, StorageError};
use crate::fs::{Fs, FsFile};
use crate::meta::{self, REWRITTEN_END_FILE};
use crate::segment::{
    self, file_stem, scan, IndexEntry, Segment, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX,
};

/// Suffix of a committed rewrite's new segment before it takes its place:
/// `<base>-<end>.swap` (both 20-digit offsets).
pub const SWAP_SUFFIX: &str = ".swap";
/// Suffix of a rewrite's temp file (`<base>.rewrite.tmp`); it ends with
/// `.tmp`, so open deletes a leftover one.
pub const REWRITE_TMP_SUFFIX: &str = ".rewrite.tmp";

/// The name of the swap file of a rewrite of `[base, end)`.
pub fn swap_file_name(base: i64, end: i64) -> String {
    format!("{}-{}{SWAP_SUFFIX}", file_stem(base), file_stem(end))
}

/// Parses a swap file name into the rewritten range `(base, end)`.
pub fn parse_swap_file_name(name: &str) -> Option<(i64, i64)> {
    let stem = name.strip_suffix(SWAP_SUFFIX)?;
    let (base, end) = stem.split_once('-')?;
    let parse = |s: &str| {
        (s.len() == 20 && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<i64>().ok())
            .flatten()
    };
    let (base, end) = (parse(base)?, parse(end)?);
    (base < end).then_some((base, end))
}

/// Finishes a rewrite that committed before a crash (recovery, before the
/// segments are listed): deletes every segment file whose base offset lies
/// in the swap's range, then renames the swap file to `<base>.log`, with a
/// directory fsync after each step. Idempotent: a crash inside it leaves
/// the swap file, and the next open runs it again.
pub(crate) fn finish_interrupted(fs: &dyn Fs, dir: &Path) -> Result<()> {
    let names = fs
        .list(dir)
        .map_err(|e| StorageError::io("listing tablet directory", dir, e))?;
    let mut swaps: Vec<(i64, i64, &String)> = names
        .iter()
        .filter_map(|n| parse_swap_file_name(n).map(|(b, e)| (b, e, n)))
        .collect();
    swaps.sort_unstable();
    for (base, end, name) in swaps {
        // Logs first, then indexes (an orphan index is removed on open
        // anyway), so no step leaves a log without its predecessor.
        for suffix in [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
            for old in &names {
                if segment::parse_file_name(old, suffix).is_some_and(|b| base <= b && b < end) {
                    let path = dir.join(old);
                    fs.remove_file(&path)
                        .map_err(|e| StorageError::io("deleting a rewritten segment", &path, e))?;
                }
            }
        }
        fs.sync_dir(dir)
            .map_err(|e| StorageError::io("syncing directory", dir, e))?;
        let from = dir.join(name);
        let to = dir.join(format!("{}{LOG_SUFFIX}", file_stem(base)));
        fs.rename(&from, &to)
            .map_err(|e| StorageError::io("renaming a rewritten segment", &from, e))?;
        fs.sync_dir(dir)
            .map_err(|e| StorageError::io("syncing directory", dir, e))?;
        tracing::warn!(
            tablet = %dir.display(),
            base_offset = base,
            end_offset = end,
            "finished a segment rewrite interrupted by a crash"
        );
    }
    Ok(())
}

/// Reads the rewritten-end hint (0 when missing). A damaged file is only a
/// lost hint (its value may be too low, never needed for correctness), so
/// it is logged and read as 0 rather than refusing to open.
pub(crate) fn read_rewritten_end(fs: &dyn Fs, dir: &Path) -> Result<i64> {
    let path = dir.join(REWRITTEN_END_FILE);
    match meta::read_small(fs, &path, meta::CHECKPOINT_BYTES as u64) {
        Ok(None) => Ok(0),
        Ok(Some(bytes)) => Ok(meta::decode_rewritten_end(&bytes).unwrap_or_else(|reason| {
            tracing::warn!(file = %path.display(), reason, "ignoring an unreadable rewritten-end checkpoint");
            0
        })),
        Err(StorageError::BadFile { .. }) => {
            tracing::warn!(file = %path.display(), "ignoring an oversized rewritten-end checkpoint");
            Ok(0)
        }
        Err(e) => Err(e),
    }
}

/// What a committed rewrite replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RewriteOutcome {
    /// Base offset of the new segment (and of the first replaced one).
    pub base_offset: i64,
    /// End of the rewritten range: the next segment's base offset.
    pub end_offset: i64,
    /// Segments replaced.
    pub segments_replaced: usize,
    /// Bytes of the replaced `.log` files.
    pub bytes_before: u64,
    /// Bytes of the new `.log` file.
    pub bytes_after: u64,
}

/// A position in a rewrite to go back to ([`SegmentRewrite::rewind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RewriteMark {
    len: u64,
    entries: usize,
    bytes_since_index: u64,
    next_offset: i64,
    last_ts: i64,
}

/// A new segment being written to replace a run of sealed segments; see
/// the module doc. Dropping it without [`SegmentRewrite::commit`] removes
/// its temp file and leaves the log as it was.
#[derive(Debug)]
pub struct SegmentRewrite<'t> {
    tablet: &'t LogTablet,
    base_offset: i64,
    /// The sealed segments from `base_offset` on when the rewrite began:
    /// commit checks the run it replaces is still exactly these.
    planned: Vec<Arc<Segment>>,
    /// The tablet's truncation count when the rewrite began.
    truncations: u64,
    tmp_path: PathBuf,
    file: Arc<dyn FsFile>,
    len: u64,
    entries: Vec<IndexEntry>,
    bytes_since_index: u64,
    /// Offsets below this are taken by written batches (or precede `base`).
    next_offset: i64,
    /// Commit timestamp of the last written batch (-1 if none).
    last_ts: i64,
    done: bool,
}

fn refused(reason: &'static str) -> StorageError {
    StorageError::RewriteRefused(reason)
}

impl LogTablet {
    /// Starts a rewrite of sealed segments beginning with the one whose base
    /// offset is `base_offset`; [`SegmentRewrite::commit`] says where it
    /// ends. Refused while another rewrite of this tablet is open, and when
    /// no sealed segment starts at `base_offset`.
    pub fn begin_rewrite(&self, base_offset: i64) -> Result<SegmentRewrite<'_>> {
        self.check_online()?;
        if self
            .rewriting
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(refused("another rewrite of this tablet is in progress"));
        }
        let started = (|| {
            let segments = self
                .segments
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            let truncations = self.truncations.load(Ordering::Acquire);
            let sealed = &segments[..segments.len() - 1];
            let Some(i) = sealed.iter().position(|s| s.base_offset == base_offset) else {
                return Err(refused(
                    "no sealed segment starts at the rewrite's base offset",
                ));
            };
            let tmp_path = self
                .dir
                .join(format!("{}{REWRITE_TMP_SUFFIX}", file_stem(base_offset)));
            let file = self
                .fs
                .open(&tmp_path, true)
                .and_then(|f| f.set_len(0).map(|()| f))
                .map_err(|e| StorageError::io("creating a rewritten segment", &tmp_path, e))?;
            Ok(SegmentRewrite {
                tablet: self,
                base_offset,
                planned: sealed[i..].to_vec(),
                truncations,
                tmp_path,
                file,
                len: 0,
                entries: Vec::new(),
                bytes_since_index: 0,
                next_offset: base_offset,
                last_ts: -1,
                done: false,
            })
        })();
        if started.is_err() {
            self.rewriting.store(false, Ordering::Release);
        }
        started
    }
}

impl SegmentRewrite<'_> {
    /// Base offset of the segment being written.
    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether no batch was written yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The offset after the last batch written (the base offset if none).
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }

    /// The current position, to [`SegmentRewrite::rewind`] to.
    pub fn mark(&self) -> RewriteMark {
        RewriteMark {
            len: self.len,
            entries: self.entries.len(),
            bytes_since_index: self.bytes_since_index,
            next_offset: self.next_offset,
            last_ts: self.last_ts,
        }
    }

    /// Forgets every batch appended after `mark`.
    pub fn rewind(&mut self, mark: RewriteMark) -> Result<()> {
        self.file
            .set_len(mark.len)
            .map_err(|e| StorageError::io("rewinding a rewritten segment", &self.tmp_path, e))?;
        self.len = mark.len;
        self.entries.truncate(mark.entries);
        self.bytes_since_index = mark.bytes_since_index;
        self.next_offset = mark.next_offset;
        self.last_ts = mark.last_ts;
        Ok(())
    }

    /// Appends whole batches (one or more), stored byte for byte: each must
    /// be valid (length, magic, CRC-32C), within `log.batch.max-size`, start
    /// after the previous one ends (gaps are allowed) and not be older than
    /// it. Nothing is written unless every batch passes. Refused when the
    /// segment would pass a segment's limits (2 GiB, `u32` relative
    /// offsets, `log.index.file-size` entries).
    pub fn append(&mut self, batches: &[u8]) -> Result<()> {
        let config = &self.tablet.config;
        let mut next = self.next_offset;
        let mut ts = self.last_ts;
        let mut len = self.len;
        let mut entries = self.entries.len();
        let mut since = self.bytes_since_index;
        let mut iter = LogBatches::new(batches);
        let mut count = 0usize;
        loop {
            let position = iter.position();
            let Some(item) = iter.next() else { break };
            let b = item.map_err(|source| StorageError::CorruptBatch { position, source })?;
            if b.size_in_bytes() > config.batch_bytes_max {
                return Err(StorageError::BatchTooLarge {
                    size: b.size_in_bytes(),
                    max: config.batch_bytes_max,
                });
            }
            if b.base_offset() < next {
                return Err(refused(
                    "a rewritten batch overlaps or precedes the previous one",
                ));
            }
            if b.commit_timestamp() < ts {
                return Err(refused("a rewritten batch is older than the previous one"));
            }
            if b.last_offset() - self.base_offset > i64::from(u32::MAX) {
                return Err(refused(
                    "a rewritten segment would span more than u32 offsets",
                ));
            }
            if len + b.size_in_bytes() as u64 > SEGMENT_BYTES_LIMIT {
                return Err(refused("a rewritten segment would pass 2 GiB"));
            }
            if entries == 0 || since >= u64::from(config.index_interval_bytes) {
                entries += 1;
                since = 0;
            }
            since += b.size_in_bytes() as u64;
            if entries > config.index_entries_max as usize {
                return Err(refused(
                    "a rewritten segment would pass log.index.file-size",
                ));
            }
            next = b.next_offset();
            ts = b.commit_timestamp();
            len += b.size_in_bytes() as u64;
            count += 1;
        }
        if !iter.remaining().is_empty() || count == 0 {
            return Err(StorageError::EmptyAppend { len: batches.len() });
        }
        let at = self.len;
        let used = (len - at) as usize;
        self.file
            .write_all_at(&batches[..used], at)
            .map_err(|e| StorageError::io("writing a rewritten segment", &self.tmp_path, e))?;
        let mut pos = at;
        for b in LogBatches::new(&batches[..used]).flatten() {
            maybe_index(
                &mut self.entries,
                &mut self.bytes_since_index,
                config.index_interval_bytes,
                IndexEntry {
                    relative_offset: (b.base_offset() - self.base_offset) as u32,
                    position: pos as u32,
                    timestamp: b.commit_timestamp(),
                },
                b.size_in_bytes(),
            );
            pos += b.size_in_bytes() as u64;
        }
        self.len = len;
        self.next_offset = next;
        self.last_ts = ts;
        Ok(())
    }

    /// Replaces the sealed segments covering `[base_offset, end_offset)`
    /// with the segment written, atomically: after a crash at any point the
    /// reopened tablet holds either those segments or the new one (see the
    /// module doc). `end_offset` must be the base offset of a later segment
    /// (the active one at most), the run must still be the segments seen
    /// when the rewrite began, undamaged, and every batch written must lie
    /// below `end_offset` and be no newer than the run's newest batch.
    /// Offsets are unchanged and the log start offset stays where it was.
    /// `now_ms` is the clock of a writer-state checkpoint it may take.
    pub fn commit(mut self, end_offset: i64, now_ms: i64) -> Result<RewriteOutcome> {
        let tablet = self.tablet;
        let Some(k) = self
            .planned
            .iter()
            .position(|s| s.published_end.load(Ordering::Acquire) == end_offset)
        else {
            return Err(refused(
                "the rewrite's end offset is not the end of a sealed segment",
            ));
        };
        let run: Vec<Arc<Segment>> = self.planned[..=k].to_vec();
        if run.iter().any(|s| s.damaged.is_some()) {
            return Err(refused("a damaged segment is never rewritten"));
        }
        if self.next_offset > end_offset {
            return Err(refused(
                "a rewritten batch lies beyond the rewrite's end offset",
            ));
        }
        let run_max_ts = run
            .iter()
            .map(|s| s.max_timestamp.load(Ordering::Acquire))
            .max()
            .unwrap_or(-1);
        if self.last_ts > run_max_ts {
            return Err(refused(
                "a rewritten batch is newer than the segments it replaces",
            ));
        }
        let bytes_before: u64 = run
            .iter()
            .map(|s| s.published_len.load(Ordering::Acquire))
            .sum();
        if self.next_offset < end_offset {
            let marker = end_marker(&run[k], end_offset, run_max_ts, tablet.config.leader_epoch)?;
            self.append(&marker)?;
        }
        self.file
            .sync_data()
            .map_err(|e| StorageError::io("syncing a rewritten segment", &self.tmp_path, e))?;

        let _m = lock(&tablet.maintenance);
        tablet.check_online()?;
        if tablet.truncations.load(Ordering::Acquire) != self.truncations {
            return Err(refused("the log was truncated meanwhile"));
        }
        if tablet.snapshot_offset.load(Ordering::Acquire) < end_offset {
            // Batches of the run lose their writer ids: the writer state
            // recovery starts from must already cover them.
            tablet.checkpoint_locked(now_ms)?;
        }
        let start = {
            let w = lock(&tablet.writer);
            let Some(i) = w
                .segments
                .iter()
                .position(|s| s.base_offset == self.base_offset)
            else {
                return Err(refused("the segments to rewrite are gone"));
            };
            let current = w.segments.get(i..=i + k);
            let unchanged = current
                .is_some_and(|c| c.iter().zip(&run).all(|(a, b)| Arc::ptr_eq(a, b)))
                && i + k + 1 < w.segments.len();
            if !unchanged {
                return Err(refused("the segments to rewrite changed meanwhile"));
            }
            i
        };

        // The commit point: once the swap file's name is durable, recovery
        // finishes the replacement.
        let dir = tablet.dir.clone();
        let fs = &*tablet.fs;
        let swap = dir.join(swap_file_name(self.base_offset, end_offset));
        fs.rename(&self.tmp_path, &swap)
            .map_err(|e| StorageError::io("renaming a rewritten segment", &self.tmp_path, e))?;
        self.done = true;
        if let Err(e) = fs.sync_dir(&dir) {
            return Err(tablet.go_offline(&dir, &e));
        }
        let log_path = dir.join(format!("{}{LOG_SUFFIX}", file_stem(self.base_offset)));
        let replaced = (|| -> std::result::Result<(), (PathBuf, std::io::Error)> {
            for seg in &run {
                for path in [
                    seg.log_path.clone(),
                    seg.index_path(),
                    seg.time_index_path(),
                ] {
                    if fs.exists(&path) {
                        fs.remove_file(&path).map_err(|e| (path.clone(), e))?;
                    }
                }
            }
            fs.sync_dir(&dir).map_err(|e| (dir.clone(), e))?;
            fs.rename(&swap, &log_path).map_err(|e| (swap.clone(), e))?;
            fs.sync_dir(&dir).map_err(|e| (dir.clone(), e))
        })();
        if let Err((path, e)) = replaced {
            return Err(tablet.go_offline(&path, &e));
        }
        let seg = Segment::with_file(log_path, Arc::clone(&self.file), self.base_offset);
        seg.index_mut().entries = std::mem::take(&mut self.entries);
        let indexed = seg.persist_index(fs, true).and_then(|()| {
            fs.sync_dir(&dir)
                .map_err(|e| StorageError::io("syncing directory", &dir, e))
        });
        if let Err(e) = indexed {
            tablet.offline.store(true, Ordering::Release);
            tracing::error!(tablet = %dir.display(), error = %e, "persisting a rewritten segment's index failed; tablet is offline");
            return Err(StorageError::Offline { dir });
        }
        seg.publish(self.len, end_offset);
        seg.max_timestamp.store(self.last_ts, Ordering::Release);
        {
            let mut w = lock(&tablet.writer);
            w.segments.splice(start..=start + k, [Arc::new(seg)]);
            tablet.publish_segments(&w);
        }
        let outcome = RewriteOutcome {
            base_offset: self.base_offset,
            end_offset,
            segments_replaced: k + 1,
            bytes_before,
            bytes_after: self.len,
        };
        tracing::info!(
            tablet = %dir.display(),
            base_offset = outcome.base_offset,
            end_offset,
            segments = outcome.segments_replaced,
            bytes_before,
            bytes_after = outcome.bytes_after,
            "rewrote segments"
        );
        // The hint moves only when the rewritten prefix grows from the log
        // start; it is written after the replacement is durable, so it is
        // never ahead of the truth.
        if self.base_offset <= tablet.rewritten_end() {
            tablet.rewritten_end.fetch_max(end_offset, Ordering::AcqRel);
            meta::write_atomic(
                fs,
                &dir,
                REWRITTEN_END_FILE,
                &meta::encode_rewritten_end(end_offset),
            )?;
        }
        Ok(outcome)
    }
}

impl Drop for SegmentRewrite<'_> {
    fn drop(&mut self) {
        if !self.done && self.tablet.fs.exists(&self.tmp_path) {
            if let Err(e) = self.tablet.fs.remove_file(&self.tmp_path) {
                tracing::warn!(file = %self.tmp_path.display(), error = %e, "could not remove an abandoned rewrite; open removes it");
            }
        }
        self.tablet.rewriting.store(false, Ordering::Release);
    }
}

/// The header-only batch that ends a rewritten segment at `end - 1`, with
/// the magic and schema id of the run's last batch (a reader resolves a
/// batch's schema by its id even when it holds no records).
fn end_marker(last_segment: &Segment, end: i64, ts: i64, leader_epoch: i32) -> Result<Vec<u8>> {
    let limit = last_segment.published_len.load(Ordering::Acquire);
    let from = last_segment
        .index()
        .entries
        .last()
        .map_or(0, |e| u64::from(e.position));
    let mut last = None;
    scan(
        &*last_segment.file,
        &last_segment.log_path,
        from,
        limit,
        |b, _| {
            last = Some((b.magic(), b.schema_id()));
            true
        },
    )?;
    let Some((magic, schema_id)) = last else {
        return Err(refused("the last segment to rewrite holds no batch"));
    };
    let header = BatchHeader {
        magic,
        base_offset: end - 1,
        commit_timestamp: ts,
        leader_epoch,
        schema_id,
        attributes: 0,
        last_offset_delta: 0,
        writer_id: NO_WRITER_ID,
        batch_sequence: NO_BATCH_SEQUENCE,
        record_count: 0,
    };
    let mut out = Vec::new();
    write_batch(&mut out, &header, &[], &[]).map_err(|source| StorageError::CorruptBatch {
        position: 0,
        source,
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swap_names_round_trip_and_reject_others() {
        let name = swap_file_name(12, 3456);
        assert_eq!(name, "00000000000000000012-00000000000000003456.swap");
        assert_eq!(parse_swap_file_name(&name), Some((12, 3456)));
        for bad in [
            "00000000000000000012.log",
            "00000000000000000012-00000000000000000012.swap",
            "0012-3456.swap",
            "00000000000000003456-00000000000000000012.swap",
            "00000000000000000012-00000000000000003456.swap.tmp",
        ] {
            assert_eq!(parse_swap_file_name(bad), None, "{bad}");
        }
    }
}
