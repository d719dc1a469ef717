//! Names of things laid out by service, host and date: the partition
//! values of the Parquet dataset (`service=<s>/host=<h>/date=<d>/`) and
//! the object-store keys of sealed trace segments shipped by the
//! recorder's object-store sink and read back by `runtrace fetch`
//! (`service=<s>/host=<h>/date=<yyyy-mm-dd>/trace-<ts>-<n>.bin`).
//! One place for the rules, so the writers and the readers agree.
//!
//! ```
//! use runtrace_format::partition::{parse_segment_key, partition_name, segment_key};
//! assert!(partition_name("web-01.eu", "--host").is_ok());
//! assert!(partition_name("../etc", "--host").is_err());
//! // 2026-11-28T01:16:20.250Z, file 7.
//! let ns = 1_795_828_580_250_000_000;
//! let key = segment_key("api", "h1", ns, 7);
//! assert_eq!(key, "service=api/host=h1/date=2026-11-28/trace-20261128T011620.250Z-7.bin");
//! let k = parse_segment_key(&key).unwrap();
//! assert_eq!((k.service.as_str(), k.host.as_str(), k.wall_ns, k.index), ("api", "h1", ns, 7));
//! ```

use crate::civil::{self, Date};

/// Longest partition value accepted.
pub const MAX_NAME: usize = 128;

fn ok_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

/// `value` if it is a safe partition name (1 to 128 characters of
/// `A-Z a-z 0-9 . _ -`, not starting with `.` or `-`), else an error
/// naming `flag`. Anything else could escape a dataset or a key prefix
/// (`/`, `..`), need escaping in Hive paths (`=`, `%`, spaces) or be
/// taken for an option.
pub fn partition_name(value: &str, flag: &str) -> Result<String, String> {
    if value.is_empty()
        || value.len() > MAX_NAME
        || !value.chars().all(ok_char)
        || value.starts_with(['.', '-'])
    {
        return Err(format!(
            "{flag} {value:?}: not a safe partition name (1 to {MAX_NAME} of A-Z a-z 0-9 . _ -, not starting with . or -)"
        ));
    }
    Ok(value.to_string())
}

/// A default partition name made safe: unsafe characters become `_`
/// (a process name such as `my app/1` gives `my_app_1`).
///
/// ```
/// assert_eq!(runtrace_format::partition::sanitize("my app/1"), "my_app_1");
/// assert_eq!(runtrace_format::partition::sanitize(""), "unknown");
/// ```
pub fn sanitize(value: &str) -> String {
    let mut s: String = value
        .chars()
        .map(|c| if ok_char(c) { c } else { '_' })
        .take(MAX_NAME)
        .collect();
    if s.starts_with(['.', '-']) {
        s.replace_range(0..1, "_");
    }
    if s.is_empty() {
        s.push_str("unknown");
    }
    s
}

/// This machine's host name (for the default `host` partition), made safe.
pub fn hostname() -> String {
    let h = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .unwrap_or_default();
    sanitize(h.trim())
}

/// The UTC date (`yyyy-mm-dd`) of `epoch_ns`.
///
/// ```
/// assert_eq!(runtrace_format::partition::date_of(1_700_000_000_000_000_000), "2023-11-14");
/// ```
pub fn date_of(epoch_ns: u64) -> String {
    let d = civil::date(epoch_ns);
    format!("{:04}-{:02}-{:02}", d.year, d.month, d.day)
}

/// `20261128T011620.250Z`: a wall clock (ns since the Unix epoch, UTC)
/// to the millisecond, as segment keys carry it.
pub fn stamp_ms(epoch_ns: u64) -> String {
    let d = civil::date(epoch_ns);
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}.{:03}Z",
        d.year,
        d.month,
        d.day,
        d.hour,
        d.minute,
        d.second,
        epoch_ns / 1_000_000 % 1_000
    )
}

/// Parses [`stamp_ms`]'s form (the milliseconds may be left out).
pub fn parse_stamp(s: &str) -> Option<u64> {
    let s = s.strip_suffix('Z')?;
    let (whole, ms) = match s.split_once('.') {
        Some((w, ms)) if ms.len() == 3 && ms.bytes().all(|b| b.is_ascii_digit()) => {
            (w, ms.parse::<u64>().ok()?)
        }
        Some(_) => return None,
        None => (s, 0),
    };
    let b = whole.as_bytes();
    if b.len() != 15 || b[8] != b'T' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        let t = whole.get(r)?;
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    let d = Date {
        year: i64::from(num(0..4)?),
        month: num(4..6)?,
        day: num(6..8)?,
        hour: num(9..11)?,
        minute: num(11..13)?,
        second: num(13..15)?,
    };
    civil::epoch_ns(d)?.checked_add(ms * 1_000_000)
}

/// Parses a UTC time as a person types one (`runtrace fetch --from/--to`):
/// `2026-11-28`, `2026-11-28T04:00:00Z` (seconds and `Z` optional, a space
/// for the `T`) or [`stamp_ms`]'s `20261128T040000Z`: ns since the Unix
/// epoch. A date alone is its first nanosecond, or with `end` its last; a
/// time without fractions, with `end`, its last nanosecond.
///
/// ```
/// use runtrace_format::partition::parse_time;
/// let day = 1_795_824_000_000_000_000; // 2026-11-28T00:00:00Z
/// assert_eq!(parse_time("2026-11-28", false), Some(day));
/// assert_eq!(parse_time("2026-11-28", true), Some(day + 86_400_000_000_000 - 1));
/// assert_eq!(parse_time("yesterday", false), None);
/// ```
pub fn parse_time(s: &str, end: bool) -> Option<u64> {
    let s = s.trim();
    if let Some(ns) = parse_stamp(s) {
        return Some(ns);
    }
    let (date, time) = match s.split_once(['T', ' ']) {
        Some((d, t)) => (d, Some(t.strip_suffix('Z').unwrap_or(t))),
        None => (s, None),
    };
    let mut dp = date.split('-');
    let (y, m, d) = (dp.next()?, dp.next()?, dp.next()?);
    if dp.next().is_some() || y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return None;
    }
    let (mut hh, mut mm, mut ss) = (0, 0, 0);
    if let Some(t) = time {
        let mut tp = t.split(':');
        hh = tp.next()?.parse().ok()?;
        mm = tp.next()?.parse().ok()?;
        ss = match tp.next() {
            Some(x) => x.parse().ok()?,
            None => 0,
        };
        if tp.next().is_some() {
            return None;
        }
    }
    let ns = civil::epoch_ns(Date {
        year: y.parse().ok()?,
        month: m.parse().ok()?,
        day: d.parse().ok()?,
        hour: hh,
        minute: mm,
        second: ss,
    })?;
    Some(match (time, end) {
        (None, true) => ns + 86_400_000_000_000 - 1,
        (Some(_), true) => ns + 999_999_999,
        _ => ns,
    })
}

/// The object-store key of sealed segment `index` (the file index of
/// `PATH.N.bin`) of a service on a host, sealed at `wall_ns`:
/// `service=<s>/host=<h>/date=<yyyy-mm-dd>/trace-<ts>-<n>.bin`. The
/// service and host must be partition names ([`partition_name`]).
pub fn segment_key(service: &str, host: &str, wall_ns: u64, index: u64) -> String {
    format!(
        "service={service}/host={host}/date={}/trace-{}-{index}.bin",
        date_of(wall_ns),
        stamp_ms(wall_ns)
    )
}

/// What a segment key says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentKey {
    /// The `service=` partition.
    pub service: String,
    /// The `host=` partition.
    pub host: String,
    /// When the segment was sealed (ns since the Unix epoch, to the ms).
    pub wall_ns: u64,
    /// Its file index.
    pub index: u64,
}

impl SegmentKey {
    /// The name `runtrace fetch` gives the segment on disk, one every
    /// tool reads as a trace file (`PATH.N.bin` with the service, host
    /// and seal time in the prefix, so segments of several hosts never
    /// collide): `trace-<s>-<h>-<ts>.<n>.bin`.
    ///
    /// ```
    /// let k = runtrace_format::partition::parse_segment_key(
    ///     "service=api/host=h1/date=2026-11-28/trace-20261128T011620.250Z-7.bin").unwrap();
    /// assert_eq!(k.file_name(), "trace-api-h1-20261128T011620.250Z.7.bin");
    /// ```
    pub fn file_name(&self) -> String {
        format!(
            "trace-{}-{}-{}.{}.bin",
            self.service,
            self.host,
            stamp_ms(self.wall_ns),
            self.index
        )
    }
}

/// Parses a key made by [`segment_key`] (after any prefix the store
/// adds: the last four `/`-separated parts are read); `None` for any
/// other key. The date partition must agree with the time.
pub fn parse_segment_key(key: &str) -> Option<SegmentKey> {
    let parts: Vec<&str> = key.rsplitn(5, '/').collect();
    if parts.len() < 4 {
        return None;
    }
    let (file, date, host, service) = (parts[0], parts[1], parts[2], parts[3]);
    let service = partition_name(service.strip_prefix("service=")?, "").ok()?;
    let host = partition_name(host.strip_prefix("host=")?, "").ok()?;
    let date = date.strip_prefix("date=")?;
    let rest = file.strip_prefix("trace-")?.strip_suffix(".bin")?;
    let (ts, n) = rest.rsplit_once('-')?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let wall_ns = parse_stamp(ts)?;
    if date_of(wall_ns) != date {
        return None;
    }
    Some(SegmentKey {
        service,
        host,
        wall_ns,
        index: n.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_bad_keys_are_refused() {
        for ns in [0u64, 951_868_799_999_000_000, 4_107_542_400_001_000_000] {
            let key = segment_key("svc", "host-1", ns, 12);
            let k = parse_segment_key(&format!("some/prefix/{key}")).unwrap();
            assert_eq!((k.wall_ns, k.index), (ns, 12), "{key}");
        }
        for bad in [
            "service=a/host=b/date=2026-11-28/trace-20261128T011620.250Z.bin",
            "service=a/host=b/date=2026-11-29/trace-20261128T011620.250Z-1.bin",
            "service=../host=b/date=2026-11-28/trace-20261128T011620.250Z-1.bin",
            "service=a/host=b/date=2026-11-28/trace-20261128T011620.25Z-1.bin",
            "service=a/host=b/date=2026-11-28/trace-20261132T011620Z-1.bin",
            "host=b/date=2026-11-28/trace-20261128T011620Z-1.bin",
            "service=a/host=b/date=2026-11-28/other-20261128T011620Z-1.bin",
        ] {
            assert_eq!(parse_segment_key(bad), None, "{bad}");
        }
        assert_eq!(
            parse_stamp("20261128T011620Z"),
            Some(1_795_828_580_000_000_000)
        );
    }

    #[test]
    fn times() {
        let day = 1_795_824_000_000_000_000; // 2026-11-28T00:00:00Z
        assert_eq!(parse_time("2026-11-28", false), Some(day));
        assert_eq!(
            parse_time("2026-11-28", true),
            Some(day + 86_400_000_000_000 - 1)
        );
        assert_eq!(
            parse_time("2026-11-28T01:16:20Z", false),
            Some(day + 4_580_000_000_000)
        );
        assert_eq!(
            parse_time("2026-11-28T01:16", false),
            Some(day + 4_560_000_000_000)
        );
        assert_eq!(
            parse_time("20261128T011620Z", false),
            Some(day + 4_580_000_000_000)
        );
        for bad in [
            "yesterday",
            "2026-13-01",
            "2026-11-28T25:00",
            "26-11-28",
            "",
        ] {
            assert_eq!(parse_time(bad, false), None, "{bad}");
        }
    }
}
