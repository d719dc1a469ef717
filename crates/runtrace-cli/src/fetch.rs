//! `runtrace fetch URL DIR [--service S] [--host H] [--from T] [--to T]`:
//! sealed segments that the recorder's object-store sink shipped
//! (`service=<s>/host=<h>/date=<yyyy-mm-dd>/trace-<ts>-<n>.bin` under the
//! URL), pulled into DIR under names every tool reads
//! (`trace-<s>-<h>-<ts>.<n>.bin`), so `runtrace check DIR`, `analyze`,
//! `report`... work on them (docs/flight-recorder.md, "Fetch").
//!
//! The store is the `object_store` crate's, chosen by the URL:
//! `file:///abs/dir`, and with feature `object-store-aws`
//! `s3://bucket/prefix` (credentials and region from the `AWS_*`
//! variables).

use crate::output::fail;
use object_store::path::Path as Key;
use object_store::ObjectStore;
use runtrace_format::partition::{self, parse_segment_key, SegmentKey};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `runtrace fetch`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Where the sink shipped the segments: `file:///abs/dir` or
    /// `s3://bucket/prefix` (the sink's `RUNTRACE_SINK_URL`).
    #[arg(value_name = "URL")]
    pub url: String,
    /// The directory the segments are written to (created if missing).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Only this service's segments.
    #[arg(long, value_name = "S")]
    pub service: Option<String>,
    /// Only this host's segments.
    #[arg(long, value_name = "H")]
    pub host: Option<String>,
    /// Only segments sealed at or after this UTC time: `2026-11-28`,
    /// `2026-11-28T04:00:00Z` (seconds, `Z` optional) or
    /// `20261128T040000Z`.
    #[arg(long, value_name = "T")]
    pub from: Option<String>,
    /// Only segments sealed at or before this UTC time (same forms; a
    /// date alone means the end of that day). A segment holds events from
    /// before its seal time: widen `--to` by a segment's length to cover
    /// a moment fully.
    #[arg(long, value_name = "T")]
    pub to: Option<String>,
}

/// Parses `--from`/`--to`: ns since the Unix epoch; a date alone is its
/// first nanosecond, or with `end` its last.
pub fn parse_time(s: &str, end: bool) -> Option<u64> {
    let s = s.trim();
    if let Some(ns) = partition::parse_stamp(s) {
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
    let ns = runtrace_format::civil::epoch_ns(runtrace_format::civil::Date {
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

/// The store a URL names and the prefix of its keys, or an error naming
/// the URL argument. Store options come from the `AWS_*`, `GOOGLE_*` and
/// `AZURE_*` variables (names lower-cased).
fn open(url: &str) -> Result<(Box<dyn ObjectStore>, Key), String> {
    let parsed = url::Url::parse(url).map_err(|e| {
        format!("URL {url:?}: not a URL ({e}); expected file:///abs/dir or s3://bucket/prefix")
    })?;
    let opts = std::env::vars().filter_map(|(k, v)| {
        let lk = k.to_ascii_lowercase();
        (lk.starts_with("aws_") || lk.starts_with("google_") || lk.starts_with("azure_"))
            .then_some((lk, v))
    });
    object_store::parse_url_opts(&parsed, opts).map_err(|e| format!("URL {url:?}: {e}"))
}

/// The segments under `root` that pass the filters, walking the
/// partitions (`service=` / `host=` / `date=`) so that whole services,
/// hosts and days outside them are never listed.
async fn select(
    store: &dyn ObjectStore,
    root: &Key,
    a: &Args,
    from: u64,
    to: u64,
) -> Result<Vec<(Key, SegmentKey)>, String> {
    let list = |p: Key| async move {
        let prefix = (!p.as_ref().is_empty()).then_some(p);
        store
            .list_with_delimiter(prefix.as_ref())
            .await
            .map_err(|e| {
                format!(
                    "cannot list {}: {e}",
                    prefix.as_ref().map_or("/", |p| p.as_ref())
                )
            })
    };
    let value = |p: &Key, name: &str| -> Option<String> {
        p.filename()?
            .strip_prefix(name)?
            .strip_prefix('=')
            .map(str::to_string)
    };
    let (from_day, to_day) = (partition::date_of(from), partition::date_of(to));
    let mut out = Vec::new();
    for s in list(root.clone()).await?.common_prefixes {
        let Some(service) = value(&s, "service") else {
            continue;
        };
        if a.service.as_ref().is_some_and(|want| *want != service) {
            continue;
        }
        for h in list(s).await?.common_prefixes {
            let Some(host) = value(&h, "host") else {
                continue;
            };
            if a.host.as_ref().is_some_and(|want| *want != host) {
                continue;
            }
            for d in list(h).await?.common_prefixes {
                let Some(day) = value(&d, "date") else {
                    continue;
                };
                if day < from_day || day > to_day {
                    continue;
                }
                for o in list(d).await?.objects {
                    let Some(k) = parse_segment_key(o.location.as_ref()) else {
                        continue;
                    };
                    if (from..=to).contains(&k.wall_ns) {
                        out.push((o.location, k));
                    }
                }
            }
        }
    }
    out.sort_by_key(|(_, k)| (k.service.clone(), k.host.clone(), k.wall_ns, k.index));
    Ok(out)
}

/// Runs `runtrace fetch`: exit 0 with at least one segment written, 1
/// on an error (named) or when nothing matched.
pub fn run(a: &Args) -> ExitCode {
    for (flag, v) in [("--service", &a.service), ("--host", &a.host)] {
        if let Some(v) = v {
            if let Err(e) = partition::partition_name(v, flag) {
                return fail(&e);
            }
        }
    }
    let from = match a.from.as_deref().map(|s| (s, parse_time(s, false))) {
        None => 0,
        Some((_, Some(t))) => t,
        Some((s, None)) => return fail(&format!(
            "--from {s:?}: not a UTC time from 1970 to 2554 (2026-11-28, 2026-11-28T04:00:00Z or 20261128T040000Z)"
        )),
    };
    let to = match a.to.as_deref().map(|s| (s, parse_time(s, true))) {
        None => u64::MAX,
        Some((_, Some(t))) => t,
        Some((s, None)) => return fail(&format!(
            "--to {s:?}: not a UTC time from 1970 to 2554 (2026-11-28, 2026-11-28T04:00:00Z or 20261128T040000Z)"
        )),
    };
    if from > to {
        return fail("--from is after --to");
    }
    let (store, root) = match open(&a.url) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    if let Err(e) = std::fs::create_dir_all(&a.dir) {
        return fail(&format!("{}: cannot create: {e}", a.dir.display()));
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(&format!("cannot start a runtime: {e}")),
    };
    let res: Result<(u64, u64), String> = rt.block_on(async {
        let picked = select(&*store, &root, a, from, to).await?;
        let (mut n, mut bytes) = (0u64, 0u64);
        for (key, k) in &picked {
            let data = store
                .get(key)
                .await
                .map_err(|e| format!("{key}: {e}"))?
                .bytes()
                .await
                .map_err(|e| format!("{key}: {e}"))?;
            let name = k.file_name();
            let dest = a.dir.join(&name);
            // Complete or absent: written under a hidden name, then renamed.
            let tmp = a.dir.join(format!(".{name}.part"));
            std::fs::write(&tmp, &data)
                .and_then(|_| std::fs::rename(&tmp, &dest))
                .map_err(|e| format!("{}: cannot write: {e}", dest.display()))?;
            n += 1;
            bytes += data.len() as u64;
        }
        Ok((n, bytes))
    });
    match res {
        Ok((0, _)) => fail(&format!(
            "no segment under {} matched (service {}, host {}, {} to {})",
            a.url,
            a.service.as_deref().unwrap_or("any"),
            a.host.as_deref().unwrap_or("any"),
            a.from.as_deref().unwrap_or("the first"),
            a.to.as_deref().unwrap_or("the last"),
        )),
        Ok((n, bytes)) => {
            println!(
                "fetched {n} segments ({bytes} bytes) into {}",
                a.dir.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_time;

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
