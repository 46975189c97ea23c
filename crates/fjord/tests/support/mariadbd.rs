//! Stopping and starting again the private MariaDB of a CDC test, as an
//! operator restarting the database under a running pipeline would: a
//! clean `SHUTDOWN`, then a new `mariadbd` on the same data directory,
//! port and socket (so `MariaDb::sql` keeps working).
//!
//! Included with `#[path = "support/mariadbd.rs"] mod mariadbd;` next to
//! the MariaDB harness as `mod mariadb;`. The options mirror the harness's
//! `MariaDb::start`, which owns the first server process.

#![allow(dead_code)] // Each test binary uses a different part of this module.

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::mariadb::{tool, MariaDb};

/// Longest a shutdown or a start may take before the test calls it a hang.
pub const MARIADB_STATE_TIMEOUT: Duration = Duration::from_secs(120);

/// A `mariadbd` started again by [`start_again`]; killed on drop.
pub struct Restarted {
    child: Child,
}

impl Drop for Restarted {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether something accepts TCP connections on 127.0.0.1:`port`.
fn port_open(port: u16) -> bool {
    TcpStream::connect(("127.0.0.1", port)).is_ok()
}

/// Shuts the server down (`SHUTDOWN`) and waits until its port refuses
/// connections.
pub fn shutdown(db: &MariaDb) {
    // The client may see the connection drop as the server goes: ignore.
    let _ = db.try_sql("SHUTDOWN");
    let deadline = Instant::now() + MARIADB_STATE_TIMEOUT;
    while port_open(db.port()) {
        assert!(
            Instant::now() < deadline,
            "MariaDB on port {} did not shut down within {MARIADB_STATE_TIMEOUT:?}",
            db.port()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts `mariadbd` again on `db`'s data directory, port and socket, and
/// waits until it answers SQL.
pub fn start_again(db: &MariaDb) -> Restarted {
    let datadir = db.datadir();
    let dir = datadir
        .parent()
        .expect("the data dir has a parent")
        .to_path_buf();
    let mut cmd = Command::new(tool("mariadbd"));
    cmd.arg("--no-defaults")
        .arg(format!("--datadir={}", datadir.display()))
        .arg(format!("--port={}", db.port()))
        .arg("--bind-address=127.0.0.1")
        .arg(format!("--socket={}", dir.join("sock").display()))
        .arg(format!("--pid-file={}", dir.join("pid").display()))
        .arg(format!("--tmpdir={}", dir.display()))
        .arg(format!("--log-error={}", dir.join("error.log").display()))
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
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        cmd.arg("--user=root");
    }
    let mut child = cmd.spawn().expect("spawn mariadbd again");
    let deadline = Instant::now() + MARIADB_STATE_TIMEOUT;
    loop {
        if let Some(status) = child.try_wait().expect("wait for mariadbd") {
            panic!(
                "mariadbd exited with {status} on restart; its log:\n{}",
                db.error_log()
            );
        }
        if db.try_sql("SELECT 1").is_ok() {
            return Restarted { child };
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "MariaDB did not answer within {MARIADB_STATE_TIMEOUT:?} of its restart; its log:\n{}",
                db.error_log()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
