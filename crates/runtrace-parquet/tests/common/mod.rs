//! DuckDB from the tests (python3's `duckdb` module): the dataset's tables
//! as views, one query's rows back as JSON.

use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Whether python3 has `duckdb`; a test without it skips with a message,
/// or fails under CI=true.
pub fn have_duckdb() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import duckdb"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "required in CI but missing: python3 module duckdb"
        );
        eprintln!("skipping: python3 module duckdb is missing (pip install duckdb)");
    }
    ok
}

/// Runs `sql` with DuckDB over `tables` of the dataset `ds` (each a view
/// of its Hive-partitioned files); its rows, values as text (null: null).
pub fn duckdb(ds: &Path, tables: &[&str], sql: &str) -> Vec<Vec<Value>> {
    let script = format!(
        "import duckdb, json, sys\n\
         con = duckdb.connect()\n\
         for t in sys.argv[2:]:\n    \
             con.execute(f\"CREATE VIEW {{t}} AS SELECT * FROM read_parquet('{ds}/{{t}}/*/*/*/*.parquet', hive_partitioning = true)\")\n\
         print(json.dumps([[None if v is None else str(v) for v in r] for r in con.execute(sys.argv[1]).fetchall()]))\n",
        ds = ds.display()
    );
    let o = Command::new("python3")
        .args(["-c", &script, sql])
        .args(tables)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "duckdb: {}\n{sql}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}
