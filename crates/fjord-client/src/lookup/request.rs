//! A Lookup or PrefixLookup request written straight from the keys its
//! callers left, as the wire has it:
//!
//! ```text
//! LookupRequest / PrefixLookupRequest { table_id = 1; repeated buckets_req = 2 }
//! PbLookupReqForBucket / PbPrefixLookupReqForBucket
//!     { optional partition_id = 1; bucket_id = 2; repeated bytes keys = 3 }
//! ```
//!
//! The two requests agree on every field the lookuper sets (it leaves the
//! optional rest unset), so one encoder serves both. Built from prost's
//! message structs, a request first gathered its keys into one buffer
//! and a reference-counted slice of it per key, whose count moved twice a
//! key: an uncontended atomic costs ~11 ns a lookup here
//! (`docs/bench-notes/kv.md`). Here the keys go from the callers' jobs
//! into the frame, once.

use bytes::{Buf, BufMut};
use prost::encoding::{self, DecodeContext, WireType};
use prost::{DecodeError, Message};

/// A bucket of the table: `(partition id, bucket id)`.
pub(super) type BucketKey = (Option<i64>, i32);

/// Something holding one encoded key (a caller's job; a plain buffer in
/// tests).
pub(super) trait KeyOf {
    /// The key's bytes, as they go on the wire.
    fn key(&self) -> &[u8];
}

/// One request's keys per bucket, encodable as a Lookup or PrefixLookup
/// request body.
pub(super) struct KeysRequest<'a, J> {
    table_id: i64,
    groups: &'a [(BucketKey, Vec<J>)],
}

impl<'a, J> KeysRequest<'a, J> {
    /// The request for `table_id` of `groups`' keys, bucket by bucket in
    /// their order.
    pub(super) fn new(table_id: i64, groups: &'a [(BucketKey, Vec<J>)]) -> Self {
        Self { table_id, groups }
    }
}

/// Bytes of one bucket's part, without its own key and length.
fn bucket_len<J: KeyOf>((partition, bucket): BucketKey, jobs: &[J]) -> usize {
    let partition = partition.map_or(0, |p| encoding::int64::encoded_len(1, &p));
    let keys: usize = jobs
        .iter()
        .map(|job| {
            let len = job.key().len();
            encoding::key_len(3) + encoding::encoded_len_varint(len as u64) + len
        })
        .sum();
    partition + encoding::int32::encoded_len(2, &bucket) + keys
}

impl<J: KeyOf + Sync> Message for KeysRequest<'_, J> {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        encoding::int64::encode(1, &self.table_id, buf);
        for &(bucket_key, ref jobs) in self.groups {
            encoding::encode_key(2, WireType::LengthDelimited, buf);
            encoding::encode_varint(bucket_len(bucket_key, jobs) as u64, buf);
            let (partition, bucket) = bucket_key;
            if let Some(partition) = partition {
                encoding::int64::encode(1, &partition, buf);
            }
            encoding::int32::encode(2, &bucket, buf);
            for job in jobs {
                let key = job.key();
                encoding::encode_key(3, WireType::LengthDelimited, buf);
                encoding::encode_varint(key.len() as u64, buf);
                buf.put_slice(key);
            }
        }
    }

    /// Never called: the client only ever encodes its requests. Skips the
    /// field, so a decode reads nothing into it.
    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        encoding::skip_field(wire_type, tag, buf, ctx)
    }

    fn encoded_len(&self) -> usize {
        let buckets: usize = self
            .groups
            .iter()
            .map(|&(bucket_key, ref jobs)| {
                let len = bucket_len(bucket_key, jobs);
                encoding::key_len(2) + encoding::encoded_len_varint(len as u64) + len
            })
            .sum();
        encoding::int64::encoded_len(1, &self.table_id) + buckets
    }

    fn clear(&mut self) {
        self.groups = &[];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use fjord_proto::messages as pb;
    use proptest::prelude::*;

    impl KeyOf for Vec<u8> {
        fn key(&self) -> &[u8] {
            self
        }
    }

    type Groups = Vec<(BucketKey, Vec<Vec<u8>>)>;

    /// Requests' groups: with and without partitions, negative ids, empty
    /// groups and keys, keys long enough for a two-byte length.
    fn groups() -> impl Strategy<Value = Groups> {
        let key = prop::collection::vec(any::<u8>(), 0..300);
        let group = (
            (prop::option::of(any::<i64>()), any::<i32>()),
            prop::collection::vec(key, 0..6),
        );
        prop::collection::vec(group, 0..5)
    }

    /// prost's encoding of the same Lookup and PrefixLookup messages.
    fn by_prost(table_id: i64, groups: &Groups) -> (Vec<u8>, Vec<u8>) {
        let keys = |keys: &Vec<Vec<u8>>| -> Vec<Bytes> {
            keys.iter().map(|k| Bytes::copy_from_slice(k)).collect()
        };
        let point = pb::LookupRequest {
            table_id,
            buckets_req: (groups.iter())
                .map(|((partition_id, bucket_id), k)| pb::PbLookupReqForBucket {
                    partition_id: *partition_id,
                    bucket_id: *bucket_id,
                    keys: keys(k),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let prefix = pb::PrefixLookupRequest {
            table_id,
            buckets_req: (groups.iter())
                .map(
                    |((partition_id, bucket_id), k)| pb::PbPrefixLookupReqForBucket {
                        partition_id: *partition_id,
                        bucket_id: *bucket_id,
                        keys: keys(k),
                        ..Default::default()
                    },
                )
                .collect(),
        };
        (point.encode_to_vec(), prefix.encode_to_vec())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        /// The request is byte for byte what prost writes for the same
        /// Lookup and PrefixLookup messages, and its length is the one it
        /// writes.
        #[test]
        fn a_request_encodes_as_prost_encodes_both_lookup_messages(
            table_id in any::<i64>(),
            groups in groups(),
        ) {
            let request = KeysRequest::new(table_id, &groups);
            let ours = request.encode_to_vec();
            prop_assert_eq!(ours.len(), request.encoded_len());
            let (point, prefix) = by_prost(table_id, &groups);
            prop_assert_eq!(&ours, &point, "Lookup");
            prop_assert_eq!(&ours, &prefix, "PrefixLookup");
        }
    }
}
