package dev.fjord.interop;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A real {@code fjord server} child process on an ephemeral loopback port, started from the
 * binary named by the {@code FJORD_BIN} environment variable (or {@code -Dfjord.bin=...}).
 *
 * <p>The bound address is read from the one ready line the CLI promises on stderr ({@code fjord
 * server ready ... listening on <ip:port>}); everything the server writes to stderr is kept so a
 * failing test can show it.
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
    private final StringBuffer stderr = new StringBuffer();
    private final CountDownLatch readyOrExited = new CountDownLatch(1);
    private volatile String address;

    private FjordServer(Process process, Path dataDir) {
        this.process = process;
        this.dataDir = dataDir;
    }

    /** Starts a server on a fresh temporary data dir and waits until it is ready. */
    static FjordServer start() throws IOException, InterruptedException {
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
        ProcessBuilder builder =
                new ProcessBuilder(
                                binary,
                                "server",
                                "--listen",
                                "127.0.0.1:0",
                                "--data-dir",
                                dataDir.toString())
                        .redirectOutput(ProcessBuilder.Redirect.DISCARD)
                        .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")));
        builder.environment().put("NO_COLOR", "1");
        builder.environment().putIfAbsent("RUST_LOG", "info");
        FjordServer server = new FjordServer(builder.start(), dataDir);
        server.drainStderr();
        if (!server.readyOrExited.await(READY_TIMEOUT_SECONDS, TimeUnit.SECONDS)
                || server.address == null) {
            server.process.destroyForcibly().waitFor();
            throw new IllegalStateException(
                    "fjord server did not print its ready line within "
                            + READY_TIMEOUT_SECONDS
                            + "s (alive="
                            + server.process.isAlive()
                            + ")\n--- fjord server stderr ---\n"
                            + server.stderr());
        }
        return server;
    }

    /** Reads stderr for the child's whole life: a full pipe would block the server. */
    private void drainStderr() {
        Thread reader =
                new Thread(
                        () -> {
                            try (BufferedReader lines =
                                    new BufferedReader(
                                            new InputStreamReader(
                                                    process.getErrorStream(),
                                                    StandardCharsets.UTF_8))) {
                                String line;
                                while ((line = lines.readLine()) != null) {
                                    stderr.append(line).append('\n');
                                    if (address == null) {
                                        Matcher m = READY.matcher(line);
                                        if (m.find()) {
                                            address = m.group(1);
                                            readyOrExited.countDown();
                                        }
                                    }
                                }
                            } catch (IOException e) {
                                stderr.append("[stderr read failed: ").append(e).append("]\n");
                            } finally {
                                readyOrExited.countDown();
                            }
                        },
                        "fjord-server-stderr");
        reader.setDaemon(true);
        reader.start();
    }

    /** The {@code host:port} from the ready line, usable as {@code bootstrap.servers}. */
    String address() {
        return address;
    }

    /** Everything the server wrote to stderr so far. */
    String stderr() {
        return stderr.toString();
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
    }

    private static void deleteRecursively(Path dir) throws IOException {
        if (!Files.exists(dir)) {
            return;
        }
        try (var paths = Files.walk(dir)) {
            for (Path p : (Iterable<Path>) paths.sorted(java.util.Comparator.reverseOrder())::iterator) {
                Files.deleteIfExists(p);
            }
        }
    }
}
