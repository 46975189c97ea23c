//! A read that leaves batches out by their header and statistics block
//! alone (Fluss 1.0's filtered FetchLog): the bodies of the batches left
//! out are never read, so a selective scan costs a few small reads per
//! batch instead of copying every byte of the log.

use bytes::Bytes;
use fjord_format::log_batch::{self, peek_size_and_magic, Layout, BASE_OFFSET_OFFSET};

use super::{LogTablet, ReadStart};
use crate::error::{Result, StorageError};

/// Most bytes of a statistics block read to judge a batch; a longer block
/// (a corrupt length, or thousands of columns) keeps the batch unjudged.
pub const STATISTICS_BYTES_MAX: usize = 64 * 1024;

/// What [`LogTablet::read_filtered`] returns.
#[derive(Debug, Clone)]
pub struct FilteredRead {
    /// The batches kept, whole and in order, as stored (those left out in
    /// between are missing).
    pub records: Bytes,
    /// High watermark when the read started.
    pub high_watermark: i64,
    /// Log start offset when the read started.
    pub log_start_offset: i64,
    /// The offset after the last batch judged, kept or left out; `None`
    /// when no batch was judged.
    pub end_offset: Option<i64>,
    /// Bytes of the batches left out (0: every batch judged was kept).
    pub left_out_bytes: usize,
}

impl LogTablet {
    /// Reads from the batch holding `from_offset` as [`LogTablet::read`]
    /// does (whole batches, below the high watermark, within one segment),
    /// but first judges each batch by its header and statistics block:
    /// `leave_out(layout, prefix)` sees the header and the statistics block
    /// (not the records), and the batches it leaves out are skipped without
    /// reading their bodies. Stops once about `max_bytes` of kept batches
    /// are found (at least one), once `scan_bytes_max` bytes of batches were
    /// left out, or at the segment's end.
    pub fn read_filtered(
        &self,
        from_offset: i64,
        max_bytes: usize,
        scan_bytes_max: usize,
        leave_out: &mut dyn FnMut(&Layout, &[u8]) -> bool,
    ) -> Result<FilteredRead> {
        let start = match self.read_start(from_offset)? {
            Ok(start) => start,
            Err(empty) => {
                return Ok(FilteredRead {
                    records: empty.records,
                    high_watermark: empty.high_watermark,
                    log_start_offset: empty.log_start_offset,
                    end_offset: None,
                    left_out_bytes: 0,
                })
            }
        };
        let ReadStart {
            seg,
            mut pos,
            limit,
            high_watermark,
            log_start,
            ..
        } = start;
        let io = |e| StorageError::io("reading segment", &seg.log_path, e);
        let mut kept: Vec<(u64, usize)> = Vec::new();
        let mut kept_bytes = 0usize;
        let mut skipped_bytes = 0usize;
        let mut end_offset = None;
        let mut prefix = Vec::new();
        loop {
            if pos + log_batch::MIN_HEADER_SIZE as u64 > limit {
                break;
            }
            prefix.resize(log_batch::MIN_HEADER_SIZE, 0);
            seg.file.read_exact_at(&mut prefix, pos).map_err(io)?;
            let (size, magic) = match peek_size_and_magic(&prefix) {
                Ok(Some(v)) => v,
                _ => break,
            };
            let Some(layout) = log_batch::layout(magic) else {
                break;
            };
            let base = i64::from_le_bytes(
                prefix[BASE_OFFSET_OFFSET..BASE_OFFSET_OFFSET + 8]
                    .try_into()
                    .unwrap_or([0; 8]),
            );
            // A batch published past the watermark taken above, or one
            // not whole in what readers may see, ends the read.
            if base >= high_watermark || size < layout.header_size || pos + size as u64 > limit {
                break;
            }
            if !kept.is_empty() && kept_bytes + size > max_bytes {
                break;
            }
            // The header, then the statistics block after it (V1 and later).
            let mut judged = layout.header_size;
            if let Some(at) = layout.statistics_length {
                prefix.resize(layout.header_size, 0);
                seg.file.read_exact_at(&mut prefix, pos).map_err(io)?;
                let length = i32::from_le_bytes(prefix[at..at + 4].try_into().unwrap_or([0; 4]));
                if let Ok(length) = usize::try_from(length) {
                    if length <= STATISTICS_BYTES_MAX && layout.header_size + length <= size {
                        judged = layout.header_size + length;
                    }
                }
            }
            prefix.resize(judged, 0);
            seg.file.read_exact_at(&mut prefix, pos).map_err(io)?;
            let at = layout.last_offset_delta;
            let delta = i32::from_le_bytes(prefix[at..at + 4].try_into().unwrap_or([0; 4]));
            end_offset = Some(base.saturating_add(i64::from(delta)).saturating_add(1));
            if leave_out(layout, &prefix) {
                skipped_bytes += size;
            } else {
                match kept.last_mut() {
                    Some((at, len)) if *at + *len as u64 == pos => *len += size,
                    _ => kept.push((pos, size)),
                }
                kept_bytes += size;
            }
            pos += size as u64;
            if skipped_bytes >= scan_bytes_max {
                break;
            }
        }
        let mut buf = vec![0u8; kept_bytes];
        let mut at = 0;
        for (pos, len) in kept {
            seg.file
                .read_exact_at(&mut buf[at..at + len], pos)
                .map_err(io)?;
            at += len;
        }
        Ok(FilteredRead {
            records: Bytes::from(buf),
            high_watermark,
            log_start_offset: log_start,
            end_offset,
            left_out_bytes: skipped_bytes,
        })
    }
}
