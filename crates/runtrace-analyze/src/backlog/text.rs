//! Small text helpers of the backlog report and its evidence sentences.

pub(super) fn list(v: &[String]) -> String {
    match v.len() {
        0 => "the consumers".into(),
        1 => v[0].clone(),
        _ => format!("{} and {}", v[..v.len() - 1].join(", "), v[v.len() - 1]),
    }
}

pub(super) fn fmt_at(ns: u64) -> String {
    format!("{:.3} s", ns as f64 / 1e9)
}

pub(super) fn fmt_rate(r: f64) -> String {
    if r >= 100.0 || r == 0.0 {
        format!("{r:.0}/s")
    } else {
        format!("{r:.1}/s")
    }
}

/// "1 wait", "2 waits".
pub(super) fn plural(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

pub(super) fn fmt_before(r: Option<f64>) -> String {
    r.map_or_else(|| "n/a".into(), fmt_rate)
}
