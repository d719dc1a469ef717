//! `runtrace fetch URL DIR [--service S] [--host H] [--from T] [--to T]`:
//! sealed segments that the recorder's object-store sink shipped
//! (`service=<s>/host=<h>/date=<yyyy-mm-dd>/trace-<ts>-<n>.bin` under the
//! URL), pulled into DIR under names every tool reads
//! (`trace-<s>-<h>-<ts>.<n>.bin`), so `runtrace check DIR`, `analyze`,
//! `report`... work on them (docs/flight-recorder.md, "Fetch").
//!
//! The work is `runtrace_store::fetch`; the store is chosen by the URL:
//! `file:///abs/dir`, and with feature `object-store-aws`
//! `s3://bucket/prefix` (credentials and region from the `AWS_*`
//! variables).

use crate::output::fail;
use runtrace_format::partition::{self, parse_time};
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

/// `--from`/`--to` as ns since the Unix epoch (`end`: `--to`), or the
/// error naming the flag.
fn time_arg(flag: &str, v: Option<&str>, end: bool) -> Result<u64, String> {
    let Some(s) = v else {
        return Ok(if end { u64::MAX } else { 0 });
    };
    parse_time(s, end).ok_or_else(|| {
        format!("{flag} {s:?}: not a UTC time from 1970 to 2554 (2026-11-28, 2026-11-28T04:00:00Z or 20261128T040000Z)")
    })
}

/// Runs `runtrace fetch`: exit 0 with at least one segment written, 1
/// on an error (named) or when nothing matched.
pub fn run(a: &Args) -> ExitCode {
    for (flag, v) in [("--service", &a.service), ("--host", &a.host)] {
        if let Some(Err(e)) = v.as_ref().map(|v| partition::partition_name(v, flag)) {
            return fail(&e);
        }
    }
    let range = time_arg("--from", a.from.as_deref(), false)
        .and_then(|from| Ok((from, time_arg("--to", a.to.as_deref(), true)?)));
    let (from_ns, to_ns) = match range {
        Ok((f, t)) if f > t => return fail("--from is after --to"),
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    let q = runtrace_store::Query {
        service: a.service.clone(),
        host: a.host.clone(),
        from_ns,
        to_ns,
    };
    match runtrace_store::fetch(&a.url, &q, &a.dir) {
        Ok(got) if got.segments == 0 => fail(&format!(
            "no segment under {} matched (service {}, host {}, {} to {})",
            a.url,
            a.service.as_deref().unwrap_or("any"),
            a.host.as_deref().unwrap_or("any"),
            a.from.as_deref().unwrap_or("the first"),
            a.to.as_deref().unwrap_or("the last"),
        )),
        Ok(got) => {
            let (n, bytes) = (got.segments, got.bytes);
            println!(
                "fetched {n} segments ({bytes} bytes) into {}",
                a.dir.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}
