//! `runtrace export parquet DIR|FILE... -o DATASET [--service NAME]
//! [--host NAME] [--replace]`: recordings into a Hive-partitioned Parquet
//! dataset (runtrace-parquet; docs/parquet.md).
//!
//! ```no_run
//! use runtrace_cli::{ExportFormat, ParquetArgs};
//! let code = runtrace_cli::export::run(&ExportFormat::Parquet(ParquetArgs {
//!     files: vec!["trace.0.bin".into()],
//!     output: "dataset".into(),
//!     service: Some("api".into()),
//!     host: None,
//!     replace: false,
//! }));
//! # let _ = code;
//! ```

use crate::{ExportFormat, ParquetArgs};
use runtrace_parquet::{export, ExportOptions};
use std::io::Write;
use std::process::ExitCode;

/// Runs `runtrace export FORMAT ...`.
pub fn run(format: &ExportFormat) -> ExitCode {
    match format {
        ExportFormat::Parquet(a) => parquet(a),
    }
}

/// `runtrace export parquet`: exit 0, or 1 when an input file was damaged
/// (what was readable is exported) or the export failed (nothing written).
fn parquet(a: &ParquetArgs) -> ExitCode {
    let opts = ExportOptions {
        service: a.service.clone(),
        host: a.host.clone(),
        replace: a.replace,
    };
    let mut err = std::io::stderr().lock();
    match export(&a.files, &a.output, &opts) {
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            let _ = writeln!(err, "error: nothing was written to {}", a.output.display());
            ExitCode::FAILURE
        }
        Ok(s) => {
            let files = s.files.len();
            let rows: u64 = s.files.iter().map(|f| f.2).sum();
            let _ = writeln!(
                std::io::stdout().lock(),
                "exported {} recording(s), {} events, {rows} rows in {files} files to {}{}",
                s.recordings.len(),
                s.events,
                a.output.display(),
                if s.replaced.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (replaced {} files of an earlier export)",
                        s.replaced.len()
                    )
                }
            );
            for e in &s.errors {
                let _ = writeln!(err, "error: {e}");
            }
            for n in &s.notes {
                let _ = writeln!(err, "note: {n}");
            }
            if s.damaged {
                let _ = writeln!(
                    err,
                    "error: damaged input: the dataset holds what was readable"
                );
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
    }
}
