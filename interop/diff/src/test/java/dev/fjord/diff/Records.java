package dev.fjord.diff;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.apache.fluss.compression.ArrowCompressionInfo;
import org.apache.fluss.memory.UnmanagedPagedOutputView;
import org.apache.fluss.metadata.KvFormat;
import org.apache.fluss.metadata.LogFormat;
import org.apache.fluss.metadata.Schema;
import org.apache.fluss.metadata.SchemaGetter;
import org.apache.fluss.metadata.SchemaInfo;
import org.apache.fluss.record.ChangeType;
import org.apache.fluss.record.DefaultValueRecordBatch;
import org.apache.fluss.record.KvRecordBatchBuilder;
import org.apache.fluss.record.LogRecord;
import org.apache.fluss.record.LogRecordBatch;
import org.apache.fluss.record.LogRecordReadContext;
import org.apache.fluss.record.MemoryLogRecords;
import org.apache.fluss.record.MemoryLogRecordsArrowBuilder;
import org.apache.fluss.record.MemoryLogRecordsIndexedBuilder;
import org.apache.fluss.record.ValueRecord;
import org.apache.fluss.record.ValueRecordReadContext;
import org.apache.fluss.row.BinaryRow;
import org.apache.fluss.row.GenericRow;
import org.apache.fluss.row.InternalRow;
import org.apache.fluss.row.arrow.ArrowWriter;
import org.apache.fluss.row.arrow.ArrowWriterPool;
import org.apache.fluss.row.encode.CompactedKeyEncoder;
import org.apache.fluss.row.encode.RowEncoder;
import org.apache.fluss.row.encode.ValueDecoder;
import org.apache.fluss.row.indexed.IndexedRow;
import org.apache.fluss.row.indexed.IndexedRowWriter;
import org.apache.fluss.shaded.arrow.org.apache.arrow.memory.RootAllocator;
import org.apache.fluss.types.DataType;
import org.apache.fluss.types.RowType;
import org.apache.fluss.utils.CloseableIterator;

/**
 * Record batches built with Fluss's own builders (the ones its Java client writes with), and
 * record batches described as text with Fluss's own readers: every header field but the commit
 * timestamp and the CRC (whose validity is checked instead), then each record's offset, change
 * type and values. Comparing descriptions, not bytes, lets two servers' changelog batches match
 * when their Arrow encoders compress or pad differently but carry the same rows.
 */
final class Records {
    private Records() {}

    private static final RootAllocator ALLOCATOR = new RootAllocator(Long.MAX_VALUE);
    private static final ArrowWriterPool WRITERS = new ArrowWriterPool(ALLOCATOR);

    /** An ARROW log batch of {@code rows} (append-only unless change types are given). */
    static byte[] arrow(
            RowType rowType,
            int schemaId,
            long writerId,
            int batchSequence,
            boolean compressed,
            List<Object[]> rows,
            ChangeType... changeTypes) {
        try {
            ArrowWriter writer =
                    WRITERS.getOrCreateWriter(
                            // the pool keys writers by table id: one per row type here
                            rowType.toString().hashCode(),
                            schemaId,
                            1 << 20,
                            rowType,
                            compressed
                                    ? ArrowCompressionInfo.DEFAULT_COMPRESSION
                                    : ArrowCompressionInfo.NO_COMPRESSION);
            MemoryLogRecordsArrowBuilder builder =
                    MemoryLogRecordsArrowBuilder.builder(
                            schemaId,
                            writer,
                            new UnmanagedPagedOutputView(64 * 1024),
                            changeTypes.length == 0);
            for (int i = 0; i < rows.size(); i++) {
                builder.append(
                        changeTypes.length == 0 ? ChangeType.APPEND_ONLY : changeTypes[i],
                        GenericRow.of(rows.get(i)));
            }
            builder.setWriterState(writerId, batchSequence);
            byte[] bytes = toBytes(builder.build());
            builder.close();
            return bytes;
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    /** An INDEXED log batch of append-only rows. */
    static byte[] indexed(
            RowType rowType, int schemaId, long writerId, int batchSequence, List<Object[]> rows) {
        try {
            MemoryLogRecordsIndexedBuilder builder =
                    MemoryLogRecordsIndexedBuilder.builder(
                            schemaId, 1 << 20, new UnmanagedPagedOutputView(64 * 1024), true);
            DataType[] types = rowType.getChildren().toArray(new DataType[0]);
            for (Object[] values : rows) {
                RowEncoder encoder = RowEncoder.create(KvFormat.INDEXED, types);
                encoder.startNewRow();
                for (int i = 0; i < values.length; i++) {
                    encoder.encodeField(i, values[i]);
                }
                builder.append(ChangeType.APPEND_ONLY, (IndexedRow) encoder.finishRow());
            }
            builder.setWriterState(writerId, batchSequence);
            byte[] bytes = toBytes(builder.build());
            builder.close();
            return bytes;
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    /** A KV batch; a row of {@code null} values except the key columns with {@code delete} = a delete. */
    static byte[] kv(
            RowType rowType,
            List<String> primaryKey,
            int schemaId,
            long writerId,
            int batchSequence,
            List<Object[]> upserts,
            List<Object[]> deletes) {
        try {
            KvRecordBatchBuilder builder =
                    KvRecordBatchBuilder.builder(
                            schemaId, 1 << 20, new UnmanagedPagedOutputView(64 * 1024), KvFormat.COMPACTED);
            CompactedKeyEncoder keys = CompactedKeyEncoder.createKeyEncoder(rowType, primaryKey);
            for (Object[] values : upserts) {
                builder.append(keys.encodeKey(GenericRow.of(values)), compacted(rowType, values));
            }
            for (Object[] values : deletes) {
                builder.append(keys.encodeKey(GenericRow.of(values)), null);
            }
            builder.setWriterState(writerId, batchSequence);
            byte[] bytes = toBytes(builder.build());
            builder.close();
            return bytes;
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    static BinaryRow compacted(RowType rowType, Object[] values) {
        RowEncoder encoder =
                RowEncoder.create(KvFormat.COMPACTED, rowType.getChildren().toArray(new DataType[0]));
        encoder.startNewRow();
        for (int i = 0; i < values.length; i++) {
            encoder.encodeField(i, values[i]);
        }
        return encoder.finishRow();
    }

    /** The encoded key of the columns {@code keyNames} of a full row. */
    static byte[] key(RowType rowType, List<String> keyNames, Object[] fullRow) {
        return CompactedKeyEncoder.createKeyEncoder(rowType, keyNames).encodeKey(GenericRow.of(fullRow));
    }

    private static byte[] toBytes(org.apache.fluss.record.bytesview.BytesView view) {
        var buf = view.getByteBuf();
        byte[] bytes = new byte[buf.readableBytes()];
        buf.getBytes(buf.readerIndex(), bytes);
        return bytes;
    }

    /** Describes log batches (FetchLog records, a log table's LimitScan records). */
    static List<String> describeLog(byte[] records, RowType rowType, int schemaId, LogFormat format, boolean projected) {
        List<String> out = new ArrayList<>();
        SchemaGetter schemas = getter(rowType, schemaId);
        try (LogRecordReadContext context =
                format == LogFormat.ARROW
                        ? LogRecordReadContext.createArrowReadContext(rowType, schemaId, schemas, projected)
                        : format == LogFormat.INDEXED
                                ? LogRecordReadContext.createIndexedReadContext(rowType, schemaId, schemas)
                                : LogRecordReadContext.createCompactedRowReadContext(rowType, schemaId)) {
            MemoryLogRecords log = MemoryLogRecords.pointToBytes(records);
            for (LogRecordBatch batch : log.batches()) {
                out.add(
                        String.format(
                                "batch base=%d last=%d next=%d magic=%d schemaId=%d writerId=%s seq=%d"
                                        + " leaderEpoch=%d count=%d crcValid=%s",
                                batch.baseLogOffset(),
                                batch.lastLogOffset(),
                                batch.nextLogOffset(),
                                batch.magic(),
                                batch.schemaId(),
                                batch.writerId() == -1 ? "-1" : "<set>",
                                batch.batchSequence(),
                                batch.leaderEpoch(),
                                batch.getRecordCount(),
                                batch.isValid()));
                try (CloseableIterator<LogRecord> it = batch.records(context)) {
                    while (it.hasNext()) {
                        LogRecord r = it.next();
                        out.add("  " + r.logOffset() + " " + r.getChangeType().shortString() + " " + row(r.getRow(), rowType));
                    }
                }
            }
        } catch (Exception e) {
            out.add("undecodable: " + e);
        }
        return out;
    }

    /** Describes a DefaultValueRecordBatch (a primary-key table's LimitScan records). */
    static List<String> describeValues(byte[] records, RowType rowType, int schemaId) {
        List<String> out = new ArrayList<>();
        try {
            DefaultValueRecordBatch batch = DefaultValueRecordBatch.pointToBytes(records);
            out.add("value batch count=" + batch.getRecordCount() + " size=" + batch.sizeInBytes());
            ValueRecordReadContext context =
                    ValueRecordReadContext.createReadContext(getter(rowType, schemaId), KvFormat.COMPACTED);
            for (ValueRecord r : batch.records(context)) {
                out.add("  schemaId=" + r.schemaId() + " " + row(r.getRow(), rowType));
            }
        } catch (Exception e) {
            out.add("undecodable: " + e);
        }
        return out;
    }

    static String row(InternalRow row, RowType rowType) {
        StringBuilder s = new StringBuilder("(");
        for (int i = 0; i < row.getFieldCount(); i++) {
            if (i > 0) {
                s.append(", ");
            }
            Object v = InternalRow.createFieldGetter(rowType.getTypeAt(i), i).getFieldOrNull(row);
            s.append(v);
        }
        return s.append(')').toString();
    }

    static SchemaGetter getter(RowType rowType, int schemaId) {
        Schema.Builder b = Schema.newBuilder();
        for (int i = 0; i < rowType.getFieldCount(); i++) {
            b.column(rowType.getFieldNames().get(i), rowType.getTypeAt(i));
        }
        SchemaInfo info = new SchemaInfo(b.build(), schemaId);
        return new SchemaGetter() {
            @Override
            public Schema getSchema(int id) {
                return info.getSchema();
            }

            @Override
            public CompletableFuture<SchemaInfo> getSchemaInfoAsync(int id) {
                return CompletableFuture.completedFuture(info);
            }

            @Override
            public SchemaInfo getLatestSchemaInfo() {
                return info;
            }

            @Override
            public void release() {}
        };
    }
}
