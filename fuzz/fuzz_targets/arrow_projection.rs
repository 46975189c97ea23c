#![no_main]
//! Fuzzes column projection pushdown (`ProjectionPlan::project`) and the
//! ARROW batch decoder over untrusted bytes: they must never panic.
//!
//! Input: `selector` byte, then either raw batch bytes or — to reach deep
//! into valid batches without a corpus — 3-byte patches `(pos: u16 LE, xor)`
//! applied to a valid encoded batch. Whatever projection succeeds is decoded
//! with the projected schema, so the rewritten metadata is exercised too.

use std::sync::OnceLock;

use fjord_format::arrow_log::{decode_log_batch_from_slice, ArrowCompression, ArrowLogEncoder};
use fjord_format::arrow_schema::{to_arrow_schema, to_projected_arrow_schema};
use fjord_format::fixtures::{nested_batch, nested_schema};
use fjord_format::log_batch::{BatchHeader, LOG_MAGIC_V0, LOG_MAGIC_V1};
use fjord_format::projection::{Projected, ProjectionPlan};
use fjord_format::Schema;

const PROJECTIONS: [&[usize]; 5] = [&[0], &[1, 3], &[4], &[2, 3, 4], &[0, 1, 2, 3, 4]];

struct Fixture {
    schema: Schema,
    plans: Vec<ProjectionPlan>,
    batches: Vec<Vec<u8>>,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        // decode_log_batch turns panics inside arrow-rs into errors with
        // catch_unwind; libfuzzer-sys's hook would abort at panic time,
        // before that. Panics that escape our code still abort the run:
        // libfuzzer-sys aborts on any panic that reaches it.
        std::panic::set_hook(Box::new(|_| {}));
        let schema = nested_schema();
        let plans = PROJECTIONS
            .iter()
            .map(|cols| ProjectionPlan::new(&schema, 1, cols).expect("valid projection"))
            .collect();
        let batch = nested_batch(13);
        let mut batches = Vec::new();
        for compression in [
            ArrowCompression::None,
            ArrowCompression::Lz4Frame,
            ArrowCompression::default(),
        ] {
            for (magic, change_types) in [(LOG_MAGIC_V0, None), (LOG_MAGIC_V1, Some([1u8; 13]))] {
                let mut encoder =
                    ArrowLogEncoder::new(to_arrow_schema(&schema), compression).expect("encoder");
                let header = BatchHeader {
                    magic,
                    ..BatchHeader::append_only(1, 0)
                };
                let mut out = Vec::new();
                encoder
                    .encode(
                        &batch,
                        &header,
                        change_types.as_ref().map(|c| &c[..]),
                        &mut out,
                    )
                    .expect("encode");
                batches.push(out);
            }
        }
        Fixture {
            schema,
            plans,
            batches,
        }
    })
}

fn project_and_decode(fx: &Fixture, plan_index: usize, bytes: &[u8]) {
    let plan = &fx.plans[plan_index];
    let mut out = Vec::new();
    if let Ok(Projected::Written(range)) = plan.project(bytes, &mut out, usize::MAX) {
        if let Some(schema) = to_projected_arrow_schema(&fx.schema, plan.columns()) {
            let _ = decode_log_batch_from_slice(&out[range], schema);
        }
    }
    let _ = decode_log_batch_from_slice(bytes, to_arrow_schema(&fx.schema));
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let fx = fixture();
    let plan_index = selector as usize % fx.plans.len();
    if selector & 0x80 == 0 {
        project_and_decode(fx, plan_index, rest);
        return;
    }
    let mut batch = fx.batches[(selector as usize >> 3) % fx.batches.len()].clone();
    for patch in rest.chunks_exact(3) {
        let pos = u16::from_le_bytes([patch[0], patch[1]]) as usize % batch.len();
        batch[pos] ^= patch[2];
    }
    project_and_decode(fx, plan_index, &batch);
});
