//! Adding an event is one entry in the catalog, plus the pass that reads
//! it: tests/fixtures/added-event builds this crate with
//! `probes/events.toml` extended by one application event (id 127, group
//! `app`, in the fixture's `extra_events.toml`) and checks the model
//! recognises it as an application event, names it by both its names,
//! decodes and counts it, with no list in the model touched. It runs in a
//! target directory of its own (the extended catalog rebuilds
//! runtrace-format and everything above it), kept between runs.

use std::path::Path;
use std::process::Command;

/// runtrace-build's `EXTRA_EVENTS_ENV`: the file of extra built-in events
/// the build scripts append to the catalog.
const EXTRA_EVENTS_ENV: &str = "RUNTRACE_TEST_EXTRA_EVENTS";

#[test]
fn an_event_added_to_the_catalog_is_read_without_other_edits() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/added-event");
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("added-event");
    let out = Command::new(env!("CARGO"))
        .args(["run", "--quiet", "--offline", "--manifest-path"])
        .arg(fixture.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target)
        .env(EXTRA_EVENTS_ENV, fixture.join("extra_events.toml"))
        .output()
        .expect("run cargo");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the fixture failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(
        stdout.contains("request_done: known to the model through the catalog alone"),
        "{stdout}"
    );
}
