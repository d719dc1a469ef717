//! What the benches in this directory share (`mod common;`): the median
//! and percentiles they report, settings from the environment, a recording
//! into a scratch directory, where results are written, and CPU accounting
//! from /proc that tells a disturbed run from a quiet one (`cpu`).
#![allow(dead_code)] // each bench uses a part

pub mod cpu;

use runtrace_recorder::{RecordStats, Recorder, RecorderBuilder, RecordingGuard};
use std::path::{Path, PathBuf};

/// Median of `xs` (the mean of the middle two for an even count; NaN when
/// empty).
///
/// ```ignore
/// assert_eq!(common::median(&[3.0, 1.0, 2.0]), 2.0);
/// ```
pub fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Geometric mean of `ratios` with its 95% confidence interval, as
/// `(mean, low, high)`: the mean of the logs plus or minus Student's t
/// (n - 1 degrees of freedom, rounded down to a tabulated one, so the
/// interval errs wide) times their standard error. The interval is NaN
/// for fewer than two ratios. What a run of paired ratios can resolve: a
/// median alone does not say.
///
/// ```ignore
/// let (gm, lo, hi) = common::geomean_ci95(&[1.0, 1.1, 0.9, 1.05]);
/// assert!(lo < gm && gm < hi);
/// ```
pub fn geomean_ci95(ratios: &[f64]) -> (f64, f64, f64) {
    let logs: Vec<f64> = ratios.iter().map(|r| r.ln()).collect();
    let n = logs.len();
    let mean = logs.iter().sum::<f64>() / n as f64;
    if n < 2 {
        return (mean.exp(), f64::NAN, f64::NAN);
    }
    let var = logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    // t(0.975, df) for the largest tabulated df not above n - 1.
    const T: [(usize, f64); 16] = [
        (1, 12.706),
        (2, 4.303),
        (3, 3.182),
        (4, 2.776),
        (5, 2.571),
        (6, 2.447),
        (7, 2.365),
        (8, 2.306),
        (9, 2.262),
        (10, 2.228),
        (15, 2.131),
        (20, 2.086),
        (30, 2.042),
        (60, 2.000),
        (120, 1.980),
        (usize::MAX, 1.960),
    ];
    let t = T
        .iter()
        .rev()
        .find(|(df, _)| *df < n)
        .map_or(12.706, |x| x.1);
    let half = t * (var / n as f64).sqrt();
    (mean.exp(), (mean - half).exp(), (mean + half).exp())
}

/// Nearest-rank percentile `p` (0-100) of already sorted values (NaN when
/// empty).
///
/// ```ignore
/// assert_eq!(common::pct(&[1.0, 2.0, 3.0, 4.0], 50.0), 2.0);
/// ```
pub fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The environment variable `var` parsed, if it is set and parses.
pub fn env_opt<T: std::str::FromStr>(var: &str) -> Option<T> {
    std::env::var(var).ok().and_then(|v| v.trim().parse().ok())
}

/// The environment variable `var` parsed, or `default`.
///
/// ```ignore
/// let rounds: usize = common::env_num("SYNC_ROUNDS", 15);
/// ```
pub fn env_num<T: std::str::FromStr>(var: &str, default: T) -> T {
    env_opt(var).unwrap_or(default)
}

/// A recording running into its own scratch directory
/// (`$TMPDIR/runtrace-bench-NAME-PID`), for benches that measure with a
/// recording running.
///
/// ```ignore
/// let rec = common::Recording::start("sync", |b| b.buffer_size(32 << 20));
/// // ... the measured work ...
/// let stats = rec.finish();
/// ```
pub struct Recording {
    dir: PathBuf,
    guard: RecordingGuard,
}

impl Recording {
    /// Starts recording to `DIR/trace` with the builder `configure`
    /// returns (the path is set here). Panics if it cannot start: a bench
    /// cannot measure without it.
    pub fn start(name: &str, configure: impl FnOnce(RecorderBuilder) -> RecorderBuilder) -> Self {
        let dir =
            std::env::temp_dir().join(format!("runtrace-bench-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let guard = configure(Recorder::builder())
            .path(dir.join("trace"))
            .start()
            .unwrap_or_else(|e| panic!("start recording in {}: {e}", dir.display()));
        Recording { dir, guard }
    }

    /// Where the trace files go.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Stops recording and deletes the trace.
    pub fn finish(self) -> RecordStats {
        self.finish_keeping(false)
    }

    /// Stops recording; deletes the trace unless `keep`.
    pub fn finish_keeping(self, keep: bool) -> RecordStats {
        let stats = self.guard.finish().expect("finish recording");
        if !keep {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
        stats
    }
}

/// Writes `text` to `target/bench-results/FILE` and returns the path.
pub fn write_result(file: &str, text: &str) -> PathBuf {
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-results");
    let _ = std::fs::create_dir_all(&out);
    let path = out.join(file);
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    path
}
