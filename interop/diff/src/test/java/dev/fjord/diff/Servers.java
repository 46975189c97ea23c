package dev.fjord.diff;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** The two servers under comparison, as child processes on loopback with fresh data dirs. */
final class Servers {
    private Servers() {}

    /** {@code fjord server} on an ephemeral port. */
    static final class Fjord implements AutoCloseable {
        private static final Pattern READY =
                Pattern.compile("fjord server ready.*?listening on ([^,\\s]+)");
        final Process process;
        final Path dataDir;
        final Path stderr;
        final String address;

        private Fjord(Process process, Path dataDir, Path stderr, String address) {
            this.process = process;
            this.dataDir = dataDir;
            this.stderr = stderr;
            this.address = address;
        }

        static Fjord start() throws IOException, InterruptedException {
            String binary = System.getProperty("fjord.bin", System.getenv("FJORD_BIN"));
            if (binary == null || binary.isEmpty()) {
                binary = "/var/tmp/fjord-target/debug/fjord";
            }
            if (!Files.isExecutable(Path.of(binary))) {
                throw new IllegalStateException(
                        "no fjord binary at " + binary + ": set FJORD_BIN (scripts/test.sh does)");
            }
            Path dataDir = Files.createTempDirectory("fjord-diff-");
            Path stderr = Files.createTempFile("fjord-diff-stderr-", ".log");
            ProcessBuilder builder =
                    new ProcessBuilder(
                                    binary, "server", "--listen", "127.0.0.1:0", "--data-dir",
                                    dataDir.toString())
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
                    return new Fjord(process, dataDir, stderr, m.group(1));
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
            deleteRecursively(dataDir);
            Files.deleteIfExists(stderr);
        }
    }

    /** The real Fluss cluster (ZooKeeper, coordinator, tablet server) of scripts/fluss-java-server.sh. */
    static final class Fluss implements AutoCloseable {
        final Path dir;
        final String coordinator;
        final String tabletServer;
        private final Path script;

        private Fluss(Path dir, Path script, Map<String, String> out) {
            this.dir = dir;
            this.script = script;
            this.coordinator = out.get("coordinator_address");
            this.tabletServer = out.get("tablet_server_address");
        }

        static Fluss start() throws IOException, InterruptedException {
            Path script = repository().resolve("scripts/fluss-java-server.sh");
            Path dir = Files.createTempDirectory("fluss-diff-");
            Path log = dir.resolve("start.log");
            Process p =
                    new ProcessBuilder("bash", script.toString(), "start", dir.toString())
                            .redirectError(log.toFile())
                            .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")))
                            .start();
            String stdout = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!p.waitFor(300, TimeUnit.SECONDS) || p.exitValue() != 0) {
                p.destroyForcibly();
                throw new IllegalStateException(
                        "scripts/fluss-java-server.sh start failed:\n"
                                + stdout
                                + Files.readString(log, StandardCharsets.UTF_8));
            }
            Map<String, String> out = new HashMap<>();
            for (String line : stdout.split("\n")) {
                int eq = line.indexOf('=');
                if (eq > 0) {
                    out.put(line.substring(0, eq), line.substring(eq + 1).trim());
                }
            }
            return new Fluss(dir, script, out);
        }

        /**
         * The last {@code perLog} WARN and ERROR lines of the coordinator's and the tablet server's
         * logs, for a failure message: the cluster's data dir (and so its logs) is deleted on close,
         * so a failure caused by the reference server must carry its reasons with it.
         */
        String recentProblems(int perLog) {
            StringBuilder out = new StringBuilder();
            for (String role : List.of("coordinator-server", "tablet-server")) {
                Path log = dir.resolve("logs").resolve(role + ".log");
                out.append("--- last WARN/ERROR lines of ").append(log).append('\n');
                try {
                    List<String> problems = Files.readAllLines(log, StandardCharsets.UTF_8).stream()
                            .filter(l -> l.contains(" WARN ") || l.contains(" ERROR "))
                            .toList();
                    problems.subList(Math.max(0, problems.size() - perLog), problems.size())
                            .forEach(l -> out.append(l).append('\n'));
                } catch (IOException e) {
                    out.append("(unreadable: ").append(e).append(")\n");
                }
            }
            return out.toString();
        }

        @Override
        public void close() throws Exception {
            Process p =
                    new ProcessBuilder("bash", script.toString(), "stop", dir.toString())
                            .redirectOutput(ProcessBuilder.Redirect.DISCARD)
                            .redirectError(ProcessBuilder.Redirect.DISCARD)
                            .start();
            p.waitFor(120, TimeUnit.SECONDS);
            if (!"1".equals(System.getenv("FLUSS_DIFF_KEEP"))) {
                deleteRecursively(dir);
            }
        }
    }

    static Path repository() {
        String env = System.getenv("FJORD_REPO");
        Path start = Path.of(env != null ? env : ".").toAbsolutePath().normalize();
        for (Path p = start; p != null; p = p.getParent()) {
            if (Files.exists(p.resolve("scripts/fluss-java-server.sh"))) {
                return p;
            }
        }
        throw new IllegalStateException("no repository with scripts/fluss-java-server.sh above " + start);
    }

    static void deleteRecursively(Path dir) throws IOException {
        if (!Files.exists(dir)) {
            return;
        }
        try (var paths = Files.walk(dir)) {
            List<Path> all = paths.sorted(Comparator.reverseOrder()).toList();
            for (Path p : all) {
                Files.deleteIfExists(p);
            }
        }
    }
}
