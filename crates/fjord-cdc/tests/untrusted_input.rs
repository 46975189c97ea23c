//! Bad input never panics: arbitrary bytes as Debezium JSON lines and
//! arbitrary text as pipeline YAML give results or errors, nothing else.

use std::io::Cursor;

use fjord_cdc::config::{self, DebeziumJsonConfig, DecimalHandling};
use fjord_cdc::event::EventBatch;
use fjord_cdc::filter::TableFilter;
use fjord_cdc::position::SourcePosition;
use fjord_cdc::source::{debezium, StartOptions};
use proptest::prelude::*;

fn drain(input: Vec<u8>) {
    let config = DebeziumJsonConfig {
        path: None,
        tables: TableFilter::all(),
        decimal_handling: DecimalHandling::Precise,
    };
    let mut source = debezium::from_reader(Cursor::new(input), &config, StartOptions::default())
        .expect("in-memory source opens");
    let mut batch = EventBatch::default();
    // Each call consumes at least one line or ends, so this terminates.
    for _ in 0..1000 {
        batch.clear();
        match source.next_batch(&mut batch) {
            Ok(fjord_cdc::source::Poll::End) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// A valid envelope to mutate.
const ENVELOPE: &str = r#"{"schema":{"type":"struct","fields":[{"type":"struct","field":"after","optional":true,"fields":[{"type":"int32","field":"id","optional":false},{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"2","connect.decimal.precision":"40"},"field":"d","optional":true},{"type":"string","name":"io.debezium.time.ZonedTimestamp","field":"z","optional":true}]}]},"payload":{"before":null,"after":{"id":1,"d":"AQAAAAAAAAAAAAAAAAAAAAA=","z":"2024-01-01T00:00:00Z"},"source":{"db":"a","table":"b"},"op":"c"}}"#;

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic_the_debezium_source(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        drain(bytes);
    }

    #[test]
    fn mutated_envelopes_never_panic_the_debezium_source(at in 0usize..ENVELOPE.len(), byte in any::<u8>(), cut in 0usize..ENVELOPE.len()) {
        let mut bytes = ENVELOPE.as_bytes().to_vec();
        bytes[at] = byte;
        drain(bytes.clone());
        bytes.truncate(cut);
        drain(bytes);
    }

    #[test]
    fn arbitrary_yaml_never_panics(text in "[a-z:\\- \\n\\[\\]{}&*!|>'\"#.0-9]{0,200}") {
        let _ = config::parse(&text);
    }

    #[test]
    fn positions_round_trip(file in "[a-z0-9.-]{1,20}", pos in any::<u64>(), rows in any::<u64>()) {
        let p = SourcePosition::Binlog(fjord_cdc::position::BinlogPosition {
            file, pos, gtids: None, skip_events: 0, skip_rows: rows,
        });
        prop_assert_eq!(SourcePosition::decode(&p.encode().unwrap()).unwrap(), p);
    }
}

#[test]
fn the_unmutated_envelope_is_accepted() {
    let config = DebeziumJsonConfig {
        path: None,
        tables: TableFilter::all(),
        decimal_handling: DecimalHandling::Precise,
    };
    let mut source = debezium::from_reader(
        Cursor::new(ENVELOPE.as_bytes().to_vec()),
        &config,
        StartOptions::default(),
    )
    .unwrap();
    let mut batch = EventBatch::default();
    source.next_batch(&mut batch).unwrap();
    assert_eq!(batch.len(), 1);
}
