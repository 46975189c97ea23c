//! A one-line progress display on stderr for `fjord produce` and `fjord scan`:
//! rows so far, rows per second and (when known) megabytes. It is redrawn
//! in place at most every [`REDRAW_INTERVAL`], only when stderr is a
//! terminal and `--quiet` is not given, so pipes and logs never see it.
//! Updated once per batch, never per record.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// Least time between two redraws: often enough to look alive, rarely
/// enough that drawing costs nothing next to the work being shown.
pub const REDRAW_INTERVAL: Duration = Duration::from_millis(200);

/// Bytes in a megabyte as the progress line and summaries count them.
pub const BYTES_PER_MB: f64 = 1_000_000.0;

/// Rows and bytes done so far, shown on stderr while a command runs.
pub struct Progress {
    verb: &'static str,
    visible: bool,
    drawn: bool,
    start: Instant,
    last_draw: Instant,
    rows: u64,
    bytes: u64,
}

impl Progress {
    /// A progress line labelled `verb` ("wrote", "read"); shown only when
    /// stderr is a terminal and `quiet` is false.
    pub fn new(verb: &'static str, quiet: bool) -> Self {
        let now = Instant::now();
        Self {
            verb,
            visible: !quiet && std::io::stderr().is_terminal(),
            drawn: false,
            start: now,
            last_draw: now,
            rows: 0,
            bytes: 0,
        }
    }

    /// Counts one batch of `rows` rows and `bytes` bytes; redraws when
    /// [`REDRAW_INTERVAL`] has passed since the last draw.
    pub fn add(&mut self, rows: usize, bytes: usize) {
        self.rows += rows as u64;
        self.bytes += bytes as u64;
        if self.visible && self.last_draw.elapsed() >= REDRAW_INTERVAL {
            self.last_draw = Instant::now();
            self.draw();
        }
    }

    /// Rows counted so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Bytes counted so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Time since the progress started.
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// Rows per second so far (0 before any time has passed).
    pub fn rows_per_second(&self) -> f64 {
        let seconds = self.elapsed().as_secs_f64();
        if seconds > 0.0 {
            self.rows as f64 / seconds
        } else {
            0.0
        }
    }

    /// Removes the progress line, so that what is printed next starts on a
    /// clean line.
    pub fn clear(&mut self) {
        if self.drawn {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
            self.drawn = false;
        }
    }

    fn draw(&mut self) {
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r\x1b[2K{} {} rows, {:.0} rows/s",
            self.verb,
            self.rows,
            self.rows_per_second()
        );
        if self.bytes > 0 {
            let _ = write!(err, ", {:.1} MB", self.bytes as f64 / BYTES_PER_MB);
        }
        let _ = err.flush();
        self.drawn = true;
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.clear();
    }
}
