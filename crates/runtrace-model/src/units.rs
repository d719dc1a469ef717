//! Human-readable units shared by the reports.
//!
//! ```
//! assert_eq!(runtrace_model::fmt_ns(1_500), "1.5 µs");
//! ```

/// Parses seconds since a recording started (a command line's `--from`,
/// `--to`): a finite number, zero or more; the error says what was
/// expected.
///
/// ```
/// assert_eq!(runtrace_model::parse_seconds("1.5"), Ok(1.5));
/// assert!(runtrace_model::parse_seconds("-1").is_err());
/// ```
pub fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!(
            "\"{s}\" is not a number of seconds since the recording started (like 1.5)"
        )),
    }
}

/// Parses a duration: a number with a unit (`ns`, `us`, `µs`, `ms`, `s`,
/// `m`), or a bare number of seconds; must be positive (`runtrace
/// backlog`'s `--window` and `--lookback`): ns.
///
/// ```
/// assert_eq!(runtrace_model::parse_duration("500ms"), Ok(500_000_000));
/// assert!(runtrace_model::parse_duration("3 parsecs").is_err());
/// ```
pub fn parse_duration(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(format!("\"{s}\" is not a duration (like 500ms, 2s)"));
    }
    let scale = match unit.trim() {
        "" | "s" => 1e9,
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "m" | "min" => 60e9,
        u => {
            return Err(format!(
                "unknown unit \"{u}\" in \"{s}\" (use ns, us, ms, s or m)"
            ))
        }
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("\"{s}\" is not a duration (like 500ms, 2s)"))?;
    let ns = v * scale;
    if !ns.is_finite() || !(1.0..=1e18).contains(&ns) {
        return Err(format!("\"{s}\" is out of range (1 ns to 31 years)"));
    }
    Ok(ns.round() as u64)
}

/// Human-readable duration.
pub fn fmt_ns(ns: u64) -> String {
    let f = ns as f64;
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{:.1} µs", f / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.2} ms", f / 1e6)
    } else {
        format!("{:.3} s", f / 1e9)
    }
}

/// Names longer than this many bytes are shortened where a report repeats
/// them ([`shown_name`]).
pub const MAX_SHOWN_NAME: usize = 256;

/// `name` as a report shows it: whole up to [`MAX_SHOWN_NAME`] bytes,
/// else its first bytes (cut at a character boundary) and how long it
/// was. A recorded name can be as long as the file; a report that repeats
/// it per trigger or per row must not multiply that (a 1 MB queue name in
/// 200 triggers made a 420 MB HTML page).
///
/// ```
/// use runtrace_model::shown_name;
/// assert_eq!(shown_name("jobs"), "jobs");
/// let long = "q".repeat(1_000_000);
/// let s = shown_name(&long);
/// assert!(s.len() < 300 && s.ends_with("… (1000000 bytes)"), "{s}");
/// ```
pub fn shown_name(name: &str) -> std::borrow::Cow<'_, str> {
    if name.len() <= MAX_SHOWN_NAME {
        return name.into();
    }
    let mut end = MAX_SHOWN_NAME - 32;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &name[..end], name.len()).into()
}

#[cfg(test)]
mod tests {
    use super::parse_duration;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1s"), Ok(1_000_000_000));
        assert_eq!(parse_duration("2"), Ok(2_000_000_000));
        assert_eq!(parse_duration("500ms"), Ok(500_000_000));
        assert_eq!(parse_duration("1.5s"), Ok(1_500_000_000));
        assert_eq!(parse_duration("250us"), Ok(250_000));
        assert_eq!(parse_duration("250µs"), Ok(250_000));
        assert_eq!(parse_duration("1m"), Ok(60_000_000_000));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("3 parsecs").is_err());
        assert!(parse_duration("").is_err());
    }
}
