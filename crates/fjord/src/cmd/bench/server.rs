//! A `fjord server` child process for benchmarks run without `--bootstrap`:
//! a separate process, so that its CPU never counts as the client's.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// How long the server may take to print its ready line.
const SERVER_READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Marker of the server's ready line (CLI convention), followed by the address.
const READY_MARKER: &str = "listening on ";

/// A running `fjord server` on a temporary data dir; stopped (SIGTERM) and its
/// data dir removed on drop.
pub struct ChildServer {
    child: Child,
    addr: String,
    /// The ready line, which also names the SQL endpoints' addresses.
    ready_line: String,
    data_dir: PathBuf,
}

impl ChildServer {
    /// Starts this binary's `fjord server` on a free loopback port and a fresh
    /// temporary data dir, and waits for its ready line.
    pub fn start() -> anyhow::Result<Self> {
        Self::start_with(&[])
    }

    /// [`ChildServer::start`] with `extra` arguments for the server (the SQL
    /// endpoints' flags).
    pub fn start_with(extra: &[&str]) -> anyhow::Result<Self> {
        let data_dir = std::env::temp_dir().join(format!(
            "fjord-bench-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default()
        ));
        let exe = std::env::current_exe().context("locating the fjord binary")?;
        let mut child = Command::new(exe)
            .args(["server", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(&data_dir)
            .args(extra)
            .env("RUST_LOG", "warn,fjord=info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting fjord server")?;
        let stderr = child.stderr.take().context("server stderr")?;
        let (tx, rx) = mpsc::channel();
        // Drains the server's stderr for its whole life so it never blocks on
        // a full pipe; the first ready line hands over the address.
        std::thread::spawn(move || {
            let mut ready = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if ready {
                    continue;
                }
                let addr = line
                    .contains("fjord server ready")
                    .then(|| line.split(READY_MARKER).nth(1))
                    .flatten()
                    .and_then(|rest| rest.split([',', ' ']).next());
                ready = addr.is_some();
                let _ = tx.send(addr.map(|a| (a.to_owned(), line.clone())).ok_or(line));
            }
        });
        let mut server = ChildServer {
            child,
            addr: String::new(),
            ready_line: String::new(),
            data_dir,
        };
        let deadline = Instant::now() + SERVER_READY_TIMEOUT;
        let mut log = Vec::new();
        loop {
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(Ok((addr, line))) => {
                    server.addr = addr;
                    server.ready_line = line;
                    return Ok(server);
                }
                Ok(Err(line)) => log.push(line),
                Err(_) => bail!(
                    "fjord server did not become ready within {SERVER_READY_TIMEOUT:?}; its log:\n{}",
                    log.join("\n")
                ),
            }
        }
    }

    /// The server's `host:port`.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The address of the SQL endpoint `name` (`postgres`, `flight sql`)
    /// from the ready line (`..., postgres on 127.0.0.1:PORT`), if started.
    pub fn endpoint(&self, name: &str) -> Option<&str> {
        let rest = self.ready_line.split(&format!(", {name} on ")).nth(1)?;
        rest.split([',', ' ']).next()
    }

    /// The server process's id (its CPU is read from `/proc/PID/stat`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        // SAFETY: signalling our own child by its pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.data_dir);
    }
}
