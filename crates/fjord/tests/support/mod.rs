//! Test support shared by the interop tests: runs the real `fjord` binary as a
//! child process on an ephemeral loopback port and hands its address to the
//! official clients.
//!
//! The server is the binary cargo builds for this crate (`CARGO_BIN_EXE_fjord`),
//! started exactly as a user would (`fjord server --listen 127.0.0.1:0 --data-dir
//! DIR`). Readiness is the one stderr line the CLI convention promises
//! (`fjord server ready ... listening on <ip:port>`); everything the server writes
//! to stderr is kept so that a failing test can show it.

#![allow(dead_code)] // Each test binary uses a different part of this module.

use std::fmt::Debug;
use std::future::Future;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// How long a server may take from spawn to its ready line. Generous because
/// the machine is small and debug builds recover data dirs slowly; it only
/// bounds how long a broken server can hang the suite.
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a clean shutdown (SIGTERM) may take before the test calls it a hang.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

/// Upper bound for one client operation (a request, a flush, a full scan) so a
/// server that never answers fails the test with a message instead of hanging it.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(120);

/// Marker the server prints once it accepts connections (CLI convention).
const READY_MARKER: &str = "fjord server ready";
/// Text that precedes the bound address on the ready line (CLI convention).
const LISTEN_MARKER: &str = "listening on ";

/// The program started as the server: the `fjord` binary of this build, or
/// the program named by `FJORD_INTEROP_SERVER` (same command line), e.g.
/// `scripts/capture_frames.py`, which records the client's frames on the way.
fn server_program() -> PathBuf {
    std::env::var_os("FJORD_INTEROP_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_fjord")))
}

/// A running `fjord server` child process. Dropping it kills the process and
/// waits for it, so no test leaves a server behind, even when it panics.
pub struct FjordServer {
    child: Option<Child>,
    addr: SocketAddr,
    data_dir: PathBuf,
    /// Extra command-line arguments (e.g. `--set key=value`), kept for
    /// [`FjordServer::restart`].
    args: Vec<String>,
    stderr: Arc<Mutex<String>>,
}

impl FjordServer {
    /// Starts `fjord server` on an ephemeral loopback port with `data_dir`.
    /// Panics (failing the test) with the server's stderr if it exits or does
    /// not print its ready line within [`READY_TIMEOUT`].
    pub fn start(data_dir: &Path) -> FjordServer {
        Self::start_listening(data_dir, "127.0.0.1:0")
    }

    /// Starts `fjord server` listening on `listen` (e.g. the address of a
    /// previous instance, to restart "the same" server).
    pub fn start_listening(data_dir: &Path, listen: &str) -> FjordServer {
        Self::start_with_args(data_dir, listen, &[])
    }

    /// Starts `fjord server` with `options` (`key=value`, each passed as
    /// `--set key=value`) on an ephemeral loopback port.
    pub fn start_with_options(data_dir: &Path, options: &[&str]) -> FjordServer {
        let args: Vec<String> = options
            .iter()
            .flat_map(|o| ["--set".to_owned(), (*o).to_owned()])
            .collect();
        Self::start_with_args(data_dir, "127.0.0.1:0", &args)
    }

    fn start_with_args(data_dir: &Path, listen: &str, args: &[String]) -> FjordServer {
        let bin = server_program();
        let mut child = Command::new(&bin)
            .arg("server")
            .arg("--listen")
            .arg(listen)
            .arg("--data-dir")
            .arg(data_dir)
            .args(args)
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
            )
            // Plain text on stderr: the ready line is parsed, not read by a person.
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot spawn {}: {e}", bin.display()));

        let stderr_pipe = child.stderr.take().expect("stderr is piped");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (ready_tx, ready_rx) = mpsc::channel::<SocketAddr>();
        let log = Arc::clone(&stderr);
        // Drains stderr for the whole life of the child (a full pipe would block
        // the server) and reports the address from the ready line once.
        thread::spawn(move || {
            let mut ready_tx = Some(ready_tx);
            for line in BufReader::new(stderr_pipe).lines() {
                let Ok(line) = line else { break };
                if ready_tx.is_some() {
                    if let Some(addr) = parse_ready_line(&line) {
                        let _ = ready_tx.take().expect("checked").send(addr);
                    }
                }
                let mut log = log.lock().expect("stderr log lock");
                log.push_str(&line);
                log.push('\n');
            }
        });

        let mut server = FjordServer {
            child: Some(child),
            addr: SocketAddr::from(([0, 0, 0, 0], 0)),
            data_dir: data_dir.to_path_buf(),
            args: args.to_vec(),
            stderr,
        };
        match ready_rx.recv_timeout(READY_TIMEOUT) {
            Ok(addr) => {
                server.addr = addr;
                server
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let log = server.stderr_log();
                server.kill();
                panic!(
                    "fjord server printed no '{READY_MARKER} ... {LISTEN_MARKER}<addr>' line \
                     within {READY_TIMEOUT:?}\n--- fjord server stderr ---\n{log}"
                );
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = server.child.as_mut().and_then(|c| c.wait().ok());
                // The reader thread may still be appending the last lines.
                thread::sleep(Duration::from_millis(50));
                panic!(
                    "fjord server exited ({status:?}) before it was ready\n\
                     --- fjord server stderr ---\n{}",
                    server.stderr_log()
                );
            }
        }
    }

    /// The address the server reported on its ready line.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address as a `bootstrap.servers` value.
    pub fn bootstrap_servers(&self) -> String {
        self.addr.to_string()
    }

    /// The data directory this server was started with.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// Everything the server wrote to stderr so far.
    pub fn stderr_log(&self) -> String {
        self.stderr.lock().expect("stderr log lock").clone()
    }

    /// Sends SIGTERM and waits for a clean exit. Panics (with stderr) if the
    /// server does not exit within [`SHUTDOWN_TIMEOUT`] or exits unsuccessfully.
    pub fn stop(&mut self) -> ExitStatus {
        let child = self.child.as_mut().expect("server is running");
        let pid = libc::pid_t::try_from(child.id()).expect("pid fits pid_t");
        // SAFETY: kill(2) on the pid of a child we own and have not reaped yet.
        let rc = unsafe { libc::kill(pid, libc::SIGTERM) };
        assert_eq!(
            rc,
            0,
            "kill(SIGTERM) failed: {}",
            std::io::Error::last_os_error()
        );
        let deadline = Instant::now() + SHUTDOWN_TIMEOUT;
        loop {
            match child.try_wait() {
                Ok(Some(status)) => {
                    self.child = None;
                    assert!(
                        status.success(),
                        "fjord server exited with {status} on SIGTERM (expected a clean exit)\n\
                         --- fjord server stderr ---\n{}",
                        self.stderr_log()
                    );
                    return status;
                }
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
                Ok(None) => {
                    let log = self.stderr_log();
                    self.kill();
                    panic!(
                        "fjord server did not exit within {SHUTDOWN_TIMEOUT:?} of SIGTERM\n\
                         --- fjord server stderr ---\n{log}"
                    );
                }
                Err(e) => panic!("waiting for fjord server failed: {e}"),
            }
        }
    }

    /// Stops the server cleanly (SIGTERM) and starts a new one on the same data
    /// dir and the same address, as an operator restarting the service would.
    pub fn restart(&mut self) {
        self.stop();
        let listen = self.addr.to_string();
        let args = std::mem::take(&mut self.args);
        *self = FjordServer::start_with_args(&self.data_dir.clone(), &listen, &args);
    }

    /// Kills the server with SIGKILL (a crash: no shutdown code runs) and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Runs one client step, bounded by [`STEP_TIMEOUT`]; on error or timeout the
    /// test fails with what was being done, the client's error and the server's
    /// stderr.
    pub async fn step<T, E: Debug>(
        &self,
        what: &str,
        fut: impl Future<Output = Result<T, E>>,
    ) -> T {
        match tokio::time::timeout(STEP_TIMEOUT, fut).await {
            Ok(Ok(value)) => value,
            Ok(Err(e)) => panic!(
                "{what}: client error: {e:?}\n--- fjord server stderr ---\n{}",
                self.stderr_log()
            ),
            Err(_) => panic!(
                "{what}: no answer within {STEP_TIMEOUT:?}\n--- fjord server stderr ---\n{}",
                self.stderr_log()
            ),
        }
    }

    /// Runs one client step that must fail; returns the error. Fails the test if
    /// the step succeeds or does not answer within [`STEP_TIMEOUT`].
    pub async fn step_err<T: Debug, E>(
        &self,
        what: &str,
        fut: impl Future<Output = Result<T, E>>,
    ) -> E {
        match tokio::time::timeout(STEP_TIMEOUT, fut).await {
            Ok(Err(e)) => e,
            Ok(Ok(value)) => panic!(
                "{what}: expected an error, got {value:?}\n--- fjord server stderr ---\n{}",
                self.stderr_log()
            ),
            Err(_) => panic!(
                "{what}: no answer within {STEP_TIMEOUT:?}\n--- fjord server stderr ---\n{}",
                self.stderr_log()
            ),
        }
    }
}

impl Drop for FjordServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A partition as fluss-rs listed it: (name, id, spec as sorted pairs).
pub type DescribedPartition = (String, i64, Vec<(String, String)>);

/// Each partition fluss-rs listed, as plain values sorted by name, so tests
/// compare listings with `assert_eq!`.
pub fn described_partitions(infos: &[fluss::metadata::PartitionInfo]) -> Vec<DescribedPartition> {
    let mut out: Vec<DescribedPartition> = infos
        .iter()
        .map(|p| {
            let mut spec: Vec<(String, String)> = p
                .get_partition_spec()
                .get_spec_map()
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            spec.sort();
            (p.get_partition_name(), p.get_partition_id(), spec)
        })
        .collect();
    out.sort();
    out
}

/// Extracts the bound address from the server's ready line, e.g.
/// `INFO fjord server ready: listening on 127.0.0.1:41234, data dir ./fjord-data`.
fn parse_ready_line(line: &str) -> Option<SocketAddr> {
    if !line.contains(READY_MARKER) {
        return None;
    }
    let rest = &line[line.find(LISTEN_MARKER)? + LISTEN_MARKER.len()..];
    let end = rest
        .find(|c: char| c == ',' || c.is_whitespace())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

#[test]
fn ready_line_parsing_finds_the_bound_address() {
    let check = |line: &str, expected: Option<&str>| {
        assert_eq!(
            parse_ready_line(line),
            expected.map(|a| a.parse().unwrap()),
            "{line}"
        );
    };
    check(
        "2026-11-30T10:00:00Z  INFO fjord server ready: listening on 127.0.0.1:41234, data dir ./d",
        Some("127.0.0.1:41234"),
    );
    check(
        "INFO fjord server ready: listening on [::1]:9123",
        Some("[::1]:9123"),
    );
    check("INFO listening on 127.0.0.1:1 (not ready yet)", None);
    check("INFO fjord server ready: listening on nowhere", None);
}
