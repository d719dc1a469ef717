//! UTC calendar dates of wall-clock times, for the names runtrace gives
//! things by date: flight-recorder snapshot directories and the Parquet
//! dataset's `date=` partitions. A few lines of integer arithmetic (Howard
//! Hinnant's days-to-civil algorithm, proleptic Gregorian) rather than a
//! date crate in the recorder.
//!
//! ```
//! use runtrace_format::civil::{date, Date};
//! // 2026-11-28T01:16:20Z
//! let d = date(1_795_828_580 * 1_000_000_000);
//! assert_eq!((d.year, d.month, d.day), (2026, 11, 28));
//! assert_eq!((d.hour, d.minute, d.second), (1, 16, 20));
//! ```

/// A UTC date and time of day, to the second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Date {
    /// Year (e.g. 2026).
    pub year: i64,
    /// Month, 1 to 12.
    pub month: u32,
    /// Day of the month, 1 to 31.
    pub day: u32,
    /// Hour, 0 to 23.
    pub hour: u32,
    /// Minute, 0 to 59.
    pub minute: u32,
    /// Second, 0 to 59.
    pub second: u32,
}

/// The UTC date of `epoch_ns` (ns since the Unix epoch).
pub fn date(epoch_ns: u64) -> Date {
    let secs = epoch_ns / 1_000_000_000;
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Civil date from days since 1970-01-01.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    Date {
        year: yoe + era * 400 + i64::from(month <= 2),
        month,
        day,
        hour: (rem / 3_600) as u32,
        minute: (rem / 60 % 60) as u32,
        second: (rem % 60) as u32,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (the inverse of
/// [`date`]'s calendar step).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Nanoseconds since the Unix epoch of a UTC date and time, `None` for a
/// date before 1970 or fields out of range (month 13, day 32, hour 24;
/// a day past its month's end, such as February 30, is refused too).
///
/// ```
/// use runtrace_format::civil::{date, epoch_ns, Date};
/// let d = Date { year: 2026, month: 11, day: 28, hour: 1, minute: 16, second: 20 };
/// assert_eq!(epoch_ns(d), Some(1_795_828_580 * 1_000_000_000));
/// assert_eq!(date(epoch_ns(d).unwrap()), d);
/// assert_eq!(epoch_ns(Date { month: 2, day: 30, ..d }), None);
/// ```
pub fn epoch_ns(d: Date) -> Option<u64> {
    if !(1..=12).contains(&d.month)
        || !(1..=31).contains(&d.day)
        || d.hour > 23
        || d.minute > 59
        || d.second > 59
    {
        return None;
    }
    let days = days_from_civil(d.year, d.month, d.day);
    let secs = days
        .checked_mul(86_400)?
        .checked_add(i64::from(d.hour * 3_600 + d.minute * 60 + d.second))?;
    let ns = u64::try_from(secs).ok()?.checked_mul(1_000_000_000)?;
    // A day past the month's end comes back as another date.
    (date(ns) == d).then_some(ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        let d = date(0);
        assert_eq!((d.year, d.month, d.day, d.hour), (1970, 1, 1, 0));
        // 2000-02-29T23:59:59Z, a leap day.
        let d = date(951_868_799 * 1_000_000_000);
        assert_eq!((d.year, d.month, d.day), (2000, 2, 29));
        assert_eq!((d.hour, d.minute, d.second), (23, 59, 59));
        // 2100-03-01 (2100 is not a leap year).
        let d = date(4_107_542_400 * 1_000_000_000);
        assert_eq!((d.year, d.month, d.day), (2100, 3, 1));
    }
}
