package dev.fjord.flink;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A {@code fjord server} child process on an ephemeral loopback port and a fresh data dir (the
 * binary named by FJORD_BIN or -Dfjord.bin, else the suite's debug build). Its stderr is kept in a
 * file so a failing test can show the server's side, and so tests can check what it logged.
 */
final class FjordProcess implements AutoCloseable {
    private static final Pattern READY = Pattern.compile("fjord server ready.*?listening on ([^,\\s]+)");

    final Process process;
    final Path dataDir;
    final Path stderr;
    final String address;

    private FjordProcess(Process process, Path dataDir, Path stderr, String address) {
        this.process = process;
        this.dataDir = dataDir;
        this.stderr = stderr;
        this.address = address;
    }

    static String binary() {
        String binary = System.getProperty("fjord.bin", System.getenv("FJORD_BIN"));
        if (binary == null || binary.isEmpty()) {
            binary = "/var/tmp/fjord-target/debug/fjord";
        }
        if (!Files.isExecutable(Path.of(binary))) {
            throw new IllegalStateException("no fjord binary at " + binary + ": set FJORD_BIN");
        }
        return binary;
    }

    static FjordProcess start(String... extraArgs) throws IOException, InterruptedException {
        Path dataDir = Files.createTempDirectory("fjord-flink-");
        Path stderr = Files.createTempFile("fjord-flink-stderr-", ".log");
        List<String> cmd = new ArrayList<>(List.of(binary(), "server", "--listen", "127.0.0.1:0", "--data-dir", dataDir.toString()));
        cmd.addAll(List.of(extraArgs));
        ProcessBuilder builder = new ProcessBuilder(cmd)
                .redirectOutput(ProcessBuilder.Redirect.DISCARD)
                .redirectError(stderr.toFile())
                .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")));
        builder.environment().put("NO_COLOR", "1");
        builder.environment().putIfAbsent("RUST_LOG", "info");
        Process process = builder.start();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (true) {
            String text = Files.readString(stderr, StandardCharsets.UTF_8);
            Matcher m = READY.matcher(text);
            if (m.find()) {
                return new FjordProcess(process, dataDir, stderr, m.group(1));
            }
            if (!process.isAlive() || System.nanoTime() > deadline) {
                process.destroyForcibly().waitFor();
                throw new IllegalStateException("fjord server did not start:\n" + text);
            }
            Thread.sleep(20);
        }
    }

    String log() {
        try {
            return Files.readString(stderr, StandardCharsets.UTF_8);
        } catch (IOException e) {
            return "[" + e + "]";
        }
    }

    @Override
    public void close() throws Exception {
        process.destroy();
        if (!process.waitFor(30, TimeUnit.SECONDS)) {
            process.destroyForcibly().waitFor();
        }
        try (var paths = Files.walk(dataDir)) {
            for (Path p : paths.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        }
        Files.deleteIfExists(stderr);
    }
}
