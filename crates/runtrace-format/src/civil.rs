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
