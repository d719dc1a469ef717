//! The outlier methods against a brute-force computation of their
//! definitions on generated data, and end to end on a generated trace.

use runtrace_analyze::index::TraceIndex;
use runtrace_analyze::outliers::{bounds, Category, Method, CPU_WINDOW_NS, MIN_SAMPLES};
use runtrace_model::synth::TraceBuilder;

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Data sets of various shapes: uniform, heavy-tailed, with ties, with a
/// few far values on both sides.
fn data(rng: &mut Rng, shape: u64, n: usize) -> Vec<f64> {
    (0..n)
        .map(|_| match shape {
            0 => rng.unit() * 1000.0,
            1 => 1.0 / (rng.unit() + 1e-3), // heavy tail
            2 => (rng.next() % 7) as f64,   // many ties
            _ => {
                let u = rng.unit();
                if u < 0.03 {
                    -5000.0 * rng.unit()
                } else if u > 0.97 {
                    1e6 * rng.unit()
                } else {
                    100.0 + rng.unit()
                }
            }
        })
        .collect()
}

/// The k-th smallest value (brute force: count, no sort).
fn kth(v: &[f64], k: usize) -> f64 {
    for &x in v {
        let below = v.iter().filter(|&&y| y < x).count();
        let equal = v.iter().filter(|&&y| y == x).count();
        if below <= k && k < below + equal {
            return x;
        }
    }
    unreachable!()
}

/// Quantile by linear interpolation between order statistics (R type 7).
fn q(v: &[f64], p: f64) -> f64 {
    let h = (v.len() - 1) as f64 * p;
    let lo = kth(v, h.floor() as usize);
    let hi = kth(v, h.ceil() as usize);
    lo + (h - h.floor()) * (hi - lo)
}

/// The indexes of the outliers of `v` by `method`, straight from the
/// definitions (None: the method cannot judge this group).
fn brute(method: Method, v: &[f64]) -> Option<Vec<usize>> {
    if v.len() < MIN_SAMPLES {
        return None;
    }
    let n = v.len() as f64;
    let keep =
        |f: &dyn Fn(f64) -> bool| -> Vec<usize> { (0..v.len()).filter(|&i| f(v[i])).collect() };
    Some(match method {
        Method::Iqr => {
            let (q1, q3) = (q(v, 0.25), q(v, 0.75));
            keep(&|x| x < q1 - 1.5 * (q3 - q1) || x > q3 + 1.5 * (q3 - q1))
        }
        Method::Mad => {
            let m = q(v, 0.5);
            let dev: Vec<f64> = v.iter().map(|x| (x - m).abs()).collect();
            let mad = q(&dev, 0.5);
            if mad == 0.0 {
                return None;
            }
            keep(&|x| 0.6745 * (x - m).abs() / mad > 3.5)
        }
        Method::StdDev => {
            let mean = v.iter().sum::<f64>() / n;
            let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
            keep(&|x| (x - mean).abs() > 3.0 * sd)
        }
        Method::Percentile => {
            let p99 = q(v, 0.99);
            keep(&|x| x > p99)
        }
    })
}

const METHODS: [Method; 4] = [Method::Iqr, Method::Mad, Method::StdDev, Method::Percentile];

#[test]
fn methods_match_brute_force_on_generated_data() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut flagged = 0;
    for round in 0..200 {
        let n = 5 + (rng.next() % 300) as usize;
        let v = data(&mut rng, round % 4, n);
        for m in METHODS {
            let want = brute(m, &v);
            let mut sorted = v.clone();
            let got = bounds(m, &mut sorted).map(|b| {
                (0..v.len())
                    .filter(|&i| b.outside(v[i]))
                    .collect::<Vec<_>>()
            });
            assert_eq!(got, want, "{m:?} on round {round}, n {n}: {v:?}");
            flagged += want.map_or(0, |w| w.len());
        }
    }
    // The data must exercise the methods, not pass vacuously.
    assert!(flagged > 500, "only {flagged} outliers in all rounds");
}

#[test]
fn method_and_category_names_parse_and_bad_ones_are_named() {
    assert_eq!(Method::parse("IQR").unwrap(), Method::Iqr);
    assert_eq!(Method::parse("StdDev").unwrap(), Method::StdDev);
    assert_eq!(Category::parse("cpu").unwrap(), Category::Cpu);
    let e = Method::parse("zscore").unwrap_err();
    assert!(e.contains("\"zscore\"") && e.contains("iqr"), "{e}");
    assert!(Category::parse("io").unwrap_err().contains("latency"));
}

/// 40 tasks at one location, each polled once for 1.00..1.39 ms, woken
/// 10 us before; task 17's poll takes 50 ms, task 23 waits 30 ms.
fn trace() -> (Vec<u8>, Vec<f64>) {
    let mut b = TraceBuilder::new();
    b.location(1, "src/jobs.rs", 10, 5);
    let mut polls = Vec::new();
    let mut t = 1_000_000u64;
    for task in 1..=40u64 {
        b.spawn(7, t, task, 0, 1, 0);
        let wait = if task == 23 { 30_000_000 } else { 10_000 };
        let dur = if task == 17 {
            50_000_000
        } else {
            1_000_000 + task * 10_000
        };
        b.poll_start(7, 0, t + wait, task, 0, 0);
        b.poll_end(7, 0, t + wait + dur, task, true);
        b.terminate(7, t + wait + dur, task);
        polls.push(dur as f64);
        t += wait + dur + 1_000;
    }
    (b.finish(), polls)
}

#[test]
fn trace_outliers_name_the_task_location_worker_and_threshold() {
    let (bytes, polls) = trace();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.0.bin");
    std::fs::write(&path, bytes).unwrap();
    let ix = TraceIndex::load(&[path]);
    for m in METHODS {
        let r = ix.outliers(m, Category::Poll, 1000);
        let poll = &r["categories"]["poll"];
        assert_eq!(poll["samples"], 40);
        let by_loc: Vec<&serde_json::Value> = poll["outliers"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|o| o["scope"] == "location")
            .collect();
        let want = brute(m, &polls).unwrap();
        assert_eq!(by_loc.len(), want.len(), "{m:?}: {poll}");
        for o in &by_loc {
            let task = o["task_id"].as_u64().unwrap();
            assert!(want.contains(&(task as usize - 1)), "{m:?}: {o}");
            assert_eq!(o["spawn_loc"], "src/jobs.rs:10:5");
            assert_eq!(o["worker"], 0);
            let w = o["window_ns"].as_array().unwrap();
            assert_eq!(
                (w[1].as_i64().unwrap() - w[0].as_i64().unwrap()) as f64,
                o["value"].as_f64().unwrap()
            );
        }
        // The 50 ms poll is the strongest outlier of every method.
        assert_eq!(by_loc[0]["task_id"], 17, "{m:?}");
        assert!(by_loc[0]["value"].as_f64().unwrap() > by_loc[0]["threshold"].as_f64().unwrap());
    }
    // Latency: task 23 waited 30 ms for its poll.
    let r = ix.outliers(Method::Iqr, Category::Latency, 10);
    let lat = &r["categories"]["latency"];
    assert_eq!(lat["outliers"][0]["task_id"], 23, "{lat}");
    assert_eq!(lat["outliers"][0]["value"], 30_000_000.0);
    assert!(r["categories"].get("poll").is_none());
    // CPU shares: task 17's 50 ms poll is split over the 10 ms windows it
    // spans, and adds up to 50 ms; every other task ran in one or two.
    let mut o = runtrace_analyze::outliers::Outliers::default();
    ix.replay(&mut o);
    let t17: Vec<_> = o.cpu.iter().filter(|s| s.task == 17).collect();
    let busy: f64 = t17.iter().map(|s| s.value * CPU_WINDOW_NS as f64).sum();
    assert!((busy - 50_000_000.0).abs() < 1.0, "{busy}");
    assert!(t17.len() >= 5 && t17.iter().filter(|s| s.value == 1.0).count() >= 4);
    for s in &o.cpu {
        assert!(s.value > 0.0 && s.value <= 1.0, "{s:?}");
        assert_eq!(s.end_ns - s.start_ns, CPU_WINDOW_NS);
    }
    // A limit cuts the list and says so.
    let r = ix.outliers(Method::Percentile, Category::All, 0);
    assert_eq!(r["categories"]["poll"]["truncated"], true);
    assert!(r["categories"]["cpu"]["samples"].as_u64().unwrap() >= 40);
}
