//! The object store that recordings are shipped to: the recorder's
//! object-store sink writes each sealed segment under
//! `service=<s>/host=<h>/date=<yyyy-mm-dd>/trace-<ts>-<n>.bin`
//! (`runtrace_format::partition`), and [`fetch`] reads them back, by
//! service, host and seal time, into a directory every `runtrace` command
//! reads (`runtrace fetch`, docs/flight-recorder.md "Fetch").
//!
//! The store is the `object_store` crate's, chosen by the URL
//! ([`open_url`]): `file:///abs/dir`, `memory://`, and with feature `aws`
//! `s3://bucket/prefix`.
//!
//! ```
//! let dir = std::env::temp_dir().join(format!("runtrace-store-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let url = format!("file://{}", dir.display());
//! // An empty store: nothing matches, nothing is written.
//! let got = runtrace_store::fetch(&url, &runtrace_store::Query::default(), &dir.join("out")).unwrap();
//! assert_eq!(got.segments, 0);
//! assert!(!dir.join("out").exists());
//! std::fs::remove_dir_all(&dir).unwrap();
//! ```

use object_store::path::Path as Key;
use object_store::ObjectStore;
use runtrace_format::partition::{self, parse_segment_key, SegmentKey};
use std::path::Path;

/// The store a URL names and the prefix of its keys, or an error naming
/// the URL (`URL "...": not a URL ...`). Store options come from the
/// environment: `AWS_*`, `GOOGLE_*` and `AZURE_*` variables, by their names
/// in lower case (`AWS_REGION` is the option `aws_region`).
///
/// ```
/// assert!(runtrace_store::open_url("memory:///").is_ok());
/// let e = runtrace_store::open_url("relative/dir").err().unwrap();
/// assert!(e.starts_with("URL \"relative/dir\": not a URL"), "{e}");
/// ```
pub fn open_url(url: &str) -> Result<(Box<dyn ObjectStore>, Key), String> {
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

/// Which segments [`fetch`] takes: all by default.
///
/// ```
/// let q = runtrace_store::Query { host: Some("h1".into()), ..Default::default() };
/// assert_eq!((q.from_ns, q.to_ns), (0, u64::MAX));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// Only this service's segments.
    pub service: Option<String>,
    /// Only this host's segments.
    pub host: Option<String>,
    /// Only segments sealed at or after this time (ns since the Unix epoch).
    pub from_ns: u64,
    /// ... and at or before this one.
    pub to_ns: u64,
}

impl Default for Query {
    fn default() -> Self {
        Query {
            service: None,
            host: None,
            from_ns: 0,
            to_ns: u64::MAX,
        }
    }
}

/// What [`fetch`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fetched {
    /// Segments written.
    pub segments: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// Copies the segments under `url` that `q` selects into `dir` (created if
/// missing), each as `trace-<s>-<h>-<ts>.<n>.bin`
/// ([`SegmentKey::file_name`]), written under a hidden name then renamed
/// so a file there is complete. Walks the partitions, so services, hosts
/// and days outside the query are never listed. An error names the URL,
/// the key or the file. When nothing matches, nothing is written (not even
/// `dir`) and [`Fetched::segments`] is 0.
///
/// ```no_run
/// let q = runtrace_store::Query { service: Some("api".into()), ..Default::default() };
/// let got = runtrace_store::fetch("s3://bucket/traces", &q, "traces/".as_ref())?;
/// println!("{} segments", got.segments);
/// # Ok::<(), String>(())
/// ```
pub fn fetch(url: &str, q: &Query, dir: &Path) -> Result<Fetched, String> {
    let (store, root) = open_url(url)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    let got = rt.block_on(async {
        let picked = select(&*store, &root, q).await?;
        if picked.is_empty() {
            return Ok(Fetched {
                segments: 0,
                bytes: 0,
            });
        }
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
        let mut got = Fetched {
            segments: 0,
            bytes: 0,
        };
        for (key, k) in &picked {
            let data = async { store.get(key).await?.bytes().await }
                .await
                .map_err(|e| format!("{key}: {e}"))?;
            let name = k.file_name();
            let dest = dir.join(&name);
            let tmp = dir.join(format!(".{name}.part"));
            std::fs::write(&tmp, &data)
                .and_then(|_| std::fs::rename(&tmp, &dest))
                .map_err(|e| format!("{}: cannot write: {e}", dest.display()))?;
            got.segments += 1;
            got.bytes += data.len() as u64;
        }
        Ok::<_, String>(got)
    })?;
    Ok(got)
}

/// The segments under `root` that pass `q`, in (service, host, time,
/// index) order, walking the partitions (`service=` / `host=` / `date=`)
/// so that whole services, hosts and days outside `q` are never listed.
async fn select(
    store: &dyn ObjectStore,
    root: &Key,
    q: &Query,
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
    let wanted = |want: &Option<String>, v: &str| want.as_deref().is_none_or(|w| w == v);
    let (from_day, to_day) = (partition::date_of(q.from_ns), partition::date_of(q.to_ns));
    let mut out = Vec::new();
    for s in list(root.clone()).await?.common_prefixes {
        if value(&s, "service").is_none_or(|v| !wanted(&q.service, &v)) {
            continue;
        }
        for h in list(s).await?.common_prefixes {
            if value(&h, "host").is_none_or(|v| !wanted(&q.host, &v)) {
                continue;
            }
            for d in list(h).await?.common_prefixes {
                if value(&d, "date").is_none_or(|day| day < from_day || day > to_day) {
                    continue;
                }
                for o in list(d).await?.objects {
                    let Some(k) = parse_segment_key(o.location.as_ref()) else {
                        continue;
                    };
                    if (q.from_ns..=q.to_ns).contains(&k.wall_ns) {
                        out.push((o.location, k));
                    }
                }
            }
        }
    }
    out.sort_by_key(|(_, k)| (k.service.clone(), k.host.clone(), k.wall_ns, k.index));
    Ok(out)
}
