//! A process forked while recording (issue 37): the child's `finish()`
//! (or its guard's drop at exit) says the recording is the parent's and
//! returns, instead of panicking on a writer thread the child does not
//! have; the parent finishes and seals the recording as usual.

use runtrace_recorder::{RecordError, Recorder};

#[test]
fn a_forked_child_leaves_the_recording_to_its_parent() {
    let dir = tempfile::tempdir().unwrap();
    let guard = Recorder::builder()
        .path(dir.path().join("trace"))
        .start()
        .unwrap();
    runtrace_recorder::events::task_terminate(1);
    // SAFETY: the child only runs the recorder's finish path (no locks:
    // an atomic store, and glibc's malloc is fork-safe) and `_exit`s.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = match guard.finish() {
            Err(RecordError::Forked { child, .. }) if child == std::process::id() => 0,
            _ => 1,
        };
        // SAFETY: ends the child without running the parent's atexit
        // handlers or test harness.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: `pid` is our child; `status` is a valid out pointer.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child status {status:#x}"
    );
    let stats = guard.finish().unwrap();
    assert_eq!(stats.events, 1);
    let files = runtrace_format::files::expand(&[dir.path().to_path_buf()]).unwrap();
    let r = runtrace_format::check::check_files(&files);
    assert_eq!(r.verdict(), "OK", "{r}");
}
