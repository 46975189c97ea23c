package dev.fjord.flink;

import java.util.Arrays;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.LongStream;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.TableEnvironment;
import org.apache.flink.table.api.TableResult;
import org.apache.flink.types.Row;
import org.apache.flink.util.CloseableIterator;

/**
 * One run of the Flink benchmark against one server (scripts/bench-flink.sh alternates Fjord and
 * the Java Fluss server): datagen {@code user_behavior} rows into a 4-bucket log table (write
 * phase), then a streaming read of all of them, every column (read phase). Prints one JSON line
 * with the rows/s of each phase and the server's CPU (each process's CPU-time clock, in ns,
 * summed over the server's processes) per record, in total and per process.
 *
 * <p>Args: {@code BOOTSTRAP SERVER_PIDS ROWS LABEL}, SERVER_PIDS comma-separated (Fluss: the tablet
 * server, then the coordinator). The read phase ends when 64 sentinel rows
 * (negative user ids, appended after the data, so spread over all buckets by the user_id bucket
 * key) have come through: each bucket's last sentinel comes after all of its data rows. Both phase
 * times include the Flink job's start (the same for both servers).
 */
public final class FlinkBench {
    private static final int SENTINELS = 64;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        int[] pids = Arrays.stream(args[1].split(",")).mapToInt(Integer::parseInt).toArray();
        long rows = Long.parseLong(args[2]);
        String label = args[3];
        Configuration conf = new Configuration();
        conf.setString("parallelism.default", "1");
        conf.setString("rest.bind-port", "0");
        TableEnvironment t = TableEnvironment.create(
                EnvironmentSettings.newInstance().inStreamingMode().withConfiguration(conf).build());
        t.executeSql("CREATE CATALOG srv WITH ('type' = 'fluss', 'bootstrap.servers' = '" + bootstrap + "')");
        t.executeSql("USE CATALOG srv");
        t.executeSql("CREATE DATABASE IF NOT EXISTS bench").await();
        String table = "bench.user_behavior_" + System.currentTimeMillis();
        t.executeSql("CREATE TABLE " + table + " (user_id BIGINT, item_id BIGINT, category_id BIGINT,"
                + " behavior STRING, ts TIMESTAMP(3)) WITH ('bucket.num' = '4', 'bucket.key' = 'user_id')").await();
        t.executeSql("CREATE TEMPORARY TABLE default_catalog.default_database.gen (user_id BIGINT, item_id BIGINT,"
                + " category_id BIGINT, ts TIMESTAMP(3)) WITH ('connector' = 'datagen', 'number-of-rows' = '" + rows + "',"
                // Unthrottled (datagen's default is 10000 rows/s).
                + " 'rows-per-second' = '1000000000',"
                + " 'fields.user_id.min' = '1', 'fields.user_id.max' = '1000000',"
                + " 'fields.item_id.min' = '1', 'fields.item_id.max' = '5000000',"
                + " 'fields.category_id.min' = '1', 'fields.category_id.max' = '10000')").await();

        // Write phase.
        double[] cpu0 = cpuSeconds(pids);
        long w0 = System.nanoTime();
        t.executeSql("INSERT INTO " + table + " SELECT user_id, item_id, category_id,"
                + " CASE MOD(item_id, 10) WHEN 0 THEN 'buy' WHEN 1 THEN 'cart' WHEN 2 THEN 'fav' ELSE 'pv' END, ts"
                + " FROM default_catalog.default_database.gen").await();
        double writeSeconds = (System.nanoTime() - w0) / 1e9;
        double[] writeCpu = minus(cpuSeconds(pids), cpu0);
        t.executeSql("INSERT INTO " + table + " VALUES " + LongStream.rangeClosed(1, SENTINELS)
                .mapToObj(i -> "(" + (-i) + ", 0, 0, 'end', TIMESTAMP '2026-01-01 00:00:00')")
                .collect(Collectors.joining(", "))).await();

        // Read phase: the whole table, streaming, until every sentinel has come through.
        double[] cpu1 = cpuSeconds(pids);
        long r0 = System.nanoTime();
        // Every column is read (no projection pushed down); the filter runs in Flink (the 0.9.1
        // connector pushes filters down only on partition keys and primary keys).
        TableResult result = t.executeSql("SELECT * FROM " + table + " WHERE user_id < 0");
        int seen = 0;
        try (CloseableIterator<Row> it = result.collect()) {
            while (seen < SENTINELS && it.hasNext()) {
                it.next();
                seen++;
            }
        }
        double readSeconds = (System.nanoTime() - r0) / 1e9;
        double[] readCpu = minus(cpuSeconds(pids), cpu1);
        if (seen != SENTINELS) {
            throw new IllegalStateException("read ended after " + seen + " sentinels");
        }
        long total = rows + SENTINELS;
        System.out.println(String.format(Locale.ROOT,
                "{\"server\":\"%s\",\"rows\":%d,\"write_rows_per_s\":%.0f,\"write_server_cpu_ns_per_row\":%.1f,"
                        + "\"read_rows_per_s\":%.0f,\"read_server_cpu_ns_per_row\":%.1f,\"write_s\":%.2f,\"read_s\":%.2f,"
                        + "\"pids\":\"%s\",\"write_cpu_ns_per_row_by_pid\":%s,\"read_cpu_ns_per_row_by_pid\":%s}",
                label, rows, rows / writeSeconds, sum(writeCpu) * 1e9 / rows, total / readSeconds,
                sum(readCpu) * 1e9 / total, writeSeconds, readSeconds, args[1], perRow(writeCpu, rows),
                perRow(readCpu, total)));
        System.exit(0);
    }

    /**
     * CPU seconds of each process so far, to the nanosecond: each process's CPU-time clock
     * ({@code clock_gettime} on the clock id {@code clock_getcpuclockid} gives: every thread, those
     * that have exited included). {@code /proc/PID/stat} counts in 10 ms ticks, too coarse for a
     * phase in which Fjord uses 50-100 ms. Java has no call for another process's clock, so one
     * {@code python3} reads them all.
     */
    static double[] cpuSeconds(int[] pids) throws Exception {
        String script = "import sys, time\n"
                + "for pid in map(int, sys.argv[1:]):\n"
                // MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED) of the kernel's posix-timers.h
                + "    print(time.clock_gettime_ns(((~pid) << 3) | 2))\n";
        String[] cmd = new String[3 + pids.length];
        cmd[0] = "python3";
        cmd[1] = "-c";
        cmd[2] = script;
        for (int i = 0; i < pids.length; i++) {
            cmd[3 + i] = Integer.toString(pids[i]);
        }
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes()).trim();
        if (!p.waitFor(30, TimeUnit.SECONDS) || p.exitValue() != 0) {
            throw new IllegalStateException("reading the servers' CPU clocks failed: " + out);
        }
        String[] lines = out.split("\n");
        if (lines.length != pids.length) {
            throw new IllegalStateException("reading the servers' CPU clocks answered: " + out);
        }
        double[] s = new double[pids.length];
        for (int i = 0; i < pids.length; i++) {
            s[i] = Long.parseLong(lines[i].trim()) / 1e9;
        }
        return s;
    }

    static double[] minus(double[] a, double[] b) {
        double[] d = new double[a.length];
        for (int i = 0; i < a.length; i++) {
            d[i] = a[i] - b[i];
        }
        return d;
    }

    static double sum(double[] a) {
        return Arrays.stream(a).sum();
    }

    static String perRow(double[] cpuSeconds, long rows) {
        return Arrays.stream(cpuSeconds).mapToObj(c -> String.format(Locale.ROOT, "%.1f", c * 1e9 / rows))
                .collect(Collectors.joining(",", "[", "]"));
    }
}
