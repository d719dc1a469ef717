//! docs/format.md section 11: which files of a directory are a recording's
//! (`runtrace_format::files::expand`).

use runtrace_format::files::expand;

#[test]
fn trace_file_names() {
    let d = std::env::temp_dir().join(format!("runtrace-format-files-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    for n in [
        "trace.0.bin",
        "trace.12.bin",
        "notes.txt",
        "trace.bin",
        "x.a.bin",
    ] {
        std::fs::write(d.join(n), b"").unwrap();
    }
    let mut got: Vec<String> = expand(std::slice::from_ref(&d))
        .unwrap()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    got.sort();
    assert_eq!(got, ["trace.0.bin", "trace.12.bin"]);
    std::fs::remove_file(d.join("trace.0.bin")).unwrap();
    std::fs::remove_file(d.join("trace.12.bin")).unwrap();
    assert!(expand(std::slice::from_ref(&d))
        .unwrap_err()
        .contains("without trace files"));
    let _ = std::fs::remove_dir_all(&d);
}
