package dev.fjord.diff;

import java.util.List;
import java.util.regex.Pattern;

/**
 * The differences between Fluss 0.9.1 and Fjord that are deliberate, each with its reason. A
 * difference is matched by a regular expression on the exchange's label and one on the
 * difference's text ({@code path: fluss=... fjord=...}).
 */
final class Exceptions {
    private Exceptions() {}

    private record Rule(Pattern label, Pattern diff, String reason) {}

    private static final String ONE_PORT =
            "Fjord serves the coordinator's and the tablet server's APIs on one port, so each role"
                    + " advertises both sets; the clients ask each role only for its own APIs";

    private static final List<Rule> RULES = List.of(
            rule("^ApiVersions", "^/serverType: fluss=\\d+ fjord=<absent>",
                    "server_type is left out while one process plays both roles on one port: when"
                            + " present, the Java client and fluss-rs refuse a connection whose type is"
                            + " not the role they opened it for (interop/CLIENT_HANDSHAKES.md, point 3)"),
            rule("^ApiVersions \\(coordinator\\)",
                    "^/apiVersions/(1014|1015|1016|1017|1021|1026|1033|1034|1059): fluss=<absent>", ONE_PORT),
            rule("^ApiVersions (\\(tablet server\\)|after errors)",
                    "^/apiVersions/(1001|1002|1005|1006|1036|1037|1044): fluss=<absent>", ONE_PORT),
            rule("^ApiVersions", "^/apiVersions/1061: fluss=<absent> fjord=0\\.\\.0",
                    "SCAN_KV exists from Fluss 1.0 on (not in 0.9.1); Fjord serves it for fluss-rs 1.0"
                            + " and the 1.0 Java client's KvBatchScanner"),
            rule("^ApiVersions", "^/apiVersions/1016: fluss=0\\.\\.1 fjord=0\\.\\.3",
                    "PutKv v2 (STORAGE_BACKPRESSURE understood) and v3 (historical-partition fields) are"
                            + " Fluss 1.0's; fluss-rs 1.0.0 negotiates them; v0/v1 requests are answered"
                            + " as Fluss 0.9.1 answers them"),
            rule("^ApiVersions",
                    "^/apiVersions/(1013|1018|1019|1020|1022|1027|1028|1029|1030|1031|1052): fluss=0\\.\\.0 fjord=<absent>",
                    "server-to-server APIs of a Fluss cluster (metadata push, leader/ISR, snapshot and"
                            + " remote-log commits); Fjord is one process"),
            rule("^ApiVersions", "^/apiVersions/(1032|1042): fluss=0\\.\\.0 fjord=<absent>",
                    "lake tiering is not implemented yet (PRODUCT.md milestone 5)"),
            rule("^ApiVersions", "^/apiVersions/(1038|1039|1040|1041): fluss=0\\.\\.0 fjord=<absent>",
                    "authentication and ACLs are not implemented yet (PRODUCT.md milestone 4)"),
            rule("^ApiVersions",
                    "^/apiVersions/(1043|1045|1046|1047|1048|1049|1050|1051): fluss=0\\.\\.0 fjord=<absent>",
                    "cluster administration (controlled shutdown, cluster configs, server tags,"
                            + " rebalance) has no meaning on a single node yet (milestone 4)"),
            rule("^ApiVersions", "^/apiVersions/(1024|1056|1057|1058): fluss=0\\.\\.0 fjord=<absent>",
                    "Fjord reports no KV snapshot (GetLatestKvSnapshots answers every bucket without one,"
                            + " as Fluss does before its first snapshot), so there are no snapshot files to"
                            + " describe or lease; the Flink source reads the changelog from offset 0 and"
                            + " only logs the lease APIs' UnsupportedVersionException"
                            + " (reference/pk-tables.md section 5)"),
            rule("^ApiVersions", "^/apiVersions/(1053|1054|1055): fluss=0\\.\\.0 fjord=<absent>",
                    "producer offsets are not implemented yet; the 0.9.1 Flink sink calls them only for"
                            + " aggregation merge-engine tables (undo recovery)"),
            rule("^CreateDatabase invalid JSON$", "^/<error>/errorCode: fluss=-1 fjord=16$",
                    "Fluss lets its JSON parser's exception escape as UNKNOWN_SERVER_ERROR (-1); Fjord"
                            + " names the problem: INVALID_DATABASE_EXCEPTION (16)"),
            rule("^CreateTable zero buckets$", "^/<error>/errorCode: fluss=-1 fjord=15$",
                    "Fluss lets InvalidBucketsException escape as UNKNOWN_SERVER_ERROR (-1); Fjord answers"
                            + " INVALID_TABLE_EXCEPTION (15)"),
            rule("^ProduceLog schema id 9", "^/bucketsResps\\[0\\]/(baseOffset|errorCode|errorMessage):",
                    "Fluss 0.9.1 appends a batch whose schema id the table does not have, which no"
                            + " reader can decode later; Fjord refuses it with SCHEMA_NOT_EXIST (9)"),
            rule("INDEXED", ".",
                    "log formats other than ARROW are not implemented yet: Fjord refuses"
                            + " table.log.format=INDEXED at CreateTable with INVALID_CONFIG_EXCEPTION"),
            rule("^(unknown api key|unsupported version|MetaData garbage body|GetTableInfo missing required"
                            + "|ListOffsets missing required)",
                    "^/: fluss=<no answer within 5 s> fjord=\\{<error>=",
                    "Fluss 0.9.1 sends no response at all to a request it cannot decode or does not"
                            + " know (the client waits for its request timeout); Fjord answers with an"
                            + " error frame (UNSUPPORTED_VERSION, CORRUPT_MESSAGE) at once"),
            rule("^ListOffsets missing required fields$", "^/: fluss=<no answer within 5 s> fjord=0x$",
                    "Fjord's proto2 decoder (prost) does not check that required fields are present: a"
                            + " ListOffsets without its required fields reads as table 0 with no buckets and"
                            + " is answered with an empty list; Fluss does not answer. No client sends it"),
            rule("^ListTables$", "^/tableNames: fluss has \\d+ items, fjord \\d+: fluss=\\[.*log_indexed",
                    "the INDEXED log table exists on Fluss only (see the INDEXED exception)"),
            rule("^MetaData missing table$", "^/<error>/errorCode: fluss=-1 fjord=7$",
                    "Fluss lets FlussRuntimeException(\"Failed to get tables\") escape as"
                            + " UNKNOWN_SERVER_ERROR (-1); Fjord answers TABLE_NOT_EXIST (7)"),
            rule("^PutKv on a log table$", "^/bucketsResps\\[0\\]/errorCode: fluss=-1 fjord=20$",
                    "Fluss fails with a NullPointerException (no KvTablet) answered as"
                            + " UNKNOWN_SERVER_ERROR (-1); Fjord answers NON_PRIMARY_KEY_TABLE_EXCEPTION (20)"),
            rule("^ListOffsets timestamp type without a timestamp$", "^/bucketsResps\\[0\\]/errorCode: fluss=-1 fjord=38$",
                    "Fluss fails an argument check (IllegalArgumentException) answered as"
                            + " UNKNOWN_SERVER_ERROR (-1); Fjord answers INVALID_TIMESTAMP_EXCEPTION (38)"),
            rule("^FetchLog .*projection", "crcValid=false fjord=batch .*crcValid=true$",
                    "Fluss 0.9.1 projects a batch (FileLogProjection) without rewriting its CRC, so the"
                            + " header's CRC no longer matches the projected body (clients do not check"
                            + " CRCs of projected fetches); Fjord writes the projected batch's true CRC"),
            rule("^ScanKv \\(not in 0\\.9\\.1\\)", "^/: fluss=<no answer within 5 s>",
                    "SCAN_KV exists from Fluss 1.0 on; 0.9.1 does not answer it, Fjord serves it")
            );

    /** The reason a difference is deliberate, or null when it is not. */
    static String reason(String label, String diff) {
        for (Rule r : RULES) {
            if (r.label.matcher(label).find() && r.diff.matcher(diff).find()) {
                return r.reason;
            }
        }
        return null;
    }

    static Rule rule(String label, String diff, String reason) {
        return new Rule(Pattern.compile(label), Pattern.compile(diff), reason);
    }
}
