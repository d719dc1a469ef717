//! Writing outputs safely: an output is never one of a command's input
//! traces ([`refuse_input`]), and it appears complete or not at all
//! ([`AtomicFile`]): written under a temporary name beside it, renamed
//! into place when done, so a failed run leaves no half-written file and
//! never truncates an existing one first.
//!
//! ```
//! use std::io::Write;
//! use runtrace_format::output::{refuse_input, AtomicFile};
//! let dir = std::env::temp_dir().join(format!("runtrace-output-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let input = dir.join("trace.0.bin");
//! std::fs::write(&input, b"RUNTRACE").unwrap();
//! assert!(refuse_input(&input, &[input.clone()]).is_err());
//! assert!(refuse_input(&dir.join("trace.1.bin"), &[input.clone()]).is_err());
//! let out = dir.join("report.html");
//! refuse_input(&out, &[input.clone()]).unwrap();
//! let mut f = AtomicFile::create(&out).unwrap();
//! f.write_all(b"<html>").unwrap();
//! f.commit().unwrap();
//! assert_eq!(std::fs::read(&out).unwrap(), b"<html>");
//! std::fs::remove_dir_all(&dir).unwrap();
//! ```

use crate::files::is_trace_name;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Refuses `output` when it is one of `inputs` (by device and inode, so a
/// hard link or a symbolic link to an input counts), or when it has a
/// trace file's name (`*.N.bin`, `*.N.bin.active`) in a directory that
/// holds one of `inputs` (it would join or replace the recording). The
/// error names both.
pub fn refuse_input(output: &Path, inputs: &[PathBuf]) -> Result<(), String> {
    let id = |p: &Path| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    if let Some(out) = id(output) {
        if let Some(input) = inputs.iter().find(|i| id(i) == Some(out)) {
            return Err(format!(
                "{}: refusing to write over the input {}",
                output.display(),
                input.display()
            ));
        }
    }
    let name_is_trace = output
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| is_trace_name(Path::new(n.strip_suffix(".active").unwrap_or(n))));
    if name_is_trace {
        let dir_id = |p: &Path| {
            let d = match p.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            id(d)
        };
        let out_dir = dir_id(output);
        if let Some(input) = inputs
            .iter()
            .find(|i| out_dir.is_some() && dir_id(i) == out_dir)
        {
            return Err(format!(
                "{}: refusing to write a file named like a trace beside the input {} (it would join its recording)",
                output.display(),
                input.display()
            ));
        }
    }
    Ok(())
}

/// A file written under a temporary name in its final directory (created
/// exclusively: an existing file or a symbolic link planted at that name
/// is never followed) and renamed over its final name by
/// [`AtomicFile::commit`]. Dropped without a commit, it removes itself.
///
/// An output that exists and is not a regular file (`/dev/null`, a FIFO,
/// `/dev/stdout` on a pipe) is written directly: renaming over it would
/// replace the device node itself (a `-o /dev/null` run as root once left
/// a regular file there).
pub struct AtomicFile {
    /// `None` when writing straight into a special file.
    tmp: Option<PathBuf>,
    path: PathBuf,
    file: Option<File>,
}

impl AtomicFile {
    /// Creates the temporary file for `path` (or opens `path` itself when
    /// it is an existing special file).
    pub fn create(path: &Path) -> io::Result<AtomicFile> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        if std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir()) {
            let file = File::options().write(true).open(path)?;
            return Ok(AtomicFile {
                tmp: None,
                path: path.to_path_buf(),
                file: Some(file),
            });
        }
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let name = path.file_name().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "an output needs a file name")
        })?;
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(
            ".{}.{}.tmp",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let tmp = dir.join(tmp_name);
        let file = File::options().write(true).create_new(true).open(&tmp)?;
        Ok(AtomicFile {
            tmp: Some(tmp),
            path: path.to_path_buf(),
            file: Some(file),
        })
    }

    /// Flushes the data to disk and renames the file into place.
    pub fn commit(mut self) -> io::Result<()> {
        let mut file = self.file.take().expect("not committed yet");
        match &self.tmp {
            Some(tmp) => {
                file.sync_all()?;
                drop(file);
                std::fs::rename(tmp, &self.path)
            }
            None => file.flush(),
        }
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.as_mut().expect("not committed").write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.as_mut().expect("not committed").flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if let (Some(_), Some(tmp)) = (&self.file, &self.tmp) {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// Writes `bytes` to `path` as an [`AtomicFile`]; errors name the path.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let mut f =
        AtomicFile::create(path).map_err(|e| format!("{}: cannot create: {e}", path.display()))?;
    f.write_all(bytes)
        .and_then(|()| f.commit())
        .map_err(|e| format!("{}: cannot write: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileTypeExt;

    #[test]
    fn a_special_file_is_written_not_replaced() {
        write_atomic(Path::new("/dev/null"), b"gone").unwrap();
        let m = std::fs::metadata("/dev/null").unwrap();
        assert!(
            m.file_type().is_char_device(),
            "/dev/null is still a device"
        );
    }

    #[test]
    fn an_uncommitted_file_leaves_nothing() {
        let dir = std::env::temp_dir().join(format!("runtrace-out-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("o.html");
        std::fs::write(&out, b"old").unwrap();
        let mut f = AtomicFile::create(&out).unwrap();
        f.write_all(b"half").unwrap();
        drop(f);
        assert_eq!(std::fs::read(&out).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
