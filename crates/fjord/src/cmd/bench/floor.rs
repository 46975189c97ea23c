//! `fjord bench compress-floor`: the cost of compressing the workload's Arrow
//! buffers alone, buffer by buffer as the Arrow IPC body compression does, with
//! one reused codec context and output buffer. No writer can encode a batch
//! for less CPU than this, so it is the floor the native writer is held to.

use std::io::Write as _;

use anyhow::Context;
use arrow_buffer::Buffer;

use super::report::{Report, Stopwatch};
use super::workload::{for_each_buffer, generate, Compression, SchemaKind, BENCH_ZSTD_LEVEL};

/// Compresses every buffer of `rows` rows of `schema` (in batches of
/// `batch_rows`, the writer's batch size) with `compression`; `None` copies the
/// buffers into a body instead (the least any encoder does).
pub fn run(
    schema: SchemaKind,
    compression: Compression,
    rows: usize,
    batch_rows: usize,
) -> anyhow::Result<Report> {
    let generating = Stopwatch::start();
    let workload = generate(schema, rows, batch_rows);
    let mut buffers: Vec<Buffer> = Vec::new();
    for batch in &workload.batches {
        for column in batch.columns() {
            for_each_buffer(&column.to_data(), &mut |buffer| {
                if !buffer.is_empty() {
                    buffers.push(buffer.clone());
                }
            });
        }
    }
    let largest = buffers.iter().map(Buffer::len).max().unwrap_or(0);
    let mut out: Vec<u8> = Vec::with_capacity(zstd::zstd_safe::compress_bound(largest) + 64);
    let (_, generate_cpu) = generating.stop();

    let mut compressed_bytes = 0u64;
    let timed = Stopwatch::start();
    match compression {
        Compression::Zstd => {
            let mut codec =
                zstd::bulk::Compressor::new(BENCH_ZSTD_LEVEL).context("creating a ZSTD context")?;
            for buffer in &buffers {
                out.clear();
                codec
                    .compress_to_buffer(buffer.as_slice(), &mut out)
                    .context("ZSTD compression")?;
                compressed_bytes += out.len() as u64;
            }
        }
        Compression::Lz4 => {
            for buffer in &buffers {
                out.clear();
                let mut encoder = lz4_flex::frame::FrameEncoder::new(&mut out);
                encoder
                    .write_all(buffer.as_slice())
                    .context("LZ4 frame compression")?;
                encoder.finish().context("LZ4 frame compression")?;
                compressed_bytes += out.len() as u64;
            }
        }
        Compression::None => {
            for buffer in &buffers {
                out.clear();
                out.extend_from_slice(buffer.as_slice());
                compressed_bytes += std::hint::black_box(&out).len() as u64;
            }
        }
    }
    let (wall, cpu) = timed.stop();
    Ok(Report {
        op: "compress-floor",
        client: "compress-only",
        input: "arrow",
        schema: schema.name(),
        compression: compression.name(),
        records: workload.rows,
        arrow_bytes: workload.arrow_bytes,
        wall,
        cpu,
        generate_cpu,
        extra: vec![
            ("buffers", buffers.len() as f64),
            (
                "compressed_bytes_per_record",
                compressed_bytes as f64 / workload.rows.max(1) as f64,
            ),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zstd_floor_compresses_user_behavior_below_its_arrow_size() {
        let report = run(SchemaKind::UserBehavior, Compression::Zstd, 20_000, 5_000).unwrap();
        assert_eq!(report.records, 20_000);
        let per_record = report.extra[1].1;
        let arrow_per_record = report.arrow_bytes as f64 / 20_000.0;
        assert!(per_record > 0.0 && per_record < arrow_per_record);
    }

    #[test]
    fn none_floor_copies_every_arrow_byte() {
        let report = run(SchemaKind::Long, Compression::None, 10_000, 3_000).unwrap();
        assert_eq!(report.extra[1].1, 8.0);
        assert_eq!(report.arrow_bytes, 80_000);
    }
}
