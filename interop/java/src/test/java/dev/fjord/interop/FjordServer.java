package dev.fjord.interop;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A real {@code fjord server} child process on an ephemeral loopback port, started from the
 * binary named by the {@code FJORD_BIN} environment variable (or {@code -Dfjord.bin=...}).
 *
 * <p>The bound address is read from the one ready line the CLI promises on stderr ({@code fjord
 * server ready ... listening on <ip:port>}); everything the server writes to stderr is kept (in a
 * file) so a failing test can show it.
 */
final class FjordServer implements AutoCloseable {
    /** Bounds how long a broken server can hang the suite before it is ready. */
    static final long READY_TIMEOUT_SECONDS = 60;
    /** Bounds a clean shutdown (SIGTERM). */
    static final long SHUTDOWN_TIMEOUT_SECONDS = 30;

    private static final Pattern READY =
            Pattern.compile("fjord server ready.*?listening on ([^,\\s]+)");

    private final Process process;
    private final Path dataDir;
    /**
     * The server's stderr goes to this file rather than a pipe: the JDK closes a process's pipes
     * when it exits, losing the last lines (a panic message) to a concurrent reader.
     */
    private final Path stderrFile;

    private FjordServer(Process process, Path dataDir, Path stderrFile) {
        this.process = process;
        this.dataDir = dataDir;
        this.stderrFile = stderrFile;
    }

    /** Starts a server on a fresh temporary data dir and waits until it is ready. */
    static FjordServer start() throws IOException, InterruptedException {
        return start(new String[0]);
    }

    /**
     * Starts a server with {@code extraArgs} after the listen address and data dir (the SQL
     * endpoints' flags, {@code --set} options) and waits until it is ready.
     */
    static FjordServer start(String... extraArgs) throws IOException, InterruptedException {
        String binary = System.getProperty("fjord.bin", System.getenv("FJORD_BIN"));
        if (binary == null || binary.isEmpty()) {
            throw new IllegalStateException(
                    "FJORD_BIN is not set: point it at the fjord binary "
                            + "(scripts/test.sh does this after `cargo test --workspace`)");
        }
        if (!Files.isExecutable(Path.of(binary))) {
            throw new IllegalStateException("FJORD_BIN=" + binary + " is not an executable file");
        }
        Path dataDir = Files.createTempDirectory("fjord-junit-");
        Path stderrFile = Files.createTempFile("fjord-junit-stderr-", ".log");
        java.util.List<String> command =
                new java.util.ArrayList<>(
                        java.util.List.of(
                                binary,
                                "server",
                                "--listen",
                                "127.0.0.1:0",
                                "--data-dir",
                                dataDir.toString()));
        command.addAll(java.util.List.of(extraArgs));
        ProcessBuilder builder =
                new ProcessBuilder(command)
                        .redirectOutput(ProcessBuilder.Redirect.DISCARD)
                        .redirectError(stderrFile.toFile())
                        .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")));
        builder.environment().put("NO_COLOR", "1");
        builder.environment().putIfAbsent("RUST_LOG", "info");
        FjordServer server = new FjordServer(builder.start(), dataDir, stderrFile);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(READY_TIMEOUT_SECONDS);
        while (true) {
            Matcher m = READY.matcher(server.stderr());
            if (m.find()) {
                server.address = m.group(1);
                return server;
            }
            if (!server.process.isAlive() || System.nanoTime() > deadline) {
                server.process.destroyForcibly().waitFor();
                throw new IllegalStateException(
                        "fjord server did not print its ready line within "
                                + READY_TIMEOUT_SECONDS
                                + "s (exit code "
                                + server.process.exitValue()
                                + ")\n--- fjord server stderr ---\n"
                                + server.stderr());
            }
            // Polling a file: the server writes one line when ready.
            Thread.sleep(20);
        }
    }

    private String address;

    /** The {@code host:port} from the ready line, usable as {@code bootstrap.servers}. */
    String address() {
        return address;
    }

    /**
     * The address the ready line gives for the endpoint {@code name} ({@code postgres}, {@code
     * flight sql}).
     */
    String endpoint(String name) {
        Matcher m = Pattern.compile(", " + Pattern.quote(name) + " on ([^,\\s]+)").matcher(stderr());
        if (!m.find()) {
            throw new IllegalStateException("no " + name + " endpoint in the ready line\n" + stderr());
        }
        return m.group(1);
    }

    /** Everything the server wrote to stderr so far. */
    String stderr() {
        try {
            return Files.readString(stderrFile, StandardCharsets.UTF_8);
        } catch (IOException e) {
            return "[cannot read " + stderrFile + ": " + e + "]";
        }
    }

    /** Sends SIGTERM, waits for the exit and returns its code; kills on timeout. */
    int stop() throws InterruptedException {
        process.destroy(); // SIGTERM on Unix
        if (!process.waitFor(SHUTDOWN_TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
            process.destroyForcibly().waitFor();
            throw new IllegalStateException(
                    "fjord server did not exit within "
                            + SHUTDOWN_TIMEOUT_SECONDS
                            + "s of SIGTERM\n--- fjord server stderr ---\n"
                            + stderr());
        }
        return process.exitValue();
    }

    @Override
    public void close() throws Exception {
        if (process.isAlive()) {
            process.destroyForcibly().waitFor();
        }
        deleteRecursively(dataDir);
        Files.deleteIfExists(stderrFile);
    }

    private static void deleteRecursively(Path dir) throws IOException {
        if (!Files.exists(dir)) {
            return;
        }
        try (var paths = Files.walk(dir)) {
            for (Path p : (Iterable<Path>) paths.sorted(Comparator.reverseOrder())::iterator) {
                Files.deleteIfExists(p);
            }
        }
    }
}
