//! Writing a flight-recorder snapshot: the memory ring's segments that
//! cover a trigger, as ordinary `PREFIX.N.bin` files in a new directory
//! `snapshot-<UTC time>-<reason>` beside the recording's path prefix.
//!
//! The directory is written complete under a hidden temporary name and
//! then renamed, so a reader never sees half a snapshot. It runs on a
//! thread of its own with `Bytes` clones of the segments (no copy), so the
//! writer thread goes on draining meanwhile.
//!
//! Each segment is a standalone trace file image already; the last one
//! gets a `FINISH` frame before its `END` (format 1.2), describing the
//! snapshot as a recording of files `first..=last` whose older files were
//! evicted, so `runtrace check` reads the directory as a complete
//! recording (and still reports any events dropped inside the window).

use crate::sink::{SegmentInfo, SinkQueue};
use crate::store::SegmentMeta;
use bytes::Bytes;
use runtrace_format::frame::{self, FrameType};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One snapshot to write.
pub(crate) struct Job {
    /// The directory the snapshot directory goes in.
    pub(crate) parent: PathBuf,
    /// File name prefix (`trace` for `dir/trace`).
    pub(crate) prefix: String,
    /// Wall clock of the trigger (ns since the Unix epoch), for the name.
    pub(crate) wall_ns: u64,
    pub(crate) reason: String,
    /// The segments, oldest first, consecutive indexes.
    pub(crate) segments: Vec<(SegmentMeta, Bytes)>,
    /// When each segment was sealed (wall clock, ns since the epoch).
    pub(crate) walls: Vec<u64>,
    /// The sinks the written files are offered to, and their keys'
    /// service and host.
    pub(crate) sinks: Vec<Arc<SinkQueue>>,
    pub(crate) service: String,
    pub(crate) host: String,
}

/// `reason` as a directory name part: letters, digits, `-`, `_` and `.`
/// kept, anything else a `-`, at most 64 bytes; `snapshot` if empty.
pub(crate) fn dir_safe(reason: &str) -> String {
    let s: String = reason
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .take(64)
        .collect();
    let s = s.trim_start_matches('.').to_string();
    if s.is_empty() {
        "snapshot".into()
    } else {
        s
    }
}

/// `20261128T011620Z` for a wall clock in ns since the Unix epoch (UTC).
pub(crate) fn utc_stamp(wall_ns: u64) -> String {
    let d = runtrace_format::civil::date(wall_ns);
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        d.year, d.month, d.day, d.hour, d.minute, d.second
    )
}

fn io(path: &Path, what: &str, e: std::io::Error) -> String {
    format!("{}: {what}: {e}", path.display())
}

/// Writes the snapshot; returns its directory.
pub(crate) fn write(job: Job) -> Result<PathBuf, String> {
    let Some(last) = job.segments.last().map(|(m, _)| *m) else {
        return Err("no segment in memory covers the trigger".into());
    };
    let first = job.segments[0].0.index;
    let base = format!(
        "snapshot-{}-{}",
        utc_stamp(job.wall_ns),
        dir_safe(&job.reason)
    );
    // Two snapshots in one second with one reason: number the second.
    let mut name = base.clone();
    let mut k = 2;
    while job.parent.join(&name).exists() {
        name = format!("{base}-{k}");
        k += 1;
    }
    let tmp = job.parent.join(format!(".{name}.tmp"));
    let done = job.parent.join(&name);
    std::fs::create_dir_all(&tmp).map_err(|e| io(&tmp, "cannot create directory", e))?;
    let res = (|| {
        let (mut events, mut dropped) = (0u64, 0u64);
        for (meta, bytes) in &job.segments {
            events += meta.events;
            dropped += meta.dropped;
            let path = tmp.join(format!("{}.{}.bin", job.prefix, meta.index));
            let mut f = std::fs::File::create(&path).map_err(|e| io(&path, "cannot create", e))?;
            if meta.index == last.index {
                // FINISH goes just before the END frame (format 1.2).
                let cut = bytes.len().saturating_sub(meta.end_len);
                let finish = frame::Finish {
                    files: last.index + 1,
                    evicted: first,
                    events,
                    dropped,
                    lost_to_writes: 0,
                };
                let mut fin = Vec::new();
                frame::write(&mut fin, FrameType::Finish, &finish.encode());
                f.write_all(&bytes[..cut])
                    .and_then(|_| f.write_all(&fin))
                    .and_then(|_| f.write_all(&bytes[cut..]))
            } else {
                f.write_all(bytes)
            }
            .and_then(|_| f.sync_data())
            .map_err(|e| io(&path, "write failed", e))?;
        }
        std::fs::rename(&tmp, &done).map_err(|e| io(&tmp, "cannot rename", e))
    })();
    if let Err(e) = res {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    // Complete: offered to the sinks (a push each, never a wait).
    for q in &job.sinks {
        for ((meta, _), &wall_ns) in job.segments.iter().zip(&job.walls) {
            q.push(SegmentInfo {
                path: done.join(format!("{}.{}.bin", job.prefix, meta.index)),
                index: meta.index,
                wall_ns,
                service: job.service.clone(),
                host: job.host.clone(),
                snapshot: Some(name.clone()),
            });
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(utc_stamp(0), "19700101T000000Z");
        // 2026-11-28 01:16:20 UTC.
        assert_eq!(utc_stamp(1_795_828_580 * 1_000_000_000), "20261128T011620Z");
        assert_eq!(utc_stamp(951_782_400 * 1_000_000_000), "20000229T000000Z");
        assert_eq!(dir_safe("slow request/p99"), "slow-request-p99");
        assert_eq!(dir_safe(""), "snapshot");
        assert_eq!(dir_safe("../x"), "-x");
    }
}
