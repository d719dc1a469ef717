//! One Parquet file of one table being written: rows go into Arrow column
//! builders, every [`BATCH_ROWS`] rows become a record batch for the
//! Parquet writer, which closes a row group every [`ROW_GROUP_ROWS`] rows,
//! so memory is bounded whatever the trace's size. The file is written
//! under a temporary name (a hidden `.tmp` file that no `*.parquet` glob
//! matches) and only [`TableWriter::finish`] gives it its final name.
//!
//! ```
//! use runtrace_parquet::schema::Table;
//! use runtrace_parquet::writer::TableWriter;
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("queues.parquet");
//! let mut w = TableWriter::create(Table::Queues, &path, 7).unwrap();
//! w.u64(1).u64(7).u64(42).i64(1_000).str(None).u32(3).u32(0);
//! w.end_row().unwrap();
//! let tmp = w.finish().unwrap();
//! assert!(!path.exists());
//! std::fs::rename(tmp, &path).unwrap();
//! assert!(path.exists());
//! ```

use crate::schema::{Table, Ty, LIST_ITEM, RECORDING_KEY};
use arrow_array::builder::{
    ArrayBuilder, BooleanBuilder, Float64Builder, Int64Builder, ListBuilder, StringBuilder,
    UInt32Builder, UInt64Builder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

/// Rows per record batch handed to the Parquet writer.
pub const BATCH_ROWS: usize = 64 * 1024;
/// Rows per Parquet row group (the writer buffers one row group's encoded
/// pages at a time).
pub const ROW_GROUP_ROWS: usize = 1024 * 1024;

enum Col {
    U64(UInt64Builder),
    U32(UInt32Builder),
    I64(Int64Builder),
    F64(Float64Builder),
    Bool(BooleanBuilder),
    Str(StringBuilder),
    StrList(ListBuilder<StringBuilder>),
}

impl Col {
    fn new(ty: Ty) -> Col {
        match ty {
            Ty::U64 => Col::U64(UInt64Builder::with_capacity(BATCH_ROWS)),
            Ty::U32 => Col::U32(UInt32Builder::with_capacity(BATCH_ROWS)),
            Ty::I64 => Col::I64(Int64Builder::with_capacity(BATCH_ROWS)),
            Ty::F64 => Col::F64(Float64Builder::with_capacity(BATCH_ROWS)),
            Ty::Bool => Col::Bool(BooleanBuilder::with_capacity(BATCH_ROWS)),
            Ty::Str => Col::Str(StringBuilder::with_capacity(BATCH_ROWS, BATCH_ROWS * 24)),
            Ty::StrList => Col::StrList(
                ListBuilder::with_capacity(StringBuilder::new(), BATCH_ROWS).with_field(
                    arrow_schema::Field::new(LIST_ITEM, arrow_schema::DataType::Utf8, false),
                ),
            ),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Col::U64(b) => ArrayBuilder::finish(b),
            Col::U32(b) => ArrayBuilder::finish(b),
            Col::I64(b) => ArrayBuilder::finish(b),
            Col::F64(b) => ArrayBuilder::finish(b),
            Col::Bool(b) => ArrayBuilder::finish(b),
            Col::Str(b) => ArrayBuilder::finish(b),
            Col::StrList(b) => ArrayBuilder::finish(b),
        }
    }
}

/// Writes one table's rows to one Parquet file, under a temporary name
/// until [`TableWriter::finish`].
///
/// A row is its values in column order ([`Table::columns`]), then
/// [`TableWriter::end_row`]; a value of the wrong type for its column is a
/// bug in the caller and panics.
pub struct TableWriter {
    table: Table,
    schema: SchemaRef,
    cols: Vec<Col>,
    cursor: usize,
    rows: usize,
    total: u64,
    tmp: PathBuf,
    w: Option<ArrowWriter<BufWriter<File>>>,
}

/// The temporary name of `path` while it is written: hidden and not
/// ending in `.parquet`, so no engine reads a file still being written;
/// unique to this process and call (it is created exclusively: a file or
/// link already there is an error, never followed).
pub fn temp_path(path: &Path) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map_or_else(|| "part".into(), |n| n.to_string_lossy().into_owned());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    path.with_file_name(format!(
        ".{name}.tmp-{}-{}-{nanos:08x}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

impl TableWriter {
    /// Starts the file of `table` that will be `path` (written to
    /// [`temp_path`] meanwhile), recording `recording_id` in its metadata.
    pub fn create(table: Table, path: &Path, recording_id: u64) -> Result<TableWriter, String> {
        let tmp = temp_path(path);
        let file = File::options()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| format!("{}: cannot create: {e}", tmp.display()))?;
        let schema = table.arrow_schema();
        // Dictionary encoding only for text (spawn locations, names: few
        // distinct values); for numbers it costs a hash per value. Min/max statistics per column chunk
        // (what engines prune row groups with), not per page.
        let mut props = WriterProperties::builder()
            .set_dictionary_enabled(false)
            .set_statistics_enabled(EnabledStatistics::Chunk);
        // Integers delta-encoded: ids and pids repeat, times grow, so the
        // deltas are small and zstd gets far fewer bytes to compress.
        for c in table.columns() {
            let path = ColumnPath::from(c.name);
            props = match c.ty {
                Ty::Str => props.set_column_dictionary_enabled(path, true),
                // Frames repeat across samples: a dictionary of the list's
                // leaf column (Parquet's path `name.list.item`).
                Ty::StrList => props.set_column_dictionary_enabled(
                    ColumnPath::new(vec![c.name.into(), "list".into(), LIST_ITEM.into()]),
                    true,
                ),
                Ty::U64 | Ty::U32 | Ty::I64 => {
                    props.set_column_encoding(path, Encoding::DELTA_BINARY_PACKED)
                }
                Ty::F64 | Ty::Bool => props,
            };
        }
        let props = props
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .set_max_row_group_size(ROW_GROUP_ROWS)
            .set_key_value_metadata(Some(
                schema
                    .metadata()
                    .iter()
                    .map(|(k, v)| KeyValue::new(k.clone(), v.clone()))
                    .chain([KeyValue::new(
                        RECORDING_KEY.to_string(),
                        format!("{recording_id:016x}"),
                    )])
                    .collect(),
            ))
            .build();
        let w = ArrowWriter::try_new(
            BufWriter::with_capacity(1 << 20, file),
            schema.clone(),
            Some(props),
        )
        .map_err(|e| format!("{}: cannot start a Parquet file: {e}", tmp.display()))?;
        Ok(TableWriter {
            table,
            cols: table.columns().iter().map(|c| Col::new(c.ty)).collect(),
            schema,
            cursor: 0,
            rows: 0,
            total: 0,
            tmp,
            w: Some(w),
        })
    }

    /// The table written.
    pub fn table(&self) -> Table {
        self.table
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.total + self.rows as u64
    }

    #[inline(always)]
    fn next(&mut self) -> &mut Col {
        let i = self.cursor;
        self.cursor += 1;
        &mut self.cols[i]
    }

    /// Next column: a `u64`.
    #[inline]
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.opt_u64(Some(v))
    }

    /// Next column: a nullable `u64`.
    #[inline]
    pub fn opt_u64(&mut self, v: Option<u64>) -> &mut Self {
        match self.next() {
            Col::U64(b) => b.append_option(v),
            _ => panic!("column type mismatch"),
        }
        self
    }

    /// Next column: a `u32`.
    #[inline]
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.opt_u32(Some(v))
    }

    /// Next column: a nullable `u32`.
    #[inline]
    pub fn opt_u32(&mut self, v: Option<u32>) -> &mut Self {
        match self.next() {
            Col::U32(b) => b.append_option(v),
            _ => panic!("column type mismatch"),
        }
        self
    }

    /// Next column: an `i64`.
    #[inline]
    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.opt_i64(Some(v))
    }

    /// Next column: a nullable `i64`.
    #[inline]
    pub fn opt_i64(&mut self, v: Option<i64>) -> &mut Self {
        match self.next() {
            Col::I64(b) => b.append_option(v),
            _ => panic!("column type mismatch"),
        }
        self
    }

    /// Next column: an `f64`.
    #[inline]
    pub fn f64(&mut self, v: f64) -> &mut Self {
        match self.next() {
            Col::F64(b) => b.append_value(v),
            _ => panic!("column type mismatch"),
        }
        self
    }

    /// Next column: a boolean.
    #[inline]
    pub fn bool(&mut self, v: bool) -> &mut Self {
        match self.next() {
            Col::Bool(b) => b.append_value(v),
            _ => panic!("column type mismatch"),
        }
        self
    }

    /// Next column: text (`None`: null).
    #[inline]
    pub fn str(&mut self, v: Option<&str>) -> &mut Self {
        match self.next() {
            Col::Str(b) => b.append_option(v),
            _ => panic!("column type mismatch"),
        }
        self
    }

    /// Next column: a list of texts.
    #[inline]
    pub fn str_list<'a>(&mut self, v: impl IntoIterator<Item = &'a str>) -> &mut Self {
        match self.next() {
            Col::StrList(b) => {
                for s in v {
                    b.values().append_value(s);
                }
                b.append(true);
            }
            _ => panic!("column type mismatch"),
        }
        self
    }

    /// Ends the row; writes a batch when [`BATCH_ROWS`] are buffered.
    #[inline]
    pub fn end_row(&mut self) -> Result<(), String> {
        assert_eq!(
            self.cursor,
            self.cols.len(),
            "row of {} has missing columns",
            self.table.name()
        );
        self.cursor = 0;
        self.rows += 1;
        if self.rows >= BATCH_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), String> {
        if self.rows == 0 {
            return Ok(());
        }
        let arrays: Vec<ArrayRef> = self.cols.iter_mut().map(Col::finish).collect();
        let batch = RecordBatch::try_new(self.schema.clone(), arrays)
            .map_err(|e| format!("{}: {e}", self.tmp.display()))?;
        self.total += self.rows as u64;
        self.rows = 0;
        match self.w.as_mut() {
            Some(w) => w
                .write(&batch)
                .map_err(|e| format!("{}: cannot write: {e}", self.tmp.display())),
            None => Ok(()),
        }
    }

    /// Writes what is buffered and the footer; returns the temporary
    /// file's path, for the caller to rename when every file of the export
    /// is complete.
    pub fn finish(mut self) -> Result<PathBuf, String> {
        self.flush()?;
        if let Some(w) = self.w.take() {
            let buf = w
                .into_inner()
                .map_err(|e| format!("{}: cannot finish: {e}", self.tmp.display()))?;
            buf.into_inner()
                .map_err(|e| format!("{}: cannot write: {e}", self.tmp.display()))?
                .sync_all()
                .map_err(|e| format!("{}: cannot write: {e}", self.tmp.display()))?;
        }
        Ok(std::mem::take(&mut self.tmp))
    }
}

impl Drop for TableWriter {
    /// A writer dropped before [`TableWriter::finish`] (an error elsewhere)
    /// leaves nothing behind.
    fn drop(&mut self) {
        if !self.tmp.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}
