//! Column projection pushdown on stored ARROW log batches, with Fluss's
//! `FileLogProjection` semantics and without decoding any data.
//!
//! For a batch whose Arrow IPC message has field nodes and buffers for every
//! column of the table schema (of the batch's schema id), the projected
//! batch keeps only the selected columns' nodes and buffers:
//!
//! ```text
//! header      copied; Length updated; StatisticsLength set to 0 (V1+, the
//!             statistics are dropped as Fluss drops them); CRC recomputed
//! change types copied unchanged (non-append-only batches)
//! IPC message new flatbuffer: same row count, the kept field nodes, the kept
//!             buffers re-laid at 8-byte aligned offsets, the same body
//!             compression, the new body length
//! body        the kept buffers' bytes (compressed or not) copied verbatim,
//!             each zero-padded to 8
//! ```
//!
//! Projected field indexes refer to the columns of the schema of the batch's
//! schema id; like Fluss they must be ascending, unique, in range and not
//! empty. The per-(schema id, projection) work — flattening nested fields
//! into node/buffer selections — happens once in [`ProjectionPlan::new`];
//! per batch, [`ProjectionPlan::project`] only reads the flatbuffer, writes
//! a small new one, copies the kept buffers and recomputes the CRC.

use std::ops::Range;

use arrow_ipc::{
    BodyCompressionBuilder, FieldNode, MessageBuilder, MessageHeader, RecordBatchBuilder,
};
use flatbuffers::FlatBufferBuilder;

use crate::arrow_schema::to_arrow_field;
use crate::ipc::{
    align8, flatten_nodes, parse_batch_message, IpcMessageError, CONTINUATION_MARKER,
    IPC_PREFIX_LEN,
};
use crate::log_batch::{self, LogBatchError, LENGTH_OFFSET, LOG_OVERHEAD};
use crate::records::{split_batch, SplitError};
use crate::schema::Schema;

/// Initial capacity of the flatbuffer builder for the projected metadata:
/// enough for a few dozen columns without regrowth.
const METADATA_CAPACITY_BYTES: usize = 1024;

/// Why a projection cannot be planned or applied.
#[derive(Debug, thiserror::Error)]
pub enum ProjectionError {
    /// The projection itself is invalid (Fluss `InvalidColumnProjectionException`):
    /// empty, unsorted, duplicated or out of range.
    #[error("invalid column projection: {0}")]
    InvalidProjection(String),
    /// The batch header is malformed.
    #[error(transparent)]
    Batch(#[from] LogBatchError),
    /// The batch's records are not an Arrow IPC RecordBatch message.
    #[error(transparent)]
    Ipc(#[from] IpcMessageError),
    /// The batch was written with a schema id other than the plan's.
    #[error("batch has schema id {batch}, projection plan is for schema id {plan}")]
    SchemaIdMismatch {
        /// Schema id in the batch header.
        batch: i16,
        /// Schema id the plan was built for.
        plan: i16,
    },
    /// The Arrow message's layout does not match the schema of its schema id.
    #[error("Arrow message has {found_nodes} field nodes and {found_buffers} buffers, but the table schema needs {expected_nodes} and {expected_buffers}")]
    LayoutMismatch {
        /// Field nodes the schema implies.
        expected_nodes: usize,
        /// Field nodes in the message.
        found_nodes: usize,
        /// Buffers the schema implies.
        expected_buffers: usize,
        /// Buffers in the message.
        found_buffers: usize,
    },
    /// The records section is shorter than its change-type vector.
    #[error("records section of {len} bytes cannot hold {records} change types")]
    ChangeTypesTruncated {
        /// Records section length.
        len: usize,
        /// Record count from the header.
        records: usize,
    },
}

/// Result of projecting one batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Projected {
    /// The projected batch was appended to the output at this range.
    Written(Range<usize>),
    /// The projected batch would be `size` bytes, more than the limit;
    /// nothing was written (Fluss stops filling the fetch response here).
    ExceedsLimit {
        /// Size the projected batch would have.
        size: usize,
    },
}

impl From<SplitError> for ProjectionError {
    fn from(e: SplitError) -> Self {
        match e {
            SplitError::Batch(e) => Self::Batch(e),
            SplitError::ChangeTypesTruncated { len, records } => {
                Self::ChangeTypesTruncated { len, records }
            }
        }
    }
}

/// The reusable plan of one projection over one schema (one schema id):
/// which flattened field nodes and buffers of the Arrow message to keep.
#[derive(Debug, Clone)]
pub struct ProjectionPlan {
    schema_id: i16,
    columns: Vec<usize>,
    kept_nodes: Vec<u32>,
    kept_buffers: Vec<u32>,
    node_count: usize,
    buffer_count: usize,
}

impl ProjectionPlan {
    /// Plans projecting the given columns (indexes into `schema`, the schema
    /// of `schema_id`) — ascending, unique, non-empty, in range.
    pub fn new(
        schema: &Schema,
        schema_id: i16,
        columns: &[usize],
    ) -> Result<Self, ProjectionError> {
        let all = schema.columns();
        if columns.is_empty() {
            return Err(ProjectionError::InvalidProjection(
                "empty projection is not supported; project at least one column".into(),
            ));
        }
        for pair in columns.windows(2) {
            if pair[1] == pair[0] {
                return Err(ProjectionError::InvalidProjection(format!(
                    "projected fields {columns:?} contain a duplicate"
                )));
            }
            if pair[1] < pair[0] {
                return Err(ProjectionError::InvalidProjection(format!(
                    "projected fields {columns:?} must be in field order"
                )));
            }
        }
        if let Some(&bad) = columns.iter().find(|&&c| c >= all.len()) {
            return Err(ProjectionError::InvalidProjection(format!(
                "projected field {bad} is out of bounds for a schema with {} fields",
                all.len()
            )));
        }
        let mut flat = Vec::new();
        for (index, column) in all.iter().enumerate() {
            let keep = columns.binary_search(&index).is_ok();
            let field = to_arrow_field(&column.name, &column.data_type);
            flatten_nodes(field.data_type(), keep, &mut flat);
        }
        let mut kept_nodes = Vec::new();
        let mut kept_buffers = Vec::new();
        let mut buffer_index = 0u32;
        for (node_index, &(keep, _, buffers)) in flat.iter().enumerate() {
            if keep {
                kept_nodes.push(node_index as u32);
                kept_buffers.extend(buffer_index..buffer_index + buffers as u32);
            }
            buffer_index += buffers as u32;
        }
        Ok(Self {
            schema_id,
            columns: columns.to_vec(),
            kept_nodes,
            kept_buffers,
            node_count: flat.len(),
            buffer_count: buffer_index as usize,
        })
    }

    /// [`ProjectionPlan::new`] for the `projected_fields` of a FetchLog
    /// request (protobuf `int32`s); a negative index is an invalid projection.
    pub fn from_projected_fields(
        schema: &Schema,
        schema_id: i16,
        projected_fields: &[i32],
    ) -> Result<Self, ProjectionError> {
        let columns = projected_fields
            .iter()
            .map(|&f| {
                usize::try_from(f).map_err(|_| {
                    ProjectionError::InvalidProjection(format!("projected field {f} is negative"))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Self::new(schema, schema_id, &columns)
    }

    /// The schema id this plan applies to.
    pub fn schema_id(&self) -> i16 {
        self.schema_id
    }

    /// The projected column indexes.
    pub fn columns(&self) -> &[usize] {
        &self.columns
    }

    /// Appends the projection of one whole log batch (`batch` holds exactly
    /// one batch) to `out`, unless the result would exceed `max_bytes`.
    ///
    /// Batches without records (header only) are copied unchanged, as Fluss
    /// does, so offsets still advance. The source CRC is not checked (the
    /// batch was validated when it was appended); the output's CRC is valid.
    /// On error `out` is unchanged.
    pub fn project(
        &self,
        batch: &[u8],
        out: &mut Vec<u8>,
        max_bytes: usize,
    ) -> Result<Projected, ProjectionError> {
        let parts = split_batch(batch)?;
        let (layout, size) = (parts.layout, parts.size);
        let batch = &batch[..size];
        if size == layout.header_size {
            return Ok(copy_whole(batch, out, max_bytes));
        }
        if parts.schema_id != self.schema_id {
            return Err(ProjectionError::SchemaIdMismatch {
                batch: parts.schema_id,
                plan: self.schema_id,
            });
        }
        let (records_start, ipc_start) = (parts.records_start, parts.ipc_start);
        let change_types_len = ipc_start - records_start;
        let ipc = &batch[ipc_start..];
        let parsed = parse_batch_message(ipc)?;
        let nodes = parsed
            .batch
            .nodes()
            .ok_or(IpcMessageError::MissingVector("nodes"))?;
        let buffers = parsed
            .batch
            .buffers()
            .ok_or(IpcMessageError::MissingVector("buffers"))?;
        if nodes.len() != self.node_count || buffers.len() != self.buffer_count {
            return Err(ProjectionError::LayoutMismatch {
                expected_nodes: self.node_count,
                found_nodes: nodes.len(),
                expected_buffers: self.buffer_count,
                found_buffers: buffers.len(),
            });
        }

        // New metadata: kept nodes, kept buffers re-laid 8-aligned.
        let mut fbb = FlatBufferBuilder::with_capacity(METADATA_CAPACITY_BYTES);
        let mut body_len = 0usize;
        fbb.start_vector::<arrow_ipc::Buffer>(self.kept_buffers.len());
        // Flatbuffer vectors are built back to front.
        let mut offsets_rev = Vec::with_capacity(self.kept_buffers.len());
        for &i in &self.kept_buffers {
            let length = buffers.get(i as usize).length() as usize;
            offsets_rev.push((body_len, length));
            body_len += align8(length);
        }
        for &(offset, length) in offsets_rev.iter().rev() {
            fbb.push(arrow_ipc::Buffer::new(offset as i64, length as i64));
        }
        let buffers_fb = fbb.end_vector(self.kept_buffers.len());
        fbb.start_vector::<FieldNode>(self.kept_nodes.len());
        for &i in self.kept_nodes.iter().rev() {
            let node = nodes.get(i as usize);
            fbb.push(FieldNode::new(node.length(), node.null_count()));
        }
        let nodes_fb = fbb.end_vector(self.kept_nodes.len());
        let compression = parsed.batch.compression().map(|c| {
            let mut b = BodyCompressionBuilder::new(&mut fbb);
            b.add_codec(c.codec());
            b.add_method(c.method());
            b.finish()
        });
        let mut rb = RecordBatchBuilder::new(&mut fbb);
        rb.add_length(parsed.batch.length());
        rb.add_nodes(nodes_fb);
        rb.add_buffers(buffers_fb);
        if let Some(c) = compression {
            rb.add_compression(c);
        }
        let rb = rb.finish();
        let mut mb = MessageBuilder::new(&mut fbb);
        mb.add_version(parsed.message.version());
        mb.add_header_type(MessageHeader::RecordBatch);
        mb.add_header(rb.as_union_value());
        mb.add_bodyLength(body_len as i64);
        let message = mb.finish();
        fbb.finish(message, None);
        let metadata = fbb.finished_data();
        let metadata_padded = align8(IPC_PREFIX_LEN + metadata.len()) - IPC_PREFIX_LEN;

        let new_size =
            layout.header_size + change_types_len + IPC_PREFIX_LEN + metadata_padded + body_len;
        if new_size > max_bytes {
            return Ok(Projected::ExceedsLimit { size: new_size });
        }
        let new_length = i32::try_from(new_size - LOG_OVERHEAD)
            .map_err(|_| LogBatchError::TooLarge { size: new_size })?;

        let start = out.len();
        out.reserve(new_size);
        out.extend_from_slice(&batch[..layout.header_size]);
        out.extend_from_slice(&batch[records_start..ipc_start]);
        out.extend_from_slice(&CONTINUATION_MARKER);
        out.extend_from_slice(&(metadata_padded as i32).to_le_bytes());
        out.extend_from_slice(metadata);
        out.resize(out.len() + (metadata_padded - metadata.len()), 0);
        let body = &ipc[parsed.body_start..parsed.body_start + parsed.body_len];
        for &i in &self.kept_buffers {
            let b = buffers.get(i as usize);
            // parse_batch_message checked every buffer lies inside the body.
            let from = b.offset() as usize;
            let length = b.length() as usize;
            out.extend_from_slice(&body[from..from + length]);
            out.resize(out.len() + (align8(length) - length), 0);
        }
        debug_assert_eq!(out.len() - start, new_size);

        let written = &mut out[start..];
        written[LENGTH_OFFSET..LENGTH_OFFSET + 4].copy_from_slice(&new_length.to_le_bytes());
        if let Some(at) = layout.statistics_length {
            written[at..at + 4].copy_from_slice(&0i32.to_le_bytes());
        }
        let crc = crc32c::crc32c(&written[layout.schema_id..]);
        written[layout.crc..layout.crc + 4].copy_from_slice(&crc.to_le_bytes());
        Ok(Projected::Written(start..out.len()))
    }
}

/// What [`project_batches`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProjectedRun {
    /// Source bytes consumed: whole batches, projected or passed through.
    pub source_bytes: usize,
    /// Batches written to the output.
    pub batches: usize,
    /// Bytes appended to the output.
    pub output_bytes: usize,
}

/// Projects consecutive batches of a log read (Fluss
/// `FileLogProjection.project`): stops at a partial trailing batch or at the
/// first projected batch that would push the output past `max_bytes`; with
/// `min_one`, the first batch is written whatever its size (Fluss's
/// `minOneMessage`, so a consumer always progresses). `plan_for` is asked
/// for the plan of a schema id only when the id changes from one batch to
/// the next. On error `out` is restored to its length on entry.
pub fn project_batches<F>(
    records: &[u8],
    mut plan_for: F,
    out: &mut Vec<u8>,
    max_bytes: usize,
    min_one: bool,
) -> Result<ProjectedRun, ProjectionError>
where
    F: FnMut(i16) -> Result<std::sync::Arc<ProjectionPlan>, ProjectionError>,
{
    let start = out.len();
    let mut run = ProjectedRun::default();
    let mut current: Option<std::sync::Arc<ProjectionPlan>> = None;
    let result = (|| {
        while run.source_bytes < records.len() {
            let rest = &records[run.source_bytes..];
            let Some((size, magic)) = log_batch::peek_size_and_magic(rest)? else {
                break;
            };
            if size > rest.len() {
                break;
            }
            let layout = log_batch::layout(magic).ok_or(LogBatchError::UnknownMagic { magic })?;
            if size < layout.header_size {
                return Err(LogBatchError::ShorterThanHeader {
                    magic,
                    size,
                    header_size: layout.header_size,
                }
                .into());
            }
            let batch = &rest[..size];
            let budget = if min_one && run.batches == 0 {
                usize::MAX
            } else {
                max_bytes.saturating_sub(run.output_bytes)
            };
            if size == layout.header_size {
                // Header-only batches carry no columns: passed through, no plan needed.
                match copy_whole(batch, out, budget) {
                    Projected::Written(range) => {
                        run.output_bytes += range.len();
                        run.batches += 1;
                        run.source_bytes += size;
                        continue;
                    }
                    Projected::ExceedsLimit { .. } => break,
                }
            }
            let schema_id =
                i16::from_le_bytes([batch[layout.schema_id], batch[layout.schema_id + 1]]);
            let plan = match &current {
                Some(plan) if plan.schema_id() == schema_id => plan.clone(),
                _ => {
                    let plan = plan_for(schema_id)?;
                    current = Some(plan.clone());
                    plan
                }
            };
            match plan.project(batch, out, budget)? {
                Projected::Written(range) => {
                    run.output_bytes += range.len();
                    run.batches += 1;
                    run.source_bytes += size;
                }
                Projected::ExceedsLimit { .. } => break,
            }
        }
        Ok(())
    })();
    match result {
        Ok(()) => Ok(run),
        Err(e) => {
            out.truncate(start);
            Err(e)
        }
    }
}

fn copy_whole(batch: &[u8], out: &mut Vec<u8>, max_bytes: usize) -> Projected {
    if batch.len() > max_bytes {
        return Projected::ExceedsLimit { size: batch.len() };
    }
    let start = out.len();
    out.extend_from_slice(batch);
    Projected::Written(start..out.len())
}
