//! Test harness: a private MariaDB server per test, on a free loopback port
//! with its own data directory in a temp dir, binary log on in ROW format, and
//! a replication user `fjord`/`fjord` for the source under test.
//!
//! The server runs as a child process and is killed when the [`MariaDb`]
//! value drops. SQL is sent with the `mariadb` command-line client over the
//! server's private Unix socket as `root` (no password), so tests need no
//! async runtime of their own.

#![allow(dead_code)] // Each test file uses a different part of the harness.

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Longest wait for a fresh server to accept queries. Starting InnoDB takes a
/// few seconds on a loaded 2-core machine; the bound keeps a broken
/// installation from hanging the test run.
pub const SERVER_READY_TIMEOUT: Duration = Duration::from_secs(90);

/// Start attempts when the probed free port was taken by someone else between
/// probing and binding.
const START_ATTEMPTS_MAX: u32 = 3;

/// User name of the replication account the source under test uses.
pub const REPL_USER: &str = "fjord";
/// Password of [`REPL_USER`].
pub const REPL_PASSWORD: &str = "fjord";

/// A running private MariaDB server; killed on drop.
pub struct MariaDb {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

/// Path of a MariaDB program, or a panic that says how to install it.
pub fn tool(name: &str) -> PathBuf {
    for dir in ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"] {
        let path = Path::new(dir).join(name);
        if path.exists() {
            return path;
        }
    }
    panic!(
        "`{name}` not found: MariaDB is not installed; run scripts/install-deps.sh \
         (it installs Debian's mariadb-server)"
    );
}

fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral loopback port");
    listener.local_addr().expect("local addr").port()
}

fn client(dir: &Path) -> Command {
    let mut cmd = Command::new(tool("mariadb"));
    cmd.arg("--no-defaults")
        .arg("-uroot")
        .arg(format!("--socket={}", dir.join("sock").display()))
        .arg("--default-character-set=utf8mb4")
        .arg("--batch")
        .arg("--skip-column-names")
        .arg("--raw");
    cmd
}

fn run_sql(dir: &Path, sql: &str) -> Result<String, String> {
    let mut child = client(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    child
        .stdin
        .take()
        .expect("stdin piped")
        .write_all(sql.as_bytes())
        .map_err(|e| e.to_string())?;
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn wait_ready(child: &mut Child, dir: &Path) -> Result<(), String> {
    let log = || std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
    let deadline = Instant::now() + SERVER_READY_TIMEOUT;
    loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            return Err(format!(
                "mariadbd exited with {status}; its log:\n{}",
                log()
            ));
        }
        if run_sql(dir, "SELECT 1").is_ok() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "not ready after {SERVER_READY_TIMEOUT:?}; its log:\n{}",
                log()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

impl MariaDb {
    /// Starts a server with the binary log in ROW format.
    pub fn start() -> MariaDb {
        MariaDb::start_with(&[])
    }

    /// Starts a server with extra `mariadbd` options (later options win, so
    /// `--binlog-format=STATEMENT` overrides the default ROW).
    pub fn start_with(extra: &[&str]) -> MariaDb {
        let dir = tempfile::Builder::new()
            .prefix("fjord-mariadb-")
            .tempdir()
            .expect("create temp dir");
        let datadir = dir.path().join("data");
        let mut install = Command::new(tool("mariadb-install-db"));
        install
            .arg("--no-defaults")
            .arg(format!("--datadir={}", datadir.display()))
            .arg("--auth-root-authentication-method=normal")
            // A private tmpdir: concurrent bootstraps in a shared /tmp can
            // collide on their temporary table files.
            .arg(format!("--tmpdir={}", dir.path().display()))
            .arg("--skip-test-db")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if running_as_root() {
            install.arg("--user=root");
        }
        let out = install.output().expect("run mariadb-install-db");
        assert!(
            out.status.success(),
            "mariadb-install-db failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut last_error = String::new();
        for _ in 0..START_ATTEMPTS_MAX {
            let port = free_port();
            let mut cmd = Command::new(tool("mariadbd"));
            cmd.arg("--no-defaults")
                .arg(format!("--datadir={}", datadir.display()))
                .arg(format!("--port={port}"))
                .arg("--bind-address=127.0.0.1")
                .arg(format!("--socket={}", dir.path().join("sock").display()))
                .arg(format!("--pid-file={}", dir.path().join("pid").display()))
                .arg(format!("--tmpdir={}", dir.path().display()))
                .arg(format!(
                    "--log-error={}",
                    dir.path().join("error.log").display()
                ))
                .arg(format!("--log-bin={}", datadir.join("binlog").display()))
                .arg("--binlog-format=ROW")
                .arg("--server-id=1")
                .arg("--skip-name-resolve")
                .arg("--character-set-server=utf8mb4")
                .arg("--collation-server=utf8mb4_general_ci")
                .arg("--innodb-buffer-pool-size=256M")
                .arg("--innodb-flush-log-at-trx-commit=2")
                .arg("--sync-binlog=0")
                .arg("--max-allowed-packet=256M")
                .args(extra)
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            if running_as_root() {
                cmd.arg("--user=root");
            }
            let mut child = cmd.spawn().expect("spawn mariadbd");
            match wait_ready(&mut child, dir.path()) {
                Ok(()) => {
                    let server = MariaDb { child, port, dir };
                    server.create_replication_user();
                    return server;
                }
                Err(e) => {
                    last_error = e;
                    let _ = child.kill();
                    let _ = child.wait();
                }
            }
        }
        panic!("MariaDB did not start: {last_error}");
    }

    fn create_replication_user(&self) {
        self.sql(&format!(
            "CREATE USER '{REPL_USER}'@'127.0.0.1' IDENTIFIED BY '{REPL_PASSWORD}';
             GRANT SELECT, RELOAD, REPLICATION SLAVE, REPLICATION CLIENT, BINLOG MONITOR,
                   LOCK TABLES, SHOW DATABASES ON *.* TO '{REPL_USER}'@'127.0.0.1';"
        ));
    }

    /// The server's error log (for failure messages).
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }

    /// TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The data directory (binlog files live here as `binlog.NNNNNN`).
    pub fn datadir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Runs SQL as root; returns stdout (tab-separated rows) or the client's stderr.
    pub fn try_sql(&self, sql: &str) -> Result<String, String> {
        run_sql(self.dir.path(), sql)
    }

    /// Runs SQL as root and panics with the server's message if it fails.
    pub fn sql(&self, sql: &str) -> String {
        match self.try_sql(sql) {
            Ok(out) => out,
            Err(e) => panic!("SQL failed: {e}\n--- statement ---\n{sql}"),
        }
    }

    /// Streams SQL text produced by `write` into one client session (bulk loads).
    pub fn sql_stream(&self, write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) {
        let mut child = client(self.dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn mariadb client");
        {
            let stdin = child.stdin.take().expect("stdin piped");
            let mut stdin = std::io::BufWriter::with_capacity(1 << 20, stdin);
            write(&mut stdin).expect("write SQL to the client");
            stdin.flush().expect("flush SQL to the client");
        }
        let out = child.wait_with_output().expect("wait for mariadb client");
        assert!(
            out.status.success(),
            "bulk SQL failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Purges every binlog file before `file`. MariaDB keeps a file until its
    /// binlog checkpoint is written (asynchronously after a rotation), so
    /// this retries for a bounded time until the oldest file is gone.
    pub fn purge_binlogs_to(&self, file: &str) {
        for _ in 0..100 {
            self.sql(&format!("PURGE BINARY LOGS TO '{file}'"));
            let logs = self.sql("SHOW BINARY LOGS");
            if logs.lines().next().is_some_and(|l| l.starts_with(file)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "binlog files before {file} were not purged: {}",
            self.sql("SHOW BINARY LOGS")
        );
    }

    /// The current binlog file and position (`SHOW MASTER STATUS`).
    pub fn master_status(&self) -> (String, u64) {
        let out = self.sql("SHOW MASTER STATUS");
        let mut fields = out.split('\t');
        let file = fields.next().expect("file").to_string();
        let pos = fields.next().expect("pos").trim().parse().expect("pos");
        (file, pos)
    }
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub mod capture;
pub mod fjord;
