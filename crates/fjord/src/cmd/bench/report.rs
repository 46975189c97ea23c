//! What a benchmark run measures and the one JSON line it prints: process CPU
//! from `getrusage(RUSAGE_SELF)` (user + system, every thread of this process;
//! the server is always another process) and wall-clock time around the timed
//! phase only.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// What `getrusage(RUSAGE_SELF)` says of this whole process so far: CPU
/// time (user + system) and minor page faults (first touches of fresh
/// memory, which cost several µs each on this VM: docs/bench-notes/client.md).
fn process_usage() -> (Duration, u64) {
    // SAFETY: getrusage only writes into the zeroed struct we pass it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    if rc != 0 {
        // Cannot happen with RUSAGE_SELF and a valid pointer; a zero reading
        // would show as an obviously wrong figure rather than a crash.
        return (Duration::ZERO, 0);
    }
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    let cpu = Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime));
    (cpu, usage.ru_minflt as u64)
}

/// CPU time (user + system) of this whole process so far.
pub fn process_cpu() -> Duration {
    process_usage().0
}

/// Wall clock, process CPU and page faults from the start of a timed phase.
pub struct Stopwatch {
    wall: Instant,
    cpu: Duration,
    faults: u64,
}

impl Stopwatch {
    /// Starts timing now.
    pub fn start() -> Self {
        let (cpu, faults) = process_usage();
        Self {
            cpu,
            faults,
            wall: Instant::now(),
        }
    }

    /// Wall-clock and CPU time since [`Stopwatch::start`].
    pub fn stop(&self) -> (Duration, Duration) {
        (self.wall.elapsed(), process_cpu().saturating_sub(self.cpu))
    }

    /// Minor page faults of the whole process since [`Stopwatch::start`].
    pub fn page_faults(&self) -> u64 {
        process_usage().1.saturating_sub(self.faults)
    }
}

/// Run time of each thread of this process so far, from
/// `/proc/self/task/*/schedstat` (nanoseconds, Linux): splits a run's CPU
/// between the caller's thread, the writer's encoder thread and the async
/// runtime's workers. Empty where `/proc` is not readable.
pub struct ThreadCpu {
    /// (thread id, thread name, run time in ns).
    threads: Vec<(u32, String, u64)>,
}

/// A run's CPU per record split by thread ([`ThreadCpu::split`]).
pub struct CpuSplit {
    /// The thread that started the process (the benchmark's caller).
    pub caller_ns: u64,
    /// Threads named `fjord-writer*` (the writer's encoder).
    pub encoder_ns: u64,
    /// Threads named `tokio*` (the runtime: sender, connections).
    pub runtime_ns: u64,
    /// Any other thread.
    pub other_ns: u64,
}

impl ThreadCpu {
    /// Every thread's run time now.
    pub fn snapshot() -> Self {
        let mut threads = Vec::new();
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
            return Self { threads };
        };
        for task in tasks.flatten() {
            let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else {
                continue;
            };
            let path = task.path();
            let name = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
            let ns = std::fs::read_to_string(path.join("schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse().ok())
                .unwrap_or(0);
            threads.push((tid, name.trim().to_owned(), ns));
        }
        Self { threads }
    }

    /// Run time since `earlier`, per kind of thread (a thread started in
    /// between counts from zero; one ended in between is lost).
    pub fn split(&self, earlier: &ThreadCpu) -> CpuSplit {
        let main = std::process::id();
        let mut split = CpuSplit {
            caller_ns: 0,
            encoder_ns: 0,
            runtime_ns: 0,
            other_ns: 0,
        };
        for (tid, name, ns) in &self.threads {
            let before = earlier
                .threads
                .iter()
                .find(|(t, _, _)| t == tid)
                .map_or(0, |(_, _, ns)| *ns);
            let used = ns.saturating_sub(before);
            let bucket = if *tid == main {
                &mut split.caller_ns
            } else if name.starts_with("fjord-writer") {
                &mut split.encoder_ns
            } else if name.starts_with("tokio") {
                &mut split.runtime_ns
            } else {
                &mut split.other_ns
            };
            *bucket += used;
        }
        split
    }
}

/// One benchmark result, printed as one JSON line on stdout.
pub struct Report {
    /// `write`, `scan` or `compress-floor`.
    pub op: &'static str,
    /// `fjord` (the native client) or the floor's `compress-only`.
    pub client: &'static str,
    /// `rows` or `arrow`: what the client was handed.
    pub input: &'static str,
    /// Workload name.
    pub schema: &'static str,
    /// Compression name.
    pub compression: &'static str,
    /// Records written or read.
    pub records: usize,
    /// Uncompressed Arrow bytes of those records (the `mb_per_s` basis).
    pub arrow_bytes: u64,
    /// Wall-clock time of the timed phase.
    pub wall: Duration,
    /// Process CPU of the timed phase.
    pub cpu: Duration,
    /// Process CPU spent generating the workload (not in `cpu`).
    pub generate_cpu: Duration,
    /// Extra numeric fields, in order.
    pub extra: Vec<(&'static str, f64)>,
}

impl Report {
    /// The JSON line: `records`, `seconds`, `records_per_s`, `mb_per_s`
    /// (10^6 uncompressed Arrow bytes per second, `mb_basis` says so),
    /// `client_cpu_ns_per_record`, `generate_cpu_ns_per_record`, then the
    /// names of client, op, input, schema and compression, then `extra`.
    pub fn to_json(&self) -> String {
        let seconds = self.wall.as_secs_f64();
        let per_s = |x: f64| if seconds > 0.0 { x / seconds } else { 0.0 };
        let per_record = |d: Duration| {
            if self.records > 0 {
                d.as_nanos() as f64 / self.records as f64
            } else {
                0.0
            }
        };
        let mut line = String::with_capacity(512);
        // Writing into a String cannot fail.
        let _ = write!(
            line,
            "{{\"client\":\"{}\",\"op\":\"{}\",\"input\":\"{}\",\"schema\":\"{}\",\"compression\":\"{}\",\
             \"records\":{},\"seconds\":{:.6},\"records_per_s\":{:.0},\"mb_per_s\":{:.1},\
             \"mb_basis\":\"arrow_uncompressed\",\"client_cpu_ns_per_record\":{:.1},\
             \"generate_cpu_ns_per_record\":{:.1}",
            self.client,
            self.op,
            self.input,
            self.schema,
            self.compression,
            self.records,
            seconds,
            per_s(self.records as f64),
            per_s(self.arrow_bytes as f64) / 1e6,
            per_record(self.cpu),
            per_record(self.generate_cpu),
        );
        for (name, value) in &self.extra {
            let _ = write!(line, ",\"{name}\":{value:.1}");
        }
        line.push('}');
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_line_is_one_json_object_with_the_issue_fields() {
        let report = Report {
            op: "write",
            client: "fjord",
            input: "arrow",
            schema: "long",
            compression: "none",
            records: 1_000,
            arrow_bytes: 8_000,
            wall: Duration::from_millis(2),
            cpu: Duration::from_micros(500),
            generate_cpu: Duration::from_micros(10),
            extra: vec![("batches", 3.0)],
        };
        let line = report.to_json();
        assert!(!line.contains('\n'));
        let json: serde_json::Value = serde_json::from_str(&line).expect("one JSON object");
        assert_eq!(json["client"], "fjord");
        assert_eq!(json["records"], 1_000);
        assert_eq!(json["records_per_s"], 500_000);
        assert_eq!(json["mb_per_s"], 4.0);
        assert_eq!(json["client_cpu_ns_per_record"], 500.0);
        assert_eq!(json["generate_cpu_ns_per_record"], 10.0);
        assert_eq!(json["batches"], 3.0);
    }

    #[test]
    fn process_cpu_grows_with_work() {
        let before = process_cpu();
        let mut x = 0u64;
        // Enough work to cross getrusage's microsecond resolution.
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(process_cpu() > before);
    }

    #[test]
    fn thread_cpu_counts_a_writer_threads_run_time_as_the_encoders() {
        let before = ThreadCpu::snapshot();
        let (ran, ran_rx) = std::sync::mpsc::channel();
        let (release, release_rx) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::Builder::new()
            .name("fjord-writer-test".into())
            .spawn(move || {
                // Spins until this thread itself has run 5 ms, then waits
                // (a thread that ended would no longer be in /proc).
                let own = || {
                    std::fs::read_to_string("/proc/thread-self/schedstat")
                        .ok()
                        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
                        .unwrap_or(u64::MAX)
                };
                while own() < 5_000_000 {
                    std::hint::black_box(0u64);
                }
                ran.send(()).unwrap();
                let _ = release_rx.recv();
            })
            .unwrap();
        ran_rx.recv().unwrap();
        let split = ThreadCpu::snapshot().split(&before);
        release.send(()).unwrap();
        worker.join().unwrap();
        assert!(split.encoder_ns >= 5_000_000, "{}", split.encoder_ns);
    }
}
